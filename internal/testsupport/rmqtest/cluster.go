package rmqtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/detourmq/detour/pkg/remoting"
)

// ClusterName is the brokerClusterName of every broker the harness starts.
const ClusterName = "DetourCluster"

// startTimeout bounds how long a name server or broker may take to boot and register; a JVM on a
// busy 2-core machine can take tens of seconds.
const startTimeout = 90 * time.Second

// SendQueueWait is how long the harness's brokers let a send wait in their send queue
// (waitTimeMillsInSendQueue, the same key in 4.9.x and 5.x) before shedding it as
// "[TIMEOUT_CLEAN_QUEUE] broker busy". RocketMQ's 200 ms is about a production machine: a JVM
// short of CPU on a busy test machine passes it, and the answer would be about the machine, not
// about what a test sends. At 10 s no client in a test waits as long. A test about that refusal
// sets its own value in BrokerConfig.Settings.
const SendQueueWait = 10 * time.Second

// BrokerConfig describes one master broker.
type BrokerConfig struct {
	// Name is the brokerName; "" means broker-a, broker-b, ... by position.
	Name string
	// NoAutoCreate turns autoCreateTopicEnable off (RocketMQ's default is on).
	NoAutoCreate bool
	// IdleTimeout is serverChannelMaxIdleTimeSeconds, after which the broker closes a connection
	// that neither read nor wrote; 0 means RocketMQ's default of 120 s.
	IdleTimeout time.Duration
	// Settings are more broker.conf entries; they win over the harness's.
	Settings map[string]string
	// Auth turns RocketMQ 5's authentication and authorization (ACL 2.0) on, with SuperUser as
	// the one user; the harness's own requests are then signed as it. RocketMQ 5 only.
	Auth bool
}

// Cluster is one real name server and its master brokers.
type Cluster struct {
	t       TB
	Dist    Dist
	dir     string
	ns      *process
	nsAddr  string
	client  *remoting.Client
	brokers []*Broker
	proxies []*Proxy
}

// Broker is one real master broker.
type Broker struct {
	c    *Cluster
	proc *process
	// Name is the brokerName, Addr the host:port it listens on and registers.
	Name, Addr string
	cfg        BrokerConfig
}

// Start launches a name server and one master broker per config (in parallel), waits until every
// broker is registered with the name server, and stops them all when the test ends.
func Start(t TB, line Line, brokers ...BrokerConfig) *Cluster {
	t.Helper()
	d := Locate(t, line)
	lockMachine(t)
	c := &Cluster{t: t, Dist: d, dir: t.TempDir(), client: remoting.NewClient(remoting.ClientOptions{})}
	t.Cleanup(c.shutdown)

	c.ns = c.newProcess("namesrv", "org.apache.rocketmq.namesrv.NamesrvStartup", "-Xms128m", "-Xmx128m")
	c.ns.argv = append(c.ns.argv, "-c", filepath.Join(c.ns.dir, "namesrv.conf"))
	c.startNameServer()

	for i, bc := range brokers {
		if bc.Auth {
			su := SuperUser
			c.client.SetCredentials(func(string) (*remoting.Credentials, bool) { return &su, true })
		}
		if bc.Name == "" {
			bc.Name = "broker-" + string(rune('a'+i))
		}
		c.brokers = append(c.brokers, c.newBroker(bc))
	}
	var wg sync.WaitGroup
	errs := make([]error, len(c.brokers))
	for i, b := range c.brokers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = b.firstBoot()
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("rmqtest: RocketMQ %s (client %s): name server %s, brokers %s", d.ServerVersion, d.ClientVersion, c.nsAddr, c.brokerList())
	return c
}

