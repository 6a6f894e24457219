package main

import (
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	detourscheme "github.com/detourmq/detour/internal/scheme"
)

// controlPlane is envtest's API server and etcd, a client of it, and a kubeconfig for the manager.
type controlPlane struct {
	env        *envtest.Environment
	config     *rest.Config
	client     client.Client
	kubeconfig string
}

// startControlPlane starts envtest with the project's CRDs and writes an administrator's
// kubeconfig into dir.
func startControlPlane(dir string) (*controlPlane, error) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		return nil, fmt.Errorf("KUBEBUILDER_ASSETS is not set: KUBEBUILDER_ASSETS=$(hack/setup-envtest.sh) go run ./hack/scalemanager")
	}
	cp := &controlPlane{env: &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}}
	cfg, err := cp.env.Start()
	if err != nil {
		_ = cp.env.Stop()
		return nil, fmt.Errorf("starting envtest (run from the repository's root): %w", err)
	}
	// Creating and clearing ten thousand Topics must not wait on the default 5 requests a second.
	cfg.QPS, cfg.Burst = 2000, 4000
	cp.config = cfg
	if err := cp.connect(dir); err != nil {
		cp.stop()
		return nil, err
	}
	return cp, nil
}

// connect makes the client and the manager's kubeconfig.
func (cp *controlPlane) connect(dir string) error {
	scheme, err := detourscheme.New()
	if err != nil {
		return err
	}
	if cp.client, err = client.New(cp.config, client.Options{Scheme: scheme}); err != nil {
		return err
	}
	user, err := cp.env.AddUser(envtest.User{Name: "scale-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return err
	}
	data, err := user.KubeConfig()
	if err != nil {
		return err
	}
	cp.kubeconfig = filepath.Join(dir, "kubeconfig")
	return os.WriteFile(cp.kubeconfig, data, 0o600)
}

// stop stops envtest.
func (cp *controlPlane) stop() {
	if err := cp.env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping envtest:", err)
	}
}
