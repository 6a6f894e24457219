package producer

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/detourmq/detour/internal/testsupport/rmqtest"
)

// groupCases are message groups and queue counts: ASCII, accented and CJK text, characters
// outside the BMP (two UTF-16 units in Java's hash), names whose hash is negative or
// Integer.MIN_VALUE-adjacent, and random ones, over 1 to 1024 queues.
func groupCases() (groups []string, queues []int) {
	fixed := []string{"a", "order-1", "order-2", "customer-émile", "顧客-42", "😀", "a😀b", "polygenelubricants",
		"Aa", "BB", strings.Repeat("z", 64), "0", "-", "%RETRY%", " x "}
	rng := rand.New(rand.NewPCG(22, 22))
	alphabet := []rune("abcXYZ019-_:/é漢😀\u07ff\uffff")
	for range 2000 {
		n := 1 + rng.IntN(30)
		var b strings.Builder
		for range n {
			b.WriteRune(alphabet[rng.IntN(len(alphabet))])
		}
		fixed = append(fixed, b.String())
	}
	for _, g := range fixed {
		groups = append(groups, g)
		queues = append(queues, []int{1, 2, 3, 4, 7, 8, 16, 24, 1024}[len(groups)%9])
	}
	return groups, queues
}

// TestGroupQueueMatchesRocketMQsSelectMessageQueueByHash runs RocketMQ's own
// SelectMessageQueueByHash over thousands of groups and queue counts and requires detour's choice
// for every one. A canary mapping (FNV-1a modulo the count) must diverge, so the comparison can
// fail.
func TestGroupQueueMatchesRocketMQsSelectMessageQueueByHash(t *testing.T) {
	groups, queues := groupCases()
	var in bytes.Buffer
	for i, g := range groups {
		fmt.Fprintf(&in, "%d\t%s\n", queues[i], hex.EncodeToString([]byte(g)))
	}
	for _, line := range rmqtest.Lines {
		t.Run(line.String(), func(t *testing.T) {
			d := rmqtest.Locate(t, line)
			src, err := filepath.Abs("../../hack/rocketmq/selector/SelectByHash.java")
			if err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("java", append(append([]string{"-Xmx128m"}, rmqtest.JVMFlags...), "-cp", d.ClientClassPath, src)...)
			cmd.Stdin = bytes.NewReader(in.Bytes())
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("java SelectByHash: %v\n%s", err, stderr.String())
			}
			java := strings.Fields(string(out))
			if len(java) != len(groups) {
				t.Fatalf("java answered %d lines for %d groups", len(java), len(groups))
			}
			canaryDiverged := 0
			for i, g := range groups {
				want, err := strconv.Atoi(java[i])
				if err != nil {
					t.Fatal(err)
				}
				if got := groupQueueIndex(g, queues[i]); got != want {
					t.Errorf("group %q over %d queues: detour picks %d, RocketMQ %d", g, queues[i], got, want)
				}
				h := fnv.New32a()
				h.Write([]byte(g))
				if int(h.Sum32()%uint32(queues[i])) != want {
					canaryDiverged++
				}
			}
			if canaryDiverged == 0 {
				t.Fatal("the FNV canary agreed with RocketMQ on every group: the comparison cannot tell mappings apart")
			}
			t.Logf("RocketMQ client %s: %d groups agree; the canary diverged on %d", d.ClientVersion, len(groups), canaryDiverged)
		})
	}
}
