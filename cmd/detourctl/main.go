// Command detourctl sends messages through detour's producer runtime, so a fault policy can be
// tried against real brokers without a Kubernetes cluster: with a static route,
//
//	detourctl send --broker broker-a=127.0.0.1:10911 --broker broker-b=127.0.0.1:10921 \
//	    --topic TopicTest --queues 4 --count 100 --preset RocketMQ5 --output json
//
// or with the route a cluster's name servers publish, as RocketMQ clients take it:
//
//	detourctl send --namesrv 127.0.0.1:9876 --topic TopicTest --count 100
//
// A body comes from --body, a file or standard input (--body-file -, up to RocketMQ's 4 MiB), and
// user properties from --property key=value (repeatable):
//
//	detourctl send --namesrv 127.0.0.1:9876 --topic TopicTest --count 1 \
//	    --body-file payload.json --property order=42
//
// With --output json every send prints one JSON object (msgId, broker, queueId, queueOffset,
// attempts, brokersTried, latencyMillis, error) and a final summary object; --output text prints
// the same as aligned text. The exit status is 1 when any send failed, 2 on bad usage.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"slices"
	"strings"
	"time"

	"github.com/detourmq/detour/pkg/producer"
	"github.com/detourmq/detour/pkg/remoting"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

const usage = `usage: detourctl <command> [flags]

commands:
  send    send messages through the producer runtime with a static route
  ping    check that a RocketMQ name server or broker answers (a readiness probe)
`

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "send":
		return runSend(ctx, args[1:], stdin, stdout, stderr)
	case "ping":
		return runPing(ctx, args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "detourctl: unknown command %q\n%s", args[0], usage)
		return 2
	}
}

// brokerFlags collects repeated --broker name=host:port values.
type brokerFlags []producer.Broker

// String renders the flag values for flag's help output.
func (b *brokerFlags) String() string {
	parts := make([]string, len(*b))
	for i, br := range *b {
		parts[i] = br.Name + "=" + br.Addr
	}
	return strings.Join(parts, ",")
}

// Set adds one name=host:port broker; names must be unique.
func (b *brokerFlags) Set(v string) error {
	name, addr, ok := strings.Cut(v, "=")
	if !ok || name == "" || addr == "" {
		return fmt.Errorf("want name=host:port, got %q", v)
	}
	if slices.ContainsFunc(*b, func(x producer.Broker) bool { return x.Name == name }) {
		return fmt.Errorf("broker %s given twice", name)
	}
	*b = append(*b, producer.Broker{Name: name, Addr: addr, Ready: true})
	return nil
}

type sendConfig struct {
	brokers     brokerFlags
	nameServers []string
	topic       string
	queues      int
	count       int
	preset      string
	output      string
	// given holds the names of the flags set on the command line, which override the preset.
	given             map[string]bool
	body              string
	bodyFile          string
	properties        propertyFlags
	size              int
	tags, keys        string
	attempts          int
	sendTimeout       time.Duration
	perAttemptTimeout time.Duration
	probe             bool
	probeInterval     time.Duration
	probeTimeout      time.Duration
	interval          time.Duration
	createTopic       bool
	group             string
	// creds sign every request to the brokers (RocketMQ ACL 2.0); nil sends unsigned.
	creds *remoting.Credentials
}

// routeToBrokers routes the topic over the --broker list with --queues each, creating it first
// when asked. It returns a non-zero exit status on failure.
func routeToBrokers(ctx context.Context, rt *producer.Runtime, c *sendConfig, policy string, stderr io.Writer) int {
	route := producer.Route{Topic: c.topic, Policy: policy}
	for _, b := range c.brokers {
		rt.SetBroker(b)
		route.Brokers = append(route.Brokers, producer.BrokerQueues{Broker: b.Name, WriteQueues: c.queues})
	}
	if err := rt.SetRoute(route); err != nil {
		fmt.Fprintf(stderr, "detourctl send: %v\n", err)
		return 2
	}
	if c.createTopic {
		for _, b := range c.brokers {
			if code := createOn(ctx, rt, c, b.Name, b.Addr, stderr); code != 0 {
				return code
			}
		}
	}
	return 0
}

