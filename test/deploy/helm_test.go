package deploy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/diff"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
)

// helmPath is the Helm client `make test` builds with hack/setup-helm.sh and passes in
// DETOUR_HELM. Without it the chart's tests fail rather than skip, so a green run means they ran;
// under -short (make test-unit) they skip.
func helmPath(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("runs the Helm client; skipped under -short")
	}
	path := os.Getenv("DETOUR_HELM")
	if path == "" {
		t.Fatal("DETOUR_HELM is not set: run `make test`, or DETOUR_HELM=$(hack/setup-helm.sh) go test ./test/deploy/")
	}
	return path
}

// runHelm runs the Helm client with its configuration, cache and data folders in a temporary
// folder, so nothing of the user's Helm setup (plugins, repositories) takes part. It returns
// standard output, and an error that carries standard error.
func runHelm(t *testing.T, args ...string) ([]byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	home := t.TempDir()
	cmd := exec.CommandContext(ctx, helmPath(t), args...)
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"), "HELM_DATA_HOME="+filepath.Join(home, "data"))
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return out.Bytes(), fmt.Errorf("helm %s: %w\n%s%s", strings.Join(args, " "), err, out.String(), errOut.String())
	}
	return out.Bytes(), nil
}

// chartDir is the chart, relative to the repository root where helm runs.
const chartDir = "charts/detour"

// lintChart runs `helm lint --strict` on the chart with the given value flags.
func lintChart(t *testing.T, values ...string) {
	t.Helper()
	if _, err := runHelm(t, append([]string{"lint", "--strict", chartDir}, values...)...); err != nil {
		t.Errorf("the chart does not lint: %v", err)
	}
}

// renderChart renders the chart with `helm template` (CRDs included) as release in namespace.
func renderChart(t *testing.T, release, namespace string, values ...string) ([]byte, []*unstructured.Unstructured) {
	t.Helper()
	out, err := runHelm(t, append([]string{"template", release, chartDir, "--namespace", namespace, "--include-crds"}, values...)...)
	if err != nil {
		t.Fatal(err)
	}
	return out, decodeObjects(t, "helm template", out)
}

// decodeObjects splits a multi-document YAML stream into objects, skipping empty documents.
func decodeObjects(t *testing.T, what string, data []byte) []*unstructured.Unstructured {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var objs []*unstructured.Unstructured
	for {
		var u unstructured.Unstructured
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return objs
			}
			t.Fatalf("decoding the output of %s: %v", what, err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, &u)
		}
	}
}

// objectKey names an object by kind, namespace and name.
func objectKey(u *unstructured.Unstructured) string {
	return u.GetKind() + " " + u.GetNamespace() + "/" + u.GetName()
}

// find returns the object of a kind and name converted, or nil when objs has none.
func find[T any](t *testing.T, objs []*unstructured.Unstructured, kind, name string) *T {
	t.Helper()
	return converted[T](t, findObject(objs, kind, name))
}

// findIn is find for an object of one namespace ("" for a cluster-scoped one): the manager's
// Roles share a name across namespaces.
func findIn[T any](t *testing.T, objs []*unstructured.Unstructured, kind, namespace, name string) *T {
	t.Helper()
	return converted[T](t, findObjectIn(objs, kind, namespace, name))
}

// converted returns u converted, or nil when u is.
func converted[T any](t *testing.T, u *unstructured.Unstructured) *T {
	t.Helper()
	if u == nil {
		return nil
	}
	var out T
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &out); err != nil {
		t.Fatalf("converting %s: %v", objectKey(u), err)
	}
	return &out
}

// findObject returns the first object of a kind and name as rendered, in any namespace, or nil
// when objs has none.
func findObject(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, u := range objs {
		if u.GetKind() == kind && u.GetName() == name {
			return u
		}
	}
	return nil
}

// findObjectIn is findObject in one namespace.
func findObjectIn(objs []*unstructured.Unstructured, kind, namespace, name string) *unstructured.Unstructured {
	for _, u := range objs {
		if u.GetKind() == kind && u.GetNamespace() == namespace && u.GetName() == name {
			return u
		}
	}
	return nil
}

