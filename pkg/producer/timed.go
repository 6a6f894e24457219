package producer

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/detourmq/detour/pkg/remoting"
)

// DelayLevels are the delays of RocketMQ 4.x's default messageDelayLevel
// ("1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"), level 1 first.
var DelayLevels = [...]time.Duration{
	time.Second, 5 * time.Second, 10 * time.Second, 30 * time.Second,
	time.Minute, 2 * time.Minute, 3 * time.Minute, 4 * time.Minute, 5 * time.Minute, 6 * time.Minute,
	7 * time.Minute, 8 * time.Minute, 9 * time.Minute, 10 * time.Minute, 20 * time.Minute, 30 * time.Minute,
	time.Hour, 2 * time.Hour,
}

// MaxTimerDelay is how far ahead a 5.x broker takes a timer message by default
// (timerMaxDelaySec, 3 days); it refuses later ones.
const MaxTimerDelay = 72 * time.Hour

// timerPrecision is a 5.x broker's default timerPrecisionMs. The broker rounds a delivery time
// down to it (a time on the mark to the mark before), so a message asked for at T could be
// delivered up to a second early; a send asks for the mark after the one at or after T.
const timerPrecision = time.Second

// ErrTimedDeliveryUnsupported is matched (errors.Is) by the error of a timed send the route's
// brokers cannot carry out as asked: a delay beyond what their line supports, or brokers of
// different lines.
var ErrTimedDeliveryUnsupported = errors.New("timed delivery unsupported")

// Line is a broker's RocketMQ release line, as the version in its answers' headers says.
type Line int

// Lines of RocketMQ brokers.
const (
	LineUnknown Line = iota
	// Line4 brokers (4.x) delay messages by level only (the DELAY property).
	Line4
	// Line5 brokers (5.x) deliver timer messages at a time (TIMER_DELIVER_MS).
	Line5
)

func (l Line) String() string {
	switch l {
	case Line4:
		return "4.x"
	case Line5:
		return "5.x"
	}
	return "unknown"
}

// lineTTL is how long a broker's line is trusted before it is asked again (an upgrade restarts
// the broker).
const lineTTL = time.Minute

// knownLine is a broker's line and when it was learnt.
type knownLine struct {
	line Line
	at   time.Time
}

// SendTimed sends m to be delivered to consumers not before deliverAt (see SendTimedRoute).
func (r *Runtime) SendTimed(ctx context.Context, m *Message, deliverAt time.Time) (*SendResult, error) {
	return r.SendTimedRoute(ctx, topicOf(m), m, deliverAt)
}

// SendTimedRoute sends m by the route whose key is route, to be delivered to consumers not before
// deliverAt, as the route's brokers' line supports: a 5.x broker gets a timer message
// (TIMER_DELIVER_MS, asked for the second mark after deliverAt because the broker rounds down),
// up to MaxTimerDelay ahead; a 4.x broker gets the shortest of DelayLevels (the default
// messageDelayLevel) that is not shorter than the delay, up to two hours. The line is read from
// the version in each broker's answer to GET_BROKER_RUNTIME_INFO, remembered for a minute. A delay the line cannot
// carry out, or a route over brokers of both lines, is refused before the message is sent, with
// an error matching ErrTimedDeliveryUnsupported; a time already past sends the message plainly.
// Selection, retries and isolation are those of Send.
func (r *Runtime) SendTimedRoute(ctx context.Context, route string, m *Message, deliverAt time.Time) (*SendResult, error) {
	begin := r.now()
	var c sendCall
	if err := c.open(r, ctx, route, m, ModeSync, begin); err != nil {
		return nil, err
	}
	if delay := deliverAt.Sub(begin); delay > 0 {
		if err := c.addTimedProperty(ctx, delay, deliverAt); err != nil {
			return nil, err
		}
	}
	return c.run()
}

