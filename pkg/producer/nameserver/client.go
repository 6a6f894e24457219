// Package nameserver is the runtime's client of RocketMQ name servers: a topic's route
// (GET_ROUTEINFO_BY_TOPIC) and a cluster's broker groups with their writability
// (GET_BROKER_CLUSTER_INFO). It asks and reads answers within bounds, nothing more: what the
// runtime keeps of a route, how often it asks again and what it does while no name server answers
// stay in pkg/producer, whose state they change.
package nameserver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/detourmq/detour/pkg/remoting"
)

// ErrAnswerRefused is wrapped by an error for a name server's answer beyond a bound
// (remoting.MaxNameServerBody, MaxRouteBrokers, MaxClusterBrokers, MaxQueueNums, name and
// address lengths): the answer was refused before anything was built from it.
var ErrAnswerRefused = errors.New("name server's answer refused")

// ErrTopicNotPublished is wrapped by the error of a route query the name server answered with
// TOPIC_NOT_EXIST.
var ErrTopicNotPublished = errors.New("topic not published by the name servers")

// Refused wraps an error that went beyond a bound with ErrAnswerRefused; other errors pass.
func Refused(err error) error {
	if errors.Is(err, remoting.ErrOverLimit) && !errors.Is(err, ErrAnswerRefused) {
		return fmt.Errorf("%w: %w", ErrAnswerRefused, err)
	}
	return err
}

// Errors are the failures of one round over a cluster's name servers, each prefixed with its
// address; errors.Is and errors.As see every one.
type Errors []error

// Error joins the failures on one line.
func (e Errors) Error() string {
	parts := make([]string, len(e))
	for i, err := range e {
		parts[i] = err.Error()
	}
	return strings.Join(parts, "; ")
}

// Unwrap returns the failures.
func (e Errors) Unwrap() []error { return e }

// Client asks name servers, with frames bounded by remoting.NameServerMaxFrameSize, each request
// waiting at most its timeout. It is safe for concurrent use.
type Client struct {
	wire    *remoting.Client
	timeout time.Duration
}

// New returns a client whose every request waits at most timeout.
func New(timeout time.Duration) *Client {
	return &Client{wire: remoting.NewClient(remoting.ClientOptions{MaxFrameSize: remoting.NameServerMaxFrameSize}), timeout: timeout}
}

// Close closes the client's connections.
func (c *Client) Close() error { return c.wire.Close() }

// ask sends one request to a name server, waiting at most the client's timeout.
func (c *Client) ask(ctx context.Context, ns string, req *remoting.Command) (*remoting.Command, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	return c.wire.Invoke(ctx, ns, req)
}

// Route asks the name server at addr for topic's route (GET_ROUTEINFO_BY_TOPIC). A topic the
// name server does not know is an error wrapping ErrTopicNotPublished; an answer beyond the
// bounds, one wrapping ErrAnswerRefused.
func (c *Client) Route(ctx context.Context, addr, topic string) (*remoting.TopicRouteData, error) {
	resp, err := c.ask(ctx, addr, remoting.NewGetRouteInfoRequest(topic))
	if err != nil {
		return nil, Refused(err)
	}
	if resp.Code == remoting.TopicNotExist {
		return nil, fmt.Errorf("%w (%s)", ErrTopicNotPublished, strings.TrimSpace(resp.Remark))
	}
	data, err := remoting.ParseRouteResponse(resp)
	return data, Refused(err)
}
