package compat_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/detourmq/detour/internal/gateway"
	"github.com/detourmq/detour/internal/testsupport/rmqtest"
	"github.com/detourmq/detour/pkg/producer"
)

// sent is what detour reported for one message, and the message itself.
type sent struct {
	via   string
	msgID string
	msg   producer.Message
}

// body returns n bytes that differ per message and position, so a swapped or truncated body
// cannot pass.
func body(seed string, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*31 + len(seed) + int(seed[i%len(seed)]))
	}
	return b
}

// bodySizes run from one byte to just under RocketMQ's 4 MiB limit, across the 4 KiB mark above
// which Java producers compress.
var bodySizes = []int{1, 100, 4096, 4097, 64 << 10, 1 << 20, producer.MaxMessageSize - 1}

// TestStoredAsSent sends messages with tags, keys, user properties and bodies of every size
// through the producer runtime (sync and async), the send gateway (both request forms) and
// detourctl to real brokers, then reads them back with RocketMQ's own Java consumer: every
// message arrives exactly once, with identical body, tags, keys and properties, under the msgId
// detour reported.
func TestStoredAsSent(t *testing.T) {
	detourctl := buildDetourctl(t)
	for _, line := range rmqtest.Lines {
		t.Run(line.String(), func(t *testing.T) {
			c := rmqtest.Start(t, line, rmqtest.BrokerConfig{}, rmqtest.BrokerConfig{})
			const topic = "DetourStoredAsSent"
			r := newRuntime(t, c, topic, 4, contentPolicy("compat"))
			ctx := context.Background()
			var all []sent

			for i, n := range bodySizes {
				m := producer.Message{Topic: topic, Tags: "TagA", Keys: fmt.Sprintf("key-%d order-%d", i, n),
					Body:       body(fmt.Sprintf("sync-%d", i), n),
					Properties: map[string]string{"order-id": fmt.Sprint(1000 + i), "note": "grüße, 世界"}}
				res, err := r.Send(ctx, &m)
				if err != nil {
					t.Fatalf("sync send of %d bytes: %v", n, err)
				}
				all = append(all, sent{via: "runtime sync", msgID: res.MsgID, msg: m})
			}

			type asyncResult struct {
				res *producer.SendResult
				err error
				m   producer.Message
			}
			results := make(chan asyncResult, 8)
			for i := range 8 {
				m := producer.Message{Topic: topic, Tags: "TagB", Keys: fmt.Sprintf("async-%d", i),
					Body: body(fmt.Sprintf("async-%d", i), 200+i), Properties: map[string]string{"seq": fmt.Sprint(i)}}
				r.SendAsync(ctx, &m, func(res *producer.SendResult, err error) { results <- asyncResult{res, err, m} })
			}
			for range 8 {
				ar := <-results
				if ar.err != nil {
					t.Fatalf("async send: %v", ar.err)
				}
				all = append(all, sent{via: "runtime async", msgID: ar.res.MsgID, msg: ar.m})
			}

			all = append(all, sendThroughGateway(t, r, topic)...)
			all = append(all, sendWithDetourctl(t, detourctl, c, topic)...)

			got := c.Consume(t, ctx, topic, len(all), 60*time.Second)
			checkStoredAsSent(t, all, got)
			if n, per := storedTotal(t, c, topic); n != int64(len(all)) {
				t.Errorf("brokers hold %d messages (%v), sent %d", n, per, len(all))
			}
		})
	}
}