// routeFromNameServers creates the topic on every master the name servers publish (when asked),
// then takes the topic's route from them. It returns a non-zero exit status on failure.
func routeFromNameServers(ctx context.Context, rt *producer.Runtime, c *sendConfig, policy string, stderr io.Writer) int {
	if c.createTopic {
		cctx, cancel := context.WithTimeout(ctx, c.sendTimeout)
		view, err := rt.DescribeCluster(cctx, c.nameServers)
		cancel()
		if err != nil {
			fmt.Fprintf(stderr, "detourctl send: %v\n", err)
			return 1
		}
		for _, b := range view.Brokers {
			if b.MasterAddr == "" {
				continue
			}
			if code := createOn(ctx, rt, c, b.Name, b.MasterAddr, stderr); code != 0 {
				return code
			}
		}
	}
	if err := rt.SetNameServerRoute(producer.NameServerRoute{Topic: c.topic, NameServers: c.nameServers, Policy: policy}); err != nil {
		fmt.Fprintf(stderr, "detourctl send: %v\n", err)
		return 2
	}
	if st, _ := rt.RouteStatus(c.topic); !st.Resolved {
		fmt.Fprintf(stderr, "detourctl send: no route for %s: %v\n", c.topic, st.Err)
		return 1
	}
	return 0
}

// createOn sends UPDATE_AND_CREATE_TOPIC with --queues read and write queues to one broker.
func createOn(ctx context.Context, rt *producer.Runtime, c *sendConfig, name, addr string, stderr io.Writer) int {
	cctx, cancel := context.WithTimeout(ctx, c.sendTimeout)
	err := rt.CreateTopicIn(cctx, "", addr, c.topic, c.queues, c.queues, int(remoting.PermReadWrite))
	cancel()
	if err != nil {
		fmt.Fprintf(stderr, "detourctl send: create topic on %s: %v\n", name, err)
		return 1
	}
	return 0
}

// sendLine is one send's outcome as printed with --output json.
type sendLine struct {
	MsgID         string   `json:"msgId"`
	Broker        string   `json:"broker"`
	QueueID       int      `json:"queueId"`
	QueueOffset   int64    `json:"queueOffset"`
	Attempts      int      `json:"attempts"`
	BrokersTried  []string `json:"brokersTried"`
	LatencyMillis float64  `json:"latencyMillis"`
	Error         string   `json:"error"`
}

// summary is the closing line.
type summary struct {
	Sent          int            `json:"sent"`
	Failed        int            `json:"failed"`
	Retried       int            `json:"retried"`
	PerBroker     map[string]int `json:"perBroker"`
	P50Millis     float64        `json:"p50Millis"`
	P99Millis     float64        `json:"p99Millis"`
	MaxMillis     float64        `json:"maxMillis"`
	ElapsedMillis float64        `json:"elapsedMillis"`
	Isolated      []string       `json:"isolated"`
}

