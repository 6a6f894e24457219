package nameserver

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/detourmq/detour/pkg/remoting"
)

// ClusterBroker is one broker group as a cluster's name servers publish it.
type ClusterBroker struct {
	// Cluster is the brokerClusterName it registered with.
	Cluster string
	Name    string
	// MasterAddr is the master's (brokerId 0) address; "" when the group has no master.
	MasterAddr string
	// Writable is false when the name servers publish the broker without the write bit
	// (wipeWritePerm, brokerPermission 4).
	Writable bool
}

// ClusterView is what one name server answered about its cluster.
type ClusterView struct {
	// NameServer is the name server that answered.
	NameServer string
	// Brokers are sorted by name.
	Brokers []ClusterBroker
}

// maxWritabilityProbes bounds the route queries one look at a name server makes to learn
// writability (one per cluster, then one per broker its cluster's topic did not cover), so a name
// server that lists thousands of clusters or brokers costs a bounded number of round trips.
// Brokers beyond it are reported as brokers published in no such topic are.
const maxWritabilityProbes = 64

// DescribeCluster asks the name servers, in turn until one answers, which broker groups they
// know and whether each takes writes. Writability comes from the route of the cluster's own topic
// (every broker publishes a topic named after its cluster, and one named after itself, with
// read-write perm that wipeWritePerm and brokerPermission mask); a broker published in neither is
// reported writable. Each request waits at most the client's timeout (the runtime's default is
// 3 s, as RocketMQ's clients wait for a name server), and ctx bounds the whole look. An answer
// beyond the bounds (remoting.MaxNameServerBody, MaxClusterBrokers, name and address lengths) is
// refused with an error wrapping ErrAnswerRefused.
func (c *Client) DescribeCluster(ctx context.Context, nameServers []string) (ClusterView, error) {
	var errs []error
	for _, ns := range nameServers {
		v, err := c.describeCluster(ctx, ns)
		if err == nil {
			return v, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", ns, Refused(err)))
		if ctx.Err() != nil {
			break
		}
	}
	return ClusterView{}, fmt.Errorf("no name server answered: %w", Errors(errs))
}

// describeCluster asks one name server for its cluster and the routes that tell writability.
func (c *Client) describeCluster(ctx context.Context, ns string) (ClusterView, error) {
	resp, err := c.ask(ctx, ns, remoting.NewRequest(remoting.GetBrokerClusterInfo, nil, nil))
	if err != nil {
		return ClusterView{}, err
	}
	if resp.Code != remoting.Success {
		return ClusterView{}, &remoting.ResponseError{Code: resp.Code, Remark: resp.Remark}
	}
	info, err := remoting.DecodeClusterInfo(resp.Body)
	if err != nil {
		return ClusterView{}, err
	}

	perms := map[string]int32{} // broker name -> perm of its cluster or own topic
	probes := 0
	probe := func(topic string) {
		if probes >= maxWritabilityProbes || ctx.Err() != nil {
			return
		}
		probes++
		rresp, err := c.ask(ctx, ns, remoting.NewGetRouteInfoRequest(topic))
		if err != nil || rresp.Code != remoting.Success {
			return
		}
		rt, err := remoting.ParseRouteResponse(rresp)
		if err != nil {
			return
		}
		for _, q := range rt.QueueDatas {
			if _, seen := perms[q.BrokerName]; !seen {
				perms[q.BrokerName] = q.Perm
			}
		}
	}
	for _, cluster := range slices.Sorted(maps.Keys(info.ClusterAddrTable)) {
		probe(cluster)
	}
	v := ClusterView{NameServer: ns, Brokers: make([]ClusterBroker, 0, len(info.BrokerAddrTable))}
	for _, name := range slices.Sorted(maps.Keys(info.BrokerAddrTable)) {
		bd := info.BrokerAddrTable[name]
		if _, ok := perms[name]; !ok {
			probe(name)
		}
		perm, known := perms[name]
		v.Brokers = append(v.Brokers, ClusterBroker{Cluster: bd.Cluster, Name: name, MasterAddr: bd.MasterAddr(),
			Writable: !known || perm&remoting.PermWrite != 0})
	}
	return v, nil
}
