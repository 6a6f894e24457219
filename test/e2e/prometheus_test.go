//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/detourmq/detour/internal/testsupport/managertest"
)

// The suite's Prometheus: a real Prometheus server (DETOUR_PROMETHEUS) started once the operator
// is deployed, scraping every manager pod as a user's ServiceMonitor (config/prometheus) makes
// the Prometheus Operator scrape them: the metrics Service's endpoints found through the API
// server, HTTPS with the endpoint's self-signed certificate, and the bearer token of a
// ServiceAccount bound to the metrics-reader role. It evaluates the shipped alerting rules, and
// a sampler runs every dashboard query against it for the rest of the suite, so the last test
// can say which panels showed data and when.
const (
	// scrapeInterval is how often Prometheus scrapes and evaluates the rules: short, so an
	// alert's state follows the manager's within seconds of the test's own checks.
	scrapeInterval = 2 * time.Second
	// rateInterval stands in for Grafana's $__rate_interval: four scrape intervals and more.
	rateInterval = "20s"
	// sampleEvery is how often the sampler runs every dashboard query.
	sampleEvery = 5 * time.Second
)

// prometheus is the running server and what the sampler has seen.
type prometheus struct {
	url     string
	started time.Time
	cmd     *exec.Cmd
	cancel  context.CancelFunc
	done    chan struct{}

	mu sync.Mutex
	// queries are the dashboards' queries by panel, with Grafana's variables filled in.
	queries map[string]string
	// firstData is when each query first returned a series; rounds how many sampling rounds ran.
	firstData map[string]time.Time
	rounds    int
	// metrics are the metric names the dashboards and the alerts select.
	metrics []string
}

var (
	promOnce sync.Once
	prom     *prometheus
	promErr  error
)

// startPrometheus starts the suite's Prometheus on first use and returns it.
func (k *cluster) startPrometheus(t *testing.T) (*prometheus, error) {
	promOnce.Do(func() { prom, promErr = k.runPrometheus(t) })
	return prom, promErr
}

// stopPrometheus ends the server and the sampler, if they run.
func stopPrometheus() {
	if prom == nil {
		return
	}
	prom.cancel()
	<-prom.done
	_ = prom.cmd.Process.Kill()
	_ = prom.cmd.Wait()
}

// runPrometheus writes the server's configuration (the scrape job, the shipped rules), starts it
// and the sampler, and waits until it has scraped both manager pods.
func (k *cluster) runPrometheus(t *testing.T) (*prometheus, error) {
	bin := os.Getenv("DETOUR_PROMETHEUS")
	if bin == "" {
		return nil, fmt.Errorf("DETOUR_PROMETHEUS is unset: run the suite with `make test-e2e`, which installs Prometheus")
	}
	// One folder in the node's, emptied at each start: its log stays for a look after a run.
	dir := filepath.Join(k.state, "prometheus")
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	out, err := k.kubectl(nil, "-n", namespace, "create", "token", "scraper", "--duration=3h")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "token"), out, 0o600); err != nil {
		return nil, err
	}
	if err := writeRules(filepath.Join(dir, "rules.yaml")); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yaml"), []byte(scrapeConfig(dir)), 0o644); err != nil {
		return nil, err
	}
	if _, err := k.discoverTargets(dir); err != nil {
		return nil, err
	}
	addr, err := managertest.FreePort()
	if err != nil {
		return nil, err
	}
	log, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yaml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr,
		"--storage.tsdb.retention.time=3h")
	cmd.Stdout, cmd.Stderr = log, log
	// The server ends with the test binary, also when a timeout kills it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	queries, metrics, err := dashboardQueries()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Hour)
	p := &prometheus{url: "http://" + addr, started: time.Now(), cmd: cmd, cancel: cancel, done: make(chan struct{}),
		queries: queries, firstData: map[string]time.Time{}, metrics: metrics}
	start := time.Now()
	if err := p.waitTargetsUp(2); err != nil {
		cancel()
		close(p.done)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logs, _ := os.ReadFile(log.Name())
		return nil, fmt.Errorf("%v; Prometheus printed:\n%s", err, tail(logs, 30))
	}
	t.Logf("Prometheus %s scrapes both manager pods, %v after its start", addr, time.Since(start).Round(100*time.Millisecond))
	go p.sample(ctx, func() { _, _ = k.discoverTargets(dir) })
	return p, nil
}

// scrapeConfig is what the Prometheus Operator generates for config/prometheus/monitor.yaml,
// in Prometheus' own terms: the https port of the metrics Service's endpoints, the bearer token,
// the endpoint's self-signed certificate accepted. Debian's Prometheus is built without
// Kubernetes discovery, so the suite discovers the endpoints itself (discoverTargets) and hands
// them over in a file, with the labels the operator attaches.
func scrapeConfig(dir string) string {
	return fmt.Sprintf(`global:
  scrape_interval: %[1]s
  evaluation_interval: %[1]s
rule_files: [%[2]q]
scrape_configs:
- job_name: detour-controller-manager-metrics
  scheme: https
  metrics_path: /metrics
  authorization: {credentials_file: %[3]q}
  tls_config: {insecure_skip_verify: true}
  file_sd_configs:
  - files: [%[4]q]
    refresh_interval: %[1]s
`, scrapeInterval, filepath.Join(dir, "rules.yaml"), filepath.Join(dir, "token"), filepath.Join(dir, "targets.json"))
}

