package kubeauth

import (
	"context"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
)

// TestReviewerAsksForCreateOnClusterMessages proves a send through a Cluster is asked of the API
// server as create on the Cluster's messages subresource, and that a remembered answer about a
// Topic of the same name never answers it: each is its own question.
func TestReviewerAsksForCreateOnClusterMessages(t *testing.T) {
	alice := authenticationv1.UserInfo{Username: "alice", UID: "u-1"}
	api := &fakeAPI{
		users:  map[string]authenticationv1.UserInfo{"good-token": alice},
		grants: map[string]bool{"alice shop/prod": true},
	}
	auth := newFakeAuth(api, nil)
	ctx := context.Background()
	if got, reason, err := auth.Authorize(ctx, "good-token", "shop", "prod"); err != nil || got != Allowed {
		t.Fatalf("Authorize of Topic prod = %v, %q, %v; want Allowed", got, reason, err)
	}
	for _, tc := range []struct {
		name, token, ns, cluster string
		want                     Decision
		wantReason               string
	}{
		{"no token", "", "shop", "prod", Unauthenticated, "a bearer token is required"},
		{"a granted Cluster", "good-token", "shop", "prod", Allowed, ""},
		{"a Cluster without a grant", "good-token", "shop", "staging", Forbidden,
			`user "alice" may not create clusters/messages "staging" in namespace "shop"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, reason, err := auth.AuthorizeCluster(ctx, tc.token, tc.ns, tc.cluster)
			if err != nil || got != tc.want || !strings.Contains(reason, tc.wantReason) {
				t.Fatalf("AuthorizeCluster = %v, %q, %v; want %v with %q", got, reason, err, tc.want, tc.wantReason)
			}
		})
	}
	if len(api.accesses) != 3 {
		t.Fatalf("%d access reviews, want one for the Topic and one for each Cluster asked with a token", len(api.accesses))
	}
	ra := api.accesses[1].ResourceAttributes
	if ra == nil || ra.Verb != "create" || ra.Group != "routing.detour.dev" || ra.Resource != "clusters" ||
		ra.Subresource != "messages" || ra.Namespace != "shop" || ra.Name != "prod" {
		t.Fatalf("access review %+v, want create clusters/messages shop/prod", ra)
	}
}
