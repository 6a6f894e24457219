package kubeauth

import "context"

// AuthClusterResource is the resource whose messages subresource a sender must be allowed to
// create to send any topic through a Cluster (the gateway's path naming a Cluster and a RocketMQ
// topic): as for a Topic, an ordinary RBAC Role grants it per namespace and, with resourceNames,
// per Cluster.
const AuthClusterResource = "clusters"

// AuthorizeCluster decides whether the token may send through the Cluster namespace/cluster, to
// any topic it serves: create on the Cluster's messages subresource. A grant on topics/messages
// does not answer it, nor the other way round. The reason is safe to show the caller; an error
// means the decision could not be made, as for Authorize.
func (a *Reviewer) AuthorizeCluster(ctx context.Context, token, namespace, cluster string) (Decision, string, error) {
	return a.authorizeMessages(ctx, token, AuthClusterResource, namespace, cluster)
}
