package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/detourmq/detour/internal/front"
	"github.com/detourmq/detour/internal/kubeauth"
	"github.com/detourmq/detour/pkg/producer"
)

// ClusterMessagesPath is the route of the send endpoint by a Cluster: {cluster} is the Cluster
// resource's name and {topic} a RocketMQ topic sent through it, declared by a Topic on that
// Cluster or, when the Cluster serves undeclared topics, by none.
const ClusterMessagesPath = "/v1/namespaces/{namespace}/clusters/{cluster}/topics/{topic}/messages"

// ClusterBatchPath is the route of the batch endpoint by a Cluster.
const ClusterBatchPath = ClusterMessagesPath + ":batch"

// ClusterTopicResolver answers a request naming a RocketMQ topic sent through a Cluster
// (front.Resolver is one): the Target, its route in the runtime when it returns. Its errors wrap
// front.ErrTopicNotFound (answered 404, saying why), front.ErrBusy (429) or front.ErrUnavailable
// (503).
type ClusterTopicResolver interface {
	ResolveClusterTopic(ctx context.Context, namespace, cluster, topic string) (front.Target, error)
}

// ClusterTopicResolverFunc adapts a function to ClusterTopicResolver.
type ClusterTopicResolverFunc func(ctx context.Context, namespace, cluster, topic string) (front.Target, error)

// ResolveClusterTopic implements ClusterTopicResolver.
func (f ClusterTopicResolverFunc) ResolveClusterTopic(ctx context.Context, namespace, cluster, topic string) (front.Target, error) {
	return f(ctx, namespace, cluster, topic)
}

// addressee is what a request's path sends to: a Topic resource by its name, or a RocketMQ topic
// through a Cluster.
type addressee struct {
	namespace string
	// name is the Topic resource's name, or the Cluster's when topic is set.
	name string
	// topic is the RocketMQ topic of a Cluster's path; "" on a Topic's.
	topic string
}

// viaCluster reports whether the path names a RocketMQ topic through a Cluster.
func (a addressee) viaCluster() bool { return a.topic != "" }

// logValues are the addressee as log key/values.
func (a addressee) logValues() []any {
	if a.viaCluster() {
		return []any{"namespace", a.namespace, "cluster", a.name, "topic", a.topic}
	}
	return []any{"namespace", a.namespace, "name", a.name}
}

// notFound is the 404 answer for the addressee: on a Topic's path it names the Topic alone (as it
// always has); on a Cluster's path it says why, as the resolver words it (no such Cluster, one
// that serves declared topics only, a topic its name servers do not publish).
func (a addressee) notFound(err error) ErrorResponse {
	if !a.viaCluster() {
		return topicNotFound(a.namespace, a.name)
	}
	msg := fmt.Sprintf("Cluster %q not found in namespace %q", a.name, a.namespace)
	if err != nil {
		msg = err.Error()
	}
	return ErrorResponse{Code: CodeTopicNotFound, Error: msg}
}

// addresseeOf reads what the request's path sends to, and answers a path naming what cannot
// exist before anyone is asked about it: a RocketMQ topic that breaks RocketMQ's rules 400, a
// namespace, Topic or Cluster name Kubernetes would refuse 404. ok is false when it answered.
func addresseeOf(w http.ResponseWriter, r *http.Request) (a addressee, ok bool) {
	a.namespace = r.PathValue("namespace")
	if r.Pattern == ClusterMessagesPath || r.Pattern == ClusterBatchPath {
		a.name, a.topic = r.PathValue("cluster"), r.PathValue("topic")
		if err := producer.CheckSendTopic(a.topic); err != nil {
			writeError(w, http.StatusBadRequest, ErrorResponse{Code: CodeInvalidMessage,
				Error: fmt.Sprintf("the topic %q in the path breaks RocketMQ's rules: %v", a.topic, err)})
			return a, false
		}
	} else {
		a.name = r.PathValue("name")
	}
	if len(validation.IsDNS1123Label(a.namespace)) > 0 || len(validation.IsDNS1123Subdomain(a.name)) > 0 {
		writeError(w, http.StatusNotFound, a.notFound(nil))
		return a, false
	}
	return a, true
}

// authorizeWith asks auth whether the token may send to the addressee: create on the Topic's
// messages, or on the Cluster's.
func (a addressee) authorizeWith(ctx context.Context, auth Authorizer, token string) (kubeauth.Decision, string, error) {
	if a.viaCluster() {
		return auth.AuthorizeCluster(ctx, token, a.namespace, a.name)
	}
	return auth.Authorize(ctx, token, a.namespace, a.name)
}

// resolve is the Target the addressee names.
func (s *Server) resolve(ctx context.Context, a addressee) (front.Target, error) {
	if a.viaCluster() {
		return s.opts.Clusters.ResolveClusterTopic(ctx, a.namespace, a.name, a.topic)
	}
	return s.opts.Topics.ResolveName(ctx, a.namespace, a.name)
}

// writeResolveError answers a request whose Target could not be had: 404 for a topic not found,
// 429 with Retry-After when too many new topics are asked for at once, 503 when the Cluster's
// name servers or the manager's cache could not answer.
func (s *Server) writeResolveError(w http.ResponseWriter, r *http.Request, a addressee, err error) {
	switch {
	case errors.Is(err, front.ErrTopicNotFound):
		writeError(w, http.StatusNotFound, a.notFound(err))
	case errors.Is(err, front.ErrBusy):
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusTooManyRequests, ErrorResponse{Code: CodeTooManyRequests, Error: err.Error() + "; retry later"})
	case errors.Is(err, front.ErrUnavailable):
		// The name servers' outage, not the gateway's fault, and one line per request while it
		// lasts: logged only when asked for.
		s.log.V(1).Info("The send gateway could not have a topic's route", append(a.logValues(), "error", err.Error())...)
		writeError(w, http.StatusServiceUnavailable, ErrorResponse{Code: CodeUnavailable, Error: err.Error() + "; retry"})
	default:
		if r.Context().Err() == nil {
			s.log.Error(err, "Looking up a topic for the send gateway failed", a.logValues()...)
		}
		what := "the Topic"
		if a.viaCluster() {
			what = "the topic's Cluster"
		}
		writeError(w, http.StatusServiceUnavailable, ErrorResponse{Code: CodeUnavailable, Error: "looking up " + what + " failed; retry"})
	}
}
