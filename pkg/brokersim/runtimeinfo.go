package brokersim

import (
	"encoding/json"
	"strconv"

	"github.com/detourmq/detour/pkg/remoting"
)

// idlePressure is what a Java broker with nothing queued reports: its send queue empty at the
// default sendThreadPoolQueueCapacity of 10000, no lock held, no put time measured.
var idlePressure = remoting.BrokerPressure{SendQueueCapacity: 10000}

// runtimeInfo answers GET_BROKER_RUNTIME_INFO as AdminBrokerProcessor.getBrokerRuntimeInfo does:
// SUCCESS with the runtime table as a KVTable in the body. The table carries the send path's
// figures (Fault.Pressure, else an idle broker's) under the Java broker's keys, in the Java
// broker's formats, the broker's version and how far its queues trail its log; the rest of a Java broker's table (store, pull,
// timer and schedule statistics) is left out, as nothing reads it from a simulator.
func (b *Broker) runtimeInfo(req *remoting.Command) *remoting.Command {
	p := idlePressure
	if f := b.fault.Load().Fault; f.Pressure != nil {
		p = *f.Pressure
	}
	version := b.opts.Version
	if version == "" {
		version = "V5_5_0"
	}
	table := map[string]string{
		"brokerVersionDesc":                     version,
		remoting.RuntimeSendQueueSize:           strconv.FormatInt(p.SendQueueSize, 10),
		remoting.RuntimeSendQueueCapacity:       strconv.FormatInt(p.SendQueueCapacity, 10),
		remoting.RuntimeSendQueueHeadWait:       strconv.FormatInt(p.SendQueueHeadWaitMillis, 10),
		remoting.RuntimePageCacheLock:           strconv.FormatInt(p.PageCacheLockMillis, 10),
		remoting.RuntimePutLatency99:            strconv.FormatFloat(max(p.PutLatency99Millis, 0), 'f', 2, 64),
		"putMessageEntireTimeMax":               "0",
		"msgPutTotalTodayNow":                   "0",
		"EndTransactionThreadPoolQueueCapacity": "100000",
		// A simulator files every message in its queue before it answers the send, so its queues
		// never trail its log.
		"dispatchBehindBytes": "0",
	}
	body, err := json.Marshal(struct {
		Table map[string]string `json:"table"`
	}{table})
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body = body
	if n, ok := versionNumbers[version]; ok {
		// A Java broker's answers carry its MQVersion.CURRENT_VERSION.
		resp.Version = n
	}
	return resp
}

// versionNumbers are RocketMQ's version numbers (MQVersion.Version ordinals) of the versions a
// simulator may report.
var versionNumbers = map[string]int16{"V4_9_7": 407, "V4_9_8": 409, "V5_0_0": 413, "V5_5_0": 513}
