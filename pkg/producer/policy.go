package producer

import (
	"fmt"
	"slices"
	"time"

	"github.com/detourmq/detour/pkg/fault"
)

// RocketMQ 5.x producer defaults (DefaultMQProducer and its fault strategy).
const (
	DefaultAttempts      = 3
	DefaultSendTimeout   = 3000 * time.Millisecond
	DefaultProbeInterval = 2000 * time.Millisecond
	DefaultProbeTimeout  = 200 * time.Millisecond
)

// DefaultRetryCodes is RocketMQ 5.3.1+'s retryResponseCodes set: TOPIC_NOT_EXIST, SERVICE_NOT_AVAILABLE,
// SYSTEM_ERROR, SYSTEM_BUSY, NO_PERMISSION, NO_BUYER_ID, NOT_IN_CURRENT_UNIT and GO_AWAY.
var DefaultRetryCodes = []int16{17, 14, 1, 2, 16, 204, 205, 1500}

// RetryPolicy says how many times a send is tried and within which time budget.
type RetryPolicy struct {
	// Attempts is 1 + RocketMQ's retryTimesWhenSendFailed; 0 means DefaultAttempts.
	Attempts int
	// SendTimeout is the budget for all attempts together (RocketMQ's sendMsgTimeout); 0 means
	// DefaultSendTimeout. A context deadline that comes earlier wins.
	SendTimeout time.Duration
	// PerAttemptTimeout caps every attempt but the last (RocketMQ 5.3.3's
	// sendMsgMaxTimeoutPerRequest), so one hung broker cannot eat the whole budget. 0 means no cap.
	PerAttemptTimeout time.Duration
	// RetryOnCodes are the broker response codes that are retried on another broker. nil means
	// DefaultRetryCodes; an empty non-nil slice retries no broker code.
	RetryOnCodes []int16
	// RetryAnotherBrokerWhenNotStoreOK retries when the broker stored the message but reported
	// FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT or SLAVE_NOT_AVAILABLE.
	RetryAnotherBrokerWhenNotStoreOK bool
}

// ProbePolicy configures active recovery checks of isolated brokers (GET_MAX_OFFSET).
type ProbePolicy struct {
	// Enabled turns the probe loop on; the fault table then ends isolations only on a good probe.
	Enabled bool
	// Interval between probe rounds; 0 means DefaultProbeInterval.
	Interval time.Duration
	// Timeout of one probe; 0 means DefaultProbeTimeout.
	Timeout time.Duration
}

// Policy is a fault policy: one fault table shared by every topic that references it.
type Policy struct {
	// Name identifies the policy; routes reference it by name. "" is the runtime's default policy.
	Name string
	// Table is the latency-to-isolation table; nil means the RocketMQ5 preset.
	Table *fault.Table
	// Retry configures attempts and time budgets.
	Retry RetryPolicy
	// Probe configures the recovery probe loop.
	Probe ProbePolicy
	// MaxIsolatedPercent caps the share of brokers isolated at once; 0 or 100 means no cap.
	MaxIsolatedPercent int
	// RespectPodHealth keeps brokers whose pods are not ready or terminating out of selection
	// while other brokers remain.
	RespectPodHealth bool
	// GrowOnRepeat lengthens isolation on consecutive failures.
	GrowOnRepeat bool
}

// DefaultPolicy is RocketMQ 5.x's behaviour with fault tolerance on: the RocketMQ5 table, three
// attempts within 3000 ms, RocketMQ 5.x's retry codes, no probing, pod health respected.
func DefaultPolicy(name string) Policy {
	return Policy{
		Name: name,
		Retry: RetryPolicy{
			Attempts:     DefaultAttempts,
			SendTimeout:  DefaultSendTimeout,
			RetryOnCodes: slices.Clone(DefaultRetryCodes),
		},
		Probe:            ProbePolicy{Interval: DefaultProbeInterval, Timeout: DefaultProbeTimeout},
		RespectPodHealth: true,
	}
}

// normalize fills defaults and checks ranges; it returns a copy that shares nothing mutable with p.
func (p Policy) normalize() (Policy, error) {
	if p.Retry.Attempts < 0 {
		return p, fmt.Errorf("policy %q: retry attempts %d must not be negative", p.Name, p.Retry.Attempts)
	}
	if p.Retry.Attempts == 0 {
		p.Retry.Attempts = DefaultAttempts
	}
	if p.Retry.SendTimeout < 0 || p.Retry.PerAttemptTimeout < 0 {
		return p, fmt.Errorf("policy %q: retry timeouts must not be negative", p.Name)
	}
	if p.Retry.SendTimeout == 0 {
		p.Retry.SendTimeout = DefaultSendTimeout
	}
	if p.Retry.RetryOnCodes == nil {
		p.Retry.RetryOnCodes = DefaultRetryCodes
	}
	p.Retry.RetryOnCodes = slices.Clone(p.Retry.RetryOnCodes)
	if p.Probe.Interval < 0 || p.Probe.Timeout < 0 {
		return p, fmt.Errorf("policy %q: probe interval and timeout must not be negative", p.Name)
	}
	if p.Probe.Interval == 0 {
		p.Probe.Interval = DefaultProbeInterval
	}
	if p.Probe.Timeout == 0 {
		p.Probe.Timeout = DefaultProbeTimeout
	}
	if p.MaxIsolatedPercent < 0 || p.MaxIsolatedPercent > 100 {
		return p, fmt.Errorf("policy %q: maxIsolatedPercent %d must be within 0..100", p.Name, p.MaxIsolatedPercent)
	}
	if p.Table == nil {
		t, err := fault.PresetTable("RocketMQ5")
		if err != nil {
			return p, fmt.Errorf("policy %q: %w", p.Name, err)
		}
		p.Table = t
	}
	return p, nil
}

// retries reports whether code is one of the policy's retry codes. The set is small (8 by
// default), so a linear scan beats a map here and allocates nothing.
func (p *Policy) retries(code int16) bool {
	return slices.Contains(p.Retry.RetryOnCodes, code)
}
