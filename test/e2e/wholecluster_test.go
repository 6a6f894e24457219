//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
	"github.com/detourmq/detour/pkg/remoting"
)

// The whole-cluster setup: a second Cluster on the same name servers whose faultPolicyRef governs
// every topic it publishes, with a name-server facade of its own on every manager replica. These
// tests come last in the suite (file order) and remove what they add: while a second Cluster
// exists, the operator-wide facade (detour-namesrv), which fronts the one Cluster there is, fronts
// none.
const (
	wholeCluster       = "whole"
	wholePolicy        = "whole"
	wholeFacadePort    = 19876
	wholeProbeInterval = 2 * time.Second
	// outage is how long the broker's network is black-holed: an intended span, longer than any
	// isolation timer of the Detour preset's first offence, so only proof brings the broker back.
	outage = 60 * time.Second
	// healBound is how soon after the heal every replica's facade must publish the broker
	// writable again.
	healBound = 10 * time.Second
)

// TestBlackHoledBrokerIsHiddenAndWritableSoonAfterTheHeal: with every packet to and from
// broker-b's pod dropped in its network namespace for 60 s (its pod stays Ready: its readiness
// probe runs on loopback, which is left alone), the whole-cluster policy's watch isolates it
// within a probe round, every replica's facade publishes it read-only for the whole outage, and
// within 10 s of the heal every replica's facade publishes it writable again.
func TestBlackHoledBrokerIsHiddenAndWritableSoonAfterTheHeal(t *testing.T) {
	k := deploy(t)
	fp := k.applyWholeCluster(t)
	nsc := remoting.NewClient(remoting.ClientOptions{DialTimeout: 2 * time.Second})
	t.Cleanup(func() { _ = nsc.Close() })
	facades := k.clusterFacades(t)
	const victim = "broker-b"
	t.Logf("leader: %s", k.leader(t))
	t.Cleanup(func() {
		if t.Failed() {
			k.describeFleet(t)
		}
	})

	// writable is whether the facade at addr publishes the victim writable in the topic's route.
	writable := func(addr string) (bool, error) {
		perms, err := routePerms(nsc, addr, topicName)
		if err != nil {
			return false, err
		}
		p, ok := perms[victim]
		if !ok {
			return false, fmt.Errorf("the route holds no queues of %s: %v", victim, perms)
		}
		return p&remoting.PermWrite != 0, nil
	}
	publishes := func(want bool) map[string]func() error {
		conds := map[string]func() error{}
		for pod, addr := range facades {
			conds["facade of "+pod] = func() error {
				w, err := writable(addr)
				if err == nil && w != want {
					err = fmt.Errorf("%s published writable=%v", victim, w)
				}
				return err
			}
		}
		return conds
	}
	listed := func(want bool) func() error {
		return func() error {
			p, err := k.policyNamed(wholePolicy)
			if err != nil {
				return err
			}
			if _, ok := isolatedIn(p, victim); ok != want {
				return fmt.Errorf("isolated: %+v", p.Status.IsolatedBrokers)
			}
			return nil
		}
	}

	pollEach(t, time.Now(), 2*time.Minute, victim+" writable before the outage", publishes(true))
	heal := k.blackHole(t, k.brokerPod(t, victim))
	start := time.Now()

	bound := detectionBound(fp)
	hide := publishes(false)
	hide["policy status"] = listed(true)
	for what, took := range pollEach(t, start, 2*time.Minute, victim+" hidden", hide) {
		t.Logf("%s: %s hidden %.1f s after the black hole (bound %v)", what, victim, took.Seconds(), bound)
		if took > bound {
			t.Errorf("%s: %s hidden after %.1f s, beyond the watch's %v", what, victim, took.Seconds(), bound)
		}
	}

	// For the rest of the outage no facade publishes the broker writable: its isolation's timer
	// may end, but a broker that does not answer returns only on proof.
	checks, skipped := holds(t, time.Until(start.Add(outage)), victim+" hidden through the outage", func() (bool, error) {
		for pod, addr := range facades {
			w, err := writable(addr)
			if err != nil {
				return false, nil // a query that went unanswered proves nothing either way
			}
			if w {
				return true, fmt.Errorf("the facade of %s published %s writable", pod, victim)
			}
		}
		return true, nil
	})
	t.Logf("%s hidden on every facade in %d checks over the outage (%d unanswered)", victim, checks, skipped)
	if p, err := k.policyNamed(wholePolicy); err != nil {
		t.Error(err)
	} else if ib, ok := isolatedIn(p, victim); !ok || !ib.HeldUntilProven {
		t.Errorf("at the end of the outage the policy status does not hold %s until proven: %+v", victim, p.Status.IsolatedBrokers)
	} else {
		t.Logf("policy status at the end of the outage: %s (cluster %q) %s since %s, until %v, reachable %v, heldUntilProven, seen by %v of %d replicas",
			victim, ib.Cluster, ib.Reason, ib.Since.Format(time.TimeOnly), ib.Until, ib.Reachable, ib.SeenBy, p.Status.Replicas)
	}

	// The person on call hears of it: the shipped rule for a broker out for a minute fires on the
	// suite's Prometheus. The black hole lasts until it has, so a slow evaluation on a loaded
	// node waits rather than fails.
	fired := k.waitAlert(t, "DetourBrokerIsolated", victim, "firing", start, 2*time.Minute)
	t.Logf("alert DetourBrokerIsolated firing for %s %.1f s after the black hole", victim, fired.Seconds())

	heal()
	healed := time.Now()
	back := publishes(true)
	back["policy status"] = listed(false)
	for what, took := range pollEach(t, healed, 2*time.Minute, victim+" writable after the heal", back) {
		t.Logf("%s: %s back %.1f s after the heal", what, victim, took.Seconds())
		if what != "policy status" && took > healBound {
			t.Errorf("%s: %s writable again %.1f s after the heal, beyond %v", what, victim, took.Seconds(), healBound)
		}
	}
	resolved := k.waitAlert(t, "DetourBrokerIsolated", victim, "", healed, 2*time.Minute)
	t.Logf("alert DetourBrokerIsolated resolved for %s %.1f s after the heal", victim, resolved.Seconds())
}

