package producer

import (
	"context"

	"github.com/detourmq/detour/pkg/producer/nameserver"
)

// The runtime's face of its name-server client (package nameserver): the answers' types and
// errors under the names the runtime's callers know, and a cluster's look. Routes asked of name
// servers are kept and refreshed in resolve.go.

// ClusterBroker is one broker group as a cluster's name servers publish it.
type ClusterBroker = nameserver.ClusterBroker

// ClusterView is what one name server answered about its cluster.
type ClusterView = nameserver.ClusterView

// ErrTopicNotPublished is wrapped by RouteStatus.Err when the name servers answer that the topic
// does not exist.
var ErrTopicNotPublished = nameserver.ErrTopicNotPublished

// DescribeCluster asks the name servers, in turn until one answers, which broker groups they
// know and whether each takes writes (see nameserver.Client.DescribeCluster). Each request waits
// at most Options.NameServerTimeout, and ctx bounds the whole look. An answer beyond the bounds
// is refused with an error wrapping ErrAnswerRefused.
func (r *Runtime) DescribeCluster(ctx context.Context, nameServers []string) (ClusterView, error) {
	return r.ns.DescribeCluster(ctx, nameServers)
}