// withoutSelection drops what the chart may render differently from config/default: labels and
// annotations (Helm's release labels), the label selectors (the chart also selects by release,
// so two releases in one namespace stay apart) and the image pull policy (a value). Everything
// else must be equal; the selectors are checked to select the manager's pods instead.
func withoutSelection(u *unstructured.Unstructured) *unstructured.Unstructured {
	c := u.DeepCopy()
	unstructured.RemoveNestedField(c.Object, "metadata", "labels")
	unstructured.RemoveNestedField(c.Object, "metadata", "annotations")
	switch c.GetKind() {
	case "Service", "PodDisruptionBudget":
		unstructured.RemoveNestedField(c.Object, "spec", "selector")
	case "Deployment":
		unstructured.RemoveNestedField(c.Object, "spec", "selector")
		unstructured.RemoveNestedField(c.Object, "spec", "template", "metadata")
		containers, _, _ := unstructured.NestedSlice(c.Object, "spec", "template", "spec", "containers")
		for _, ctr := range containers {
			delete(ctr.(map[string]any), "imagePullPolicy")
		}
		_ = unstructured.SetNestedSlice(c.Object, containers, "spec", "template", "spec", "containers")
	}
	return c
}

// checkCoherent proves a rendering holds together: the manager's arguments are flags the
// binary accepts and bind the ports it names, every Service and the PodDisruptionBudget select its
// pods and reach ports it names, and every binding names a role and the ServiceAccount that
// exist. It returns the Deployment and the parsed arguments.
func checkCoherent(t *testing.T, objs []*unstructured.Unstructured, prefix string) (*appsv1.Deployment, managerFlags) {
	t.Helper()
	dep := find[appsv1.Deployment](t, objs, "Deployment", prefix+"-controller-manager")
	if dep == nil {
		t.Fatalf("no Deployment %s-controller-manager", prefix)
	}
	if !labelsMatch(dep.Spec.Selector.MatchLabels, dep.Spec.Template.Labels) {
		t.Errorf("the Deployment selects %v, not its own pods %v", dep.Spec.Selector.MatchLabels, dep.Spec.Template.Labels)
	}
	c := dep.Spec.Template.Spec.Containers[0]
	o, err := parseFlags(c.Args, io.Discard)
	if err != nil {
		t.Fatalf("the Deployment's arguments %v are not the manager's flags: %v", c.Args, err)
	}
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	for name, addr := range map[string]string{"gateway": o["gateway-bind-address"], "metrics": o["metrics-bind-address"], "health": o["health-probe-bind-address"], "namesrv": o["namesrv-facade-bind-address"], "grpc": o["grpc-bind-address"]} {
		p, named := ports[name]
		if addr == "0" && named {
			t.Errorf("container port %q is named but %s is off", name, name)
		} else if addr != "0" && (!named || !strings.HasSuffix(addr, fmt.Sprintf(":%d", p))) {
			t.Errorf("container port %q = %d does not match the bind address %q", name, p, addr)
		}
	}
	podLabels := dep.Spec.Template.Labels
	sa := dep.Spec.Template.Spec.ServiceAccountName
	if find[corev1.ServiceAccount](t, objs, "ServiceAccount", sa) == nil {
		t.Errorf("no ServiceAccount %s", sa)
	}
	for _, u := range objs {
		switch u.GetKind() {
		case "Service":
			svc := find[corev1.Service](t, objs, "Service", u.GetName())
			if !labelsMatch(svc.Spec.Selector, podLabels) {
				t.Errorf("Service %s selects %v, not the manager's pods %v", svc.Name, svc.Spec.Selector, podLabels)
			}
			for _, p := range svc.Spec.Ports {
				if _, ok := ports[p.TargetPort.StrVal]; !ok {
					t.Errorf("Service %s targets port %q, which the container does not name", svc.Name, p.TargetPort.StrVal)
				}
			}
		case "PodDisruptionBudget":
			pdb := find[policyv1.PodDisruptionBudget](t, objs, u.GetKind(), u.GetName())
			if !labelsMatch(pdb.Spec.Selector.MatchLabels, podLabels) {
				t.Errorf("PodDisruptionBudget %s selects %v, not the manager's pods %v", pdb.Name, pdb.Spec.Selector.MatchLabels, podLabels)
			}
		case "ClusterRoleBinding", "RoleBinding":
			var b rbacv1.RoleBinding // a ClusterRoleBinding has the same fields
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &b); err != nil {
				t.Fatal(err)
			}
			if findObjectIn(objs, b.RoleRef.Kind, b.Namespace, b.RoleRef.Name) == nil {
				t.Errorf("%s %s binds %s %s, which is not rendered in its namespace", u.GetKind(), b.Name, b.RoleRef.Kind, b.RoleRef.Name)
			}
			for _, s := range b.Subjects {
				if s.Name != sa || s.Namespace != dep.Namespace {
					t.Errorf("%s %s binds %s/%s, not the manager's ServiceAccount %s/%s", u.GetKind(), b.Name, s.Namespace, s.Name, dep.Namespace, sa)
				}
			}
		}
	}
	return dep, o
}

