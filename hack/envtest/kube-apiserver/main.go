// Command kube-apiserver is the Kubernetes API server, built from the published
// k8s.io/kubernetes module so the envtest control plane needs no prebuilt binary.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
