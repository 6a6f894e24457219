package deploy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
)

// runKubectl runs the real kubectl, as a user would, and returns its standard output.
func runKubectl(t *testing.T, stdin []byte, args ...string) []byte {
	t.Helper()
	path, err := exec.LookPath("kubectl")
	if err != nil {
		t.Fatalf("kubectl is required for this test: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Stdin = bytes.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, errOut.String())
	}
	return out.Bytes()
}

// renderKustomization renders dir with `kubectl kustomize` into objects.
func renderKustomization(t *testing.T, dir string) ([]byte, []*unstructured.Unstructured) {
	t.Helper()
	out := runKubectl(t, nil, "kustomize", dir)
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
	var objs []*unstructured.Unstructured
	for {
		var u unstructured.Unstructured
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatalf("decoding the output of kubectl kustomize %s: %v", dir, err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, &u)
		}
	}
	return out, objs
}

// typed finds the single object of a kind and name in objs and converts it.
func typed[T any](t *testing.T, objs []*unstructured.Unstructured, kind, name string) *T {
	t.Helper()
	for _, u := range objs {
		if u.GetKind() == kind && u.GetName() == name {
			var out T
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &out); err != nil {
				t.Fatalf("converting %s %s: %v", kind, name, err)
			}
			return &out
		}
	}
	t.Fatalf("kubectl kustomize output has no %s %s", kind, name)
	return nil
}

func labelsMatch(selector, labels map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return len(selector) > 0
}

// TestDefaultKustomizationRenders proves `kubectl kustomize config/default` renders a coherent
// deployment: the manager's arguments are flags the binary accepts, the Services select its
// pods and reach named container ports, and its service account is bound to the roles that the
// controllers, leader election and the gateway's TokenReview/SubjectAccessReview need.
func TestDefaultKustomizationRenders(t *testing.T) {
	_, objs := renderKustomization(t, filepath.Join(repoRoot, "config", "default"))
	dep := typed[appsv1.Deployment](t, objs, "Deployment", "detour-controller-manager")
	if dep.Namespace != "detour-system" || dep.Spec.Replicas == nil || *dep.Spec.Replicas < 2 {
		t.Errorf("Deployment in %q with %v replicas; want detour-system and at least two", dep.Namespace, dep.Spec.Replicas)
	}
	c := dep.Spec.Template.Spec.Containers[0]
	o, err := parseFlags(c.Args, io.Discard)
	if err != nil {
		t.Fatalf("the Deployment's arguments %v are not the manager's flags: %v", c.Args, err)
	}
	if !o.on("leader-elect") || !o.on("gateway-auth") || !o.on("gateway-secure") || !o.on("metrics-secure") {
		t.Errorf("deployed flags: leader election %v, gateway auth %v, gateway TLS %v, secure metrics %v; want all on",
			o.on("leader-elect"), o.on("gateway-auth"), o.on("gateway-secure"), o.on("metrics-secure"))
	}
	grace := dep.Spec.Template.Spec.TerminationGracePeriodSeconds
	if grace == nil || time.Duration(*grace)*time.Second <= o.duration(t, "shutdown-delay")+o.duration(t, "shutdown-timeout") {
		t.Errorf("terminationGracePeriodSeconds %v does not cover shutdown delay %s + timeout %s", grace, o.duration(t, "shutdown-delay"), o.duration(t, "shutdown-timeout"))
	}
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	for name, addr := range map[string]string{"gateway": o["gateway-bind-address"], "metrics": o["metrics-bind-address"], "health": o["health-probe-bind-address"], "namesrv": o["namesrv-facade-bind-address"], "grpc": o["grpc-bind-address"]} {
		if p, ok := ports[name]; !ok || !strings.HasSuffix(addr, fmt.Sprintf(":%d", p)) {
			t.Errorf("container port %q = %d does not match the bind address %q", name, p, addr)
		}
	}
	podLabels := dep.Spec.Template.Labels
	for _, name := range []string{"detour-gateway", "detour-namesrv", "detour-grpc", "detour-controller-manager-metrics-service"} {
		svc := typed[corev1.Service](t, objs, "Service", name)
		if !labelsMatch(svc.Spec.Selector, podLabels) {
			t.Errorf("Service %s selects %v, not the manager's pods %v", name, svc.Spec.Selector, podLabels)
		}
		for _, p := range svc.Spec.Ports {
			if _, ok := ports[p.TargetPort.StrVal]; !ok {
				t.Errorf("Service %s targets port %q, which the container does not name", name, p.TargetPort.StrVal)
			}
		}
	}
	sa := dep.Spec.Template.Spec.ServiceAccountName
	typed[corev1.ServiceAccount](t, objs, "ServiceAccount", sa)
	granted := map[string]bool{}
	for _, u := range objs {
		var roleRef rbacv1.RoleRef
		var subjects []rbacv1.Subject
		switch u.GetKind() {
		case "ClusterRoleBinding":
			b := typed[rbacv1.ClusterRoleBinding](t, objs, u.GetKind(), u.GetName())
			roleRef, subjects = b.RoleRef, b.Subjects
		case "RoleBinding":
			b := typed[rbacv1.RoleBinding](t, objs, u.GetKind(), u.GetName())
			roleRef, subjects = b.RoleRef, b.Subjects
		default:
			continue
		}
		if !slices.ContainsFunc(subjects, func(s rbacv1.Subject) bool { return s.Name == sa && s.Namespace == dep.Namespace }) {
			continue
		}
		var rules []rbacv1.PolicyRule
		if roleRef.Kind == "ClusterRole" {
			rules = typed[rbacv1.ClusterRole](t, objs, "ClusterRole", roleRef.Name).Rules
		} else {
			rules = typed[rbacv1.Role](t, objs, "Role", roleRef.Name).Rules
		}
		for _, r := range rules {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					granted[res+":"+v] = true
				}
			}
		}
	}
	for _, need := range []string{"tokenreviews:create", "subjectaccessreviews:create", "leases:create", "leases:update",
		"pods:watch", "topics:watch", "faultpolicies:watch", "faultpolicies/status:update", "faultpolicies:patch",
		"faultpolicies/finalizers:update", "events:create", "secrets:get", "secrets:watch"} {
		if !granted[need] {
			t.Errorf("the manager's service account lacks %s", need)
		}
	}
	// Secrets are read for RocketMQ credentials (a Cluster's credentialsSecretRef), never written.
	if granted["secrets:create"] || granted["secrets:update"] || granted["secrets:delete"] || granted["pods:delete"] || granted["topics:update"] {
		t.Errorf("the manager's service account has rights it does not use: %v", granted)
	}
}