// startNameServer starts the name server on a free port and waits until it answers, moving to
// another port when the one picked was taken before the JVM bound it.
func (c *Cluster) startNameServer() {
	c.t.Helper()
	var err error
	for range 3 {
		port := freePorts(c.t, 1)
		c.nsAddr = "127.0.0.1:" + strconv.Itoa(port)
		c.writeFile(c.ns.dir, "namesrv.conf", map[string]string{"listenPort": strconv.Itoa(port)})
		if err = c.ns.start(); err != nil {
			c.t.Fatal(err)
		}
		err = c.poll(c.ns, "name server", func(ctx context.Context) error {
			_, err := c.ClusterInfo(ctx)
			return err
		})
		if err == nil || !c.ns.logContains(addrInUse) {
			break
		}
		if ok, _ := c.ns.alive(); ok {
			_ = c.ns.stop(syscall.SIGKILL, 10*time.Second)
		}
	}
	if err != nil {
		c.t.Fatal(err)
	}
}

// NameServer returns the name server's host:port.
func (c *Cluster) NameServer() string { return c.nsAddr }

// Brokers returns the brokers in start order.
func (c *Cluster) Brokers() []*Broker { return c.brokers }

// Broker returns the broker with the given name, failing the test when there is none.
func (c *Cluster) Broker(name string) *Broker {
	for _, b := range c.brokers {
		if b.Name == name {
			return b
		}
	}
	c.t.Fatalf("rmqtest: no broker %q", name)
	return nil
}

// Client is the remoting client the harness uses for admin requests; tests may use it too.
func (c *Cluster) Client() *remoting.Client { return c.client }

func (c *Cluster) brokerList() string {
	var s []string
	for _, b := range c.brokers {
		s = append(s, b.Name+"="+b.Addr)
	}
	return strings.Join(s, " ")
}

// newProcess prepares a JVM running main with the line's server class path in its own folder.
func (c *Cluster) newProcess(name, main string, heap ...string) *process {
	return c.newProcessOn(name, main, c.Dist.ServerClassPath, heap...)
}

// newProcessOn prepares a JVM running main with class path cp in its own folder, with heap and
// the shared JVMFlags.
func (c *Cluster) newProcessOn(name, main, cp string, heap ...string) *process {
	return c.newProcessWith(name, main, cp, append(slices.Clip(heap), JVMFlags...))
}

// newProcessWith prepares a JVM running main with class path cp in its own folder, with the JVM
// options jvm and nothing else of the harness's.
func (c *Cluster) newProcessWith(name, main, cp string, jvm []string) *process {
	dir := filepath.Join(c.dir, name)
	if err := os.MkdirAll(filepath.Join(dir, "conf"), 0o755); err != nil {
		c.t.Fatal(err)
	}
	// RocketMQ 4.x configures logback from $ROCKETMQ_HOME/conf; 5.x ships its configuration in its
	// jars and only needs user.home.
	for _, f := range []string{"logback_namesrv.xml", "logback_broker.xml", "logback_tools.xml"} {
		if err := os.WriteFile(filepath.Join(dir, "conf", f), []byte(logbackConfig), 0o644); err != nil {
			c.t.Fatal(err)
		}
	}
	argv := append([]string{"java"}, jvm...)
	argv = append(argv, "-Duser.home="+dir, "-Drocketmq.home.dir="+dir, "-cp", cp, main)
	return &process{name: name, dir: dir, argv: argv, logPath: filepath.Join(dir, name+".out")}
}

// logbackConfig sends RocketMQ 4.x's logs to one file under the process's user.home.
const logbackConfig = `<configuration>
  <appender name="FILE" class="ch.qos.logback.core.FileAppender">
    <file>${user.home}/logs/rocketmq.log</file>
    <encoder><pattern>%d{HH:mm:ss.SSS} %-5p %c{0} - %m%n</pattern></encoder>
  </appender>
  <root level="INFO"><appender-ref ref="FILE"/></root>
</configuration>
`

// newBroker prepares (but does not start) a master broker.
func (c *Cluster) newBroker(bc BrokerConfig) *Broker {
	p := c.newProcess(bc.Name, "org.apache.rocketmq.broker.BrokerStartup", "-Xms256m", "-Xmx256m", "-XX:MaxDirectMemorySize=256m")
	p.argv = append(p.argv, "-c", filepath.Join(p.dir, "broker.conf"))
	b := &Broker{c: c, proc: p, Name: bc.Name, cfg: bc}
	if err := b.configure(); err != nil {
		c.t.Fatal(err)
	}
	return b
}

