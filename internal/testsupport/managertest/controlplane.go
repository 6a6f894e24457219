// Package managertest runs the manager as users run it, the cmd/manager binary against a
// kubeconfig, for measurements of the operator as deployed: an envtest control plane with the
// project's CRDs and an administrator's kubeconfig, the binary built as the image builds it, and
// a running manager's addresses, CPU time, memory and CPU profiles.
package managertest

import (
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	detourscheme "github.com/detourmq/detour/internal/scheme"
)

// ControlPlane is envtest's API server and etcd, a client of it, and a kubeconfig for the
// manager.
type ControlPlane struct {
	env *envtest.Environment
	// Config is an administrator's REST config, with a high client-side rate limit.
	Config *rest.Config
	// Client is an administrator's client with the project's scheme.
	Client client.Client
	// Kubeconfig is the path of an administrator's kubeconfig, for the manager.
	Kubeconfig string
}

// StartControlPlane starts envtest with the CRDs of the repository at root and writes an
// administrator's kubeconfig into dir. KUBEBUILDER_ASSETS must name the control plane's binaries.
func StartControlPlane(root, dir string) (*ControlPlane, error) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		return nil, fmt.Errorf("KUBEBUILDER_ASSETS is not set: KUBEBUILDER_ASSETS=$(hack/setup-envtest.sh)")
	}
	cp := &ControlPlane{env: &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(root, "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}}
	cfg, err := cp.env.Start()
	if err != nil {
		_ = cp.env.Stop()
		return nil, fmt.Errorf("starting envtest: %w", err)
	}
	// Creating and clearing thousands of objects must not wait on the default 5 requests a second.
	cfg.QPS, cfg.Burst = 2000, 4000
	cp.Config = cfg
	if err := cp.connect(dir); err != nil {
		_ = cp.Stop()
		return nil, err
	}
	return cp, nil
}

// connect makes the client and the manager's kubeconfig.
func (cp *ControlPlane) connect(dir string) error {
	scheme, err := detourscheme.New()
	if err != nil {
		return err
	}
	if cp.Client, err = client.New(cp.Config, client.Options{Scheme: scheme}); err != nil {
		return err
	}
	user, err := cp.env.AddUser(envtest.User{Name: "bench-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return err
	}
	data, err := user.KubeConfig()
	if err != nil {
		return err
	}
	cp.Kubeconfig = filepath.Join(dir, "kubeconfig")
	return os.WriteFile(cp.Kubeconfig, data, 0o600)
}

// Stop stops envtest.
func (cp *ControlPlane) Stop() error {
	if err := cp.env.Stop(); err != nil {
		return fmt.Errorf("stopping envtest: %w", err)
	}
	return nil
}