// TestPrometheusKustomizationRenders proves that enabling config/prometheus in the default
// kustomization renders, in the manager's namespace, a ServiceMonitor that selects the metrics
// Service and scrapes a port it has, and the alerting rules.
func TestPrometheusKustomizationRenders(t *testing.T) {
	tmp := t.TempDir()
	if err := os.CopyFS(filepath.Join(tmp, "config"), os.DirFS(filepath.Join(repoRoot, "config"))); err != nil {
		t.Fatal(err)
	}
	kpath := filepath.Join(tmp, "config", "default", "kustomization.yaml")
	data, err := os.ReadFile(kpath)
	if err != nil {
		t.Fatal(err)
	}
	enabled := strings.Replace(string(data), "#- ../prometheus", "- ../prometheus", 1)
	if enabled == string(data) {
		t.Fatal("config/default/kustomization.yaml has no commented '#- ../prometheus' line to enable")
	}
	if err := os.WriteFile(kpath, []byte(enabled), fs.FileMode(0o644)); err != nil {
		t.Fatal(err)
	}
	_, objs := renderKustomization(t, filepath.Join(tmp, "config", "default"))
	var mon, rule *unstructured.Unstructured
	for _, u := range objs {
		switch u.GetKind() {
		case "ServiceMonitor":
			mon = u
		case "PrometheusRule":
			rule = u
		}
	}
	if mon == nil || rule == nil {
		t.Fatalf("ServiceMonitor %v and PrometheusRule %v rendered, want both", mon != nil, rule != nil)
	}
	svc := typed[corev1.Service](t, objs, "Service", "detour-controller-manager-metrics-service")
	if rule.GetNamespace() != svc.Namespace {
		t.Errorf("PrometheusRule in %q, the manager in %q", rule.GetNamespace(), svc.Namespace)
	}
	if mon.GetNamespace() != svc.Namespace {
		t.Errorf("ServiceMonitor in %q, metrics Service in %q", mon.GetNamespace(), svc.Namespace)
	}
	sel, _, _ := unstructured.NestedStringMap(mon.Object, "spec", "selector", "matchLabels")
	if !labelsMatch(sel, svc.Labels) {
		t.Errorf("ServiceMonitor selects %v, the metrics Service has labels %v", sel, svc.Labels)
	}
	endpoints, _, _ := unstructured.NestedSlice(mon.Object, "spec", "endpoints")
	if len(endpoints) != 1 {
		t.Fatalf("ServiceMonitor endpoints %v, want one", endpoints)
	}
	port, _, _ := unstructured.NestedString(endpoints[0].(map[string]any), "port")
	if !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == port }) {
		t.Errorf("ServiceMonitor scrapes port %q, which the metrics Service does not have", port)
	}
}

