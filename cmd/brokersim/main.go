// Command brokersim runs simulated RocketMQ brokers and a name server on loopback, with
// optional faults, for demos and manual tests:
//
//	brokersim --namesrv-addr 127.0.0.1:9876 \
//	    --broker broker-a=127.0.0.1:10911 --broker broker-b=127.0.0.1:10921 \
//	    --topic TopicTest:4 --fault broker-b=delay:800ms
//
// Faults: delay:D, delay:D1-D2, blackhole, refuse, close, code:N, illegal (every send refused as
// MESSAGE_ILLEGAL), flap:UP/DOWN (down is a black hole; flap:UP/DOWN:refuse refuses instead),
// strand (with blackhole or flap: a connection that had a request dropped stays silent after the
// heal, as one in TCP retransmission backoff does), none; several join with commas. It prints one line starting "brokersim ready" once everything
// listens, and stops cleanly on SIGINT or SIGTERM. Bad flags exit with status 2, -h prints the
// flags and exits 0.
//
// Like Java brokers and name servers, it closes connections that stay idle for two minutes;
// --idle-timeout changes that (0 keeps them open).
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/detourmq/detour/pkg/brokersim"
)

func main() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, sig))
}

type brokerSpec struct{ name, addr string }

type topicSpec struct {
	name   string
	queues int
}

type config struct {
	namesrvAddr string
	cluster     string
	autoCreate  bool
	idleTimeout time.Duration // 0: never close idle connections
	brokers     []brokerSpec
	topics      []topicSpec
	faults      map[string]brokersim.Fault
}

// listFlag collects a repeatable flag.
type listFlag []string

// String implements flag.Value.
func (l *listFlag) String() string { return strings.Join(*l, ",") }

// Set implements flag.Value; each use of the flag adds one entry.
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// errUsage marks errors for which the usage text was already printed.
var errUsage = errors.New("usage")

// parseArgs reads the command line; every problem is reported as an error naming the flag.
func parseArgs(args []string, stderr io.Writer) (*config, error) {
	fs := flag.NewFlagSet("brokersim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var brokers, topics, faults listFlag
	cfg := &config{faults: map[string]brokersim.Fault{}}
	fs.StringVar(&cfg.namesrvAddr, "namesrv-addr", "127.0.0.1:9876", "name server listen address (empty: no name server)")
	fs.StringVar(&cfg.cluster, "cluster", "DefaultCluster", "cluster name of the brokers")
	fs.BoolVar(&cfg.autoCreate, "auto-create-topics", true, "create unknown topics on first send (else answer TOPIC_NOT_EXIST)")
	fs.DurationVar(&cfg.idleTimeout, "idle-timeout", brokersim.DefaultIdleTimeout, "close connections without traffic for this long, as Java servers do (0: never)")
	fs.Var(&brokers, "broker", "broker as name=ip:port (repeatable, at least one)")
	fs.Var(&topics, "topic", "topic created on every broker, as name:queues (repeatable)")
	fs.Var(&faults, "fault", "fault of a broker, as name=spec; spec is delay:D, delay:D1-D2, blackhole, refuse, close, code:N, illegal, flap:UP/DOWN[:refuse], strand or none, comma-joined (repeatable)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: brokersim --broker name=ip:port [--broker ...] [--namesrv-addr ip:port] [--topic name:queues] [--fault name=spec]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, flag.ErrHelp
		}
		return nil, errUsage
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if cfg.idleTimeout < 0 {
		return nil, fmt.Errorf("--idle-timeout %v: want 0 (never) or a positive duration", cfg.idleTimeout)
	}
	if len(brokers) == 0 {
		return nil, errors.New("at least one --broker name=ip:port is required")
	}
	seen := map[string]bool{}
	for _, b := range brokers {
		name, addr, ok := strings.Cut(b, "=")
		if !ok || name == "" || addr == "" {
			return nil, fmt.Errorf("--broker %q: want name=ip:port", b)
		}
		if seen[name] {
			return nil, fmt.Errorf("--broker %q: broker %s given twice", b, name)
		}
		seen[name] = true
		cfg.brokers = append(cfg.brokers, brokerSpec{name, addr})
	}
	for _, t := range topics {
		name, n, ok := strings.Cut(t, ":")
		q, err := strconv.Atoi(n)
		if !ok || name == "" || err != nil || q < 1 || q > 1024 {
			return nil, fmt.Errorf("--topic %q: want name:queues with 1..1024 queues", t)
		}
		cfg.topics = append(cfg.topics, topicSpec{name, q})
	}
	for _, f := range faults {
		name, spec, ok := strings.Cut(f, "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("--fault %q: want broker=spec", f)
		}
		if !seen[name] {
			return nil, fmt.Errorf("--fault %q: no --broker named %s", f, name)
		}
		fault, err := parseFault(cfg.faults[name], spec)
		if err != nil {
			return nil, fmt.Errorf("--fault %q: %w", f, err)
		}
		cfg.faults[name] = fault
	}
	return cfg, nil
}

// parseFault adds the comma-separated fault parts of spec to f.
func parseFault(f brokersim.Fault, spec string) (brokersim.Fault, error) {
	for _, part := range strings.Split(spec, ",") {
		kind, arg, _ := strings.Cut(part, ":")
		switch kind {
		case "none":
			f = brokersim.Fault{}
		case "blackhole":
			f.BlackHole = true
		case "strand":
			f.Strand = true
		case "refuse":
			f.Refuse = true
		case "close":
			f.CloseMidRequest = true
		case "delay":
			lo, hi, isRange := strings.Cut(arg, "-")
			d, err := parseDuration(lo)
			if err != nil {
				return f, fmt.Errorf("delay: %w", err)
			}
			f.Delay, f.DelayMax = d, 0
			if isRange {
				if f.DelayMax, err = parseDuration(hi); err != nil {
					return f, fmt.Errorf("delay: %w", err)
				}
				if f.DelayMax <= f.Delay {
					return f, fmt.Errorf("delay range %s: the upper bound must exceed the lower", arg)
				}
			}
		case "code":
			n, err := strconv.ParseInt(arg, 10, 16)
			if err != nil || n == 0 {
				return f, fmt.Errorf("code %q: want a non-zero response code", arg)
			}
			f.Code = int16(n)
		case "illegal":
			f.IllegalMessages = true
		case "flap":
			times, mode, _ := strings.Cut(arg, ":")
			up, down, ok := strings.Cut(times, "/") //docgen:not-identity the flap fault's up/down durations
			var err1, err2 error
			f.FlapUp, err1 = parseDuration(up)
			f.FlapDown, err2 = parseDuration(down)
			if !ok || err1 != nil || err2 != nil || f.FlapUp == 0 || f.FlapDown == 0 {
				return f, fmt.Errorf("flap %q: want UP/DOWN durations above zero", arg)
			}
			switch mode {
			case "", "blackhole":
			case "refuse":
				f.Refuse = true
			default:
				return f, fmt.Errorf("flap mode %q: want blackhole or refuse", mode)
			}
		default:
			return f, fmt.Errorf("unknown fault %q (want delay, blackhole, refuse, close, code, illegal, flap, strand or none)", part)
		}
	}
	return f, nil
}

func parseDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, err
	}
	if d < 0 {
		return 0, fmt.Errorf("negative duration %s", s)
	}
	return d, nil
}

