package remoting

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// javaBrokerConfig is the start of a Java 5.x broker's GET_BROKER_CONFIG body: properties text,
// sorted by key, one unescaped "key=value" line each (a few of its ~400 keys).
const javaBrokerConfig = "brokerClusterName=DefaultCluster\nbrokerName=broker-a\nbrokerPermission=6\n" +
	"osPageCacheBusyTimeOutMills=1000\nstorePathRootDir=/tmp/store\nwaitTimeMillsInSendQueue=200\n"

func brokerConfigResponse(code int16, body string) *Command {
	return &Command{Code: code, Body: []byte(body), Flag: FlagResponse,
		ExtFields: map[string]string{"version": `{"counter":1,"stateVersion":0,"timestamp":1764633600000}`}}
}

func TestParseBrokerConfigReadsTheBusyLimits(t *testing.T) {
	cases := []struct {
		name string
		body string
		want BrokerLimits
	}{
		{"a default broker", javaBrokerConfig, BrokerLimits{SendQueueWaitMillis: 200, PageCacheBusyMillis: 1000}},
		{"a send queue wait lowered to 0", strings.Replace(javaBrokerConfig, "InSendQueue=200", "InSendQueue=0", 1),
			BrokerLimits{SendQueueWaitMillis: 0, PageCacheBusyMillis: 1000}},
		{"a negative limit refuses as 0 does", "waitTimeMillsInSendQueue=-5\nosPageCacheBusyTimeOutMills = 30 \n",
			BrokerLimits{SendQueueWaitMillis: 0, PageCacheBusyMillis: 30}},
		{"comments, blank lines and CRLF are skipped", "# updated\r\n\r\n! x\r\nwaitTimeMillsInSendQueue=50\r\n",
			BrokerLimits{SendQueueWaitMillis: 50, PageCacheBusyMillis: -1}},
		{"values that do not parse are unknown", "waitTimeMillsInSendQueue=soon\nosPageCacheBusyTimeOutMills=9223372036854775808\n",
			BrokerLimits{SendQueueWaitMillis: -1, PageCacheBusyMillis: -1}},
		{"an empty configuration", "", BrokerLimits{SendQueueWaitMillis: -1, PageCacheBusyMillis: -1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseBrokerConfig(brokerConfigResponse(Success, tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if got := LimitsOf(c); got != tc.want {
				t.Fatalf("limits %+v, want %+v", got, tc.want)
			}
			if !strings.Contains(c.Version, `"counter":1`) {
				t.Errorf("version %q, want the answer's data version", c.Version)
			}
		})
	}
}

func TestParseBrokerConfigRefusesHostileAnswers(t *testing.T) {
	var many strings.Builder
	for i := range MaxBrokerConfigEntries + 1 {
		fmt.Fprintf(&many, "k%d=%d\n", i, i)
	}
	cases := []struct {
		name  string
		resp  *Command
		want  string
		limit bool
	}{
		{"a body over 256 KiB", brokerConfigResponse(Success, "waitTimeMillsInSendQueue="+strings.Repeat("9", MaxBrokerConfigBody)), "over the limit of 262144", true},
		{"more entries than the bound", brokerConfigResponse(Success, many.String()), "more than 4096 entries", true},
		{"a refusal", brokerConfigResponse(SystemError, ""), "SYSTEM_ERROR", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseBrokerConfig(tc.resp)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("config %d entries, error %v; want an error naming %q", len(c.Entries), err, tc.want)
			}
			var le *LimitError
			if errors.As(err, &le) != tc.limit {
				t.Errorf("error %v: a limit error %v, want %v", err, !tc.limit, tc.limit)
			}
		})
	}
	// A body of repeated keys is not over the bound: a key counts once.
	c, err := ParseBrokerConfig(brokerConfigResponse(Success, strings.Repeat("k=1\n", MaxBrokerConfigEntries+10)))
	if err != nil || len(c.Entries) != 1 {
		t.Fatalf("repeated key: %d entries, error %v", len(c.Entries), err)
	}
}

// FuzzBrokerConfig feeds arbitrary bodies through the parser: it never panics, never returns
// more than MaxBrokerConfigEntries entries, and LimitsOf reads any configuration it returns
// without a limit below -1.
func FuzzBrokerConfig(f *testing.F) {
	f.Add([]byte(javaBrokerConfig))
	f.Add([]byte("waitTimeMillsInSendQueue\n=\n==\n\x00=\xff"))
	f.Add([]byte("osPageCacheBusyTimeOutMills=-9223372036854775808\r"))
	f.Fuzz(func(t *testing.T, body []byte) {
		c, err := ParseBrokerConfig(&Command{Code: Success, Body: body, Flag: FlagResponse})
		if err != nil {
			return
		}
		if len(c.Entries) > MaxBrokerConfigEntries {
			t.Fatalf("%d entries returned", len(c.Entries))
		}
		if l := LimitsOf(c); l.SendQueueWaitMillis < -1 || l.PageCacheBusyMillis < -1 {
			t.Fatalf("limits %+v", l)
		}
	})
}