// TestDeletingAClustersFaultPolicyWaitsForTheCluster: `kubectl delete` of the FaultPolicy a
// Cluster's faultPolicyRef names leaves it in place, marked for deletion and InUse
// (ReferencedByClusters), while the Cluster stays Ready and its facade routes; removing the
// reference lets it go; naming it again while it is gone makes the Cluster not Ready
// (FaultPolicyNotFound) until the policy exists again.
func TestDeletingAClustersFaultPolicyWaitsForTheCluster(t *testing.T) {
	k := deploy(t)
	k.applyWholeCluster(t)
	nsc := remoting.NewClient(remoting.ClientOptions{DialTimeout: 2 * time.Second})
	t.Cleanup(func() { _ = nsc.Close() })
	facades := k.clusterFacades(t)
	routes := map[string]func() error{}
	for pod, addr := range facades {
		routes["facade of "+pod] = func() error { return routesEveryBroker(nsc, addr) }
	}
	pollEach(t, time.Now(), 2*time.Minute, "every facade routes "+topicName, routes)
	// The policy may be created before the Cluster that names it: its status says so once the
	// Cluster's creation has been reconciled.
	inUse := func() error {
		p, err := k.policyNamed(wholePolicy)
		if err != nil {
			return err
		}
		c := meta.FindStatusCondition(p.Status.Conditions, routingv1alpha1.ConditionInUse)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != routingv1alpha1.ReasonReferencedByClusters {
			return fmt.Errorf("InUse: %+v", c)
		}
		return nil
	}
	eventually(t, time.Minute, "the policy in use by the Cluster", inUse)

	if _, err := k.kubectl(nil, "-n", namespace, "delete", "faultpolicy", wholePolicy, "--wait=false"); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	// Marking it for deletion bumps its generation: the status that reflects the deletion says
	// the deletion waits.
	eventually(t, time.Minute, "the policy marked for deletion, its status current", func() error {
		p, err := k.policyNamed(wholePolicy)
		if err != nil {
			return err
		}
		c := meta.FindStatusCondition(p.Status.Conditions, routingv1alpha1.ConditionInUse)
		if p.DeletionTimestamp == nil || c == nil || c.ObservedGeneration != p.Generation {
			return fmt.Errorf("deletionTimestamp %v, generation %d, InUse %+v", p.DeletionTimestamp, p.Generation, c)
		}
		t.Logf("InUse %s (%s) %.1f s after the delete: %s", c.Status, c.Reason, time.Since(deleted).Seconds(), c.Message)
		return nil
	})
	// Several probe rounds and reconciles long: the policy stays, in use, and the Cluster routes.
	checks, skipped := holds(t, 15*time.Second, "the referenced policy kept", func() (bool, error) {
		if err := inUse(); err != nil {
			return true, err
		}
		if err := k.clusterReady(wholeCluster, metav1.ConditionTrue, ""); err != nil {
			return true, err
		}
		for _, addr := range facades {
			if err := routesEveryBroker(nsc, addr); err != nil {
				var missing *missingBrokerError
				if errors.As(err, &missing) {
					return true, err
				}
				return false, nil // a query that went unanswered proves nothing either way
			}
		}
		return true, nil
	})
	t.Logf("policy kept with a deletionTimestamp, InUse (ReferencedByClusters), the Cluster Ready and routing, in %d checks over 15 s (%d unanswered)", checks, skipped)

	if _, err := k.kubectl(nil, "-n", namespace, "patch", "cluster", wholeCluster, "--type=json",
		"-p", `[{"op":"remove","path":"/spec/faultPolicyRef"}]`); err != nil {
		t.Fatal(err)
	}
	unreferenced := time.Now()
	eventually(t, time.Minute, "the policy gone once no Cluster names it", func() error {
		_, err := k.policyNamed(wholePolicy)
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there: %v", err)
	})
	t.Logf("policy gone %.1f s after the Cluster stopped naming it", time.Since(unreferenced).Seconds())

	// Restore the reference first, then the policy: the Cluster says what it misses meanwhile.
	if _, err := k.kubectl(nil, "-n", namespace, "patch", "cluster", wholeCluster, "--type=merge",
		"-p", fmt.Sprintf(`{"spec":{"faultPolicyRef":{"name":%q}}}`, wholePolicy)); err != nil {
		t.Fatal(err)
	}
	referenced := time.Now()
	eventually(t, time.Minute, "the Cluster not Ready while its policy is missing", func() error {
		return k.clusterReady(wholeCluster, metav1.ConditionFalse, routingv1alpha1.ReasonFaultPolicyNotFound)
	})
	t.Logf("Cluster not Ready (FaultPolicyNotFound) %.1f s after naming the missing policy", time.Since(referenced).Seconds())
	restored := time.Now()
	k.declareWholeCluster(t)
	eventually(t, time.Minute, "the restored policy in use by the Cluster", inUse)
	t.Logf("policy restored, the Cluster Ready and the policy InUse (ReferencedByClusters) %.1f s after applying it", time.Since(restored).Seconds())
}

