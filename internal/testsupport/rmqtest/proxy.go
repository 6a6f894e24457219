package rmqtest

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"

	"github.com/detourmq/detour/pkg/rmqpb"
)

// ProxyOptions configure a real RocketMQ 5 Proxy in cluster mode.
type ProxyOptions struct {
	// NameServer is the name-server address the Proxy routes from (namesrvAddr); "" means the
	// cluster's own name server.
	NameServer string
	// RouteRefresh is how often the Proxy refreshes a cached topic route from the name server
	// (topicRouteServiceCacheRefreshSeconds, whole seconds, at least 1); 0 keeps the Proxy's
	// default of 20 s.
	RouteRefresh time.Duration
	// Settings are more rmq-proxy.json entries, by ProxyConfig's field names; they win over the
	// harness's.
	Settings map[string]any
	// JVM, when set, are the Proxy JVM's options instead of the harness's (a 256 MiB heap and
	// JVMFlags, sized for many JVMs on a small machine): ShippedServerJVM runs it as RocketMQ's
	// start script does, for a benchmark that measures the Proxy at its best.
	JVM []string
}

// ShippedServerJVM are the JVM options RocketMQ 5's start script (bin/runserver.sh, which
// bin/mqproxy runs) gives a server on Java 9 and later: a fixed 4 GiB heap and the G1 collector
// with its tuning, C2 compilation as the JVM's default. Only the GC log, written to /dev/shm by the
// script, is left out; IPv4 is preferred as for every process here (loopback only).
var ShippedServerJVM = []string{
	"-server", "-Xms4g", "-Xmx4g", "-XX:MetaspaceSize=128m", "-XX:MaxMetaspaceSize=320m",
	"-XX:+UseG1GC", "-XX:G1HeapRegionSize=16m", "-XX:G1ReservePercent=25", "-XX:InitiatingHeapOccupancyPercent=30",
	"-XX:SoftRefLRUPolicyMSPerMB=0", "-XX:-OmitStackTraceInFastThrow", "-XX:-UseLargePages",
	"-Djava.net.preferIPv4Stack=true",
}

// Proxy is one real RocketMQ 5 Proxy (rocketmq-proxy, the class path 5/proxy in the folder
// hack/setup-rocketmq.sh prints) in cluster mode: it serves RocketMQ 5's gRPC protocol and
// forwards to the brokers its name server lists, as a separate process.
type Proxy struct {
	c    *Cluster
	proc *process
	// Addr is the gRPC endpoint, 127.0.0.1:port. It serves TLS in the Proxy's test mode (a
	// certificate it generates itself), which the gRPC SDK's default TLS accepts, and plaintext
	// on the same port.
	Addr string
	// RemotingAddr is where the Proxy serves RocketMQ's remoting protocol.
	RemotingAddr string
	// Version is the Proxy's RocketMQ version.
	Version string
	cfg     ProxyOptions
}

// proxyMain is the Proxy's entry point; -pc names its JSON configuration.
const proxyMain = "org.apache.rocketmq.proxy.ProxyStartup"

// proxyStarted is the line the Proxy prints once all its servers are up.
const proxyStarted = "rocketmq-proxy startup successfully"

// StartProxy starts a real Proxy in cluster mode in front of the cluster (RocketMQ 5 only), in its
// own folder with its own rmq-proxy.json, and waits until it answers a gRPC route query and says
// it started. It runs under the cluster's machine lock and is stopped with the cluster, also when
// the test fails.
func (c *Cluster) StartProxy(o ProxyOptions) *Proxy {
	c.t.Helper()
	if c.Dist.Line != V5 {
		c.t.Fatalf("rmqtest: the Proxy is RocketMQ 5's; this cluster runs RocketMQ %s", c.Dist.Line)
	}
	version, cp, err := classPath(os.Getenv(EnvDist), V5, "proxy")
	if err != nil {
		c.t.Fatal(err)
	}
	name := "proxy-" + strconv.Itoa(len(c.proxies))
	var p *process
	if o.JVM != nil {
		p = c.newProcessWith(name, proxyMain, cp, o.JVM)
	} else {
		p = c.newProcessOn(name, proxyMain, cp, "-Xms128m", "-Xmx256m")
	}
	p.argv = append(p.argv, "-pc", filepath.Join(p.dir, "rmq-proxy.json"))
	px := &Proxy{c: c, proc: p, Version: version, cfg: o}
	c.proxies = append(c.proxies, px)
	if err := px.firstBoot(); err != nil {
		c.t.Fatal(err)
	}
	return px
}

// firstBoot configures and boots the Proxy, moving it to other ports when another process took
// one between the check and the JVM's bind.
func (px *Proxy) firstBoot() error {
	var err error
	for range 3 {
		if err = px.configure(); err != nil {
			return err
		}
		if err = px.boot(); err == nil || !px.proc.logContains(addrInUse) {
			return err
		}
		if ok, _ := px.proc.alive(); ok {
			_ = px.proc.stop(syscall.SIGKILL, 10*time.Second)
		}
	}
	return err
}

