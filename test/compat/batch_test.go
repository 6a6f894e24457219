package compat_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/detourmq/detour/internal/gateway"
	"github.com/detourmq/detour/internal/testsupport/rmqtest"
	"github.com/detourmq/detour/pkg/producer"
	"github.com/detourmq/detour/pkg/remoting"
)

// batchSent is one message of a batch and where detour said it was stored.
type batchSent struct {
	sent
	offsetMsgID string
	broker      string
	queueID     int
	queueOffset int64
}

// TestBatchesStoredAsSent sends batches through the runtime (SendBatch) and the send gateway
// (messages:batch) to real brokers and reads them back with RocketMQ's own Java consumer: every
// message arrives exactly once with its body, tags, keys and properties, under the msgId and
// offsetMsgId detour answered, on the broker and queue it answered, at consecutive offsets in
// the order of the batch.
func TestBatchesStoredAsSent(t *testing.T) {
	for _, line := range rmqtest.Lines {
		t.Run(line.String(), func(t *testing.T) {
			c := rmqtest.Start(t, line, rmqtest.BrokerConfig{}, rmqtest.BrokerConfig{})
			const topic = "DetourBatches"
			r := newRuntime(t, c, topic, 4, contentPolicy("compat"))
			var all []batchSent
			for round := range 3 {
				all = append(all, sendRuntimeBatch(t, r, topic, round)...)
			}
			all = append(all, sendGatewayBatch(t, r, topic)...)

			got := c.Consume(t, context.Background(), topic, len(all), 60*time.Second)
			plain := make([]sent, len(all))
			for i, s := range all {
				plain[i] = s.sent
			}
			checkStoredAsSent(t, plain, got)
			checkStoredWhereAnswered(t, all, got)

			// The canary: a batch whose own properties carry a UNIQ_KEY, as RocketMQ's producer
			// sends it, reads back under that one id on 4.9.x brokers, which append a batch's
			// properties to each message's. detour leaves the batch's UNIQ_KEY out.
			ids := sendBatchWithItsOwnID(t, c, topic+"Canary")
			canary := c.Consume(t, context.Background(), topic+"Canary", len(ids), 60*time.Second)
			distinct := map[string]bool{}
			for _, g := range canary {
				distinct[g.MsgID] = true
			}
			if collapsed := len(distinct) == 1; collapsed != (line == rmqtest.V4) {
				t.Errorf("%s: a batch with its own UNIQ_KEY read back under %d distinct ids for %d messages; want one id on 4.9.x only", line, len(distinct), len(canary))
			}
		})
	}
}