// applyWholeCluster declares the whole-cluster policy and its Cluster, waits until the policy's
// status reflects its spec, and removes both when the test ends.
func (k *cluster) applyWholeCluster(t *testing.T) *routingv1alpha1.FaultPolicy {
	t.Helper()
	t.Cleanup(func() {
		for _, obj := range []string{"clusters.routing.detour.dev/" + wholeCluster, "faultpolicies.routing.detour.dev/" + wholePolicy} {
			if _, err := k.kubectl(nil, "-n", namespace, "delete", obj, "--ignore-not-found", "--timeout=120s"); err != nil {
				t.Error(err)
			}
		}
	})
	k.declareWholeCluster(t)
	var fp *routingv1alpha1.FaultPolicy
	eventually(t, time.Minute, "the whole-cluster policy's status current", func() error {
		p, err := k.policyNamed(wholePolicy)
		if err != nil {
			return err
		}
		if p.Status.ObservedGeneration != p.Generation || p.Status.Effective == nil {
			return fmt.Errorf("observed generation %d of %d, effective %v", p.Status.ObservedGeneration, p.Generation, p.Status.Effective)
		}
		fp = p
		return nil
	})
	return fp
}

// declareWholeCluster applies testdata/wholecluster.yaml and waits until the Cluster is Ready.
func (k *cluster) declareWholeCluster(t *testing.T) {
	t.Helper()
	manifest, err := render("testdata/wholecluster.yaml", map[string]any{
		"Namespace": namespace, "NameServer": k.nameServer, "Cluster": wholeCluster, "Policy": wholePolicy,
		"FacadePort": wholeFacadePort, "ProbeIntervalMillis": wholeProbeInterval.Milliseconds(),
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.kubectl(manifest, "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	if _, err := k.kubectl(nil, "-n", namespace, "wait", "--for=condition=Ready", "clusters.routing.detour.dev/"+wholeCluster, "--timeout=120s"); err != nil {
		t.Fatal(err)
	}
}

// clusterFacades are the whole-cluster facade's addresses on each manager replica, by pod: the
// Service would balance between them, and every one of them must publish the same route.
func (k *cluster) clusterFacades(t *testing.T) map[string]string {
	t.Helper()
	pods := k.managerPods(t)
	if len(pods) != 2 {
		t.Fatalf("want 2 manager pods, got %d", len(pods))
	}
	addrs := map[string]string{}
	for _, p := range pods {
		addrs[p.Name] = fmt.Sprintf("%s:%d", p.Status.PodIP, wholeFacadePort)
	}
	return addrs
}

// detectionBound is how soon the watch must hide a broker that went silent: the longest probe
// interval drawn (1.5 × the mean), how long a watch probe waits for an answer (the per-attempt
// cap, else the send timeout), a second for the replicas to share their views, and 5 s of margin
// for a loaded node.
func detectionBound(fp *routingv1alpha1.FaultPolicy) time.Duration {
	wait := time.Duration(fp.Status.Effective.SendTimeoutMillis) * time.Millisecond
	if c := fp.Status.Effective.PerAttemptTimeoutMillis; c != nil && *c > 0 {
		wait = time.Duration(*c) * time.Millisecond
	}
	return wholeProbeInterval*3/2 + wait + time.Second + 5*time.Second
}

// routePerms asks the name-server facade at addr for topic's route and returns each broker's
// queue permission.
func routePerms(c *remoting.Client, addr, topic string) (map[string]int32, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	resp, err := c.Invoke(ctx, addr, remoting.NewGetRouteInfoRequest(topic))
	if err != nil {
		return nil, err
	}
	route, err := remoting.ParseRouteResponse(resp)
	if err != nil {
		return nil, err
	}
	perms := map[string]int32{}
	for _, q := range route.QueueDatas {
		perms[q.BrokerName] = q.Perm
	}
	return perms, nil
}

// missingBrokerError is a route that was answered without a broker's queues.
type missingBrokerError struct {
	broker string
	perms  map[string]int32
}

func (e *missingBrokerError) Error() string {
	return fmt.Sprintf("the route of %s holds no queues of %s: %v", topicName, e.broker, e.perms)
}

// routesEveryBroker checks that the facade at addr answers the topic's route with queues on every
// broker; a route without one gives a *missingBrokerError.
func routesEveryBroker(c *remoting.Client, addr string) error {
	perms, err := routePerms(c, addr, topicName)
	if err != nil {
		return err
	}
	for _, b := range brokers {
		if _, ok := perms[b]; !ok {
			return &missingBrokerError{broker: b, perms: perms}
		}
	}
	return nil
}

// policyNamed reads a FaultPolicy in the RocketMQ namespace.
func (k *cluster) policyNamed(name string) (*routingv1alpha1.FaultPolicy, error) {
	var fp routingv1alpha1.FaultPolicy
	err := k.c.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, &fp)
	return &fp, err
}

// isolatedIn finds broker among the brokers the policy's status lists isolated (the policy governs
// the whole Cluster alone).
func isolatedIn(fp *routingv1alpha1.FaultPolicy, broker string) (routingv1alpha1.IsolatedBroker, bool) {
	i := slices.IndexFunc(fp.Status.IsolatedBrokers, func(b routingv1alpha1.IsolatedBroker) bool {
		return b.BrokerName == broker
	})
	if i < 0 {
		return routingv1alpha1.IsolatedBroker{}, false
	}
	return fp.Status.IsolatedBrokers[i], true
}

// clusterReady checks a Cluster's Ready condition's status and, when reason is set, its reason.
func (k *cluster) clusterReady(name string, status metav1.ConditionStatus, reason string) error {
	var cl routingv1alpha1.Cluster
	if err := k.c.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, &cl); err != nil {
		return err
	}
	c := meta.FindStatusCondition(cl.Status.Conditions, routingv1alpha1.ConditionReady)
	if c == nil || c.Status != status || (reason != "" && c.Reason != reason) {
		return fmt.Errorf("Cluster %s Ready: %+v", name, c)
	}
	return nil
}

