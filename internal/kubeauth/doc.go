// Package kubeauth authenticates and authorises HTTP callers against the Kubernetes API server,
// as the API server protects itself: a bearer token checked by TokenReview, a question asked by
// SubjectAccessReview. Two doors of the manager use it: the send gateway (create on a Topic's
// messages subresource) and the metrics endpoint (get on /metrics, NonResourceFilter).
//
// It replaces controller-runtime's filters.WithAuthenticationAndAuthorization, which builds on
// k8s.io/apiserver's delegating authenticator and authorizer, for the reasons Reviewer gives:
// their caches are unbounded or shared by everyone, and nothing bounds the reviews one client
// can cause. Both doors share one Reviewer, so one token's answer is remembered once and one
// client's budget of reviews covers them both.
package kubeauth
