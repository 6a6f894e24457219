package controllers

import (
	"context"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/detourmq/detour/pkg/facade"
)

// Event reasons of the name-server facade, recorded on the Topic whose route changed.
const (
	EventBrokerHidden = "BrokerHidden"
	EventBrokerShown  = "BrokerShown"
)

// FacadeEvents records an Event on the Topic whose route hid or showed a broker, at most one per
// topic, broker and direction a second.
type FacadeEvents struct {
	View     *FacadeView
	Recorder recorder.EventRecorder
	limit    *writeLimiter
	once     sync.Once
}

// Record is a facade.Options.OnChange.
func (e *FacadeEvents) Record(c facade.Change) {
	e.once.Do(func() { e.limit = newWriteLimiter(time.Second) })
	//docgen:not-identity a key of the Events' rate limit, never read back
	key := types.NamespacedName{Namespace: c.Topic, Name: c.Broker + "/" + strconv.FormatBool(c.Hidden)}
	if e.limit.wait(key) > 0 {
		return
	}
	e.limit.wrote(key)
	ctx, cancel := context.WithTimeout(context.Background(), viewTimeout)
	defer cancel()
	_, t, ok := e.View.topicOnCluster(ctx, c.Topic)
	if !ok {
		return
	}
	if c.Hidden {
		e.Recorder.Eventf(t, nil, corev1.EventTypeWarning, EventBrokerHidden, "HideBroker",
			"Broker %s published read-only to RocketMQ clients of %s: %s", c.Broker, c.Topic, c.Reason)
		return
	}
	e.Recorder.Eventf(t, nil, corev1.EventTypeNormal, EventBrokerShown, "ShowBroker",
		"Broker %s published writable again to RocketMQ clients of %s", c.Broker, c.Topic)
}