func parseSend(args []string, stderr io.Writer) (*sendConfig, error) {
	c := &sendConfig{}
	fs := flag.NewFlagSet("detourctl send", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Var(&c.brokers, "broker", "broker `name=host:port` (repeat for each broker master)")
	namesrv := fs.String("namesrv", "", "name servers `host:port[;host:port]` to take the route from, as RocketMQ clients do (instead of --broker)")
	fs.StringVar(&c.topic, "topic", "TopicTest", "topic to send to")
	fs.IntVar(&c.queues, "queues", 4, "write queues per broker")
	fs.IntVar(&c.count, "count", 10, "number of messages")
	fs.StringVar(&c.preset, "preset", "RocketMQ5", "behaviour preset: Detour, RocketMQ5, RocketMQ4 or Disabled (the flags below that are given override it)")
	fs.StringVar(&c.output, "output", "text", "output format: json or text")
	fs.StringVar(&c.body, "body", "", "message body (default: a generated body of --size bytes)")
	fs.StringVar(&c.bodyFile, "body-file", "", "read the message body from this `file` (- for standard input), up to 4 MiB")
	fs.Var(&c.properties, "property", "a user property `key=value` (repeat for each)")
	fs.IntVar(&c.size, "size", 128, "generated body size in bytes")
	fs.StringVar(&c.tags, "tags", "", "message tags")
	fs.StringVar(&c.keys, "keys", "", "message keys")
	fs.IntVar(&c.attempts, "attempts", producer.DefaultAttempts, "attempts per message (1 + retries)")
	fs.DurationVar(&c.sendTimeout, "send-timeout", producer.DefaultSendTimeout, "time budget of one message, all attempts")
	fs.DurationVar(&c.perAttemptTimeout, "per-attempt-timeout", 0, "cap of every attempt but the last (0 = none; unset: the preset's)")
	fs.BoolVar(&c.probe, "probe", false, "probe isolated brokers and let them back only on a good probe (unset: the preset's)")
	fs.DurationVar(&c.probeInterval, "probe-interval", producer.DefaultProbeInterval, "probe interval")
	fs.DurationVar(&c.probeTimeout, "probe-timeout", producer.DefaultProbeTimeout, "probe timeout")
	fs.DurationVar(&c.interval, "interval", 0, "pause between messages")
	fs.BoolVar(&c.createTopic, "create-topic", false, "create the topic on every broker first (UPDATE_AND_CREATE_TOPIC)")
	fs.StringVar(&c.group, "group", producer.DefaultProducerGroup, "producer group")
	accessKey := fs.String("access-key", "", "RocketMQ ACL user to sign requests as (default: $"+envAccessKey+")")
	secretKey := fs.String("secret-key", "", "the user's password (default: $"+envSecretKey+", which, unlike a flag, other users of the machine cannot read)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	creds, err := credentialsFrom(*accessKey, *secretKey, getenv)
	if err != nil {
		return nil, err
	}
	c.creds = creds
	c.given = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { c.given[f.Name] = true })
	switch {
	case fs.NArg() > 0:
		return nil, fmt.Errorf("unexpected arguments: %v", fs.Args())
	case len(c.brokers) == 0 && *namesrv == "":
		return nil, errors.New("at least one --broker, or --namesrv, is required")
	case len(c.brokers) > 0 && *namesrv != "":
		return nil, errors.New("give either --namesrv or --broker, not both")
	case c.queues < 1:
		return nil, errors.New("--queues must be at least 1")
	case c.count < 0:
		return nil, errors.New("--count must not be negative")
	case c.output != "json" && c.output != "text":
		return nil, fmt.Errorf("--output must be json or text, got %q", c.output)
	case c.body == "" && c.size < 1:
		return nil, errors.New("--size must be at least 1")
	case c.body != "" && c.bodyFile != "":
		return nil, errors.New("give either --body or --body-file, not both")
	}
	if err := producer.CheckUserProperties(c.properties); err != nil {
		return nil, fmt.Errorf("--property: %w", err)
	}
	if err := producer.CheckSendTopic(c.topic); err != nil {
		return nil, err
	}
	// RocketMQ's namesrvAddr separates name servers with semicolons; commas are accepted too.
	for _, a := range strings.FieldsFunc(*namesrv, func(r rune) bool { return r == ';' || r == ',' }) {
		if _, _, err := net.SplitHostPort(strings.TrimSpace(a)); err != nil {
			return nil, fmt.Errorf("--namesrv: %v", err)
		}
		c.nameServers = append(c.nameServers, strings.TrimSpace(a))
	}
	return c, nil
}

// Environment variables detourctl send takes credentials from when the flags are not given.
const (
	envAccessKey = "DETOUR_ACCESS_KEY"
	envSecretKey = "DETOUR_SECRET_KEY"
)

// getenv reads the environment; tests replace it.
var getenv = os.Getenv

// credentialsFrom returns the credentials of the flags, each falling back to its environment
// variable; nil when neither gives an access key. An access key without a secret (or the reverse)
// is an error: the brokers would refuse every request.
func credentialsFrom(accessKey, secretKey string, env func(string) string) (*remoting.Credentials, error) {
	if accessKey == "" {
		accessKey = env(envAccessKey)
	}
	if secretKey == "" {
		secretKey = env(envSecretKey)
	}
	if accessKey == "" && secretKey == "" {
		return nil, nil
	}
	c := &remoting.Credentials{AccessKey: accessKey, SecretKey: secretKey}
	if err := c.Check(); err != nil {
		return nil, fmt.Errorf("--access-key and --secret-key (or $%s and $%s) go together: %w", envAccessKey, envSecretKey, err)
	}
	return c, nil
}

// sendPolicy is the preset's policy, a whole behaviour, with the flags given overriding it.
func sendPolicy(c *sendConfig) (producer.Policy, error) {
	pol, err := producer.PresetPolicy("detourctl", producer.Preset(c.preset))
	if err != nil {
		return pol, err
	}
	pol.Retry.Attempts = c.attempts
	pol.Retry.SendTimeout = c.sendTimeout
	if c.given["per-attempt-timeout"] {
		pol.Retry.PerAttemptTimeout = c.perAttemptTimeout
	}
	if c.given["probe"] {
		pol.Probe.Enabled = c.probe
	}
	pol.Probe.Interval, pol.Probe.Timeout = c.probeInterval, c.probeTimeout
	return pol, nil
}

func runSend(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	c, pol, body, code := prepareSend(args, stdin, stderr)
	if code != 0 {
		return code
	}
	rt := producer.New(producer.Options{ProducerGroup: c.group})
	defer rt.Close()
	if code := startRuntime(ctx, rt, c, pol, stderr); code != 0 {
		return code
	}
	out := newPrinter(c.output, stdout)
	sum := sendEach(ctx, rt, c, body, out)
	sum.Isolated = []string{}
	for _, it := range rt.Isolated(pol.Name) {
		sum.Isolated = append(sum.Isolated, it.Broker)
	}
	out.summary(sum)
	if sum.Failed > 0 {
		return 1
	}
	return 0
}

// prepareSend parses the send command line into its configuration, policy and message body, or
// says why not and returns the exit code 2. The body is read before anything is sent or created,
// so a bad one changes nothing.
func prepareSend(args []string, stdin io.Reader, stderr io.Writer) (*sendConfig, producer.Policy, []byte, int) {
	c, err := parseSend(args, stderr)
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(stderr, "detourctl send: %v\n", err)
		}
		return nil, producer.Policy{}, nil, 2
	}
	pol, err := sendPolicy(c)
	if err != nil {
		fmt.Fprintf(stderr, "detourctl send: %v\n", err)
		return nil, producer.Policy{}, nil, 2
	}
	body, err := messageBody(c, stdin)
	if err != nil {
		fmt.Fprintf(stderr, "detourctl send: %v\n", err)
		return nil, producer.Policy{}, nil, 2
	}
	return c, pol, body, 0
}