// run starts everything, prints the ready line, waits for a signal and stops. It returns the
// exit status: 0 after a clean stop, 1 when something could not start, 2 for bad flags.
func run(args []string, stdout, stderr io.Writer, stop <-chan os.Signal) int {
	cfg, err := parseArgs(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		if !errors.Is(err, errUsage) {
			fmt.Fprintf(stderr, "brokersim: %v\n", err)
		}
		return 2
	}
	var closers []io.Closer
	closeAll := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			_ = closers[i].Close()
		}
		closers = nil
	}
	defer closeAll()
	ready := []string{"brokersim ready"}
	// The library reads zero as the Java default and a negative value as never.
	idle := cfg.idleTimeout
	if idle == 0 {
		idle = -1
	}
	var brokers []*brokersim.Broker
	for _, spec := range cfg.brokers {
		b, err := brokersim.StartBrokerWith(spec.name, spec.addr, brokersim.Options{Cluster: cfg.cluster, NoAutoCreate: !cfg.autoCreate, IdleTimeout: idle})
		if err != nil {
			fmt.Fprintf(stderr, "brokersim: %v\n", err)
			return 1
		}
		closers = append(closers, b)
		brokers = append(brokers, b)
		for _, t := range cfg.topics {
			b.CreateTopic(t.name, t.queues)
		}
	}
	if cfg.namesrvAddr != "" {
		ns, err := brokersim.StartNameServerWith(cfg.namesrvAddr, brokersim.NameServerOptions{IdleTimeout: idle}, brokers...)
		if err != nil {
			fmt.Fprintf(stderr, "brokersim: %v\n", err)
			return 1
		}
		closers = append(closers, ns)
		ready = append(ready, "namesrv="+ns.Addr())
	}
	for _, b := range brokers {
		ready = append(ready, "broker:"+b.Name()+"="+b.Addr())
	}
	for _, b := range brokers {
		if f, ok := cfg.faults[b.Name()]; ok {
			b.SetFault(f)
			ready = append(ready, "fault:"+b.Name()+"="+f.String())
		}
	}
	fmt.Fprintln(stdout, strings.Join(ready, " "))
	s := <-stop
	closeAll()
	fmt.Fprintf(stdout, "brokersim stopped: %v\n", s)
	return 0
}
