package kubeauth

import (
	"container/list"
	"time"
)

// fairCache remembers answers for a while within bounds that keep any one owner (a user, or a
// client address) from pushing out the answers of others:
//   - an owner holds at most the cap given with each answer; beyond it, that owner's own least
//     recently used answer makes room;
//   - when the whole cache is full, expired answers go first, then the least recently used
//     answer of the owner holding the most, so a newcomer always finds room and only ever
//     displaces the biggest holder.
//
// It is not safe for concurrent use; Reviewer holds its lock around every call.
type fairCache[K comparable, V any] struct {
	max     int
	entries map[K]*list.Element   // of *fairEntry[K, V]
	owners  map[string]*list.List // each owner's entries, least recently used first
	// nextExpiry is no later than the earliest expiry held, so a full cache sweeps only when
	// something may have expired.
	nextExpiry time.Time
}

type fairEntry[K comparable, V any] struct {
	key     K
	owner   string
	value   V
	expires time.Time
}

func newFairCache[K comparable, V any](max int) *fairCache[K, V] {
	return &fairCache[K, V]{max: max, entries: make(map[K]*list.Element), owners: make(map[string]*list.List)}
}

// get returns the unexpired answer for k and marks it used.
func (c *fairCache[K, V]) get(k K, now time.Time) (V, bool) {
	var zero V
	el, ok := c.entries[k]
	if !ok {
		return zero, false
	}
	e := el.Value.(*fairEntry[K, V])
	if !now.Before(e.expires) {
		c.remove(el)
		return zero, false
	}
	c.owners[e.owner].MoveToBack(el)
	return e.value, true
}

// put remembers v for k until expires, charged to owner, who may hold at most ownerCap answers.
func (c *fairCache[K, V]) put(k K, owner string, ownerCap int, v V, expires, now time.Time) {
	if el, ok := c.entries[k]; ok {
		c.remove(el)
	}
	if mine := c.owners[owner]; mine != nil && mine.Len() >= ownerCap {
		c.remove(mine.Front())
	}
	if len(c.entries) >= c.max {
		c.makeRoom(now)
	}
	mine := c.owners[owner]
	if mine == nil {
		mine = list.New()
		c.owners[owner] = mine
	}
	c.entries[k] = mine.PushBack(&fairEntry[K, V]{key: k, owner: owner, value: v, expires: expires})
	if c.nextExpiry.IsZero() || expires.Before(c.nextExpiry) {
		c.nextExpiry = expires
	}
}

// makeRoom frees one place at least: every expired answer if any may have expired, else the
// least recently used answer of the owner holding the most. The scans are bounded by the
// cache's size and run only on a full cache, once per review made, and reviews are bounded
// per client.
func (c *fairCache[K, V]) makeRoom(now time.Time) {
	if !now.Before(c.nextExpiry) {
		c.nextExpiry = time.Time{}
		for _, el := range c.entries {
			e := el.Value.(*fairEntry[K, V])
			switch {
			case !now.Before(e.expires):
				c.remove(el)
			case c.nextExpiry.IsZero() || e.expires.Before(c.nextExpiry):
				c.nextExpiry = e.expires
			}
		}
		if len(c.entries) < c.max {
			return
		}
	}
	var biggest *list.List
	for _, l := range c.owners {
		if biggest == nil || l.Len() > biggest.Len() {
			biggest = l
		}
	}
	c.remove(biggest.Front())
}

func (c *fairCache[K, V]) remove(el *list.Element) {
	e := el.Value.(*fairEntry[K, V])
	delete(c.entries, e.key)
	mine := c.owners[e.owner]
	mine.Remove(el)
	if mine.Len() == 0 {
		delete(c.owners, e.owner)
	}
}

// held counts the answers owner holds, expired or not.
func (c *fairCache[K, V]) held(owner string) int {
	if l := c.owners[owner]; l != nil {
		return l.Len()
	}
	return 0
}

// reviewBudgets is a token bucket of reviews per client, for at most max clients. When full,
// the client that spent least recently is forgotten: its bucket has refilled the longest, so
// forgetting it gives away the least, and a new client always gets a bucket of its own (no
// client ever shares another's).
type reviewBudgets struct {
	rate, burst float64
	max         int
	order       *list.List // of *bucket, least recently spent first
	byClient    map[string]*list.Element
}

// bucket is a token bucket of reviews for one client.
type bucket struct {
	client string
	tokens float64
	at     time.Time
}

func newReviewBudgets(rate float64, max int) *reviewBudgets {
	return &reviewBudgets{rate: rate, burst: 2 * rate, max: max, order: list.New(), byClient: make(map[string]*list.Element)}
}

// spend takes one review from client's bucket, and reports whether there was one.
func (r *reviewBudgets) spend(client string, now time.Time) bool {
	el, ok := r.byClient[client]
	if !ok {
		if r.order.Len() >= r.max {
			oldest := r.order.Front()
			delete(r.byClient, oldest.Value.(*bucket).client)
			r.order.Remove(oldest)
		}
		el = r.order.PushBack(&bucket{client: client, tokens: r.burst, at: now})
		r.byClient[client] = el
	}
	r.order.MoveToBack(el)
	b := el.Value.(*bucket)
	b.tokens = min(r.burst, b.tokens+now.Sub(b.at).Seconds()*r.rate)
	b.at = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}