// TestHelmChartRendersTheKustomization proves the chart with its default values, installed as
// release detour in detour-system, renders what `kubectl kustomize config/default` renders:
// the same kinds and names in the same namespaces, and each object equal field by field (CRDs,
// RBAC rules and bindings, the Deployment's pod spec with its arguments, probes, security
// context, resources and volumes, Service ports, the PodDisruptionBudget) except for labels,
// selectors and the image pull policy. Only the Namespace is left to `helm install
// --create-namespace`.
func TestHelmChartRendersTheKustomization(t *testing.T) {
	lintChart(t)
	_, kustomized := renderKustomization(t, filepath.Join(repoRoot, "config", "default"))
	_, charted := renderChart(t, "detour", "detour-system")

	want := map[string]*unstructured.Unstructured{}
	for _, u := range kustomized {
		if u.GetKind() != "Namespace" {
			want[objectKey(u)] = u
		}
	}
	got := map[string]*unstructured.Unstructured{}
	for _, u := range charted {
		if _, dup := got[objectKey(u)]; dup {
			t.Errorf("the chart renders %s twice", objectKey(u))
		}
		got[objectKey(u)] = u
	}
	for key, k := range want {
		h, ok := got[key]
		if !ok {
			t.Errorf("config/default renders %s, the chart does not", key)
			continue
		}
		if a, b := withoutSelection(k), withoutSelection(h); !reflect.DeepEqual(a.Object, b.Object) {
			t.Errorf("%s differs between config/default and the chart (-kustomize +helm):\n%s", key, diff.Diff(a.Object, b.Object))
		}
	}
	for key := range got {
		if _, ok := want[key]; !ok {
			t.Errorf("the chart renders %s, config/default does not", key)
		}
	}
	dep, _ := checkCoherent(t, charted, "detour")
	if img := dep.Spec.Template.Spec.Containers[0].Image; img != "detour:dev" {
		t.Errorf("default image %q, want config/manager's detour:dev", img)
	}
}

// helmValuesCase is one set of values and what it must change in the rendering.
type helmValuesCase struct {
	name    string
	release string // "" means detour
	prefix  string // of the objects' names; "" means the one the release gives
	values  []string
	check   func(t *testing.T, objs []*unstructured.Unstructured, dep *appsv1.Deployment, o managerFlags)
}