// startRuntime gives rt the credentials and the policy and routes the topic, from the name
// servers or to the brokers named; a non-zero result is the exit code.
func startRuntime(ctx context.Context, rt *producer.Runtime, c *sendConfig, pol producer.Policy, stderr io.Writer) int {
	// detourctl's brokers are named without a scope: the credentials sign for them all.
	if err := rt.SetCredentials("", c.creds); err != nil {
		fmt.Fprintf(stderr, "detourctl send: %v\n", err)
		return 2
	}
	if err := rt.SetPolicy(pol); err != nil {
		fmt.Fprintf(stderr, "detourctl send: %v\n", err)
		return 2
	}
	if len(c.nameServers) > 0 {
		return routeFromNameServers(ctx, rt, c, pol.Name, stderr)
	}
	return routeToBrokers(ctx, rt, c, pol.Name, stderr)
}

// sendEach sends the message c.count times, c.interval apart, until ctx ends, prints a line for
// each send and sums them up with the latency percentiles.
func sendEach(ctx context.Context, rt *producer.Runtime, c *sendConfig, body []byte, out *printer) summary {
	sum := summary{PerBroker: map[string]int{}}
	var latencies []time.Duration
	begin := time.Now()
	for i := 0; i < c.count && ctx.Err() == nil; i++ {
		if i > 0 && c.interval > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(c.interval):
			}
		}
		line, lat := sendOnce(ctx, rt, c, body, &sum)
		latencies = append(latencies, lat)
		out.send(line)
	}
	sum.ElapsedMillis = millis(time.Since(begin))
	slices.Sort(latencies)
	if n := len(latencies); n > 0 {
		sum.P50Millis = millis(latencies[(n-1)*50/100])
		sum.P99Millis = millis(latencies[(n-1)*99/100])
		sum.MaxMillis = millis(latencies[n-1])
	}
	return sum
}