// blackHole drops every packet to and from pod but those on loopback, in the pod's own network
// namespace, and returns what heals it; the test's cleanup heals it too, also when the test fails.
// The namespace is held open, so the rules can be removed even if the container has gone.
func (k *cluster) blackHole(t *testing.T, pod *corev1.Pod) func() {
	t.Helper()
	netns, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", k.containerPID(t, containerID(t, pod))))
	if err != nil {
		t.Fatal(err)
	}
	rules := [][]string{{"INPUT", "!", "-i", "lo", "-j", "DROP"}, {"OUTPUT", "!", "-o", "lo", "-j", "DROP"}}
	iptables := func(op string, rule []string) error {
		cmd := exec.Command("nsenter", append([]string{"--net=/proc/self/fd/3", "iptables", "-w", op}, rule...)...)
		cmd.ExtraFiles = []*os.File{netns}
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("iptables %s %s in %s's network namespace: %v: %s", op, strings.Join(rule, " "), pod.Name, err, out)
		}
		return nil
	}
	var once sync.Once
	heal := func() {
		once.Do(func() {
			for _, r := range rules {
				if err := iptables("-D", r); err != nil {
					t.Error(err)
				}
			}
			_ = netns.Close()
		})
	}
	t.Cleanup(heal)
	for _, r := range rules {
		if err := iptables("-A", r); err != nil {
			t.Fatal(err) // the cleanup removes what was added (the missing rule's -D errs)
		}
	}
	return heal
}