// TestHelmChartValuesChangeWhatTheySay renders the chart with each value changed and proves the
// value does what values.yaml says, that the rendering stays coherent (flags the manager
// accepts, Services and bindings that reach what exists) and that it lints.
func TestHelmChartValuesChangeWhatTheySay(t *testing.T) {
	for _, tc := range []helmValuesCase{
		{name: "image", values: []string{"--set", "image.repository=registry.example.com/detour,image.tag=v0.1.0,image.pullPolicy=Always",
			"--set", "imagePullSecrets[0].name=regcred"},
			check: func(t *testing.T, _ []*unstructured.Unstructured, dep *appsv1.Deployment, _ managerFlags) {
				c := dep.Spec.Template.Spec.Containers[0]
				if c.Image != "registry.example.com/detour:v0.1.0" || c.ImagePullPolicy != corev1.PullAlways {
					t.Errorf("image %q pulled %q", c.Image, c.ImagePullPolicy)
				}
				if s := dep.Spec.Template.Spec.ImagePullSecrets; len(s) != 1 || s[0].Name != "regcred" {
					t.Errorf("imagePullSecrets %v", s)
				}
			}},
		{name: "three replicas keep the disruption budget", values: []string{"--set", "replicas=3"},
			check: func(t *testing.T, objs []*unstructured.Unstructured, dep *appsv1.Deployment, _ managerFlags) {
				if *dep.Spec.Replicas != 3 {
					t.Errorf("replicas %d", *dep.Spec.Replicas)
				}
				if find[policyv1.PodDisruptionBudget](t, objs, "PodDisruptionBudget", "detour-controller-manager") == nil {
					t.Error("no PodDisruptionBudget")
				}
			}},
		{name: "one replica has no disruption budget to block drains", values: []string{"--set", "replicas=1"},
			check: func(t *testing.T, objs []*unstructured.Unstructured, dep *appsv1.Deployment, _ managerFlags) {
				if *dep.Spec.Replicas != 1 {
					t.Errorf("replicas %d", *dep.Spec.Replicas)
				}
				if find[policyv1.PodDisruptionBudget](t, objs, "PodDisruptionBudget", "detour-controller-manager") != nil {
					t.Error("a PodDisruptionBudget with minAvailable 1 for one replica blocks every drain")
				}
			}},
		{name: "gRPC access keys are read from the watched namespace", values: []string{"--set", "grpc.accessKeysSecret=grpc-keys,watchNamespace=shop"},
			check: func(t *testing.T, _ []*unstructured.Unstructured, _ *appsv1.Deployment, o managerFlags) {
				if o["grpc-access-keys-secret"] != "shop/grpc-keys" {
					t.Errorf("--grpc-access-keys-secret %q", o["grpc-access-keys-secret"])
				}
			}},
		{name: "namespace scope binds a Role there", values: []string{"--set", "watchNamespace=shop"},
			check: func(t *testing.T, objs []*unstructured.Unstructured, _ *appsv1.Deployment, o managerFlags) {
				if o["namespace"] != "shop" {
					t.Errorf("--namespace %q", o["namespace"])
				}
				defaults := renderedDefault(t)
				role := findIn[rbacv1.Role](t, objs, "Role", "shop", "detour-manager-role")
				generated := find[rbacv1.ClusterRole](t, defaults, "ClusterRole", "detour-manager-role")
				if role == nil || !reflect.DeepEqual(role.Rules, generated.Rules) {
					t.Errorf("manager Role %+v; want the generated ClusterRole's rules in namespace shop", role)
				}
				b := findIn[rbacv1.RoleBinding](t, objs, "RoleBinding", "shop", "detour-manager-rolebinding")
				if b == nil || b.RoleRef.Kind != "Role" {
					t.Errorf("manager RoleBinding %+v; want a Role binding in shop", b)
				}
				own := findIn[rbacv1.Role](t, objs, "Role", "detour-system", "detour-manager-role")
				generatedOwn := findIn[rbacv1.Role](t, defaults, "Role", "detour-system", "detour-manager-role")
				if own == nil || generatedOwn == nil || !reflect.DeepEqual(own.Rules, generatedOwn.Rules) {
					t.Errorf("manager Role %+v in the release namespace; want the generated Role's rules (%+v) there", own, generatedOwn)
				}
				if find[rbacv1.ClusterRole](t, objs, "ClusterRole", "detour-manager-role") != nil ||
					find[rbacv1.ClusterRoleBinding](t, objs, "ClusterRoleBinding", "detour-manager-rolebinding") != nil {
					t.Error("a namespace-scoped manager still gets the cluster-wide manager role")
				}
				if find[rbacv1.ClusterRole](t, objs, "ClusterRole", "detour-gateway-auth-role") == nil {
					t.Error("TokenReviews and SubjectAccessReviews are cluster-scoped: the gateway auth ClusterRole must stay")
				}
			}},
		{name: "broker pod selector", values: []string{"--set", "brokerPodSelector=app.kubernetes.io/component in (broker\\,namesrv)"},
			check: func(t *testing.T, _ []*unstructured.Unstructured, _ *appsv1.Deployment, o managerFlags) {
				if sel, err := labels.Parse(o["broker-pod-selector"]); err != nil || sel.String() != "app.kubernetes.io/component in (broker,namesrv)" {
					t.Errorf("--broker-pod-selector %q: %v", o["broker-pod-selector"], err)
				}
			}},
		{name: "gateway off", values: []string{"--set", "gateway.enabled=false"},
			check: func(t *testing.T, objs []*unstructured.Unstructured, dep *appsv1.Deployment, o managerFlags) {
				if o["gateway-bind-address"] != "0" || o["gateway-cert-dir"] != "" {
					t.Errorf("gateway bound at %q with certificates from %q", o["gateway-bind-address"], o["gateway-cert-dir"])
				}
				if find[corev1.Service](t, objs, "Service", "detour-gateway") != nil || find[rbacv1.ClusterRole](t, objs, "ClusterRole", "detour-topic-sender") != nil ||
					find[rbacv1.ClusterRole](t, objs, "ClusterRole", "detour-cluster-sender") != nil {
					t.Error("the gateway's Service or sender role is still rendered")
				}
				if slices.ContainsFunc(dep.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == "gateway-tls" }) {
					t.Error("the gateway's certificate is still mounted")
				}
				if find[rbacv1.ClusterRole](t, objs, "ClusterRole", "detour-gateway-auth-role") == nil {
					t.Error("the metrics endpoint still needs TokenReviews and SubjectAccessReviews")
				}
			}},
		{name: "gateway port and certificate", values: []string{"--set", "gateway.port=9443,gateway.tlsSecretName=detour-cert"},
			check: func(t *testing.T, objs []*unstructured.Unstructured, dep *appsv1.Deployment, _ managerFlags) {
				svc := find[corev1.Service](t, objs, "Service", "detour-gateway")
				if svc == nil || svc.Spec.Ports[0].Port != 9443 {
					t.Errorf("gateway Service %+v, want port 9443", svc)
				}
				i := slices.IndexFunc(dep.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == "gateway-tls" })
				if i < 0 || dep.Spec.Template.Spec.Volumes[i].Secret.SecretName != "detour-cert" {
					t.Errorf("volumes %+v, want the gateway's certificate from detour-cert", dep.Spec.Template.Spec.Volumes)
				}
			}},
		{name: "facade off", values: []string{"--set", "facade.enabled=false,facade.cluster=rmq/main"},
			check: func(t *testing.T, objs []*unstructured.Unstructured, _ *appsv1.Deployment, o managerFlags) {
				if o["namesrv-facade-bind-address"] != "0" || o["namesrv-facade-cluster"] != "" {
					t.Errorf("facade bound at %q for %q", o["namesrv-facade-bind-address"], o["namesrv-facade-cluster"])
				}
				if find[corev1.Service](t, objs, "Service", "detour-namesrv") != nil {
					t.Error("the facade's Service is still rendered")
				}
			}},
		{name: "facade cluster and port", values: []string{"--set", "facade.cluster=rmq/main,facade.port=19876"},
			check: func(t *testing.T, objs []*unstructured.Unstructured, _ *appsv1.Deployment, o managerFlags) {
				if o["namesrv-facade-cluster"] != "rmq/main" {
					t.Errorf("--namesrv-facade-cluster %q", o["namesrv-facade-cluster"])
				}
				if svc := find[corev1.Service](t, objs, "Service", "detour-namesrv"); svc == nil || svc.Spec.Ports[0].Port != 19876 {
					t.Errorf("namesrv Service %+v, want port 19876", svc)
				}
			}},
		{name: "undeclared topics' default Cluster and bound", values: []string{"--set", "undeclaredTopics.defaultCluster=rmq/main,undeclaredTopics.maxTopics=50000"},
			check: func(t *testing.T, _ []*unstructured.Unstructured, _ *appsv1.Deployment, o managerFlags) {
				if o["default-cluster"] != "rmq/main" || o["undeclared-topics-max"] != "50000" {
					t.Errorf("--default-cluster %q, --undeclared-topics-max %q", o["default-cluster"], o["undeclared-topics-max"])
				}
			}},
		{name: "leader election off", values: []string{"--set", "leaderElection.enabled=false"},
			check: func(t *testing.T, objs []*unstructured.Unstructured, _ *appsv1.Deployment, o managerFlags) {
				if o.on("leader-elect") {
					t.Error("--leader-elect still set")
				}
				if find[rbacv1.Role](t, objs, "Role", "detour-manager-role") != nil {
					t.Error("the Role over the Lease, the ReplicaViews and the facades' Services is still rendered")
				}
			}},
		{name: "watching the release namespace grants both roles' rules in one Role there", values: []string{"--set", "watchNamespace=detour-system"},
			check: func(t *testing.T, objs []*unstructured.Unstructured, _ *appsv1.Deployment, _ managerFlags) {
				defaults := renderedDefault(t)
				var want []rbacv1.PolicyRule
				want = append(want, find[rbacv1.ClusterRole](t, defaults, "ClusterRole", "detour-manager-role").Rules...)
				want = append(want, findIn[rbacv1.Role](t, defaults, "Role", "detour-system", "detour-manager-role").Rules...)
				var roles []string
				for _, u := range objs {
					if (u.GetKind() == "Role" || u.GetKind() == "ClusterRole") && u.GetName() == "detour-manager-role" {
						roles = append(roles, objectKey(u))
					}
				}
				if !slices.Equal(roles, []string{"Role detour-system/detour-manager-role"}) {
					t.Fatalf("manager roles %v; want the one Role detour-system/detour-manager-role", roles)
				}
				if role := findIn[rbacv1.Role](t, objs, "Role", "detour-system", "detour-manager-role"); !reflect.DeepEqual(role.Rules, want) {
					t.Errorf("manager Role rules %+v; want the ClusterRole's then the Role's generated rules %+v", role.Rules, want)
				}
			}},
		{name: "resources", values: []string{"--set", "resources.requests.cpu=250m,resources.limits.memory=1Gi"},
			check: func(t *testing.T, _ []*unstructured.Unstructured, dep *appsv1.Deployment, _ managerFlags) {
				r := dep.Spec.Template.Spec.Containers[0].Resources
				if !r.Requests.Cpu().Equal(resource.MustParse("250m")) || !r.Limits.Memory().Equal(resource.MustParse("1Gi")) {
					t.Errorf("resources %+v", r)
				}
			}},
		{name: "extra args", values: []string{"--set", "extraArgs={--producer-group=orders,--zap-log-level=debug}"},
			check: func(t *testing.T, _ []*unstructured.Unstructured, dep *appsv1.Deployment, o managerFlags) {
				args := dep.Spec.Template.Spec.Containers[0].Args
				if o["producer-group"] != "orders" || !slices.Equal(args[len(args)-2:], []string{"--producer-group=orders", "--zap-log-level=debug"}) {
					t.Errorf("args %v, producer group %q", args, o["producer-group"])
				}
			}},
		{name: "scheduling", values: []string{"--set", "nodeSelector.pool=infra,podAnnotations.team=mq",
			"--set-json", `tolerations=[{"key":"dedicated","operator":"Exists"}]`,
			"--set-json", `affinity={"podAntiAffinity":{"preferredDuringSchedulingIgnoredDuringExecution":[{"weight":1,"podAffinityTerm":{"topologyKey":"kubernetes.io/hostname","labelSelector":{"matchLabels":{"control-plane":"controller-manager"}}}}]}}`},
			check: func(t *testing.T, _ []*unstructured.Unstructured, dep *appsv1.Deployment, _ managerFlags) {
				s := dep.Spec.Template.Spec
				if s.NodeSelector["pool"] != "infra" || len(s.Tolerations) != 1 || s.Tolerations[0].Key != "dedicated" ||
					s.Affinity == nil || s.Affinity.PodAntiAffinity == nil || dep.Spec.Template.Annotations["team"] != "mq" {
					t.Errorf("pod spec %+v, annotations %v", s, dep.Spec.Template.Annotations)
				}
			}},
		{name: "another release keeps its own names", release: "payments",
			check: func(t *testing.T, objs []*unstructured.Unstructured, dep *appsv1.Deployment, _ managerFlags) {
				for _, u := range objs {
					if u.GetKind() != "CustomResourceDefinition" && !strings.HasPrefix(u.GetName(), "payments-detour-") {
						t.Errorf("%s is not named for the release", objectKey(u))
					}
				}
				if dep.Spec.Selector.MatchLabels["app.kubernetes.io/instance"] != "payments" {
					t.Errorf("selector %v does not keep releases apart", dep.Spec.Selector.MatchLabels)
				}
			}},
		{name: "fullnameOverride", prefix: "mq-detour", values: []string{"--set", "fullnameOverride=mq-detour"},
			check: func(t *testing.T, objs []*unstructured.Unstructured, _ *appsv1.Deployment, _ managerFlags) {
				if find[corev1.Service](t, objs, "Service", "mq-detour-gateway") == nil {
					t.Error("no Service mq-detour-gateway")
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			release := tc.release
			if release == "" {
				release = "detour"
			}
			lintChart(t, tc.values...)
			_, objs := renderChart(t, release, "detour-system", tc.values...)
			prefix := tc.prefix
			if prefix == "" {
				prefix = release
				if !strings.Contains(release, "detour") {
					prefix = release + "-detour"
				}
			}
			dep, o := checkCoherent(t, objs, prefix)
			tc.check(t, objs, dep, o)
		})
	}
}

