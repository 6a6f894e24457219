// Package front is the one home of what detour's doors (the HTTP send gateway, the RocketMQ 5
// gRPC endpoint, the name-server facade's view and the demo) need to know about a request before
// the runtime sends it: which Topic resource it means, the runtime's route key for that
// resource, the scope the route's brokers are named in, and the RocketMQ Proxy that consumers'
// calls on the topic are forwarded to.
//
// A request names a Topic in one of two ways: the gateway's by its Kubernetes namespace and name
// (a Get from the manager's cache), the gRPC endpoint's and the facade's by its RocketMQ topic
// name (spec.topicName, through a field index of the cache). Neither lists a namespace, so a
// request costs the same with ten thousand Topics as with one.
package front
