package front

import (
	"context"
	"errors"
	"fmt"
	"sync"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
)

// maxAnswers bounds the answers a Resolver remembers. Clients choose the names they ask for, so
// unknown names must not grow it: once full, it starts over.
const maxAnswers = 16384

// Informers is what Remember needs of the manager's cache: the informers of Topics and Clusters.
type Informers interface {
	GetInformer(ctx context.Context, obj client.Object, opts ...cache.InformerGetOption) (cache.Informer, error)
}

// Remember makes r keep its answers (a Target, or not found) until a Topic or a Cluster is added,
// deleted or has its spec changed, as the informers of the manager's cache report it, so that a
// door's request costs a map read instead of an index list and a Get. Status writes, which
// change no answer, keep the answers. Call it once, after the cache has started; it returns once
// the informers' handlers have heard of every object, and until then r answers every request
// from the cache.
func (r *Resolver) Remember(ctx context.Context, informers Informers) error {
	a := &answers{m: map[answerKey]answer{}}
	handler := toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { a.forget() },
		UpdateFunc: func(old, cur any) {
			if specChanged(old, cur) {
				a.forget()
			}
		},
		DeleteFunc: func(any) { a.forget() },
	}
	var synced []toolscache.InformerSynced
	for _, obj := range []client.Object{&routingv1alpha1.Topic{}, &routingv1alpha1.Cluster{}} {
		inf, err := informers.GetInformer(ctx, obj)
		if err != nil {
			return err
		}
		reg, err := inf.AddEventHandler(handler)
		if err != nil {
			return err
		}
		synced = append(synced, reg.HasSynced)
	}
	// The handlers first hear of every object there is; answers are remembered from then on.
	if !toolscache.WaitForCacheSync(ctx.Done(), synced...) {
		return fmt.Errorf("the Topic and Cluster informers did not sync: %w", context.Cause(ctx))
	}
	r.answers.Store(a)
	return nil
}

// specChanged reports whether an update changed an object's spec (its generation), or cannot
// tell.
func specChanged(old, cur any) bool {
	o, ok1 := old.(client.Object)
	c, ok2 := cur.(client.Object)
	return !ok1 || !ok2 || o.GetGeneration() != c.GetGeneration()
}

// answerKey is one request a Resolver answers: by RocketMQ topic name (byTopic, or on a Cluster:
// byCluster) or by Topic resource name, in a namespace.
type answerKey struct {
	byTopic bool
	// byCluster is the Cluster a gateway request names a RocketMQ topic on (ResolveClusterTopic).
	byCluster       string
	namespace, name string
}

// answer is what a request was answered.
type answer struct {
	target Target
	err    error
}

// remembered reports whether err is an answer that holds until the Topics or Clusters change:
// none, or not found. Any other error (the cache failing) is asked again next time.
func remembered(err error) bool {
	return err == nil || errors.Is(err, ErrTopicNotFound)
}

// answers are a Resolver's remembered answers, forgotten all at once on any change. gen counts
// the changes, so that an answer worked out before a change is not kept after it.
type answers struct {
	mu  sync.RWMutex
	gen uint64
	m   map[answerKey]answer
}

// get is the answer to k, if remembered, and the generation to put a new one with.
func (a *answers) get(k answerKey) (answer, uint64, bool) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	v, ok := a.m[k]
	return v, a.gen, ok
}

// put remembers v as the answer to k, unless a change came since generation gen.
func (a *answers) put(gen uint64, k answerKey, v answer) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if gen != a.gen {
		return
	}
	if len(a.m) >= maxAnswers {
		clear(a.m)
	}
	a.m[k] = v
}

// forget drops every answer.
func (a *answers) forget() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.gen++
	clear(a.m)
}

// recall answers k from the remembered answers, or by resolve, remembering its answer.
func (r *Resolver) recall(k answerKey, resolve func() (Target, error)) (Target, error) {
	a := r.answers.Load()
	if a == nil {
		return resolve()
	}
	v, gen, ok := a.get(k)
	if ok {
		return v.target, v.err
	}
	target, err := resolve()
	if remembered(err) {
		a.put(gen, k, answer{target: target, err: err})
	}
	return target, err
}