// addTimedProperty adds the property that asks the route's brokers for delivery after delay, at
// deliverAt, in their line's terms; a delay the line cannot carry out releases the send.
func (c *sendCall) addTimedProperty(ctx context.Context, delay time.Duration, deliverAt time.Time) error {
	line, err := c.r.routeLine(ctx, c.rt)
	if err == nil {
		var prop string
		if prop, err = timedProperty(line, delay, deliverAt); err == nil {
			return c.addProperties(prop)
		}
	}
	c.release()
	return err
}

// timedProperty is the property that asks a broker of line for delivery after delay, at
// deliverAt.
func timedProperty(line Line, delay time.Duration, deliverAt time.Time) (string, error) {
	switch line {
	case Line5:
		if delay > MaxTimerDelay {
			return "", fmt.Errorf("%w: 5.x brokers take timer messages at most %v ahead (timerMaxDelaySec), asked for %v",
				ErrTimedDeliveryUnsupported, MaxTimerDelay, delay.Round(time.Second))
		}
		p := timerPrecision.Milliseconds()
		at := (deliverAt.UnixMilli()+p-1)/p*p + p
		return remoting.EncodeProperty(remoting.PropertyTimerDeliverMS, strconv.FormatInt(at, 10)), nil
	case Line4:
		for i, d := range DelayLevels {
			if d >= delay {
				return remoting.EncodeProperty(remoting.PropertyDelayLevel, strconv.Itoa(i+1)), nil
			}
		}
		return "", fmt.Errorf("%w: 4.x brokers delay messages by level, at most %v (level %d), asked for %v",
			ErrTimedDeliveryUnsupported, DelayLevels[len(DelayLevels)-1], len(DelayLevels), delay.Round(time.Second))
	}
	return "", fmt.Errorf("%w: the brokers' RocketMQ line is unknown", ErrTimedDeliveryUnsupported)
}

// routeLine is the line of every broker rt routes to, or an error when they differ or one cannot
// be asked.
func (r *Runtime) routeLine(ctx context.Context, rt *route) (Line, error) {
	line := LineUnknown
	var first string
	for i := 0; i < len(rt.queues); i += int(rt.queues[i].rest) {
		b := rt.queues[i].b
		l, err := r.lineOf(ctx, b.addr)
		if err != nil {
			return LineUnknown, fmt.Errorf("asking broker %s for its version before a timed send: %w", b.name, err)
		}
		if line != LineUnknown && l != line {
			return LineUnknown, fmt.Errorf("%w: the route's brokers run different lines (%s %s, %s %s)",
				ErrTimedDeliveryUnsupported, first, line, b.name, l)
		}
		line, first = l, b.name
	}
	return line, nil
}

// v5_0_0 is RocketMQ's version number (MQVersion.Version.V5_0_0.ordinal()) of 5.0.0.
const v5_0_0 = 413

// lineOf returns the line of the broker at addr, asking it when not known within lineTTL. A
// broker puts its version number (MQVersion.CURRENT_VERSION) in the header of every answer, a
// refusal included: a broker just started answers GET_BROKER_RUNTIME_INFO with SYSTEM_ERROR
// until its statistics have a first sample, and its version all the same.
func (r *Runtime) lineOf(ctx context.Context, addr string) (Line, error) {
	if v, ok := r.lines.Load(addr); ok {
		if k := v.(knownLine); time.Since(k.at) < lineTTL {
			return k.line, nil
		}
	}
	actx, cancel := context.WithTimeout(ctx, heartbeatTimeout)
	defer cancel()
	resp, err := r.client.Invoke(actx, addr, remoting.NewGetBrokerRuntimeInfoRequest())
	if err != nil {
		return LineUnknown, err
	}
	var l Line
	switch {
	case resp.Version >= v5_0_0:
		l = Line5
	case resp.Version > 0:
		l = Line4
	default:
		return LineUnknown, fmt.Errorf("%w: the broker names its version %d", ErrTimedDeliveryUnsupported, resp.Version)
	}
	r.lines.Store(addr, knownLine{line: l, at: time.Now()})
	return l, nil
}