// containerPID is the host PID of a container's task, from containerd.
func (k *cluster) containerPID(t *testing.T, id string) int {
	t.Helper()
	out, err := exec.Command("ctr", "--address", filepath.Join(k.state, "containerd", "containerd.sock"), "-n", "k8s.io", "tasks", "ls").CombinedOutput()
	if err != nil {
		t.Fatalf("ctr tasks ls: %v: %s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == id {
			pid, err := strconv.Atoi(f[1])
			if err != nil {
				t.Fatalf("ctr tasks ls: pid %q of %s", f[1], id)
			}
			return pid
		}
	}
	t.Fatalf("ctr tasks ls lists no task %s:\n%s", id, out)
	return 0
}

// describeFleet logs what the replicas share and say when the fleet disagrees: every
// ReplicaView, the whole-cluster policy's status and the managers' recent log lines.
func (k *cluster) describeFleet(t *testing.T) {
	t.Helper()
	out, _ := k.kubectl(nil, "get", "replicaviews.routing.detour.dev", "-A", "-o", "yaml")
	t.Logf("replica views:\n%s", tail(out, 120))
	out, _ = k.kubectl(nil, "-n", namespace, "get", "faultpolicies.routing.detour.dev", wholePolicy, "-o", "jsonpath={.status}")
	t.Logf("policy status: %s", out)
	for _, p := range k.managerPods(t) {
		out, _ := k.kubectl(nil, "-n", operatorNamespace, "logs", p.Name, "--tail=200")
		t.Logf("logs of %s:\n%s", p.Name, tail(out, 80))
	}
}