// sendOnce sends the message once, counts the outcome in sum and returns its line and latency.
func sendOnce(ctx context.Context, rt *producer.Runtime, c *sendConfig, body []byte, sum *summary) (sendLine, time.Duration) {
	start := time.Now()
	res, err := rt.Send(ctx, &producer.Message{Topic: c.topic, Tags: c.tags, Keys: c.keys, Properties: c.properties, Body: body})
	lat := time.Since(start)
	line := sendLine{LatencyMillis: millis(lat), BrokersTried: []string{}}
	if err != nil {
		sum.Failed++
		line.Error = err.Error()
		var se *producer.SendError
		if errors.As(err, &se) {
			line.Attempts = se.Attempts
			line.BrokersTried = se.BrokersTried
		}
	} else {
		sum.Sent++
		sum.PerBroker[res.Broker]++
		line.MsgID, line.Broker, line.QueueID, line.QueueOffset = res.MsgID, res.Broker, res.QueueID, res.QueueOffset
		line.Attempts, line.BrokersTried = res.Attempts, res.BrokersTried
	}
	if line.Attempts > 1 {
		sum.Retried++
	}
	return line, lat
}

func millis(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

type printer struct {
	json bool
	w    io.Writer
	enc  *json.Encoder
}

func newPrinter(format string, w io.Writer) *printer {
	return &printer{json: format == "json", w: w, enc: json.NewEncoder(w)}
}

func (p *printer) send(l sendLine) {
	if p.json {
		_ = p.enc.Encode(l)
		return
	}
	if l.Error != "" {
		fmt.Fprintf(p.w, "FAILED   attempts=%d brokersTried=%s latency=%.3fms error=%s\n",
			l.Attempts, strings.Join(l.BrokersTried, ","), l.LatencyMillis, l.Error)
		return
	}
	fmt.Fprintf(p.w, "SEND_OK  msgId=%s broker=%s queueId=%d queueOffset=%d attempts=%d brokersTried=%s latency=%.3fms\n",
		l.MsgID, l.Broker, l.QueueID, l.QueueOffset, l.Attempts, strings.Join(l.BrokersTried, ","), l.LatencyMillis)
}

func (p *printer) summary(s summary) {
	if p.json {
		_ = p.enc.Encode(struct {
			Summary summary `json:"summary"`
		}{s})
		return
	}
	names := make([]string, 0, len(s.PerBroker))
	for n := range s.PerBroker {
		names = append(names, n)
	}
	slices.Sort(names)
	per := make([]string, len(names))
	for i, n := range names {
		per[i] = fmt.Sprintf("%s=%d", n, s.PerBroker[n])
	}
	fmt.Fprintf(p.w, "summary: sent=%d failed=%d retried=%d perBroker=[%s] p50=%.3fms p99=%.3fms max=%.3fms elapsed=%.3fms isolated=[%s]\n",
		s.Sent, s.Failed, s.Retried, strings.Join(per, " "), s.P50Millis, s.P99Millis, s.MaxMillis, s.ElapsedMillis,
		strings.Join(s.Isolated, " "))
}
