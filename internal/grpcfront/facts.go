package grpcfront

import (
	"context"
	"sync"
	"time"

	"github.com/detourmq/detour/pkg/producer"
	"github.com/detourmq/detour/pkg/rmqpb"
)

// What the endpoint knows of a topic from its brokers (its message.type attribute, the brokers'
// maxMessageSize) is kept in a cache, as the Proxy keeps topic configurations: a send never waits
// for a broker's configuration once its topic's route was queried or a send went before. An entry
// older than factsTTL is still used while a refresh runs in the background; the cache holds at
// most maxFactsEntries topics, dropping the oldest read when full.
const (
	// factsTTL is how long a topic's facts are used before they are read again: the Proxy's
	// topic-configuration cache refreshes as often, and a topic's type changes only by an admin.
	factsTTL = 20 * time.Second
	// factsRetry is how soon a reading that failed is tried again; meanwhile the rules that need
	// the facts are not applied (or applied with the facts last read).
	factsRetry = 2 * time.Second
	// factsReadTimeout bounds one reading of a topic's facts from its brokers.
	factsReadTimeout = 3 * time.Second
	// factsFirstWait bounds how long a call waits for a topic's first reading, so that brokers
	// slow to answer leave the call most of its time.
	factsFirstWait = time.Second
	// maxFactsEntries bounds the topics whose facts are kept.
	maxFactsEntries = 4096
)

// factsReader reads a route's facts from its brokers; the runtime's TopicFacts.
type factsReader func(ctx context.Context, route string) (producer.TopicFacts, error)

// topicFacts is the cache.
type topicFacts struct {
	read factsReader
	now  func() time.Time

	mu      sync.Mutex
	entries map[string]*factsEntry
}

// factsEntry is one route's facts; ok says a reading was ever tried to its end (facts are then
// unknown, MessageType "" and MaxMessageSize -1, when it failed). A reading in progress is waited
// on through done by callers with nothing to use meanwhile.
type factsEntry struct {
	facts      producer.TopicFacts
	ok         bool
	readAt     time.Time
	nextRead   time.Time
	refreshing bool
	done       chan struct{}
}

func newTopicFacts(read factsReader, now func() time.Time) *topicFacts {
	return &topicFacts{read: read, now: now, entries: map[string]*factsEntry{}}
}

// get returns route's facts: the cached ones (starting a refresh in the background when they are
// due), else the first reading's, waited for at most factsFirstWait within ctx. ok is false when
// no reading has ended yet.
func (c *topicFacts) get(ctx context.Context, route string) (producer.TopicFacts, bool) {
	c.mu.Lock()
	e := c.entries[route]
	if e == nil {
		c.evictLocked()
		e = &factsEntry{}
		c.entries[route] = e
	}
	if e.ok {
		if !e.refreshing && !c.now().Before(e.nextRead) {
			c.startLocked(route, e)
		}
		facts := e.facts
		c.mu.Unlock()
		return facts, true
	}
	if !e.refreshing {
		c.startLocked(route, e)
	}
	done := e.done
	c.mu.Unlock()
	wait := time.NewTimer(factsFirstWait)
	defer wait.Stop()
	select {
	case <-done:
	case <-ctx.Done():
		return producer.TopicFacts{}, false
	case <-wait.C:
		return producer.TopicFacts{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return e.facts, e.ok
}

// startLocked starts reading route's facts; c.mu is held.
func (c *topicFacts) startLocked(route string, e *factsEntry) {
	e.refreshing = true
	done := make(chan struct{})
	e.done = done
	go func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(context.Background(), factsReadTimeout)
		defer cancel()
		facts, err := c.read(ctx, route)
		c.mu.Lock()
		defer c.mu.Unlock()
		e.refreshing = false
		if err != nil {
			// Facts last read stay in use; a route never read has unknown facts until a later
			// reading, so that brokers that cannot say cost no round trip on every call.
			if !e.ok {
				e.facts, e.ok = producer.TopicFacts{MaxMessageSize: -1}, true
			}
			e.nextRead = c.now().Add(factsRetry)
			return
		}
		e.facts, e.ok, e.readAt, e.nextRead = facts, true, c.now(), c.now().Add(factsTTL)
	}()
}

// evictLocked drops the entry read longest ago when the cache is full; c.mu is held.
func (c *topicFacts) evictLocked() {
	if len(c.entries) < maxFactsEntries {
		return
	}
	var oldest string
	var at time.Time
	for k, e := range c.entries {
		if e.refreshing {
			continue
		}
		if oldest == "" || e.readAt.Before(at) {
			oldest, at = k, e.readAt
		}
	}
	if oldest != "" {
		delete(c.entries, oldest)
	}
}

// topicMessageType is the message type the Proxy reads off a message's properties: a half
// message is TRANSACTION, one with a delivery time DELAY, one with a message group FIFO, any
// other NORMAL; the type the client declares counts only for TRANSACTION.
func topicMessageType(o outgoing) string {
	switch {
	case o.transactional:
		return "TRANSACTION"
	case !o.deliverAt.IsZero():
		return "DELAY"
	case o.group != "":
		return "FIFO"
	}
	return "NORMAL"
}

// checkMessageType refuses a message whose type the topic does not take, as the Proxy's
// enableTopicMessageTypeCheck does: a MIXED topic takes every type, any other only its own.
func checkMessageType(topicType string, o outgoing) *rmqpb.Status {
	got := topicMessageType(o)
	if topicType == "MIXED" || topicType == got {
		return nil
	}
	return newStatus(rmqpb.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
		"the topic's message.type is %s but the message is %s (a message group makes it FIFO, a delivery time DELAY, the TRANSACTION type a half message): send it to a topic of its type or of type MIXED", topicType, got)
}

// acceptedTypesOf is what a route's queues advertise in accept_message_types for a topic of
// type t, as the Proxy lists them; all four types when the type is unknown (no broker said).
func acceptedTypesOf(t string, known bool) []rmqpb.MessageType {
	if !known || t == "" {
		return acceptedTypes
	}
	switch t {
	case "NORMAL":
		return []rmqpb.MessageType{rmqpb.MessageType_NORMAL}
	case "FIFO":
		return []rmqpb.MessageType{rmqpb.MessageType_FIFO}
	case "DELAY":
		return []rmqpb.MessageType{rmqpb.MessageType_DELAY}
	case "TRANSACTION":
		return []rmqpb.MessageType{rmqpb.MessageType_TRANSACTION}
	case "MIXED":
		return acceptedTypes
	}
	return []rmqpb.MessageType{rmqpb.MessageType_MESSAGE_TYPE_UNSPECIFIED}
}