// checkStoredAsSent matches what the consumer read with what was sent, by msgId.
func checkStoredAsSent(t *testing.T, want []sent, got []rmqtest.Consumed) {
	t.Helper()
	byID := make(map[string][]rmqtest.Consumed, len(got))
	for _, g := range got {
		byID[g.MsgID] = append(byID[g.MsgID], g)
	}
	if len(got) != len(want) {
		t.Errorf("consumer read %d messages, sent %d", len(got), len(want))
	}
	for _, w := range want {
		gs := byID[w.msgID]
		if len(gs) != 1 {
			t.Errorf("%s message %s: consumer read it %d times, want exactly once", w.via, w.msgID, len(gs))
			continue
		}
		g := gs[0]
		if !bytes.Equal(g.Body, w.msg.Body) {
			t.Errorf("%s message %s: body of %d bytes read back as %d bytes (or different bytes)", w.via, w.msgID, len(w.msg.Body), len(g.Body))
		}
		if g.Tags != w.msg.Tags {
			t.Errorf("%s message %s: tags %q, sent %q", w.via, w.msgID, g.Tags, w.msg.Tags)
		}
		if g.Keys != w.msg.Keys {
			t.Errorf("%s message %s: keys %q, sent %q", w.via, w.msgID, g.Keys, w.msg.Keys)
		}
		if g.Properties["UNIQ_KEY"] != w.msgID {
			t.Errorf("%s message %s: UNIQ_KEY %q", w.via, w.msgID, g.Properties["UNIQ_KEY"])
		}
		for k, v := range w.msg.Properties {
			if g.Properties[k] != v {
				t.Errorf("%s message %s: property %q = %q, sent %q", w.via, w.msgID, k, g.Properties[k], v)
			}
		}
	}
}

// sendThroughGateway posts messages to the send gateway in front of r, in the raw form (body as
// sent, headers for tags, keys and properties) and the JSON form.
func sendThroughGateway(t *testing.T, r *producer.Runtime, topic string) []sent {
	t.Helper()
	url := startGateway(t, r, topic)

	var out []sent
	post := func(req *http.Request, m producer.Message) {
		t.Helper()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var sr gateway.SendResponse
		if err := json.NewDecoder(resp.Body).Decode(&sr); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("gateway answered %d (%v)", resp.StatusCode, err)
		}
		out = append(out, sent{via: "gateway", msgID: sr.MsgID, msg: m})
	}
	for i, n := range []int{1, 5000, 1 << 20} {
		m := producer.Message{Tags: "TagG", Keys: fmt.Sprintf("gw-%d", i), Body: body(fmt.Sprintf("gw-raw-%d", i), n),
			Properties: map[string]string{"order-id": fmt.Sprint(i)}}
		req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(m.Body))
		req.Header.Set(gateway.HeaderTags, m.Tags)
		req.Header.Set(gateway.HeaderKeys, m.Keys)
		req.Header.Set(gateway.HeaderPropertyPrefix+"Order-Id", "ignored-case")
		m.Properties["order-id"] = "ignored-case"
		post(req, m)
	}
	for i := range 2 {
		m := producer.Message{Tags: "TagJ", Keys: fmt.Sprintf("json-%d other", i), Body: body(fmt.Sprintf("gw-json-%d", i), 700),
			Properties: map[string]string{"Mixed-Case": "kept"}}
		js, _ := json.Marshal(map[string]any{"tags": m.Tags, "keys": strings.Fields(m.Keys),
			"body": base64.StdEncoding.EncodeToString(m.Body), "properties": m.Properties})
		req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(js))
		req.Header.Set("Content-Type", "application/json")
		post(req, m)
	}
	return out
}

// buildDetourctl builds the detourctl command once for the test binary.
func buildDetourctl(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "detourctl")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/detourmq/detour/cmd/detourctl")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build detourctl: %v\n%s", err, out)
	}
	return bin
}

// sendWithDetourctl runs `detourctl send` against the real brokers and collects the msgIds it
// prints.
func sendWithDetourctl(t *testing.T, bin string, c *rmqtest.Cluster, topic string) []sent {
	t.Helper()
	const text = "detourctl body"
	args := []string{"send", "--topic", topic, "--queues", "4", "--count", "5", "--tags", "TagC",
		"--keys", "ctl-1 ctl-2", "--body", text, "--output", "json"}
	for _, b := range c.Brokers() {
		args = append(args, "--broker", b.Name+"="+b.Addr)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("detourctl send: %v\n%s", err, out)
	}
	var res []sent
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var rec struct {
			MsgID string `json:"msgId"`
			Error string `json:"error"`
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("detourctl output %q: %v", line, err)
		}
		if rec.MsgID == "" {
			continue // the summary line
		}
		if rec.Error != "" {
			t.Fatalf("detourctl send: %s", rec.Error)
		}
		res = append(res, sent{via: "detourctl", msgID: rec.MsgID,
			msg: producer.Message{Tags: "TagC", Keys: "ctl-1 ctl-2", Body: []byte(text)}})
	}
	if len(res) != 5 {
		t.Fatalf("detourctl reported %d messages, want 5:\n%s", len(res), out)
	}
	return res
}
