package quota

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// QueueWorkers is how many ClusterQueues (and LocalQueues) are reconciled at a time: each
// status write waits ~0.5 s on a loaded API server, and 500 queues one at a time took minutes.
const QueueWorkers = 4

// tracker remembers, per queue, the spec state last put in the cache (so the snapshot is rebuilt
// only when a spec really changed) and when its status was last written (so counters that move
// with every admission are written at most once per MinStatusInterval).
type tracker struct {
	mu        sync.Mutex
	seen      map[string]string
	lastWrite map[string]time.Time
}

func newTracker() *tracker {
	return &tracker{seen: map[string]string{}, lastWrite: map[string]time.Time{}}
}

// changed records a queue's spec state and reports whether it differs from the last one.
func (t *tracker) changed(key, state string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.seen[key] == state {
		return false
	}
	t.seen[key] = state
	return true
}

// forget drops a deleted queue.
func (t *tracker) forget(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.seen, key)
	delete(t.lastWrite, key)
}

// writeStatus writes want as obj's whole status when it differs from cur, unless the last write
// was less than MinStatusInterval ago: then it asks to be called again when it may write.
func (t *tracker) writeStatus(ctx context.Context, c client.Client, clk clock.PassiveClock, key string, obj client.Object, cur, want any) (reconcile.Result, error) {
	if equality.Semantic.DeepEqual(cur, want) {
		return reconcile.Result{}, nil
	}
	t.mu.Lock()
	wait := MinStatusInterval - clk.Since(t.lastWrite[key])
	t.mu.Unlock()
	if wait > 0 {
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	if err := c.Status().Patch(ctx, obj, statusPatch(want)); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	t.mu.Lock()
	t.lastWrite[key] = clk.Now()
	t.mu.Unlock()
	return reconcile.Result{}, nil
}
