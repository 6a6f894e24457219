package compat_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/detourmq/detour/internal/testsupport/rmqtest"
	"github.com/detourmq/detour/pkg/producer"
)

// TestTimedMessagesAreDeliveredNotBeforeTheTimeAsked sends a message for 5.3 s later to a real
// broker of each line and watches the topic's queues: the message is not in them at any look
// before the time asked (5.x holds it as a timer message, asked for the mark after the time; 4.x
// as delay level 3, 10 s), it is there soon after, and RocketMQ's Java consumer reads it back
// under the msgId answered.
func TestTimedMessagesAreDeliveredNotBeforeTheTimeAsked(t *testing.T) {
	for _, line := range rmqtest.Lines {
		t.Run(line.String(), func(t *testing.T) {
			c := rmqtest.Start(t, line, rmqtest.BrokerConfig{})
			const topic = "DetourTimed"
			r := newRuntime(t, c, topic, 2, contentPolicy("timed"))
			ctx := context.Background()
			at := time.Now().Add(5*time.Second + 300*time.Millisecond)
			m := &producer.Message{Topic: topic, Tags: "later", Body: []byte("delivered not before " + at.Format(time.RFC3339Nano))}
			res, err := r.SendTimed(ctx, m, at)
			if err != nil {
				t.Fatal(err)
			}
			stored := func() int64 {
				n, _ := storedTotal(t, c, topic)
				return n
			}
			looks := 0
			for time.Now().Before(at.Add(-100 * time.Millisecond)) {
				if n := stored(); n != 0 && time.Now().Before(at) {
					t.Fatalf("the message is in the topic %v before the time asked", at.Sub(time.Now()))
				}
				looks++
				time.Sleep(100 * time.Millisecond) // the interval between looks; each look is the check
			}
			var seenAt time.Time
			for deadline := time.Now().Add(60 * time.Second); ; {
				if stored() == 1 {
					seenAt = time.Now()
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the message did not reach the topic within a minute of %v", at)
				}
				time.Sleep(100 * time.Millisecond) // the poll interval; the count is the synchronisation
			}
			t.Logf("%s: not in the topic at %d looks before the time asked; seen %v after it", line, looks, seenAt.Sub(at).Round(10*time.Millisecond))
			got := c.Consume(t, ctx, topic, 1, 60*time.Second)
			if len(got) != 1 || got[0].MsgID != res.MsgID || string(got[0].Body) != string(m.Body) || got[0].Tags != "later" {
				t.Fatalf("consumer read %s, sent %s %q", fmt.Sprint(got), res.MsgID, m.Body)
			}
		})
	}
}
