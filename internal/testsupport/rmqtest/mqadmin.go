package rmqtest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// MQAdmin runs RocketMQ's own admin command, mqadmin (the tools' MQAdminStartup, from the
// server class path), against the cluster's name server, and returns what it printed. args are
// mqadmin's: a subcommand and its options; -n (the name server) is added. A run that exits with
// an error, or prints RocketMQ's failure marker, fails with its output.
func (c *Cluster) MQAdmin(ctx context.Context, args ...string) (string, error) {
	dir := filepath.Join(c.dir, "mqadmin")
	if err := os.MkdirAll(filepath.Join(dir, "conf"), 0o755); err != nil {
		return "", err
	}
	argv := append([]string{"-Xms64m", "-Xmx128m"}, JVMFlags...)
	argv = append(argv, "-Duser.home="+dir, "-Drocketmq.home.dir="+dir, "-cp", c.Dist.ServerClassPath,
		"org.apache.rocketmq.tools.command.MQAdminStartup")
	argv = append(argv, args...)
	argv = append(argv, "-n", c.nsAddr)
	cmd := exec.CommandContext(ctx, "java", argv...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "ROCKETMQ_HOME="+dir)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	text := out.String()
	// mqadmin reports a failed command on its output and still exits 0.
	if err == nil && strings.Contains(text, "Exception") {
		err = fmt.Errorf("mqadmin reported a failure")
	}
	if err != nil {
		return text, fmt.Errorf("rmqtest: mqadmin %s: %w\n%s", strings.Join(args, " "), err, text)
	}
	return text, nil
}

// CreateTopicWithMQAdmin creates a topic on every broker of the cluster with RocketMQ's own
// `mqadmin updateTopic -c`, with queues read and write queues and, when msgType is set, its
// message.type attribute (NORMAL, FIFO, DELAY, TRANSACTION or MIXED), as an operator of a
// RocketMQ cluster creates one by hand.
func (c *Cluster) CreateTopicWithMQAdmin(ctx context.Context, topic string, queues int, msgType string) error {
	args := []string{"updateTopic", "-c", ClusterName, "-t", topic, "-r", fmt.Sprint(queues), "-w", fmt.Sprint(queues)}
	if msgType != "" {
		args = append(args, "-a", "+message.type="+msgType)
	}
	_, err := c.MQAdmin(ctx, args...)
	return err
}
