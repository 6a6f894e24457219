package producer

import (
	"hash/maphash"
	"iter"
)

// topicShards is how many shards a topicMap spreads its topics over.
const topicShards = 256

var topicSeed = maphash.MakeSeed()

// topicMap is an immutable map from topic to V that snapshots share. Changing it copies the table
// of shards and the shards touched, not every topic: a route change among 20,000 topics costs
// what one among a hundred does, where copying the whole map cost 20,000 entries a change.
type topicMap[V any] struct {
	shards *[topicShards]map[string]V // nil: empty
	n      int
}

func shardOf(topic string) int { return int(maphash.String(topicSeed, topic) % topicShards) }

// Get returns topic's value.
func (m topicMap[V]) Get(topic string) (V, bool) {
	if m.shards == nil {
		var zero V
		return zero, false
	}
	v, ok := m.shards[shardOf(topic)][topic]
	return v, ok
}

// Len is the number of topics.
func (m topicMap[V]) Len() int { return m.n }

// All yields every topic and its value, in no particular order.
func (m topicMap[V]) All() iter.Seq2[string, V] {
	return func(yield func(string, V) bool) {
		if m.shards == nil {
			return
		}
		for _, sh := range m.shards {
			for k, v := range sh {
				if !yield(k, v) {
					return
				}
			}
		}
	}
}

// edit starts a batch of changes; m itself never changes.
func (m topicMap[V]) edit() *topicMapEdit[V] {
	e := &topicMapEdit[V]{n: m.n, shards: new([topicShards]map[string]V)}
	if m.shards != nil {
		*e.shards = *m.shards
	}
	return e
}

// With returns m with topic set to v.
func (m topicMap[V]) With(topic string, v V) topicMap[V] {
	e := m.edit()
	e.Set(topic, v)
	return e.Done()
}

// Without returns m without topic.
func (m topicMap[V]) Without(topic string) topicMap[V] {
	e := m.edit()
	e.Delete(topic)
	return e.Done()
}

// topicMapEdit is a batch of changes to a topicMap: every shard it touches is copied once.
type topicMapEdit[V any] struct {
	shards *[topicShards]map[string]V
	owned  [topicShards]bool
	n      int
}

func (e *topicMapEdit[V]) shard(topic string) map[string]V {
	i := shardOf(topic)
	if !e.owned[i] {
		old := e.shards[i]
		sh := make(map[string]V, len(old)+1)
		for k, v := range old {
			sh[k] = v
		}
		e.shards[i], e.owned[i] = sh, true
	}
	return e.shards[i]
}

// Set sets topic to v.
func (e *topicMapEdit[V]) Set(topic string, v V) {
	sh := e.shard(topic)
	if _, ok := sh[topic]; !ok {
		e.n++
	}
	sh[topic] = v
}

// Delete removes topic.
func (e *topicMapEdit[V]) Delete(topic string) {
	sh := e.shard(topic)
	if _, ok := sh[topic]; ok {
		delete(sh, topic)
		e.n--
	}
}

// Done returns the edited map; e must not be used afterwards.
func (e *topicMapEdit[V]) Done() topicMap[V] {
	return topicMap[V]{shards: e.shards, n: e.n}
}