// pollEach polls every condition every 200 ms until each has held once, and returns how long
// after since each first held; it fails the test when one has not within timeout of since.
func pollEach(t *testing.T, since time.Time, timeout time.Duration, what string, conds map[string]func() error) map[string]time.Duration {
	t.Helper()
	took := map[string]time.Duration{}
	last := map[string]error{}
	for {
		for name, cond := range conds {
			if _, done := took[name]; done {
				continue
			}
			if err := cond(); err != nil {
				last[name] = err
				continue
			}
			took[name] = time.Since(since)
			if err := last[name]; err != nil {
				t.Logf("%s: %s held after %.1f s; before, last: %v", what, name, took[name].Seconds(), err)
			}
		}
		if len(took) == len(conds) {
			return took
		}
		if time.Since(since) > timeout {
			for name, d := range took {
				t.Logf("%s: %s after %.1f s", what, name, d.Seconds())
			}
			for name := range conds {
				if _, done := took[name]; !done {
					t.Errorf("%s: %s not within %v: %v", what, name, timeout, last[name])
				}
			}
			t.FailNow()
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// holds checks cond every 500 ms for span, the intended length of a state, and fails the test at
// the first check that finds it broken. cond's first result is false for a check that could not
// tell (a query went unanswered); holds returns how many checks told and how many could not.
func holds(t *testing.T, span time.Duration, what string, cond func() (bool, error)) (told, unanswered int) {
	t.Helper()
	end := time.Now().Add(span)
	for time.Now().Before(end) {
		ok, err := cond()
		switch {
		case err != nil:
			t.Errorf("%s: broken after %d checks: %v", what, told, err)
			return told, unanswered
		case ok:
			told++
		default:
			unanswered++
		}
		time.Sleep(500 * time.Millisecond)
	}
	return told, unanswered
}

// TestEveryDashboardQueryShowedData runs last (the last test of the last file): over the whole
// suite, the rolling restarts, the frozen broker, the lost leader and the black hole, the suite's
// Prometheus scraped the deployed managers and the sampler ran every panel query of the shipped
// dashboards. Every query must have returned series at least once, and every metric the panels
// and the shipped alerts name must have been exported by the managers: a renamed metric, or a
// label the managers do not attach, leaves a blank panel here before it leaves one on call.
// troubleNotCaused are the panel queries that show only a trouble the suite never causes, and
// why it does not; they may show no data, and the metrics only they name may be unexported
// (a counter has no series before its first count). Each is named, so any other blank panel fails.
var troubleNotCaused = map[string]string{
	"detour / Overview / Refusals by brokers / A": "no broker refuses a send here: the brokers are healthy, frozen, black-holed or restarting, never busy or without the topic",
	"detour / Overview / Refusals by brokers / B": "the brokers run without ACL (test/compat refuses detour's credentials on brokers with ACL 2.0 on)",
}

func TestEveryDashboardQueryShowedData(t *testing.T) {
	k := deploy(t)
	p, err := k.startPrometheus(t)
	if err != nil {
		t.Fatal(err)
	}
	// What the sampler saw so far; the queries and metrics are fixed once Prometheus runs.
	p.mu.Lock()
	firstData, rounds := maps.Clone(p.firstData), p.rounds
	p.mu.Unlock()
	names := slices.Sorted(maps.Keys(p.queries))
	for _, name := range names {
		first, ok := firstData[name]
		if !ok {
			// One last look, in case the state it shows has only just come about.
			n, err := p.query(p.queries[name])
			if why, notCaused := troubleNotCaused[name]; notCaused && err == nil && n == 0 {
				t.Logf("%s: no data, as expected: %s", name, why)
				continue
			}
			if err != nil || n == 0 {
				t.Errorf("%s: no series in %d rounds over %v (%v)\n\t%s", name, rounds, time.Since(p.started).Round(time.Second), err, p.queries[name])
				continue
			}
			first = time.Now()
		}
		t.Logf("%s: data %.0f s after Prometheus started", name, first.Sub(p.started).Seconds())
	}
	exported, err := p.exported()
	if err != nil {
		t.Fatal(err)
	}
	onlyNotCaused := map[string]bool{}
	for name := range troubleNotCaused {
		for _, m := range metricName.FindAllString(p.queries[name], -1) {
			onlyNotCaused[histogramName(m)] = true
		}
	}
	for name, expr := range p.queries {
		if _, notCaused := troubleNotCaused[name]; !notCaused {
			for _, m := range metricName.FindAllString(expr, -1) {
				delete(onlyNotCaused, histogramName(m))
			}
		}
	}
	for _, m := range p.metrics {
		if !exported[m] && !onlyNotCaused[m] {
			t.Errorf("%s, named by a panel or an alert, was never exported by the managers", m)
		}
	}
	t.Logf("%d panel queries and %d metrics checked against what %d sampling rounds saw", len(names), len(p.metrics), rounds)
}
