package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestNoProductCodeBuildsIdentitiesByHand holds the product's code to the identity rule.
func TestNoProductCodeBuildsIdentitiesByHand(t *testing.T) {
	found, err := handBuiltIdentities(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if len(found) > 0 {
		t.Fatalf("identities built or cut by hand:\n%s", strings.Join(found, "\n"))
	}
}

// TestHandBuiltIdentitiesFlagsGlueAndCutsOnSlashOnly proves the check can fail and where it
// does not: every way of gluing or cutting a "/" by hand is reported (the canaries, one line
// each), and what glues no names with "/" (literals alone, a URL's scheme, messages, other
// separators, Kubernetes objects' names), an exempted line or function, pkg/scope, tests and
// hack/ are not.
func TestHandBuiltIdentitiesFlagsGlueAndCutsOnSlashOnly(t *testing.T) {
	const canaries = `package a

import (
	"fmt"
	"strings"
)

func canaries(ns, cluster, name, id string) {
	_ = ns + "/" + name
	_ = ns + "/" + cluster + "/" + name
	_ = ns + "/"
	_ = "/" + name
	_ = ns + "/cluster:" + name
	_, _, _ = strings.Cut(id, "/")
	_ = strings.LastIndexByte(id, '/')
	_ = strings.HasSuffix(id, "/"+name)
	_ = strings.Split(id, ("/"))
	_ = fmt.Sprintf("%s/%s", ns, name)
	//docgen:not-identity
	_ = ns + "/" + name
}
`
	const passes = `package a

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

const both = "shop" + "/" + "orders"

func passes(scheme, host, ns, name, s string) {
	_ = scheme + "://" + host
	_ = name + ":" + ns
	_, _, _ = strings.Cut(s, ":")
	_ = strings.HasPrefix(s, "/api")
	_ = fmt.Sprintf("flap:%v/%v", ns, name)
	_ = fmt.Errorf("no Cluster %s/%s", ns, name)
	_ = types.NamespacedName{Namespace: ns, Name: name}.String()
	//docgen:not-identity a credential's AccessKey/date
	_, _, _ = strings.Cut(s, "/")
	_ = ns + "/" + name //docgen:not-identity a rate limit's key, never read back
}

// parseRef reads a flag's namespace/name.
//
//docgen:not-identity a Kubernetes object's namespace/name as a flag gives it
func parseRef(s string) (string, string, bool) {
	ns, name, ok := strings.Cut(s, "/")
	return ns, name, ok && !strings.Contains(name, "/")
}
`
	const glue = "package a\n\nfunc glue(ns, name string) string { return ns + \"/\" + name }\n"
	files := map[string]string{
		"pkg/a/canaries.go":  canaries,
		"pkg/a/passes.go":    passes,
		"pkg/a/a_test.go":    glue,
		"pkg/scope/scope.go": glue,
		"pkg/scopes/x.go":    glue,
		"hack/tool/main.go":  glue,
		"test/scale/x.go":    glue,
	}
	root := t.TempDir()
	for name, src := range files {
		path := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	found, err := handBuiltIdentities(root)
	if err != nil {
		t.Fatal(err)
	}
	const glued, use = `"/" glued between names`, " (use pkg/scope)"
	want := []string{
		"pkg/a/canaries.go:9: " + glued + use,
		"pkg/a/canaries.go:10: " + glued + use,
		"pkg/a/canaries.go:11: " + glued + use,
		"pkg/a/canaries.go:12: " + glued + use,
		"pkg/a/canaries.go:13: " + glued + use,
		`pkg/a/canaries.go:14: strings.Cut on "/"` + use,
		`pkg/a/canaries.go:15: strings.LastIndexByte on "/"` + use,
		"pkg/a/canaries.go:16: " + glued + use,
		`pkg/a/canaries.go:17: strings.Split on "/"` + use,
		`pkg/a/canaries.go:18: fmt.Sprintf("%s/%s") glues names with "/"` + use,
		"pkg/a/canaries.go:19: //docgen:not-identity needs a reason",
		"pkg/a/canaries.go:20: " + glued + use,
		"pkg/scopes/x.go:3: " + glued + use,
	}
	slices.Sort(found)
	slices.Sort(want)
	if !slices.Equal(found, want) {
		t.Errorf("found:\n%s\nwant:\n%s", strings.Join(found, "\n"), strings.Join(want, "\n"))
	}
}
