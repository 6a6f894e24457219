package scope

import (
	"slices"
	"testing"
)

// TestBrokerIdentitiesKeepTheFormsTheRuntimeAndStatusKey proves the string forms byte for byte:
// they are keys in the runtime and in status written before this type existed, so a change
// would orphan every route and isolation a running operator holds.
func TestBrokerIdentitiesKeepTheFormsTheRuntimeAndStatusKey(t *testing.T) {
	for _, tc := range []struct {
		name   string
		id     BrokerID
		prefix string
		want   string
	}{
		{"a broker found by its pod", Pods("shop").Broker("broker-a"), "shop/", "shop/broker-a"},
		{"a broker a Cluster publishes", Cluster("shop", "prod").Broker("broker-a"), "shop/prod/", "shop/prod/broker-a"},
		{"a broker in no scope", Scope{}.Broker("broker-a"), "", "broker-a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.id.Scope.Prefix(); got != tc.prefix {
				t.Errorf("Prefix() = %q, want %q", got, tc.prefix)
			}
			if got := tc.id.String(); got != tc.want {
				t.Errorf("String() = %q, want %q", got, tc.want)
			}
			back, ok := ParseBrokerID(tc.id.String())
			if !ok || back != tc.id {
				t.Errorf("ParseBrokerID(%q) = %+v, %v; want %+v", tc.id.String(), back, ok, tc.id)
			}
		})
	}
}

// TestParseBrokerIDRefusesWhatNoScopeWrites proves that a string no Scope writes (an empty part,
// a fourth part) is not read as some broker's identity.
func TestParseBrokerIDRefusesWhatNoScopeWrites(t *testing.T) {
	for _, id := range []string{"", "/", "shop/", "/broker-a", "shop//broker-a", "shop/prod/", "//", "shop/prod/x/broker-a"} {
		t.Run(id, func(t *testing.T) {
			if b, ok := ParseBrokerID(id); ok {
				t.Fatalf("ParseBrokerID(%q) = %+v, want refused", id, b)
			}
		})
	}
}

// TestAScopeNamesOnlyItsOwnBrokers proves that stripping a scope never names another tenant's
// broker as one of its own: not another namespace's, and not a Cluster's within the same
// namespace (the narrower scope), which a plain prefix cut would have taken.
func TestAScopeNamesOnlyItsOwnBrokers(t *testing.T) {
	pods, prod := Pods("shop"), Cluster("shop", "prod")
	for _, tc := range []struct {
		name     string
		scope    Scope
		id       string
		local    string
		ok       bool
		publicly string
	}{
		{"its pod's broker", pods, "shop/broker-a", "broker-a", true, "broker-a"},
		{"its Cluster's broker", prod, "shop/prod/broker-a", "broker-a", true, "broker-a"},
		{"a Cluster's broker seen from the namespace's pods", pods, "shop/prod/broker-a", "", false, "shop/prod/broker-a"},
		{"another namespace's broker", pods, "bank/broker-a", "", false, "bank/broker-a"},
		{"another Cluster's broker", prod, "shop/test/broker-a", "", false, "shop/test/broker-a"},
		{"an unscoped broker in no scope", Scope{}, "broker-a", "broker-a", true, "broker-a"},
		{"a scoped broker in no scope", Scope{}, "shop/broker-a", "", false, "shop/broker-a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			local, ok := tc.scope.Local(tc.id)
			if ok != tc.ok || (ok && local != tc.local) {
				t.Errorf("Local(%q) = %q, %v; want %q, %v", tc.id, local, ok, tc.local, tc.ok)
			}
			if got := tc.scope.Name(tc.id); got != tc.publicly {
				t.Errorf("Name(%q) = %q, want %q", tc.id, got, tc.publicly)
			}
		})
	}
	if got := pods.Names([]string{"shop/broker-a", "bank/broker-b"}); !slices.Equal(got, []string{"broker-a", "bank/broker-b"}) {
		t.Errorf("Names = %v", got)
	}
}

// TestSplitBrokerIDCutsAtTheLastSlash proves the cut the runtime keys credentials by: for every
// identity a Scope writes it agrees with ParseBrokerID, and it takes what no Scope writes as it
// always has.
func TestSplitBrokerIDCutsAtTheLastSlash(t *testing.T) {
	for _, tc := range []struct{ id, prefix, name string }{
		{"broker-a", "", "broker-a"},
		{"shop/broker-a", "shop/", "broker-a"},
		{"shop/prod/broker-a", "shop/prod/", "broker-a"},
		{"a/b/c/broker-a", "a/b/c/", "broker-a"},
		{"shop/", "shop/", ""},
		{"", "", ""},
	} {
		prefix, name := SplitBrokerID(tc.id)
		if prefix != tc.prefix || name != tc.name {
			t.Errorf("SplitBrokerID(%q) = %q, %q; want %q, %q", tc.id, prefix, name, tc.prefix, tc.name)
		}
		if b, ok := ParseBrokerID(tc.id); ok && (b.Scope.Prefix() != prefix || b.Name != name) {
			t.Errorf("SplitBrokerID(%q) = %q, %q disagrees with ParseBrokerID's %+v", tc.id, prefix, name, b)
		}
	}
}

// TestRouteAndPolicyKeysKeepTheirForms proves the keys of routes and policies byte for byte, as
// the identities above: they are keys in the runtime and in status.
func TestRouteAndPolicyKeysKeepTheirForms(t *testing.T) {
	for _, tc := range []struct{ name, got, want string }{
		{"a Topic's route", TopicRoute("shop", "orders"), "shop/orders"},
		{"an undeclared topic's route", Cluster("shop", "prod").UndeclaredRoute("Orders"), "shop/prod/Orders"},
		{"an undeclared topic's metrics label", Cluster("shop", "prod").UndeclaredMetricsTopic(), "shop/prod/*"},
		{"a FaultPolicy", PolicyKey("shop", "steer"), "shop/steer"},
		{"a Cluster's watch route", Cluster("shop", "prod").WatchRoute(), "shop/cluster:prod"},
		{"a Cluster's doors' metrics label", Cluster("shop", "prod").MetricsCluster(), "shop/prod"},
		{"a namespace's pods' doors' metrics label", Pods("shop").MetricsCluster(), "shop"},
		{"no scope's doors' metrics label", Scope{}.MetricsCluster(), ""},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, tc.got, tc.want)
		}
	}
	for key, want := range map[string][2]string{"shop/steer": {"shop", "steer"}, "": {}, "steer": {}, "/steer": {}, "shop/": {}} {
		ns, name, ok := ParsePolicyKey(key)
		if ok != (want[0] != "") || (ok && (ns != want[0] || name != want[1])) {
			t.Errorf("ParsePolicyKey(%q) = %q, %q, %v; want %q", key, ns, name, ok, want)
		}
	}
}