// renderedDefault renders the chart with its defaults, for cases that compare with them.
func renderedDefault(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	_, objs := renderChart(t, "detour", "detour-system")
	return objs
}

// TestHelmChartRefusesBadValues proves a value the manager could not run with is refused when
// the chart is rendered, with a message that names it, instead of a Deployment that crash-loops
// or a manager that silently watches nothing.
func TestHelmChartRefusesBadValues(t *testing.T) {
	for _, tc := range []struct {
		name    string
		release string
		values  []string
		want    string
	}{
		{"replicas not a number", "", []string{"--set", "replicas=two"}, "/replicas"},
		{"negative replicas", "", []string{"--set", "replicas=-1"}, "/replicas"},
		{"a misspelt value", "", []string{"--set", "replica=3"}, "'replica' not allowed"},
		{"no image repository", "", []string{"--set", "image.repository="}, "/image/repository"},
		{"an unknown pull policy", "", []string{"--set", "image.pullPolicy=Sometimes"}, "/image/pullPolicy"},
		{"a gateway port out of range", "", []string{"--set", "gateway.port=70000"}, "/gateway/port"},
		{"a facade port of zero", "", []string{"--set", "facade.port=0"}, "/facade/port"},
		{"a facade cluster without its namespace", "", []string{"--set", "facade.cluster=main"}, "/facade/cluster"},
		{"a facade cluster outside the watched namespace", "", []string{"--set", "watchNamespace=shop,facade.cluster=rmq/main"}, "outside watchNamespace"},
		{"a namespace that is no namespace name", "", []string{"--set", "watchNamespace=Shop_Floor"}, "/watchNamespace"},
		{"a TLS secret that is no secret name", "", []string{"--set", "gateway.tlsSecretName=My Cert"}, "/gateway/tlsSecretName"},
		{"extra args not a list", "", []string{"--set", "extraArgs=--zap-log-level=debug"}, "/extraArgs"},
		{"an extra arg that is no flag", "", []string{"--set", "extraArgs={debug}"}, "/extraArgs/0"},
		{"a dashboards namespace that is no namespace name", "", []string{"--set", "dashboards.enabled=true,dashboards.namespace=Grafana Dashboards"}, "/dashboards/namespace"},
		{"a release name too long for the Services", "a-release-name-far-too-long-for-its", nil, "at most 28"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			release := tc.release
			if release == "" {
				release = "detour"
			}
			out, err := runHelm(t, append([]string{"template", release, chartDir, "--namespace", "detour-system"}, tc.values...)...)
			if err == nil {
				t.Fatalf("rendered:\n%s", out)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("refused with %v\nwant a message naming %q", err, tc.want)
			}
		})
	}
}

