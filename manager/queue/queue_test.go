package queue

import (
	"maps"
	"math/rand/v2"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/fleetq/fleetq/internal/engine"
	enginequeue "github.com/fleetq/fleetq/internal/engine/queue"
)

func popAll(q *Queues, cq string) []string {
	var keys []string
	q.WithLocked(func(m *enginequeue.Manager) {
		for w := m.Pop(cq); w != nil; w = m.Pop(cq) {
			keys = append(keys, w.Key)
		}
	})
	return keys
}

func signalled(q *Queues) bool {
	select {
	case <-q.Signal():
		return true
	default:
		return false
	}
}

func TestBackoffHoldsWorkloadUntilItsTime(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	q := New(clk)
	q.Add(&engine.Workload{Key: "ns/a", ClusterQueue: "cq"}, "ns/lq", clk.Now().Add(time.Minute))
	if signalled(q) {
		t.Fatal("a backing-off workload must not wake the scheduler")
	}
	if got := q.ClusterQueueCounts("cq"); got != (Counts{BackingOff: 1}) {
		t.Errorf("counts = %+v, want one backing off", got)
	}
	if got := q.Pending("ns/lq"); got != 1 {
		t.Errorf("Pending(lq) = %d, want 1 (backing off counts as pending)", got)
	}
	clk.Step(59 * time.Second)
	if got := popAll(q, "cq"); len(got) != 0 {
		t.Fatalf("popped %v before the backoff ended", got)
	}
	clk.Step(time.Second)
	select {
	case <-q.Signal():
	case <-time.After(10 * time.Second):
		t.Fatal("backoff end did not wake the scheduler")
	}
	if got := popAll(q, "cq"); len(got) != 1 || got[0] != "ns/a" {
		t.Errorf("after backoff popped %v, want [ns/a]", got)
	}
}

func TestDeleteCancelsBackoff(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	q := New(clk)
	q.Add(&engine.Workload{Key: "ns/a", ClusterQueue: "cq"}, "ns/lq", clk.Now().Add(time.Minute))
	q.Delete("ns/a")
	clk.Step(2 * time.Minute)
	if got := q.ClusterQueueCounts("cq"); got != (Counts{}) {
		t.Errorf("counts after delete = %+v, want none", got)
	}
	if clk.HasWaiters() {
		t.Error("the backoff timer is still armed after Delete")
	}
}

func TestAddWakesAndCounts(t *testing.T) {
	q := New(clocktesting.NewFakeClock(time.Unix(1000, 0)))
	q.Add(&engine.Workload{Key: "ns/a", ClusterQueue: "cq"}, "ns/lq", time.Time{})
	q.Add(&engine.Workload{Key: "ns/b", ClusterQueue: "cq"}, "ns/other", time.Unix(10, 0)) // backoff in the past
	if !signalled(q) {
		t.Fatal("Add must wake the scheduler")
	}
	if got := q.ClusterQueueCounts("cq"); got != (Counts{Active: 2}) {
		t.Errorf("counts = %+v, want 2 active", got)
	}
	if got := q.Pending("ns/lq"); got != 1 {
		t.Errorf("Pending(ns/lq) = %d, want 1", got)
	}
	if got := q.LocalQueueOf("ns/b"); got != "ns/other" {
		t.Errorf("LocalQueueOf = %q", got)
	}
}

// TestCountsFollowEveryChange: the per-queue counts kept as workloads come, move, back off and
// go always equal a count over every queued workload, and forget queues left empty.
func TestCountsFollowEveryChange(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	q := New(clk)
	rng := rand.New(rand.NewPCG(1, 2))
	keys := []string{"ns/a", "ns/b", "ns/c", "ns/d", "ns/e"}
	lqs := []string{"ns/lq1", "ns/lq2"}
	cqs := []string{"cq1", "cq2"}
	for step := range 2000 {
		key := keys[rng.IntN(len(keys))]
		switch rng.IntN(4) {
		case 0, 1:
			var at time.Time
			if rng.IntN(2) == 0 {
				at = clk.Now().Add(time.Duration(1+rng.IntN(3)) * time.Second)
			}
			q.Add(&engine.Workload{Key: key, ClusterQueue: cqs[rng.IntN(2)]}, lqs[rng.IntN(2)], at)
		case 2:
			q.Delete(key)
		case 3:
			clk.Step(time.Second) // some backoffs end
		}
		// The fake clock runs backoffDone within Step: the counts are settled here.
		q.mu.Lock()
		wantPending, wantBackingOff := map[string]int{}, map[string]int{}
		for _, p := range q.where {
			wantPending[p.localQueue]++
		}
		for _, d := range q.delayed {
			wantPending[d.lq]++
			wantBackingOff[d.wl.ClusterQueue]++
		}
		gotPending, gotBackingOff := maps.Clone(q.pending), maps.Clone(q.backingOff)
		q.mu.Unlock()
		if !maps.Equal(wantPending, gotPending) || !maps.Equal(wantBackingOff, gotBackingOff) {
			t.Fatalf("step %d: pending %v backingOff %v; counted %v and %v", step, gotPending, gotBackingOff, wantPending, wantBackingOff)
		}
		for _, lq := range lqs {
			if got := q.Pending(lq); got != wantPending[lq] {
				t.Fatalf("step %d: Pending(%s) = %d, want %d", step, lq, got, wantPending[lq])
			}
		}
		for _, cq := range cqs {
			if got := q.ClusterQueueCounts(cq).BackingOff; got != wantBackingOff[cq] {
				t.Fatalf("step %d: %s backing off %d, want %d", step, cq, got, wantBackingOff[cq])
			}
		}
	}
}
