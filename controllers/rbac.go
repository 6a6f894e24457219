package controllers

// The operator reads broker pods, manages its own kinds, their status and the FaultPolicy
// protection finalizer, and records events.
// These markers generate config/rbac/role.yaml; keep them to exactly what the controllers touch.
// The rights in the operator's own namespace (namespace=system: the Lease and its Events, the
// ReplicaViews, the facades' Services) are marked next to the code that needs them and generate
// a Role there.
//
// +kubebuilder:rbac:groups=routing.detour.dev,resources=topics;faultpolicies;clusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=routing.detour.dev,resources=topics/status;faultpolicies/status;clusters/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=routing.detour.dev,resources=faultpolicies,verbs=update;patch
// +kubebuilder:rbac:groups=routing.detour.dev,resources=faultpolicies/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