// TestHelmChartCarriesTheGeneratedFiles proves the chart's copies of the generated CRDs,
// manager rules, alerting rules and dashboards are those in config/ (make manifests copies them; make verify checks them too).
func TestHelmChartCarriesTheGeneratedFiles(t *testing.T) {
	bases, err := filepath.Glob(filepath.Join(repoRoot, "config", "crd", "bases", "*.yaml"))
	if err != nil || len(bases) == 0 {
		t.Fatalf("no CRDs in config/crd/bases: %v", err)
	}
	copies, err := filepath.Glob(filepath.Join(repoRoot, chartDir, "crds", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	pairs := map[string]string{
		filepath.Join(repoRoot, "config", "rbac", "role.yaml"):         filepath.Join(repoRoot, chartDir, "files", "manager-role.yaml"),
		filepath.Join(repoRoot, "config", "prometheus", "alerts.yaml"): filepath.Join(repoRoot, chartDir, "files", "prometheus-alerts.yaml"),
	}
	for _, b := range bases {
		pairs[b] = filepath.Join(repoRoot, chartDir, "crds", filepath.Base(b))
	}
	dashboards, err := filepath.Glob(filepath.Join(repoRoot, "config", "grafana", "*.json"))
	if err != nil || len(dashboards) == 0 {
		t.Fatalf("no dashboards in config/grafana: %v", err)
	}
	for _, d := range dashboards {
		pairs[d] = filepath.Join(repoRoot, chartDir, "files", "dashboards", filepath.Base(d))
	}
	for _, c := range copies {
		if _, err := os.Stat(filepath.Join(repoRoot, "config", "crd", "bases", filepath.Base(c))); err != nil {
			t.Errorf("the chart carries %s, which config/crd/bases no longer has: run make manifests", filepath.Base(c))
		}
	}
	for src, dst := range pairs {
		want, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(dst)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s is not a copy of %s (%v): run make manifests", dst, src, err)
		}
	}
}

// TestManagerRunsWithTheChartsNamespacedRBAC proves a Role binding suffices for a manager
// scoped to one namespace: the chart, rendered with watchNamespace into a release namespace of
// its own, is applied with kubectl; the manager runs as its ServiceAccount with the chart's flags
// (bind addresses moved to loopback), turns ready, leads, routes a Topic of the watched
// namespace, writes its FaultPolicy's status and sends for a topic-sender, and nothing it does is
// forbidden, while that ServiceAccount can read Topics nowhere else.
func TestManagerRunsWithTheChartsNamespacedRBAC(t *testing.T) {
	needsEnvtest(t)
	release, watched, elsewhere := newNamespace(t), newNamespace(t), newNamespace(t)
	// Another release name than the other tests', so its cluster-wide roles are its own.
	manifests, objs := renderChart(t, "scoped", release, "--set", "watchNamespace="+watched)
	runKubectl(t, manifests, "--kubeconfig", kubeconfigPath, "apply", "--server-side", "--force-conflicts", "-f", "-")
	dep, o := checkCoherent(t, objs, "scoped-detour")
	identity := serviceAccountUser(t, release, dep.Spec.Template.Spec.ServiceAccountName)
	saClient, err := client.New(identity.Config(), client.Options{Scheme: k8sClient.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, ns := range []string{elsewhere, ""} {
		if err := saClient.List(ctx, &routingv1alpha1.TopicList{}, client.InNamespace(ns)); !apierrors.IsForbidden(err) {
			t.Errorf("listing Topics in %q as the scoped manager: %v, want forbidden", ns, err)
		}
	}

	b := startBroker(t, watched, "scoped-a", map[string]string{"app": "scoped"})
	createTopic(t, watched, "orders", "ScopedOrders", "scoped")
	appToken := serviceAccountToken(t, watched, "app")
	bindSender(t, watched, "app", "scoped-detour-topic-sender")

	healthAddr, gatewayAddr := freeAddr(t), freeAddr(t)
	args := append(slices.Clone(dep.Spec.Template.Spec.Containers[0].Args),
		"--gateway-bind-address="+gatewayAddr,
		"--grpc-bind-address=127.0.0.1:0",
		"--metrics-bind-address=0",
		"--health-probe-bind-address="+healthAddr,
		"--namesrv-facade-bind-address=0",
		"--leader-election-namespace="+release, // in a pod this comes from the service account
		"--shutdown-delay=0s")
	if o, err = parseFlags(args, io.Discard); err != nil {
		t.Fatal(err)
	}
	if o["namespace"] != watched {
		t.Fatalf("the chart's flags watch %q, want %q", o["namespace"], watched)
	}
	logs, stop := startManagerAs(t, identity, args)
	// What the kubelet sees: a replica that cannot read what it must restore never turns ready.
	eventually(t, "the replica ready", func() error {
		if code, body, err := probe(healthAddr, "/readyz"); err != nil || code != http.StatusOK {
			return fmt.Errorf("/readyz: %d %s %v", code, body, err)
		}
		return nil
	})
	waitLeadingAndWriting(t, release, watched, "orders")
	a := postMessage(t, insecureClient(), messagesURL("https://"+gatewayAddr, watched, "orders"), "text/plain", appToken, []byte("order"))
	if a.status != http.StatusOK || storedCounts(b)[a.ok.MsgID] != 1 {
		t.Fatalf("a sender bound to scoped-detour-topic-sender: %d %+v; want 200 and stored", a.status, a.err)
	}
	stop()
	if refused := logs.find("forbidden"); len(refused) > 0 {
		t.Errorf("the namespace-scoped operator was refused by the API server:\n%s", strings.Join(refused, ""))
	}
}
