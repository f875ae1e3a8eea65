package scheduler

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	clocktesting "k8s.io/utils/clock/testing"
)

// writeLog records the pending writes a throttle makes.
type writeLog struct {
	mu     sync.Mutex
	writes []string
}

func (l *writeLog) write(_ context.Context, key, reason, message string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.writes = append(l.writes, key+" "+reason+": "+message)
}

func (l *writeLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.writes
	l.writes = nil
	return out
}

func TestPendingThrottle(t *testing.T) {
	// In a bubble, synctest.Wait returns once the writers are idle (every queued write done),
	// so every step checks exactly what was written.
	synctest.Test(t, testPendingThrottle)
}

func testPendingThrottle(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // the writers end with the bubble
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC))
	log := &writeLog{}
	th := newPendingThrottle(ctx, clk, 2, log.write)
	expect := func(step string, want ...string) {
		t.Helper()
		synctest.Wait()
		if diff := cmp.Diff(want, log.take()); diff != "" {
			t.Errorf("%s: writes (-want +got):\n%s", step, diff)
		}
	}

	th.set("ns/a", "Pending", "available 3")
	expect("first message", "ns/a Pending: available 3")

	clk.Step(time.Second)
	th.set("ns/a", "Pending", "available 2")
	th.set("ns/a", "Pending", "available 1")
	expect("same reason within the refresh")

	th.set("ns/b", "Pending", "available 1")
	expect("another workload is not held back", "ns/b Pending: available 1")

	clk.Step(PendingRefresh - time.Second)
	expect("refresh over: the latest message", "ns/a Pending: available 1")

	th.set("ns/a", "Inadmissible", "LocalQueue missing")
	expect("a new reason right after a write waits for the reason gap")
	clk.Step(PendingReasonGap)
	expect("reason gap over: the new reason", "ns/a Inadmissible: LocalQueue missing")

	clk.Step(PendingReasonGap)
	th.set("ns/a", "NoPlacement", "no worker has room")
	expect("a new reason after the gap: at once", "ns/a NoPlacement: no worker has room")
	clk.Step(time.Second)
	th.set("ns/a", "NoPlacement", "no worker has room, still")
	th.set("ns/a", "Pending", "quota 1 of 2")
	th.set("ns/a", "NoPlacement", "no worker has room again")
	th.set("ns/a", "Pending", "quota 0 of 2")
	expect("a reason flipping every cycle is held back")
	clk.Step(PendingReasonGap - time.Second)
	expect("one write after the gap, with the latest reason", "ns/a Pending: quota 0 of 2")
	th.set("ns/a", "Inadmissible", "LocalQueue missing")
	expect("and the gap starts again")
	clk.Step(PendingReasonGap)
	expect("the next reason after it", "ns/a Inadmissible: LocalQueue missing")

	clk.Step(PendingRefresh)
	expect("nothing held back, nothing written")
	th.set("ns/a", "Inadmissible", "LocalQueue still missing")
	expect("refresh over: at once", "ns/a Inadmissible: LocalQueue still missing")

	th.set("ns/a", "Inadmissible", "held back")
	th.forget("ns/a")
	clk.Step(PendingRefresh)
	expect("forgotten (admitted): the held-back message is dropped")
	th.set("ns/a", "Inadmissible", "after admission and eviction")
	expect("forgotten: the next message at once", "ns/a Inadmissible: after admission and eviction")
}

// A cycle hands its pending messages over and goes on: set never waits for a write, however slow
// the API server, and a workload still queued for its write gets the latest message, once.
func TestPendingThrottleNeverWaitsForAWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		clk := clocktesting.NewFakeClock(time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC))
		release := make(chan struct{})
		log := &writeLog{}
		th := newPendingThrottle(ctx, clk, 1, func(ctx context.Context, key, reason, message string) {
			<-release // an API server that takes its time
			log.write(ctx, key, reason, message)
		})
		th.set("ns/a", "Pending", "available 3")
		synctest.Wait() // the one writer is now stuck in ns/a's write
		th.set("ns/b", "Pending", "available 2")
		th.set("ns/c", "Pending", "available 1")
		th.set("ns/c", "NoPlacement", "no worker has room")
		if got := log.take(); len(got) != 0 {
			t.Fatalf("written before the API server answered: %v", got)
		}
		close(release)
		synctest.Wait()
		// ns/c's second reason came while its first waited for a writer: one write, the latest.
		want := []string{"ns/a Pending: available 3", "ns/b Pending: available 2", "ns/c NoPlacement: no worker has room"}
		if diff := cmp.Diff(want, log.take()); diff != "" {
			t.Errorf("writes (-want +got):\n%s", diff)
		}
		clk.Step(PendingReasonGap)
		synctest.Wait()
		if got := log.take(); len(got) != 0 {
			t.Errorf("written again after the gap: %v", got)
		}
	})
}
