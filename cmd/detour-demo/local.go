package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
	"github.com/detourmq/detour/internal/demo"
	"github.com/detourmq/detour/internal/front"
	"github.com/detourmq/detour/internal/operator"
	"github.com/detourmq/detour/pkg/scope"
)

// runLocal is the demo: the demo environment, the operator in this process, traffic and the
// fault script, until the demo duration passes or ctx ends. Everything is stopped before it
// returns, in order: traffic, operator (gateway drained, runtime closed), brokers, control plane.
func runLocal(ctx context.Context, o *options, stdout, stderr io.Writer, force *forcedStop) error {
	logOut := stderr
	if o.demoLog != "-" {
		if err := os.MkdirAll(filepath.Dir(o.demoLog), 0o755); err != nil {
			return err
		}
		f, err := os.Create(o.demoLog)
		if err != nil {
			return err
		}
		defer f.Close()
		logOut = f
	}
	log := o.operator.Logger(logOut)
	ctrl.SetLogger(log)

	env, err := demo.StartEnv(ctx, demo.EnvOptions{
		AssetsDir:      o.localAssets,
		CRDDir:         o.localCRDs,
		SamplesDir:     o.localSamples,
		KubeconfigPath: o.demoKubeconfig,
		Progress:       stdout,
		OnControlPlane: func(stop func() error) { force.set(func() { _ = stop() }) },
	})
	if err != nil {
		return err
	}
	topic, policy, err := demoTopic(ctx, env)
	if err != nil {
		return errors.Join(err, env.Stop())
	}

	fmt.Fprintln(stdout, "demo: Starting the operator (controllers, runtime, send gateway)")
	op, err := operator.New(env.Config, &o.operator, log)
	if err != nil {
		return errors.Join(err, env.Stop())
	}
	opCtx, stopOp := context.WithCancel(context.Background())
	defer stopOp()
	opDone := make(chan error, 1)
	go func() { opDone <- op.Run(opCtx) }()

	// The demo ends early if the operator fails.
	demoCtx, stopDemo := context.WithCancel(ctx)
	defer stopDemo()
	var opErr error
	opFinished := make(chan struct{})
	go func() {
		defer close(opFinished)
		select {
		case opErr = <-opDone:
			stopDemo()
		case <-opCtx.Done():
			opErr = <-opDone
		}
	}()

	printInstructions(stdout, env, op, o, topic)
	_, runErr := demo.Run(demoCtx, demo.RunOptions{
		Runtime:  op.Runtime(),
		Env:      env,
		Target:   front.TopicTarget(topic),
		Policy:   policy,
		Victim:   o.demoVictimBroker,
		Duration: o.demoDuration,
		Phase:    o.demoPhase,
		Rate:     o.demoRate,
		Senders:  o.demoSenders,
		Out:      stdout,
	})
	fmt.Fprintln(stdout, "demo: Stopping the operator, the brokers and the control plane")
	stopOp()
	<-opFinished
	stopErr := env.Stop()
	if errors.Is(runErr, context.Canceled) {
		runErr = nil // interrupted by the user: a clean stop
	}
	return errors.Join(runErr, opErr, stopErr)
}

// demoTopic picks the Topic the demo sends to (the samples' "orders", else the first) and the
// runtime policy key of the FaultPolicy it references.
func demoTopic(ctx context.Context, env *demo.Env) (*routingv1alpha1.Topic, string, error) {
	var topics routingv1alpha1.TopicList
	if err := env.Client.List(ctx, &topics, client.InNamespace(env.Namespace)); err != nil {
		return nil, "", err
	}
	if len(topics.Items) == 0 {
		return nil, "", errors.New("the samples define no Topic to send to")
	}
	i := max(0, slices.IndexFunc(topics.Items, func(t routingv1alpha1.Topic) bool { return t.Name == "orders" }))
	t := &topics.Items[i]
	policy := ""
	if t.Spec.FaultPolicyRef != nil {
		policy = scope.PolicyKey(t.Namespace, t.Spec.FaultPolicyRef.Name)
	}
	return t, policy, nil
}

func printInstructions(out io.Writer, env *demo.Env, op *operator.Operator, o *options, topic *routingv1alpha1.Topic) {
	if env.KubeconfigPath != "" {
		fmt.Fprintf(out, "demo: In another terminal, watch the isolations the operator writes:\n\n"+
			"    kubectl --kubeconfig %s get faultpolicies -w\n\n", env.KubeconfigPath)
	}
	if url := op.GatewayURL(); url != "" {
		auth := ""
		if o.gatewayAuth {
			auth = "-H \"Authorization: Bearer $TOKEN\" "
		}
		fmt.Fprintf(out, "demo: Send a message yourself through the gateway:\n\n"+
			"    curl -s %s-H 'X-Detour-Tags: hello' --data 'hi' %s/v1/namespaces/%s/topics/%s/messages\n\n",
			auth, url, topic.Namespace, topic.Name)
	}
	log := o.demoLog
	if log == "-" {
		log = "stderr"
	}
	fmt.Fprintf(out, "demo: Operator log: %s. RocketMQ name server for other clients: %s. Ctrl-C stops everything.\n",
		log, env.NameServer.Addr())
}
