package producer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

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

// DescribeCluster asks the name servers, in turn until one answers, which broker groups they
// know and whether each takes writes. Writability comes from the route of the cluster's own topic
// (every broker publishes a topic named after its cluster, and one named after itself, with
// read-write perm that wipeWritePerm and brokerPermission mask); a broker published in neither is
// reported writable.
func (r *Runtime) DescribeCluster(ctx context.Context, nameServers []string) (ClusterView, error) {
	var errs []error
	for _, ns := range nameServers {
		v, err := r.describeCluster(ctx, ns)
		if err == nil {
			return v, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", ns, err))
		if ctx.Err() != nil {
			break
		}
	}
	return ClusterView{}, fmt.Errorf("no name server answered: %w", errors.Join(errs...))
}

func (r *Runtime) describeCluster(ctx context.Context, ns string) (ClusterView, error) {
	resp, err := r.client.Invoke(ctx, ns, remoting.NewRequest(remoting.GetBrokerClusterInfo, nil, nil))
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
	probe := func(topic string) {
		rresp, err := r.client.Invoke(ctx, ns, remoting.NewGetRouteInfoRequest(topic))
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
	for cluster := range info.ClusterAddrTable {
		probe(cluster)
	}
	v := ClusterView{NameServer: ns}
	for name, bd := range info.BrokerAddrTable {
		if _, ok := perms[name]; !ok {
			probe(name)
		}
		perm, known := perms[name]
		v.Brokers = append(v.Brokers, ClusterBroker{Cluster: bd.Cluster, Name: name, MasterAddr: bd.MasterAddr(),
			Writable: !known || perm&remoting.PermWrite != 0})
	}
	slices.SortFunc(v.Brokers, func(a, b ClusterBroker) int { return strings.Compare(a.Name, b.Name) })
	return v, nil
}