// configure picks free ports and writes broker.conf.
func (b *Broker) configure() error {
	port, err := pickPort(3) // RocketMQ listens on port, port-2 (fast channel) and port+1 (HA)
	if err != nil {
		return err
	}
	return b.writeConfig(port)
}

// writeConfig writes broker.conf for a broker listening on port.
func (b *Broker) writeConfig(port int) error {
	b.Addr = "127.0.0.1:" + strconv.Itoa(port)
	store := filepath.Join(b.proc.dir, "store")
	conf := map[string]string{
		"brokerClusterName":  ClusterName,
		"brokerName":         b.Name,
		"brokerId":           "0",
		"brokerIP1":          "127.0.0.1",
		"namesrvAddr":        b.c.nsAddr,
		"listenPort":         strconv.Itoa(port),
		"haListenPort":       strconv.Itoa(port + 1),
		"storePathRootDir":   store,
		"storePathCommitLog": filepath.Join(store, "commitlog"),
		// Small store files: 32 MiB of commit log holds the largest message (4 MiB) many times over.
		"mappedFileSizeCommitLog":    strconv.Itoa(32 << 20),
		"mappedFileSizeConsumeQueue": strconv.Itoa(30000 * 20),
		"maxHashSlotNum":             "10000",
		"maxIndexNum":                "40000",
		"autoCreateTopicEnable":      strconv.FormatBool(!b.cfg.NoAutoCreate),
		"flushDiskType":              "ASYNC_FLUSH",
		"waitTimeMillsInSendQueue":   strconv.FormatInt(SendQueueWait.Milliseconds(), 10),
		// A 5.x broker creates topics of message.type MIXED only with this on (off by default);
		// the gRPC suites send every type to one topic. 4.x brokers ignore the key.
		"enableMixedMessageType": "true",
	}
	if b.cfg.Auth {
		for k, v := range authSettings() {
			conf[k] = v
		}
	}
	if b.cfg.IdleTimeout > 0 {
		conf["serverChannelMaxIdleTimeSeconds"] = strconv.Itoa(max(1, int(b.cfg.IdleTimeout/time.Second)))
	}
	for k, v := range b.cfg.Settings {
		conf[k] = v
	}
	return writeProperties(b.proc.dir, "broker.conf", conf)
}

// firstBoot boots the broker, moving it to other ports when another process took one of its
// ports between the check and the JVM's bind (test binaries of other packages start brokers too).
func (b *Broker) firstBoot() error {
	var err error
	for range 3 {
		if err = b.boot(); err == nil || !b.proc.logContains(addrInUse) {
			return err
		}
		if ok, _ := b.proc.alive(); ok {
			_ = b.proc.stop(syscall.SIGKILL, 10*time.Second)
		}
		if err := b.configure(); err != nil {
			return err
		}
	}
	return err
}

// addrInUse is what the JVM reports when a listen port is taken.
const addrInUse = "Address already in use"

// writeFile writes a Java properties file, failing the test on error.
func (c *Cluster) writeFile(dir, name string, props map[string]string) {
	if err := writeProperties(dir, name, props); err != nil {
		c.t.Fatal(err)
	}
}

// writeProperties writes a Java properties file.
func writeProperties(dir, name string, props map[string]string) error {
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%s\n", k, props[k])
	}
	return os.WriteFile(filepath.Join(dir, name), []byte(b.String()), 0o644)
}

// boot starts the broker and waits until the name server lists it as the master of its name.
func (b *Broker) boot() error {
	start := time.Now()
	if err := b.proc.start(); err != nil {
		return err
	}
	if err := b.c.poll(b.proc, "broker "+b.Name, func(ctx context.Context) error {
		if err := b.c.checkRegistered(ctx, b.Name, b.Addr); err != nil {
			return err
		}
		// After a restart under the same address the name server may still list the old run for
		// a moment: only an answer from the broker itself says this run is up.
		_, err := b.MaxOffset(ctx, "TBW102", 0)
		return err
	}); err != nil {
		return err
	}
	b.c.t.Logf("rmqtest: broker %s (%s) registered %v after start", b.Name, b.Addr, time.Since(start).Round(10*time.Millisecond))
	return nil
}

