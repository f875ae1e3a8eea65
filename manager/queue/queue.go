// Package queue holds the manager's pending workloads: the engine's per-ClusterQueue heaps behind
// a lock, backoff timers for evicted workloads, and the wake-up signal of the scheduling loop.
package queue

import (
	"sort"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/fleetq/fleetq/internal/engine"
	enginequeue "github.com/fleetq/fleetq/internal/engine/queue"
)

// Queues is safe for concurrent use; the scheduler holds it (Lock) for the length of a cycle.
type Queues struct {
	mu    sync.Mutex
	q     *enginequeue.Manager
	clock clock.WithTickerAndDelayedExecution

	// delayed holds workloads backing off after an eviction, with their timers.
	delayed map[string]*delayedWorkload
	// where remembers each queued workload's LocalQueue (namespace/name) and ClusterQueue.
	where map[string]place
	// pending counts, per LocalQueue, its workloads in where and delayed; backingOff counts,
	// per ClusterQueue, its workloads in delayed. Kept as they change, since queue status reads
	// them for every queue and a scan of 20,000 workloads per read held the lock for long.
	pending, backingOff map[string]int

	signal chan struct{}

	// OnChange, when set, hears which ClusterQueue and LocalQueue (namespace/name) gained or
	// lost a pending workload, for their status counts; it must not block.
	OnChange func(clusterQueue, localQueue string)
}

type place struct{ localQueue, clusterQueue string }

type delayedWorkload struct {
	wl    *engine.Workload
	lq    string
	timer clock.Timer
}

// New returns empty queues that measure backoff with clk.
func New(clk clock.WithTickerAndDelayedExecution) *Queues {
	return &Queues{
		q:          enginequeue.New(),
		clock:      clk,
		delayed:    map[string]*delayedWorkload{},
		where:      map[string]place{},
		pending:    map[string]int{},
		backingOff: map[string]int{},
		signal:     make(chan struct{}, 1),
	}
}

// Signal is readable when a cycle may admit something new.
func (q *Queues) Signal() <-chan struct{} { return q.signal }

func (q *Queues) notify() {
	select {
	case q.signal <- struct{}{}:
	default:
	}
}

// Add queues a pending workload (or replaces it) and wakes the scheduler. A workload whose
// backoff ends after now waits for it first.
func (q *Queues) Add(wl *engine.Workload, localQueue string, requeueAt time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.deleteLocked(wl.Key)
	if wait := requeueAt.Sub(q.clock.Now()); !requeueAt.IsZero() && wait > 0 {
		d := &delayedWorkload{wl: wl, lq: localQueue}
		d.timer = q.clock.AfterFunc(wait, func() { q.backoffDone(wl.Key, d) })
		q.setDelayed(wl.Key, d)
		q.changed(wl.ClusterQueue, localQueue)
		return
	}
	q.q.Add(wl)
	q.setPlace(wl.Key, place{localQueue, wl.ClusterQueue})
	q.changed(wl.ClusterQueue, localQueue)
	q.notify()
}

func (q *Queues) backoffDone(key string, d *delayedWorkload) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.delayed[key] != d {
		return // replaced or deleted meanwhile
	}
	q.dropDelayed(key, d)
	q.q.Add(d.wl)
	q.setPlace(key, place{d.lq, d.wl.ClusterQueue})
	q.notify()
}

// Delete forgets a workload (admitted, finished, deleted or no longer routable).
func (q *Queues) Delete(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.deleteLocked(key)
}

func (q *Queues) deleteLocked(key string) {
	q.q.Delete(key)
	if p, ok := q.where[key]; ok {
		delete(q.where, key)
		decrement(q.pending, p.localQueue)
		q.changed(p.clusterQueue, p.localQueue)
	}
	if d, ok := q.delayed[key]; ok {
		d.timer.Stop()
		q.dropDelayed(key, d)
		q.changed(d.wl.ClusterQueue, d.lq)
	}
}

// setPlace records a queued workload's place (it is in no place yet) and counts it.
func (q *Queues) setPlace(key string, p place) {
	q.where[key] = p
	q.pending[p.localQueue]++
}

// setDelayed records a workload's backoff (it has none yet) and counts it.
func (q *Queues) setDelayed(key string, d *delayedWorkload) {
	q.delayed[key] = d
	q.pending[d.lq]++
	q.backingOff[d.wl.ClusterQueue]++
}

// dropDelayed forgets a workload's backoff and uncounts it.
func (q *Queues) dropDelayed(key string, d *delayedWorkload) {
	delete(q.delayed, key)
	decrement(q.pending, d.lq)
	decrement(q.backingOff, d.wl.ClusterQueue)
}

// decrement lowers a count, forgetting it at zero so queues that come and go leave nothing.
func decrement(counts map[string]int, name string) {
	if counts[name]--; counts[name] <= 0 {
		delete(counts, name)
	}
}

func (q *Queues) changed(clusterQueue, localQueue string) {
	if q.OnChange != nil {
		q.OnChange(clusterQueue, localQueue)
	}
}

// Wake returns the parked workloads of the named ClusterQueues to their heaps and runs a cycle,
// e.g. when quota was freed in their cohort tree: even active heads (a preemptor waiting for its
// victims) may fit now.
func (q *Queues) Wake(clusterQueues ...string) {
	if len(clusterQueues) == 0 {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.q.Wake(clusterQueues...)
	q.notify()
}

// WakeAll returns every parked workload to its heap and runs a cycle (a new capacity report).
func (q *Queues) WakeAll() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.q.Wake(q.allQueuesLocked()...)
	q.notify()
}

func (q *Queues) allQueuesLocked() []string {
	set := map[string]bool{}
	for _, p := range q.where {
		set[p.clusterQueue] = true
	}
	out := make([]string, 0, len(set))
	for name := range set {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// WithLocked runs f with the engine queues under the lock: one cycle sees a consistent queue.
func (q *Queues) WithLocked(f func(m *enginequeue.Manager)) {
	q.mu.Lock()
	defer q.mu.Unlock()
	f(q.q)
}

// Counts is what a queue holds, for status.
type Counts struct {
	Active, Parked, BackingOff int
}

// ClusterQueueCounts counts the pending workloads of a ClusterQueue.
func (q *Queues) ClusterQueueCounts(name string) Counts {
	q.mu.Lock()
	defer q.mu.Unlock()
	a, p := q.q.Len(name)
	return Counts{Active: a, Parked: p, BackingOff: q.backingOff[name]}
}

// Pending counts the pending workloads of a LocalQueue (namespace/name), backing off included.
func (q *Queues) Pending(localQueue string) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.pending[localQueue]
}

// LocalQueueOf returns the LocalQueue of a queued workload.
func (q *Queues) LocalQueueOf(key string) string {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.where[key].localQueue
}
