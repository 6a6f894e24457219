package controllers

import (
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
	"github.com/detourmq/detour/pkg/fault"
)

// TestReplicasShareIsolationsByTheMergeRule proves the merge rule on the views replicas publish:
// a broker any live replica isolates is claimed; it stays claimed while one replica that saw it
// still does; the claim that ends last wins; the merging replica's own view, isolations already
// over and the views of replicas that stopped renewing (a replica that died holding an
// isolation) claim nothing.
func TestReplicasShareIsolationsByTheMergeRule(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	view := func(replica string, renewed time.Duration, isolations ...routingv1alpha1.ReplicaIsolation) routingv1alpha1.ReplicaView {
		return routingv1alpha1.ReplicaView{
			ObjectMeta: metav1.ObjectMeta{Name: replica},
			Spec: routingv1alpha1.ReplicaViewSpec{Replica: replica, RenewTime: metav1.NewMicroTime(now.Add(renewed)),
				LeaseDurationSeconds: 15, Isolations: isolations},
		}
	}
	iso := func(broker string, until time.Duration) routingv1alpha1.ReplicaIsolation {
		ri := routingv1alpha1.ReplicaIsolation{FaultPolicy: "shop/fp", BrokerName: broker, Reason: routingv1alpha1.IsolationSendFailed,
			Since: metav1.NewTime(now.Add(-time.Second))}
		if until != 0 {
			ri.Until = ptr.To(metav1.NewTime(now.Add(until)))
		}
		return ri
	}
	onCluster := iso("b", 5*time.Second)
	onCluster.Cluster = "prod"
	held := time.Duration(0) // no until: held until withdrawn
	tests := []struct {
		name  string
		views []routingv1alpha1.ReplicaView
		want  map[string]time.Duration // broker identity -> claim's end from now (0: held)
		seen  map[string][]string
		live  int
	}{
		{name: "one replica's isolation is claimed",
			views: []routingv1alpha1.ReplicaView{view("a", 0, iso("b", 5*time.Second)), view("c", 0)},
			want:  map[string]time.Duration{"shop/b": 5 * time.Second}, seen: map[string][]string{"shop/b": {"a"}}, live: 2},
		{name: "readmitted by one, still isolated by another: claimed",
			views: []routingv1alpha1.ReplicaView{view("a", 0), view("c", 0, iso("b", held))},
			want:  map[string]time.Duration{"shop/b": held}, seen: map[string][]string{"shop/b": {"c"}}, live: 2},
		{name: "readmitted by every replica that saw it: not claimed",
			views: []routingv1alpha1.ReplicaView{view("a", 0), view("c", 0)}, live: 2},
		{name: "the claim that ends last wins",
			views: []routingv1alpha1.ReplicaView{view("a", 0, iso("b", 5*time.Second)), view("c", 0, iso("b", 9*time.Second))},
			want:  map[string]time.Duration{"shop/b": 9 * time.Second}, seen: map[string][]string{"shop/b": {"a", "c"}}, live: 2},
		{name: "a claim without an end outlasts one with an end",
			views: []routingv1alpha1.ReplicaView{view("a", 0, iso("b", held)), view("c", 0, iso("b", 9*time.Second))},
			want:  map[string]time.Duration{"shop/b": held}, seen: map[string][]string{"shop/b": {"a", "c"}}, live: 2},
		{name: "an isolation whose until passed claims nothing",
			views: []routingv1alpha1.ReplicaView{view("a", 0, iso("b", -time.Second))}, live: 1},
		{name: "a replica that died holding an isolation claims nothing once its view expired",
			views: []routingv1alpha1.ReplicaView{view("a", -16*time.Second, iso("b", held))}},
		{name: "the merging replica's own view is not a peer's",
			views: []routingv1alpha1.ReplicaView{view("self", 0, iso("b", held))}},
		{name: "a broker of a Cluster keeps its Cluster",
			views: []routingv1alpha1.ReplicaView{view("a", 0, onCluster)},
			want:  map[string]time.Duration{"shop/prod/b": 5 * time.Second}, seen: map[string][]string{"shop/prod/b": {"a"}}, live: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			claims, seen, live, _ := mergeViews(tc.views, "self", now)
			got := map[string]fault.PeerClaim{}
			for policy, c := range claims {
				if policy != "shop/fp" {
					t.Fatalf("claims under policy %q", policy)
				}
				got = c
			}
			if len(got) != len(tc.want) || live != tc.live {
				t.Fatalf("claims %+v over %d live views, want %v over %d", got, live, tc.want, tc.live)
			}
			for broker, end := range tc.want {
				c, ok := got[broker]
				wantUntil := time.Time{}
				if end != 0 {
					wantUntil = now.Add(end)
				}
				if !ok || !c.Until.Equal(wantUntil) || c.Reason != fault.ReasonSendFailed {
					t.Errorf("claim on %s = %+v, want until %v", broker, c, wantUntil)
				}
				if s := seen["shop/fp"][broker]; !slices.Equal(s, tc.seen[broker]) {
					t.Errorf("%s seen by %v, want %v", broker, s, tc.seen[broker])
				}
			}
		})
	}
}

