package controllers

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
)

// kubectl runs the real kubectl against the envtest API server and returns its combined output.
func kubectl(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	path, err := exec.LookPath("kubectl")
	if err != nil {
		t.Fatalf("kubectl is required for this test: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, append([]string{"--kubeconfig", kubeconfigPath}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	return out.String(), err
}

// TestKubectlAppliesSamplesAndPrintsColumns proves a user's kubectl applies the samples and
// shows the printer columns of both kinds.
func TestKubectlAppliesSamplesAndPrintsColumns(t *testing.T) {
	needsEnvtest(t)
	ns := newNamespace(t)
	out, err := kubectl(t, "", "apply", "-n", ns, "-f", filepath.Join("..", "config", "samples"))
	if err != nil {
		t.Fatalf("kubectl apply -f config/samples: %v\n%s", err, out)
	}
	for _, want := range []string{"faultpolicy.routing.detour.dev/default created", "topic.routing.detour.dev/orders created"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl apply output lacks %q:\n%s", want, out)
		}
	}

	out, err = kubectl(t, "", "get", "faultpolicies", "-n", ns)
	if err != nil {
		t.Fatalf("kubectl get faultpolicies: %v\n%s", err, out)
	}
	if header := strings.Fields(firstLine(out)); strings.Join(header, " ") != "NAME BEHAVIOR BROKERS ISOLATED READY AGE" {
		t.Errorf("kubectl get faultpolicies header = %q, want NAME BEHAVIOR BROKERS ISOLATED READY AGE", header)
	}
	if !strings.Contains(out, "default") || !strings.Contains(out, "strict") {
		t.Errorf("kubectl get faultpolicies lacks the samples:\n%s", out)
	}

	out, err = kubectl(t, "", "get", "topics.routing.detour.dev", "-n", ns)
	if err != nil {
		t.Fatalf("kubectl get topics: %v\n%s", err, out)
	}
	if header := strings.Join(strings.Fields(firstLine(out)), " "); header != "NAME TOPIC BROKERS AVAILABLE READY AGE" {
		t.Errorf("kubectl get topics header = %q, want NAME TOPIC BROKERS AVAILABLE READY AGE", header)
	}
	if !strings.Contains(out, "TopicTest") {
		t.Errorf("kubectl get topics lacks the topic name column:\n%s", out)
	}

	out, err = kubectl(t, "", "get", "detour", "-n", ns, "-o", "name")
	if err != nil {
		t.Fatalf("kubectl get detour (the category): %v\n%s", err, out)
	}
	if strings.Count(out, "\n") != 3 {
		t.Errorf("kubectl get detour lists %q, want the three samples", out)
	}
}

// TestKubectlRefusesDecreasingThresholds proves a user applying a FaultPolicy whose thresholds
// decrease sees the rule's message and nothing is created.
func TestKubectlRefusesDecreasingThresholds(t *testing.T) {
	needsEnvtest(t)
	ns := newNamespace(t)
	manifest := `apiVersion: routing.detour.dev/v1alpha1
kind: FaultPolicy
metadata:
  name: backwards
spec:
  rules:
  - latencyMillis: 500
    isolationMillis: 1000
  - latencyMillis: 100
    isolationMillis: 2000
`
	out, err := kubectl(t, manifest, "apply", "-n", ns, "-f", "-")
	if err == nil {
		t.Fatalf("kubectl apply accepted decreasing thresholds:\n%s", out)
	}
	if !strings.Contains(out, "rules must be strictly increasing in latencyMillis") {
		t.Errorf("kubectl apply output lacks the rule's message:\n%s", out)
	}
	var list routingv1alpha1.FaultPolicyList
	if err := k8sClient.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatalf("listing FaultPolicies: %v", err)
	}
	if len(list.Items) != 0 {
		t.Errorf("a refused FaultPolicy was stored: %v", list.Items)
	}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