// TestManagerRunsWithTheDeployedRBAC proves the RBAC in config/ is enough and is what the
// operator uses: the rendered default kustomization is applied with kubectl, the manager runs as
// its service account with the Deployment's own flags (bind addresses moved to loopback), leads
// through its Lease, writes status, authorises a sender that the topic-sender ClusterRole
// allows, serves metrics to a metrics-reader only, and nothing it does is forbidden.
func TestManagerRunsWithTheDeployedRBAC(t *testing.T) {
	needsEnvtest(t)
	manifests, objs := renderKustomization(t, filepath.Join(repoRoot, "config", "default"))
	runKubectl(t, manifests, "--kubeconfig", kubeconfigPath, "apply", "--server-side", "--force-conflicts", "-f", "-")
	dep := typed[appsv1.Deployment](t, objs, "Deployment", "detour-controller-manager")
	identity := serviceAccountUser(t, dep.Namespace, dep.Spec.Template.Spec.ServiceAccountName)

	ns := newNamespace(t)
	b := startBroker(t, ns, "rbac-a", map[string]string{"app": "rbac"})
	createTopic(t, ns, "orders", "RbacOrders", "rbac")
	appToken := serviceAccountToken(t, ns, "app")
	promToken := serviceAccountToken(t, ns, "prometheus")
	ctx := context.Background()
	bindSender(t, ns, "app", "detour-topic-sender")
	if err := k8sClient.Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "prometheus-reads-detour-" + ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "detour-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "prometheus", Namespace: ns}},
	}); err != nil {
		t.Fatal(err)
	}

	metricsAddr, gatewayAddr := freeAddr(t), freeAddr(t)
	args := append(slices.Clone(dep.Spec.Template.Spec.Containers[0].Args),
		"--gateway-bind-address="+gatewayAddr,
		"--grpc-bind-address=127.0.0.1:0",
		"--metrics-bind-address="+metricsAddr,
		"--health-probe-bind-address=0",
		"--leader-election-namespace="+dep.Namespace, // in a pod this comes from the service account
		"--shutdown-delay=0s")
	if _, err := parseFlags(args, io.Discard); err != nil {
		t.Fatal(err)
	}
	logs, stop := startManagerAs(t, identity, args)
	waitLeadingAndWriting(t, dep.Namespace, ns, "orders")

	c := insecureClient()
	gatewayURL := "https://" + gatewayAddr
	a := postMessage(t, c, messagesURL(gatewayURL, ns, "orders"), "text/plain", appToken, []byte("order"))
	if a.status != http.StatusOK || storedCounts(b)[a.ok.MsgID] != 1 {
		t.Fatalf("a sender bound to detour-topic-sender: %d %+v; want 200 and stored", a.status, a.err)
	}
	if a := postMessage(t, c, messagesURL(gatewayURL, ns, "orders"), "text/plain", promToken, []byte("x")); a.status != http.StatusForbidden {
		t.Fatalf("the metrics reader sending: %d, want 403", a.status)
	}

	eventually(t, "the metrics endpoint", func() error {
		res, err := c.Get("https://" + metricsAddr + "/metrics")
		if err != nil {
			return err
		}
		res.Body.Close()
		return nil
	})
	for _, tc := range []struct {
		token string
		want  int
	}{{"", http.StatusUnauthorized}, {appToken, http.StatusForbidden}, {promToken, http.StatusOK}} {
		req, _ := http.NewRequest(http.MethodGet, "https://"+metricsAddr+"/metrics", nil)
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+tc.token)
		}
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != tc.want {
			t.Fatalf("GET /metrics: %d, want %d", res.StatusCode, tc.want)
		}
		if tc.want == http.StatusOK {
			for _, series := range []string{"detour_gateway_requests_total", "detour_sends_total"} {
				if !bytes.Contains(body, []byte(series)) {
					t.Errorf("metrics lack %s", series)
				}
			}
		}
	}
	stop() // what the operator does while stopping (releasing the Lease) must be allowed too
	if refused := logs.find("forbidden"); len(refused) > 0 {
		t.Errorf("the operator was refused by the API server:\n%s", strings.Join(refused, ""))
	}
}