// TestReplicasShareIsolationsNextExpiry proves the merger wakes when the first live view expires,
// so a dead replica's claims end on time without any other change.
func TestReplicasShareIsolationsNextExpiry(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	views := []routingv1alpha1.ReplicaView{
		{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: routingv1alpha1.ReplicaViewSpec{Replica: "a",
			RenewTime: metav1.NewMicroTime(now.Add(-10 * time.Second)), LeaseDurationSeconds: 15}},
		{ObjectMeta: metav1.ObjectMeta{Name: "b"}, Spec: routingv1alpha1.ReplicaViewSpec{Replica: "b",
			RenewTime: metav1.NewMicroTime(now), LeaseDurationSeconds: 15}},
	}
	if _, _, _, next := mergeViews(views, "self", now); !next.Equal(now.Add(5 * time.Second)) {
		t.Fatalf("next expiry %v, want %v", next, now.Add(5*time.Second))
	}
}

// TestReplicasShareIsolationsRewriteOnlyPoliciesWhoseViewChanged proves the leader writes again
// the status of exactly the policies where which replicas isolate what changed.
func TestReplicasShareIsolationsRewriteOnlyPoliciesWhoseViewChanged(t *testing.T) {
	before := map[string]map[string][]string{
		"shop/same":    {"shop/b": {"a"}},
		"shop/more":    {"shop/b": {"a"}},
		"shop/gone":    {"shop/b": {"a"}},
		"shop/readmit": {"shop/b": {"a"}, "shop/c": {"a"}},
	}
	after := map[string]map[string][]string{
		"shop/same":    {"shop/b": {"a"}},
		"shop/more":    {"shop/b": {"a", "c"}},
		"shop/readmit": {"shop/b": {"a"}},
		"shop/new":     {"shop/b": {"c"}},
	}
	got := changedPolicies(before, after)
	slices.Sort(got)
	if want := []string{"shop/gone", "shop/more", "shop/new", "shop/readmit"}; !slices.Equal(got, want) {
		t.Fatalf("changed %v, want %v", got, want)
	}
}

// TestFleetFiguresCountLiveReplicasAndPeerIsolations proves the figures the metrics export come
// from the merged views: the live peers and this replica, and by policy the brokers peers isolate
// (a broker two peers isolate counts once).
func TestFleetFiguresCountLiveReplicasAndPeerIsolations(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	view := func(replica string, brokers ...string) routingv1alpha1.ReplicaView {
		v := routingv1alpha1.ReplicaView{ObjectMeta: metav1.ObjectMeta{Name: replica},
			Spec: routingv1alpha1.ReplicaViewSpec{Replica: replica, RenewTime: metav1.NewMicroTime(now), LeaseDurationSeconds: 15}}
		for _, b := range brokers {
			v.Spec.Isolations = append(v.Spec.Isolations, routingv1alpha1.ReplicaIsolation{FaultPolicy: "shop/fp", BrokerName: b,
				Reason: routingv1alpha1.IsolationSendFailed, Since: metav1.NewTime(now.Add(-time.Second))})
		}
		return v
	}
	f := newFleet(FleetOptions{Replica: "self"})
	if got := f.figures(); got.Replicas != 1 || len(got.PeerIsolations) != 0 {
		t.Errorf("before any view: %+v, want 1 replica and no peer isolations", got)
	}
	_, seen, live, _ := mergeViews([]routingv1alpha1.ReplicaView{view("a", "b1", "b2"), view("c", "b2"), view("self", "b3")}, "self", now)
	f.seen, f.live = seen, live
	got := f.figures()
	if got.Replicas != 3 || len(got.PeerIsolations) != 1 || got.PeerIsolations["shop/fp"] != 2 {
		t.Errorf("figures %+v, want 3 replicas and 2 brokers peers isolate under shop/fp", got)
	}
}
