// Command kube is the node side of the end-to-end cluster in one binary: kubelet, kube-proxy,
// kube-scheduler and kube-controller-manager, built from the published k8s.io/kubernetes module
// (no prebuilt binary is downloaded). One binary links the shared packages once, which keeps the
// first build and the cache small. The component is the first argument:
//
//	kube kubelet --config=...
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	proxy "k8s.io/kubernetes/cmd/kube-proxy/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	kubelet "k8s.io/kubernetes/cmd/kubelet/app"
)

func main() {
	components := map[string]func() *cobra.Command{
		"kubelet":                 func() *cobra.Command { return kubelet.NewKubeletCommand(context.Background()) },
		"kube-proxy":              proxy.NewProxyCommand,
		"kube-scheduler":          func() *cobra.Command { return scheduler.NewSchedulerCommand() },
		"kube-controller-manager": controllermanager.NewControllerManagerCommand,
	}
	if len(os.Args) < 2 || components[os.Args[1]] == nil {
		fmt.Fprintln(os.Stderr, "usage: kube {kubelet|kube-proxy|kube-scheduler|kube-controller-manager} [flags]")
		os.Exit(2)
	}
	cmd := components[os.Args[1]]()
	cmd.SetArgs(os.Args[2:])
	os.Exit(cli.Run(cmd))
}
