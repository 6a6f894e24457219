// Package facadetest gives the name-server facade a view of a producer runtime without the
// operator, for the benchmark and the tests that run the facade in front of real RocketMQ.
package facadetest

import (
	"github.com/detourmq/detour/pkg/facade"
	"github.com/detourmq/detour/pkg/producer"
)

// RuntimeView is the facade's view of one runtime policy: the cluster's name server, and for one
// topic the brokers the policy holds out (isolated, or marked by their pod) within its cap, as the
// operator's view computes them. Other topics pass through unchanged.
type RuntimeView struct {
	NameServer, Topic, Policy string
	Runtime                   *producer.Runtime
}

var _ facade.View = RuntimeView{}

// NameServers implements facade.View.
func (v RuntimeView) NameServers() []string { return []string{v.NameServer} }

// Hide implements facade.View.
func (v RuntimeView) Hide(topic string, brokers []string) (map[string]string, bool) {
	if topic != v.Topic {
		return nil, false
	}
	candidates := map[string]string{}
	for _, it := range v.Runtime.Isolated(v.Policy) {
		candidates[it.Broker] = string(it.Reason)
	}
	pol, _ := v.Runtime.Policy(v.Policy)
	return facade.CapHidden(candidates, brokers, pol.MaxIsolatedPercent), true
}