// checkRegistered succeeds once the name server lists addr as the master of broker name.
func (c *Cluster) checkRegistered(ctx context.Context, name, addr string) error {
	info, err := c.ClusterInfo(ctx)
	if err != nil {
		return err
	}
	bd, ok := info.BrokerAddrTable[name]
	if !ok || bd.BrokerAddrs[remoting.MasterID] != addr {
		return fmt.Errorf("broker %s at %s not registered yet", name, addr)
	}
	return nil
}

// poll calls check until it succeeds, failing when the process exits or the start timeout passes.
func (c *Cluster) poll(p *process, what string, check func(context.Context) error) error {
	deadline := time.Now().Add(startTimeout)
	var last error
	for time.Now().Before(deadline) {
		if ok, err := p.alive(); !ok {
			return fmt.Errorf("rmqtest: %s exited while starting (%v); log:\n%s", what, err, p.logTail(4000))
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		last = check(ctx)
		cancel()
		if last == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("rmqtest: %s not up within %v: %v; log:\n%s", what, startTimeout, last, p.logTail(4000))
}

// shutdown kills every process, proxies first, and prints their logs when the test failed.
func (c *Cluster) shutdown() {
	procs := []*process{}
	for _, px := range c.proxies {
		procs = append(procs, px.proc)
	}
	for _, b := range c.brokers {
		procs = append(procs, b.proc)
	}
	if c.ns != nil {
		procs = append(procs, c.ns)
	}
	for _, p := range procs {
		if ok, _ := p.alive(); ok {
			_ = p.stop(syscall.SIGKILL, 10*time.Second)
		}
	}
	_ = c.client.Close()
	if c.t.Failed() {
		for _, p := range procs {
			c.t.Logf("rmqtest: logs of %s:\n%s", p.name, p.logTail(6000))
		}
	}
}

// Pause stops the broker's JVM with SIGSTOP: the kernel still accepts connections and buffers
// requests, nothing answers. A black hole.
func (b *Broker) Pause() {
	b.c.t.Helper()
	if err := b.proc.signal(syscall.SIGSTOP); err != nil {
		b.c.t.Fatal(err)
	}
}

// Resume continues a paused broker (SIGCONT).
func (b *Broker) Resume() {
	b.c.t.Helper()
	if err := b.proc.signal(syscall.SIGCONT); err != nil {
		b.c.t.Fatal(err)
	}
}

// Kill ends the broker with SIGKILL: its connections are reset and its port refuses.
func (b *Broker) Kill() {
	b.c.t.Helper()
	if err := b.proc.stop(syscall.SIGKILL, 10*time.Second); err != nil {
		b.c.t.Fatal(err)
	}
}

// Stop shuts the broker down gracefully (SIGTERM runs RocketMQ's shutdown hook, which unregisters
// it from the name server) and waits for the exit.
func (b *Broker) Stop() {
	b.c.t.Helper()
	if err := b.proc.stop(syscall.SIGTERM, 60*time.Second); err != nil {
		b.c.t.Fatal(err)
	}
}

// Restart starts a stopped or killed broker again with the same name, address, settings and store
// and waits until it is registered.
func (b *Broker) Restart() {
	b.c.t.Helper()
	if err := b.boot(); err != nil {
		b.c.t.Fatal(err)
	}
}

// RestartElsewhere starts a stopped broker again with the same name and store on new ports, as a
// broker pod rescheduled with a new IP comes back, and returns once the name server lists it at its
// new Addr. Nothing listens at the old address afterwards.
func (b *Broker) RestartElsewhere() {
	b.c.t.Helper()
	if err := b.configure(); err != nil {
		b.c.t.Fatal(err)
	}
	if err := b.boot(); err != nil {
		b.c.t.Fatal(err)
	}
}

// BootWith starts a stopped broker again on the same ports and store with settings changed (an
// empty value drops a setting), for a change that takes a restart, such as bindAddress; it returns
// once the name server lists the broker again.
func (b *Broker) BootWith(settings map[string]string) {
	b.c.t.Helper()
	if b.cfg.Settings == nil {
		b.cfg.Settings = map[string]string{}
	}
	for k, v := range settings {
		if v == "" {
			delete(b.cfg.Settings, k)
		} else {
			b.cfg.Settings[k] = v
		}
	}
	_, port, err := net.SplitHostPort(b.Addr)
	if err != nil {
		b.c.t.Fatal(err)
	}
	p, _ := strconv.Atoi(port)
	if err := b.writeConfig(p); err != nil {
		b.c.t.Fatal(err)
	}
	if err := b.boot(); err != nil {
		b.c.t.Fatal(err)
	}
}

// Running reports whether the broker's JVM is alive (paused counts as alive).
func (b *Broker) Running() bool {
	ok, _ := b.proc.alive()
	return ok
}

// LogContains reports whether the broker's output or RocketMQ's own logs contain s.
func (b *Broker) LogContains(s string) bool { return b.proc.logContains(s) }

// Dir is the broker's folder: config, store and logs.
func (b *Broker) Dir() string { return b.proc.dir }

// freePorts is pickPort for the test goroutine.
func freePorts(t TB, span int) int {
	t.Helper()
	p, err := pickPort(span)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// pickPort returns a free port p; for span 3 also p-2 and p+1 are free (a broker listens on all
// three). Candidates come from below Linux's ephemeral range (32768 and up), so outgoing
// connections never take a port a broker is about to listen on.
func pickPort(span int) (int, error) {
	for range 500 {
		p := 20000 + rand.IntN(12000)
		probe := []int{p}
		if span > 1 {
			probe = []int{p - 2, p, p + 1}
		}
		ok := true
		for _, q := range probe {
			l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(q))
			if err != nil {
				ok = false
				break
			}
			l.Close()
		}
		if ok && reserve(p) {
			return p, nil
		}
	}
	return 0, fmt.Errorf("rmqtest: no free port")
}

var (
	reservedMu sync.Mutex
	reserved   = map[int]bool{}
)

// reserve keeps two brokers started at the same time in one test binary from picking
// overlapping port triples.
func reserve(p int) bool {
	reservedMu.Lock()
	defer reservedMu.Unlock()
	for _, q := range []int{p - 3, p - 2, p - 1, p, p + 1, p + 2, p + 3} {
		if reserved[q] {
			return false
		}
	}
	reserved[p] = true
	return true
}

// lockMachine makes the test wait until no other process of this machine runs a cluster started
// here, and holds the lock until the test ends. Test binaries of several packages run at once
// under `go test ./...`; three JVM brokers each on a 2-core machine would starve one another, and
// a real broker under that load sheds requests ("broker busy") that no test is about. Within one
// process the lock is shared: a caller may run several clusters at once.
func lockMachine(t TB) {
	t.Helper()
	machineLock.Lock()
	defer machineLock.Unlock()
	if machineLock.holders == 0 {
		path := os.Getenv("DETOUR_RMQTEST_LOCK")
		if path == "" {
			path = filepath.Join(os.TempDir(), "detour-rmqtest.lock")
		}
		f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			t.Fatalf("rmqtest: machine lock: %v", err)
		}
		start := time.Now()
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			f.Close()
			t.Fatalf("rmqtest: machine lock: %v", err)
		}
		if waited := time.Since(start); waited > time.Second {
			t.Logf("rmqtest: waited %v for another process's RocketMQ cluster to stop", waited.Round(time.Second))
		}
		machineLock.file = f
	}
	machineLock.holders++
	// Registered before the cluster's own cleanup, so it runs after every process stopped.
	t.Cleanup(func() {
		machineLock.Lock()
		defer machineLock.Unlock()
		if machineLock.holders--; machineLock.holders == 0 {
			_ = syscall.Flock(int(machineLock.file.Fd()), syscall.LOCK_UN)
			machineLock.file.Close()
			machineLock.file = nil
		}
	})
}

// machineLock is this process's share of the machine lock.
var machineLock struct {
	sync.Mutex
	holders int
	file    *os.File
}
