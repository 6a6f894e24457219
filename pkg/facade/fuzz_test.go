package facade

import (
	"testing"

	"github.com/detourmq/detour/pkg/remoting"
)

// FuzzFacadeRequest sends one request, built from the fuzzer's flags, code, version, header
// serialisation, ext fields, remark and body, over a real connection to a facade in front of a
// name server on loopback, and checks what every client may rely on: the process survives, no
// panic is recovered, a request gets exactly one answer (to its opaque), and a oneway request or
// a stray response gets none.
func FuzzFacadeRequest(f *testing.F) {
	m := newCountingMetrics()
	fx := start(f, Options{Metrics: m})
	fx.view.set("Governed", map[string]string{"broker-a": "BrokerError"})
	for _, s := range []struct {
		flag          int32
		code, version int16
		binary        bool
		k, v, remark  string
		body          []byte
	}{
		{0, remoting.GetRouteInfoByTopic, remoting.DefaultVersion, false, "topic", "Governed", "", nil},
		{0, remoting.GetRouteInfoByTopic, 300, true, "topic", "Other", "", nil},
		{remoting.FlagOneway, remoting.GetRouteInfoByTopic, remoting.DefaultVersion, false, "topic", "Governed", "", nil},
		{remoting.FlagResponse, remoting.GetRouteInfoByTopic, remoting.DefaultVersion, false, "topic", "Other", "", nil},
		{remoting.FlagResponse | remoting.FlagOneway, 0, 0, true, "", "", "r", nil},
		{0, remoting.GetBrokerClusterInfo, remoting.DefaultVersion, false, "", "", "", nil},
		{0, remoting.RegisterBroker, remoting.DefaultVersion, true, "brokerName", "broker-a", "", []byte(`{"topicConfigTable":{}}`)},
		{0, 322, -1, false, "topic", "\x00\xff", "remark", []byte{0}},
		{0, 9999, 32767, true, "", "", "", nil},
		{-1, -32768, -32768, false, "topic", "Governed", "\"", []byte("{")},
	} {
		f.Add(s.flag, s.code, s.version, s.binary, s.k, s.v, s.remark, s.body)
	}
	f.Fuzz(func(t *testing.T, flag int32, code, version int16, binary bool, k, v, remark string, body []byte) {
		req := &remoting.Command{Code: code, Language: "JAVA", Version: version, Opaque: 42, Flag: flag,
			Remark: remark, ExtFields: map[string]string{k: v}, Body: body}
		if binary {
			req.SerializeType = remoting.RocketMQ
		}
		frame, err := remoting.Encode(req)
		if err != nil {
			return // the codec cannot encode it, so no client can send it: nothing to try
		}
		// The facade reads the frame as this process would: what it cannot decode, it answers
		// by closing the connection.
		decoded, derr := remoting.Decode(frame[4:])
		// A frame too short to be one follows, so the facade answers what it read and then closes
		// the connection itself: the answers can be counted exactly, and the fuzzer's thousands
		// of connections a second leave no client ports waiting out TIME_WAIT.
		p := dial(t, fx.srv.Addr())
		if _, err := p.Write(append(frame, 0, 0, 0, 0)); err != nil {
			t.Fatal(err)
		}
		answers := p.untilClosed()
		want := 1
		if derr != nil || len(frame) > DefaultMaxFrameSize || decoded.IsResponse() || decoded.IsOneway() {
			want = 0
		}
		if len(answers) != want {
			t.Fatalf("%d answers to %v, want %d: %v", len(answers), decoded, want, answers)
		}
		for _, a := range answers {
			if a.Opaque != 42 || !a.IsResponse() {
				t.Errorf("answer %v is not a response to opaque 42", a)
			}
		}
		if n := m.get(func(m *countingMetrics) int { return m.panicked }); n != 0 {
			t.Fatalf("%d panics recovered serving %v", n, decoded)
		}
	})
}
