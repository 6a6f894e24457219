//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestHelmChartTakesOverAndSends: a user moving from config/default to the chart removes the
// Deployment and PodDisruptionBudget (the chart's selectors add the release, which a Deployment
// cannot change), installs charts/detour over the rest (`--take-ownership`: same names, same
// namespace; `--force-conflicts`: the Services' selectors were kubectl's under server-side apply)
// and sends through the gateway as before.
func TestHelmChartTakesOverAndSends(t *testing.T) {
	k := deploy(t)
	helm := os.Getenv("DETOUR_HELM")
	if helm == "" {
		t.Fatal("DETOUR_HELM is unset: run the suite with `make test-e2e`, which builds helm (hack/setup-helm.sh)")
	}
	if _, err := k.kubectl(nil, "-n", operatorNamespace, "delete", "deployment/detour-controller-manager",
		"poddisruptionbudget/detour-controller-manager", "--wait=true", "--timeout=120s"); err != nil {
		t.Fatal(err)
	}
	// The Deployment's pods go in the background: the chart starts from none of them.
	eventually(t, 2*time.Minute, "the old manager pods gone", func() error {
		pods, err := k.cs.CoreV1().Pods(operatorNamespace).List(context.Background(), metav1.ListOptions{LabelSelector: "control-plane=controller-manager"})
		if err != nil {
			return err
		}
		if n := len(pods.Items); n > 0 {
			return fmt.Errorf("%d left", n)
		}
		return nil
	})
	chart, err := filepath.Abs("../../charts/detour")
	if err != nil {
		t.Fatal(err)
	}
	repo, tag, _ := strings.Cut(managerImage, ":")
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, helm, "--kubeconfig", k.kubeconfig, "install", "detour", chart,
		"--namespace", operatorNamespace, "--take-ownership", "--force-conflicts",
		"--set", "image.repository="+repo, "--set", "image.tag="+tag,
		"--wait", "--timeout", "4m").CombinedOutput()
	if err != nil {
		t.Fatalf("helm install: %v\n%s", err, out)
	}
	t.Logf("helm install: both replicas Ready in %v", time.Since(start).Round(100*time.Millisecond))
	if _, err := k.kubectl(nil, "-n", operatorNamespace, "rollout", "status", "deployment/detour-controller-manager", "--timeout=180s"); err != nil {
		t.Fatal(err)
	}
	if err := k.waitEveryReplicaRoutes(t); err != nil {
		t.Fatal(err)
	}
	// The gateway Service's selector changed with the chart: it answers again once kube-proxy has
	// the new pods (the takeover itself is a gap in service, as the Deployment was replaced).
	token := k.token(t, "sender")
	eventually(t, time.Minute, "the gateway Service answers through the chart's pods", func() error {
		r, err := k.send(httpsClient(), token, "after the takeover")
		if err != nil || r.status != http.StatusOK {
			return fmt.Errorf("%+v %v", r, err)
		}
		return nil
	})
	tr := k.startTraffic(t, token, 4, 100*time.Millisecond)
	k.waitAcked(t, tr, 80)
	tr.finish(t)
}
