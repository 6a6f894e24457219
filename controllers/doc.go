// Package controllers translates detour's resources and the broker pods they cover into the
// producer runtime's state, and the runtime's decisions back into status, Events and the answers
// of the name-server facade. Setup registers everything with a controller-runtime manager.
//
// Reconcilers, each reading its object, computing what the runtime should hold, pushing it and
// writing status once (state.go spaces the writes of one object):
//   - BrokerPodReconciler (brokerpod_controller.go): broker pods, recognised as broker.go says
//     (podcache.go keeps only what that needs in the cache), become the runtime's brokers with
//     their readiness;
//   - TopicReconciler (topic_controller.go, topic_cluster.go): a Topic becomes a route, created
//     on the brokers or resolved from its Cluster's name servers;
//   - ClusterReconciler (cluster_controller.go, cluster_policy.go): a Cluster's name servers and
//     credentials (credentials.go), and the policy it sets for all its topics;
//   - FaultPolicyReconciler (faultpolicy_controller.go, policy.go): a FaultPolicy becomes the
//     runtime's policy, and its status lists the brokers isolated, why and until when;
//   - FleetMerger (fleet.go): the other replicas' ReplicaViews merged into this runtime, so a
//     broker one replica saw fail is avoided by all.
//
// Runnables beside them: the restore of isolations recorded in status at start (restore.go), the
// runtime's isolation events turned into Events and reconciles (isolation_events.go), detour's
// own leader election (leadership.go) and the resync when this replica wins (leader_resync.go),
// and the look at Clusters' name servers off the reconcilers' workers (describer.go).
//
// The name-server facade's side: FacadeView (facade_view.go) tells pkg/facade which brokers to
// publish read-only, FacadeEvents (facade_events.go) records when it does, and ClusterFacades
// (cluster_facade.go, cluster_facade_service.go) serve one facade per Cluster that asks.
//
// Identity: brokers, routes and policies are named by pkg/scope, by namespace (and Cluster), so
// two tenants' brokers of one name never meet in the runtime. The collectors live in pkg/metrics; the
// RBAC the manager needs is generated from the markers next to the code that needs it.
package controllers
