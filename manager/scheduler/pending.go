package scheduler

import (
	"context"
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
)

// PendingRefresh is how often a pending workload's message may be rewritten while its reason
// stays the same (a new reason is written at once). Messages carry numbers (available, used)
// that change with every admission nearby: rewriting them every 5 s was ~9 of the 14 Workload
// status patches per workload of the single-cluster bench, and the API server load slowed every
// admission; a minute-old figure under a current reason costs the reader nothing.
const PendingRefresh = 60 * time.Second

// PendingReasonGap is the least time between two pending writes for a workload when the reason
// changed: a new reason is news, but a workload whose reason flips every cycle (no worker has
// room, then no quota, then room again as jobs come and go) wrote every half second in the
// multi-cluster pressure bench.
const PendingReasonGap = 5 * time.Second

// pendingWriters is how many pending messages are written at a time.
const pendingWriters = 4

// pendingThrottle spaces out the writes of pending messages per workload: a new reason is
// written once PendingReasonGap has passed since the last write (at once, usually); a new
// message with the same reason waits until PendingRefresh has passed. What waits is the latest
// reason and message, so the condition always ends up saying what the last cycle decided.
//
// Its own writers write them, so an admission cycle never waits for them: with 20,000
// workloads waiting, each cycle's first pending writes (~0.5 s each on a loaded API server)
// held the next cycle, and with it an admissible workload, for over a minute. A workload
// queued for a write is queued once, and the write says the latest decision.
type pendingThrottle struct {
	clock clock.WithDelayedExecution
	write func(ctx context.Context, key, reason, message string)
	// writes are the workloads with a message to write now.
	writes workqueue.TypedInterface[string]

	mu        sync.Mutex
	last      map[string]*pendingWrite
	lastSweep time.Time
}

// pendingWrite is the last write for one workload, and the reason and message waiting to follow
// it while timer is armed.
type pendingWrite struct {
	at         time.Time
	reason     string
	heldReason string
	held       string
	holding    bool
	timer      clock.Timer
	// due is when timer fires.
	due time.Time
}

// newPendingThrottle starts writers that write messages until ctx ends.
func newPendingThrottle(ctx context.Context, clk clock.WithDelayedExecution, writers int, write func(ctx context.Context, key, reason, message string)) *pendingThrottle {
	t := &pendingThrottle{clock: clk, write: write, writes: workqueue.NewTyped[string](), last: map[string]*pendingWrite{}}
	for range writers {
		go func() {
			for {
				key, quit := t.writes.Get()
				if quit {
					return
				}
				t.flush(ctx, key)
				t.writes.Done(key)
			}
		}()
	}
	go func() {
		<-ctx.Done()
		t.writes.ShutDown()
	}()
	return t
}

// set queues (or schedules) the write of a pending reason and message for key; it never waits
// for a write.
func (t *pendingThrottle) set(key, reason, message string) {
	now := t.clock.Now()
	t.mu.Lock()
	t.sweep(now)
	p := t.last[key]
	if p != nil {
		gap := PendingRefresh
		if reason != p.reason {
			gap = PendingReasonGap
		}
		if wait := gap - now.Sub(p.at); wait > 0 {
			p.heldReason, p.held, p.holding = reason, message, true
			if p.timer != nil && p.due.After(now.Add(wait)) {
				p.timer.Stop() // a new reason is due sooner than the refresh it waited for
				p.timer = nil
			}
			if p.timer == nil {
				// Only queued: a fake clock runs the function under its lock, and the writer
				// reads the clock.
				p.due = now.Add(wait)
				p.timer = t.clock.AfterFunc(wait, func() { t.writes.Add(key) })
			}
			t.mu.Unlock()
			return
		}
	}
	if p == nil {
		p = &pendingWrite{}
		t.last[key] = p
	}
	p.at, p.reason = now, reason
	p.heldReason, p.held, p.holding = reason, message, true
	t.mu.Unlock()
	t.writes.Add(key)
}

// flush writes the message that waited for its turn (or for a writer).
func (t *pendingThrottle) flush(ctx context.Context, key string) {
	t.mu.Lock()
	p := t.last[key]
	if p == nil {
		t.mu.Unlock()
		return
	}
	now := t.clock.Now()
	if p.timer != nil && !now.Before(p.due) {
		p.timer = nil // it fired: a later message may arm another
	}
	if !p.holding {
		t.mu.Unlock()
		return
	}
	reason, message := p.heldReason, p.held
	p.at, p.reason, p.held, p.holding = now, reason, "", false
	t.mu.Unlock()
	if ctx.Err() == nil {
		t.write(ctx, key, reason, message)
	}
}

// forget drops what is known of key (admitted, deleted): its next pending reason is written at
// once, and a message waiting for its turn is not written.
func (t *pendingThrottle) forget(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if p := t.last[key]; p != nil {
		if p.timer != nil {
			p.timer.Stop()
		}
		delete(t.last, key)
	}
}

// sweep drops entries that can no longer hold a write back, once the map has grown, at most once
// per PendingRefresh; t.mu held.
func (t *pendingThrottle) sweep(now time.Time) {
	if len(t.last) < 4096 || now.Sub(t.lastSweep) < PendingRefresh {
		return
	}
	t.lastSweep = now
	for k, p := range t.last {
		if p.timer == nil && now.Sub(p.at) >= PendingRefresh {
			delete(t.last, k)
		}
	}
}
