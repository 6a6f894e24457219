package main

import (
	"bufio"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/detourmq/detour/internal/testsupport/managertest"
)

// progressEvery paces the progress lines printed while the manager works towards Ready.
const progressEvery = 15 * time.Second

// progress prints, at most every progressEvery, how many Topics are Ready and written, and how
// many Topic reconciles the manager has run and for how long in all (its metrics), so it shows
// where a start spends its time: before the first write, or at some rate of writes.
type progress struct {
	what string
	m    *managertest.Manager
	r    *readiness
	next time.Time
}

// tick prints a progress line when one is due.
func (p *progress) tick(ready int) {
	if time.Now().Before(p.next) {
		return
	}
	p.next = time.Now().Add(progressEvery)
	sums, err := scrape(p.m.Metrics, `controller_runtime_reconcile_total{controller="topic"`,
		`controller_runtime_reconcile_time_seconds_sum{controller="topic"`, `workqueue_depth{controller="topic"`)
	line := fmt.Sprintf("%s: +%v: %d Ready, %d writes seen", p.what, time.Since(p.m.Started).Round(time.Second), ready, p.r.writes.Load())
	if err == nil {
		line += fmt.Sprintf("; Topic reconciles %.0f taking %.1f s in all, queue depth %.0f", sums[0], sums[1], sums[2])
	}
	fmt.Println(line)
}

// scrape sums, for each prefix, the values of the metrics at url whose line begins with it.
func scrape(url string, prefixes ...string) ([]float64, error) {
	res, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	sums := make([]float64, len(prefixes))
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		for i, p := range prefixes {
			if !strings.HasPrefix(line, p) {
				continue
			}
			if v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64); err == nil {
				sums[i] += v
			}
		}
	}
	return sums, sc.Err()
}
