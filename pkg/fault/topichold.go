package fault

import "time"

// Holds for one topic. A broker that refuses a send because it lacks the topic (TOPIC_NOT_EXIST)
// is healthy for every other topic, and a probe proves only that it answers, not that it has the
// topic: readmitting it on the next good probe sends the topic's next messages back into the same
// refusal. So such a refusal holds the broker out for that topic alone (RefusedTopic), keyed by
// broker and topic, until the table's failure isolation ends or a check of that topic on that
// broker shows the topic (TopicShown). A topic one client names never takes the broker out for
// the others, and the hold is no failure: nothing is counted, nothing grows, the isolation limit
// does not count it (selection still falls back to a held broker when nothing else is left).

// MaxTopicHolds bounds the topics one broker is held out for at once. A new hold beyond it
// replaces the one that ends soonest, so no client naming topics can grow the table without bound.
const MaxTopicHolds = 16

// topicHold is one broker's hold for one topic.
type topicHold struct {
	topic        string
	since, until int64 // ticks: when the refusal came, when the hold ends
}

// TopicHold is a snapshot of one hold for one topic (see RefusedTopic).
type TopicHold struct {
	Broker, Topic string
	// Since is when the broker refused the topic; Until when the hold ends unless a check of the
	// topic on the broker ends it sooner.
	Since, Until time.Time
}

// HeldFor reports whether the broker is held out for topic (see RefusedTopic). It takes no lock
// and allocates nothing: one atomic load while the broker has no hold.
func (e *Entry) HeldFor(topic string) bool {
	p := e.topics.Load()
	if p == nil {
		return false
	}
	for i := range *p {
		if h := &(*p)[i]; h.topic == topic {
			return e.t.tick() < h.until
		}
	}
	return false
}

// RefusedTopic records that broker refused a send of topic because it lacks the topic
// (TOPIC_NOT_EXIST): the broker is held out for that topic, and for no other, for the table's
// failure isolation from now, unless TopicShown ends the hold sooner. A refusal during a hold
// starts it again from now. The broker's own state (availability, failures, reachable flag) is
// left alone. An unknown broker is left alone; nothing is recorded under SemanticsDisabled.
func (t *Tolerance) RefusedTopic(broker, topic string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.lookup(broker)
	if t.opts.Semantics == SemanticsDisabled || e == nil || !e.present {
		return
	}
	now := t.tick()
	next := liveHolds(e, now, topic, 1)
	if len(next) >= MaxTopicHolds {
		next = dropSoonest(next)
	}
	next = append(next, topicHold{topic: topic, since: now, until: now + int64(t.opts.Table.FailureIsolation())})
	e.topics.Store(&next)
}

// TopicShown records that a check of topic on broker (its topic configuration, asked of the
// broker itself) shows the topic: a hold for it ends now. Unknown brokers and topics without a
// hold are left alone.
func (t *Tolerance) TopicShown(broker, topic string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.lookup(broker)
	if e == nil || !e.present || !e.HeldFor(topic) {
		return
	}
	if next := liveHolds(e, t.tick(), topic, 0); len(next) > 0 {
		e.topics.Store(&next)
	} else {
		e.topics.Store(nil)
	}
}

// TopicHolds lists the holds for one topic that have not ended, by broker and topic, and drops
// those that have.
func (t *Tolerance) TopicHolds() []TopicHold {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.tick()
	var out []TopicHold
	for _, e := range *t.entries.Load() {
		if e.topics.Load() == nil || !e.present {
			continue
		}
		live := liveHolds(e, now, "", 0)
		for _, h := range live {
			out = append(out, TopicHold{Broker: e.name, Topic: h.topic, Since: t.timeOf(h.since), Until: t.timeOf(h.until)})
		}
		if len(live) == 0 {
			e.topics.Store(nil)
		}
	}
	return out
}

// liveHolds copies e's holds that have not ended at now, less any for topic, with room for spare
// more. The holds a reader may be scanning are never changed in place. Callers hold mu.
func liveHolds(e *Entry, now int64, topic string, spare int) []topicHold {
	p := e.topics.Load()
	if p == nil {
		return make([]topicHold, 0, spare)
	}
	next := make([]topicHold, 0, len(*p)+spare)
	for _, h := range *p {
		if now < h.until && h.topic != topic {
			next = append(next, h)
		}
	}
	return next
}

// dropSoonest removes the hold that ends soonest from holds.
func dropSoonest(holds []topicHold) []topicHold {
	soonest := 0
	for i, h := range holds {
		if h.until < holds[soonest].until {
			soonest = i
		}
	}
	return append(holds[:soonest], holds[soonest+1:]...)
}

// HasTopicHolds reports whether some broker is held out for a topic, or was until lately (a hold
// that ran out is dropped at the next write). It takes no lock.
func (t *Tolerance) HasTopicHolds() bool {
	for _, e := range *t.entries.Load() {
		if e.topics.Load() != nil {
			return true
		}
	}
	return false
}