// serviceAccountUser is an envtest user authenticated as ServiceAccount sa of namespace ns, with
// the groups the API server gives a ServiceAccount token, so RBAC bound to the ServiceAccount
// applies to it.
func serviceAccountUser(t *testing.T, ns, sa string) *envtest.AuthenticatedUser {
	t.Helper()
	user, err := testEnv.AddUser(envtest.User{
		Name:   "system:serviceaccount:" + ns + ":" + sa,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return user
}

// bindSender lets ServiceAccount sa of ns send to the namespace's Topics through ClusterRole role.
func bindSender(t *testing.T, ns, sa, role string) {
	t.Helper()
	if err := k8sClient.Create(context.Background(), &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa + "-sends"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: ns}},
	}); err != nil {
		t.Fatal(err)
	}
}

// waitLeadingAndWriting waits until a manager holds a leader Lease in leaseNamespace and has
// written FaultPolicy and Topic ns/name's status Ready, the Topic routed over its brokers: what
// only a leader whose runtime holds the route writes.
func waitLeadingAndWriting(t *testing.T, leaseNamespace, ns, name string) {
	t.Helper()
	ctx := context.Background()
	eventually(t, "leadership through a Lease", func() error {
		var leases coordinationv1.LeaseList
		if err := k8sClient.List(ctx, &leases, client.InNamespace(leaseNamespace)); err != nil {
			return err
		}
		for _, l := range leases.Items {
			if l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" {
				return nil
			}
		}
		return errors.New("no Lease held")
	})
	eventually(t, "the FaultPolicy's and the Topic's status", func() error {
		var fp routingv1alpha1.FaultPolicy
		if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &fp); err != nil {
			return err
		}
		if !apimeta.IsStatusConditionTrue(fp.Status.Conditions, "Ready") {
			return fmt.Errorf("FaultPolicy conditions %v", fp.Status.Conditions)
		}
		var topic routingv1alpha1.Topic
		if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &topic); err != nil {
			return err
		}
		if !apimeta.IsStatusConditionTrue(topic.Status.Conditions, "Ready") || topic.Status.BrokerCount == 0 {
			return fmt.Errorf("Topic conditions %v, %d brokers", topic.Status.Conditions, topic.Status.BrokerCount)
		}
		return nil
	})
}

// TestDockerfileBuildsTheManager checks what can be checked without a container engine: the
// build stage copies every folder holding a package the manager imports from this module, and
// the image's entrypoint is the command the Deployment runs.
func TestDockerfileBuildsTheManager(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	copied := map[string]bool{}
	entrypoint := ""
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) >= 3 && fields[0] == "COPY" && !strings.HasPrefix(fields[1], "--from") {
			for _, src := range fields[1 : len(fields)-1] {
				copied[strings.TrimSuffix(src, "/")] = true
			}
		}
		if len(fields) > 1 && fields[0] == "ENTRYPOINT" {
			entrypoint = strings.Join(fields[1:], " ")
		}
	}
	cmd := exec.Command("go", "list", "-deps", "-f", "{{if .Module}}{{if .Module.Main}}{{.Dir}}{{end}}{{end}}", "./cmd/manager")
	cmd.Dir = repoRoot
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, dir := range strings.Fields(string(out)) {
		rel, err := filepath.Rel(repoRoot, dir)
		if err != nil {
			t.Fatal(err)
		}
		top, _, _ := strings.Cut(filepath.ToSlash(rel), "/")
		if !copied[top] {
			t.Errorf("the manager imports %s, but the Dockerfile does not copy %s/", rel, top)
		}
	}
	for _, f := range []string{"go.mod", "go.sum"} {
		if !copied[f] {
			t.Errorf("the Dockerfile does not copy %s", f)
		}
	}
	_, objs := renderKustomization(t, filepath.Join(repoRoot, "config", "default"))
	dep := typed[appsv1.Deployment](t, objs, "Deployment", "detour-controller-manager")
	if want := fmt.Sprintf("[%q]", dep.Spec.Template.Spec.Containers[0].Command[0]); entrypoint != want {
		t.Errorf("ENTRYPOINT %s, but the Deployment runs %s", entrypoint, want)
	}
}