// metricsService is the Service config/default puts in front of the managers' metrics.
const metricsService = "detour-controller-manager-metrics-service"

// discoverTargets writes the ready endpoints of the metrics Service's https port to the file
// Prometheus reads its targets from, each labelled as the Prometheus Operator labels a
// ServiceMonitor's targets (namespace, service, pod, container, endpoint, job), and returns how
// many it wrote.
func (k *cluster) discoverTargets(dir string) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list, err := k.cs.DiscoveryV1().EndpointSlices(operatorNamespace).List(ctx, metav1.ListOptions{
		LabelSelector: discoveryv1.LabelServiceName + "=" + metricsService})
	if err != nil {
		return 0, err
	}
	type group struct {
		Targets []string          `json:"targets"`
		Labels  map[string]string `json:"labels"`
	}
	var groups []group
	for _, es := range list.Items {
		for _, port := range es.Ports {
			if port.Name == nil || *port.Name != "https" || port.Port == nil {
				continue
			}
			for _, ep := range es.Endpoints {
				if ep.Conditions.Ready != nil && !*ep.Conditions.Ready || ep.TargetRef == nil || len(ep.Addresses) == 0 {
					continue
				}
				groups = append(groups, group{
					Targets: []string{net.JoinHostPort(ep.Addresses[0], fmt.Sprint(*port.Port))},
					Labels: map[string]string{"namespace": operatorNamespace, "service": metricsService,
						"pod": ep.TargetRef.Name, "container": "manager", "endpoint": "https", "job": metricsService},
				})
			}
		}
	}
	data, err := json.Marshal(groups)
	if err != nil {
		return 0, err
	}
	// Written whole and renamed, so Prometheus never reads half a file.
	tmp := filepath.Join(dir, "targets.json.tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return 0, err
	}
	return len(groups), os.Rename(tmp, filepath.Join(dir, "targets.json"))
}