// sendBatchWithItsOwnID sends a batch of 3 messages to topic (created on the first broker) as
// RocketMQ's DefaultMQProducer does: a UNIQ_KEY on every message and one on the batch.
func sendBatchWithItsOwnID(t *testing.T, c *rmqtest.Cluster, topic string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b := c.Brokers()[0]
	r := producer.New(producer.Options{ProducerGroup: "detour_compat_canary"})
	defer r.Close()
	if err := r.CreateTopic(ctx, b.Addr, topic, 1, 1, 6); err != nil {
		t.Fatal(err)
	}
	var msgs []*remoting.Message
	var ids []string
	for i := range 3 {
		id := remoting.NewUniqID()
		ids = append(ids, id)
		msgs = append(msgs, &remoting.Message{Body: []byte(fmt.Sprint("canary ", i)),
			Properties: map[string]string{remoting.PropertyUniqKey: id, remoting.PropertyWaitStoreMsgOK: "true"}})
	}
	encoded, _, err := remoting.AppendBatch(nil, msgs, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := &remoting.SendHeader{ProducerGroup: "detour_compat_canary", Topic: topic, DefaultTopic: remoting.DefaultTopic,
		DefaultTopicQueueNums: remoting.DefaultTopicQueueNums, BornTimestamp: time.Now().UnixMilli(), Batch: true, BrokerName: b.Name,
		Properties: (&remoting.Message{Properties: map[string]string{remoting.PropertyWaitStoreMsgOK: "true", remoting.PropertyUniqKey: remoting.NewUniqID()}}).EncodeProperties()}
	resp, err := c.Client().Invoke(ctx, b.Addr, remoting.NewSendRequest(h, encoded, true))
	if err != nil || resp.Code != remoting.Success {
		t.Fatalf("canary batch: %v %+v", err, resp)
	}
	return ids
}

// sendRuntimeBatch sends one batch of 8 messages with SendBatch; bodies run up to 64 KiB, which
// a batch sends uncompressed.
func sendRuntimeBatch(t *testing.T, r *producer.Runtime, topic string, round int) []batchSent {
	t.Helper()
	var msgs []*producer.Message
	for i, n := range []int{1, 10, 100, 1000, 4096, 5000, 20000, 64 << 10} {
		msgs = append(msgs, &producer.Message{Topic: topic, Tags: fmt.Sprintf("TagR%d", round),
			Keys: fmt.Sprintf("batch-%d-%d other", round, i), Body: body(fmt.Sprintf("batch-%d-%d", round, i), n),
			Properties: map[string]string{"seq": fmt.Sprint(i), "note": "grüße, 世界"}})
	}
	res, err := r.SendBatch(context.Background(), msgs)
	if err != nil {
		t.Fatalf("batch %d: %v", round, err)
	}
	if len(res.MsgIDs) != len(msgs) || len(res.OffsetMsgIDs) != len(msgs) {
		t.Fatalf("batch %d answered %d ids and %d offset ids for %d messages: %+v", round, len(res.MsgIDs), len(res.OffsetMsgIDs), len(msgs), res)
	}
	out := make([]batchSent, len(msgs))
	for i, m := range msgs {
		out[i] = batchSent{sent: sent{via: "runtime batch", msgID: res.MsgIDs[i], msg: *m}, offsetMsgID: res.OffsetMsgIDs[i],
			broker: res.Broker, queueID: res.QueueID, queueOffset: res.QueueOffset + int64(i)}
	}
	return out
}

// sendGatewayBatch posts one batch in both body forms to the send gateway in front of r.
func sendGatewayBatch(t *testing.T, r *producer.Runtime, topic string) []batchSent {
	t.Helper()
	url := startGateway(t, r, topic) + ":batch"
	var msgs []producer.Message
	var req gateway.JSONBatch
	for i := range 5 {
		m := producer.Message{Tags: "TagG", Keys: fmt.Sprintf("gw-batch-%d", i), Body: body(fmt.Sprintf("gw-batch-%d", i), 300+i),
			Properties: map[string]string{"Mixed-Case": fmt.Sprint(i)}}
		jm := gateway.JSONMessage{Tags: m.Tags, Keys: gateway.Keys{m.Keys}, Properties: m.Properties}
		if i%2 == 0 {
			b64 := base64.StdEncoding.EncodeToString(m.Body)
			jm.Body = &b64
		} else {
			m.Body = []byte(strings.Repeat("text ", i) + "\"quoted\"\n")
			text := string(m.Body)
			jm.BodyText = &text
		}
		msgs = append(msgs, m)
		req.Messages = append(req.Messages, jm)
	}
	js, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(url, "application/json", bytes.NewReader(js))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var br gateway.BatchResponse
	if err := json.NewDecoder(resp.Body).Decode(&br); err != nil || resp.StatusCode != http.StatusOK || len(br.Messages) != len(msgs) {
		t.Fatalf("gateway answered %d %+v (%v)", resp.StatusCode, br, err)
	}
	out := make([]batchSent, len(msgs))
	for i, m := range msgs {
		a := br.Messages[i]
		out[i] = batchSent{sent: sent{via: "gateway batch", msgID: a.MsgID, msg: m}, offsetMsgID: a.OffsetMsgID,
			broker: br.Broker, queueID: br.QueueID, queueOffset: a.QueueOffset}
	}
	return out
}

// checkStoredWhereAnswered matches the consumer's broker, queue, offset and offset msgId of every
// message with what detour answered.
func checkStoredWhereAnswered(t *testing.T, want []batchSent, got []rmqtest.Consumed) {
	t.Helper()
	byID := make(map[string]rmqtest.Consumed, len(got))
	for _, g := range got {
		byID[g.MsgID] = g
	}
	for _, w := range want {
		g, ok := byID[w.msgID]
		if !ok {
			continue // checkStoredAsSent reported it
		}
		if g.BrokerName != w.broker || g.QueueID != w.queueID || g.QueueOffset != w.queueOffset || g.OffsetMsgID != w.offsetMsgID {
			t.Errorf("%s message %s: read back on %s queue %d offset %d as %s; answered %s queue %d offset %d as %s",
				w.via, w.msgID, g.BrokerName, g.QueueID, g.QueueOffset, g.OffsetMsgID, w.broker, w.queueID, w.queueOffset, w.offsetMsgID)
		}
	}
}