// configure picks free ports and writes rmq-proxy.json.
func (px *Proxy) configure() error {
	grpcPort, err := pickPort(1)
	if err != nil {
		return err
	}
	remotingPort, err := pickPort(1)
	if err != nil {
		return err
	}
	px.Addr = "127.0.0.1:" + strconv.Itoa(grpcPort)
	px.RemotingAddr = "127.0.0.1:" + strconv.Itoa(remotingPort)
	ns := px.cfg.NameServer
	if ns == "" {
		ns = px.c.nsAddr
	}
	conf := map[string]any{
		"proxyMode":           "cluster",
		"namesrvAddr":         ns,
		"rocketMQClusterName": ClusterName,
		"proxyName":           px.proc.name,
		"grpcServerPort":      grpcPort,
		"remotingListenPort":  remotingPort,
		// The Proxy waits this long for in-flight calls when it stops; a test's proxy is killed
		// with its cluster, and a graceful stop should not hold a test for the default 30 s.
		"grpcShutdownTimeSeconds": 3,
	}
	if px.cfg.RouteRefresh > 0 {
		conf["topicRouteServiceCacheRefreshSeconds"] = max(1, int(px.cfg.RouteRefresh/time.Second))
	}
	for k, v := range px.cfg.Settings {
		conf[k] = v
	}
	data, err := json.MarshalIndent(conf, "", "  ")
	if err != nil {
		return fmt.Errorf("rmqtest: proxy settings: %w", err)
	}
	return os.WriteFile(filepath.Join(px.proc.dir, "rmq-proxy.json"), data, 0o644)
}

// boot starts the Proxy and waits until it says it started and answers a gRPC route query.
func (px *Proxy) boot() error {
	start := time.Now()
	if err := px.proc.start(); err != nil {
		return err
	}
	if err := px.c.poll(px.proc, "proxy "+px.proc.name, px.ready); err != nil {
		return err
	}
	px.c.t.Logf("rmqtest: RocketMQ Proxy %s (cluster mode, name server %s): gRPC %s, remoting %s, up %v after start",
		px.Version, px.nameServer(), px.Addr, px.RemotingAddr, time.Since(start).Round(10*time.Millisecond))
	return nil
}

func (px *Proxy) nameServer() string {
	if px.cfg.NameServer != "" {
		return px.cfg.NameServer
	}
	return px.c.nsAddr
}

// ready succeeds once the Proxy printed its start line and its gRPC port answers a route query
// with any status: the messaging service is serving (the Proxy starts its gRPC server before its
// remoting server, and prints the line after both).
func (px *Proxy) ready(ctx context.Context) error {
	if !px.proc.logContains(proxyStarted) {
		return errors.New("the proxy has not said it started")
	}
	_, err := px.QueryRoute(ctx, "TBW102")
	return err
}

// QueryRoute asks the Proxy's gRPC endpoint for a topic's route over TLS (the Proxy's certificate
// is its own, not verified), as a client named rmqtest. The route's status is the Proxy's answer;
// an error means the call itself failed.
func (px *Proxy) QueryRoute(ctx context.Context, topic string) (*rmqpb.QueryRouteResponse, error) {
	return QueryRouteTLS(ctx, px.Addr, topic)
}

// QueryRouteTLS asks the gRPC endpoint at addr (a Proxy's, or detour's in its place) for a
// topic's route over TLS, the certificate not verified, as a client named rmqtest.
func QueryRouteTLS(ctx context.Context, addr, topic string) (*rmqpb.QueryRouteResponse, error) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{
		InsecureSkipVerify: true, //nolint:gosec // the Proxy's test-mode certificate is self-signed
		MinVersion:         tls.VersionTLS12,
	})))
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	ctx = metadata.AppendToOutgoingContext(ctx, "x-mq-client-id", "rmqtest@"+strconv.Itoa(os.Getpid()),
		"x-mq-language", "GOLANG", "x-mq-protocol", "v2", "x-mq-client-version", "rmqtest")
	endpoints, err := EndpointsOf(addr)
	if err != nil {
		return nil, err
	}
	return rmqpb.NewMessagingServiceClient(conn).QueryRoute(ctx, &rmqpb.QueryRouteRequest{
		Topic: &rmqpb.Resource{Name: topic}, Endpoints: endpoints})
}

// EndpointsOf is the gRPC endpoint address addr as a QueryRoute request names the endpoint it
// dialled.
func EndpointsOf(addr string) (*rmqpb.Endpoints, error) {
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	port, err := strconv.ParseInt(portText, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("rmqtest: endpoint address %s: %w", addr, err)
	}
	return &rmqpb.Endpoints{Scheme: rmqpb.AddressScheme_IPv4, Addresses: []*rmqpb.Address{{Host: host, Port: int32(port)}}}, nil
}

// Stop shuts the Proxy down gracefully (SIGTERM runs its shutdown hook) and waits for the exit.
func (px *Proxy) Stop() {
	px.c.t.Helper()
	if err := px.proc.stop(syscall.SIGTERM, 60*time.Second); err != nil {
		px.c.t.Fatal(err)
	}
}

// Running reports whether the Proxy's JVM is alive.
func (px *Proxy) Running() bool {
	ok, _ := px.proc.alive()
	return ok
}

// LogContains reports whether the Proxy's output or its own log contain s.
func (px *Proxy) LogContains(s string) bool { return px.proc.logContains(s) }

// Dir is the Proxy's folder: rmq-proxy.json and logs.
func (px *Proxy) Dir() string { return px.proc.dir }

// ThreadsCPU is the CPU time the Proxy JVM's live threads have used so far, by group
// (ThreadsJIT, ThreadsGC, ThreadsOther): how much of its cost is compiling and collecting.
func (px *Proxy) ThreadsCPU() (map[string]time.Duration, error) {
	cmd, _, err := px.proc.running()
	if err != nil {
		return nil, err
	}
	return ThreadsCPU(cmd.Process.Pid)
}

// CPU is the CPU time (user and system) the Proxy's JVM has used so far, all its threads, from
// the kernel's accounting of the process.
func (px *Proxy) CPU() (time.Duration, error) {
	cmd, _, err := px.proc.running()
	if err != nil {
		return 0, err
	}
	return ProcessCPU(cmd.Process.Pid)
}