// writeRules writes the groups of the shipped PrometheusRule (config/prometheus/alerts.yaml) as a
// Prometheus rule file, as the Prometheus Operator hands them to its server.
func writeRules(path string) error {
	data, err := os.ReadFile("../../config/prometheus/alerts.yaml")
	if err != nil {
		return err
	}
	var rule struct {
		Spec struct {
			Groups []any `json:"groups"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(data, &rule); err != nil {
		return err
	}
	if len(rule.Spec.Groups) == 0 {
		return fmt.Errorf("config/prometheus/alerts.yaml holds no rule groups")
	}
	out, err := yaml.Marshal(map[string]any{"groups": rule.Spec.Groups})
	if err != nil {
		return err
	}
	return os.WriteFile(path, out, 0o644)
}

// grafanaVariables fill in the dashboards' variables as Grafana does with every value chosen.
var grafanaVariables = strings.NewReplacer("$__rate_interval", rateInterval, "$namespace", ".*", "$broker", ".*")

// metricName finds the metric names a query selects.
var metricName = regexp.MustCompile(`\bdetour_[a-z0-9_]+`)

// dashboardQueries reads every panel query of config/grafana's dashboards, named by dashboard,
// panel and query, with Grafana's variables filled in, and the metric names they and the shipped
// alerts select.
func dashboardQueries() (map[string]string, []string, error) {
	files, err := filepath.Glob("../../config/grafana/*.json")
	if err != nil || len(files) == 0 {
		return nil, nil, fmt.Errorf("no dashboards in config/grafana (%v)", err)
	}
	queries := map[string]string{}
	var metrics []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, nil, err
		}
		var d struct {
			Title  string `json:"title"`
			Panels []struct {
				Title   string `json:"title"`
				Targets []struct {
					RefID string `json:"refId"`
					Expr  string `json:"expr"`
				} `json:"targets"`
			} `json:"panels"`
		}
		if err := json.Unmarshal(data, &d); err != nil {
			return nil, nil, fmt.Errorf("%s: %v", f, err)
		}
		for _, p := range d.Panels {
			for _, q := range p.Targets {
				queries[fmt.Sprintf("%s / %s / %s", d.Title, p.Title, q.RefID)] = grafanaVariables.Replace(q.Expr)
				metrics = append(metrics, metricName.FindAllString(q.Expr, -1)...)
			}
		}
	}
	alerts, err := os.ReadFile("../../config/prometheus/alerts.yaml")
	if err != nil {
		return nil, nil, err
	}
	metrics = append(metrics, metricName.FindAllString(string(alerts), -1)...)
	for i, m := range metrics {
		metrics[i] = histogramName(m)
	}
	slices.Sort(metrics)
	return queries, slices.Compact(metrics), nil
}

// promAnswer is the envelope of Prometheus' HTTP API answers.
type promAnswer struct {
	Status string          `json:"status"`
	Error  string          `json:"error"`
	Data   json.RawMessage `json:"data"`
}

// promAlert is one alert of /api/v1/alerts.
type promAlert struct {
	Labels map[string]string `json:"labels"`
	State  string            `json:"state"`
}

// get asks Prometheus' HTTP API and decodes the answer's data into data.
func (p *prometheus) get(path string, params url.Values, data any) error {
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(p.url + path + "?" + params.Encode())
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return err
	}
	var a promAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		return fmt.Errorf("%s: HTTP %d, not JSON: %.200s", path, resp.StatusCode, body)
	}
	if a.Status != "success" {
		return fmt.Errorf("%s: %s", path, a.Error)
	}
	return json.Unmarshal(a.Data, data)
}

// query runs an instant query and returns how many series it returned.
func (p *prometheus) query(expr string) (int, error) {
	var r struct {
		Result []json.RawMessage `json:"result"`
	}
	if err := p.get("/api/v1/query", url.Values{"query": {expr}}, &r); err != nil {
		return 0, err
	}
	return len(r.Result), nil
}

// waitTargetsUp waits until n targets are up: every manager pod scraped.
func (p *prometheus) waitTargetsUp(n int) error {
	deadline := time.Now().Add(2 * time.Minute)
	last := fmt.Errorf("not asked yet")
	for time.Now().Before(deadline) {
		var r struct {
			Active []struct {
				Health    string            `json:"health"`
				Labels    map[string]string `json:"labels"`
				LastError string            `json:"lastError"`
			} `json:"activeTargets"`
		}
		err := p.get("/api/v1/targets", url.Values{"state": {"active"}}, &r)
		if err == nil {
			up := 0
			var why []string
			for _, tg := range r.Active {
				if tg.Health == "up" {
					up++
				} else {
					why = append(why, fmt.Sprintf("%s %s: %s", tg.Labels["pod"], tg.Health, tg.LastError))
				}
			}
			if up >= n {
				return nil
			}
			err = fmt.Errorf("%d of %d targets up %v", up, len(r.Active), why)
		}
		last = err
		time.Sleep(500 * time.Millisecond)
	}
	return fmt.Errorf("Prometheus did not scrape %d manager pods within 2 minutes: %v", n, last)
}

// sample runs every dashboard query each sampleEvery until ctx ends, and records when each
// first returned a series; before each round it runs discover, so Prometheus follows the
// managers' pods as they are replaced.
func (p *prometheus) sample(ctx context.Context, discover func()) {
	defer close(p.done)
	tick := time.NewTicker(sampleEvery)
	defer tick.Stop()
	for {
		discover()
		for name, expr := range p.queries {
			p.mu.Lock()
			_, seen := p.firstData[name]
			p.mu.Unlock()
			if seen {
				continue
			}
			if n, err := p.query(expr); err == nil && n > 0 {
				p.mu.Lock()
				p.firstData[name] = time.Now()
				p.mu.Unlock()
			}
		}
		p.mu.Lock()
		p.rounds++
		p.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// alertState is the state of an alert for a broker (its BrokerID ends in /broker), under any
// policy: firing when one of its instances fires, else pending when one is pending, else ""
// (inactive).
func (p *prometheus) alertState(name, broker string) (string, error) {
	var r struct {
		Alerts []promAlert `json:"alerts"`
	}
	if err := p.get("/api/v1/alerts", nil, &r); err != nil {
		return "", err
	}
	state := ""
	for _, a := range r.Alerts {
		if a.Labels["alertname"] != name || !strings.HasSuffix(a.Labels["broker"], "/"+broker) {
			continue
		}
		if a.State == "firing" || state == "" {
			state = a.State
		}
	}
	return state, nil
}

// waitAlert waits until the suite's Prometheus has the alert for broker in state want ("" for
// inactive) and returns how long after since that was seen.
func (k *cluster) waitAlert(t *testing.T, name, broker, want string, since time.Time, timeout time.Duration) time.Duration {
	t.Helper()
	p, err := k.startPrometheus(t)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, timeout, fmt.Sprintf("%s for %s in state %q", name, broker, want), func() error {
		got, err := p.alertState(name, broker)
		if err == nil && got != want {
			err = fmt.Errorf("state %q", got)
		}
		return err
	})
	return time.Since(since)
}

// exported returns the names of the detour_ metrics Prometheus holds series of, a histogram's
// under its own name.
func (p *prometheus) exported() (map[string]bool, error) {
	var all []string
	if err := p.get("/api/v1/label/__name__/values", url.Values{"match[]": {`{__name__=~"detour_.+"}`}}, &all); err != nil {
		return nil, err
	}
	names := map[string]bool{}
	for _, n := range all {
		names[histogramName(n)] = true
	}
	return names, nil
}

// histogramName is the name a histogram's series (_bucket, _count, _sum) are registered under;
// any other name is its own.
func histogramName(series string) string {
	for _, suffix := range []string{"_bucket", "_count", "_sum"} {
		if name, ok := strings.CutSuffix(series, suffix); ok {
			return name
		}
	}
	return series
}
