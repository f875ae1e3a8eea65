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
	// In a bubble, synctest.Wait returns once a held-back message's write (in the goroutine the
	// timer starts) is done, so every step checks exactly what was written.
	synctest.Test(t, testPendingThrottle)
}

func testPendingThrottle(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC))
	log := &writeLog{}
	th := newPendingThrottle(clk, log.write)
	expect := func(step string, want ...string) {
		t.Helper()
		synctest.Wait()
		if diff := cmp.Diff(want, log.take()); diff != "" {
			t.Errorf("%s: writes (-want +got):\n%s", step, diff)
		}
	}

	th.set(ctx, "ns/a", "Pending", "available 3")
	expect("first message", "ns/a Pending: available 3")

	clk.Step(time.Second)
	th.set(ctx, "ns/a", "Pending", "available 2")
	th.set(ctx, "ns/a", "Pending", "available 1")
	expect("same reason within the refresh")

	th.set(ctx, "ns/b", "Pending", "available 1")
	expect("another workload is not held back", "ns/b Pending: available 1")

	clk.Step(PendingRefresh - time.Second)
	expect("refresh over: the latest message", "ns/a Pending: available 1")

	th.set(ctx, "ns/a", "Inadmissible", "LocalQueue missing")
	expect("a new reason right after a write waits for the reason gap")
	clk.Step(PendingReasonGap)
	expect("reason gap over: the new reason", "ns/a Inadmissible: LocalQueue missing")

	clk.Step(PendingReasonGap)
	th.set(ctx, "ns/a", "NoPlacement", "no worker has room")
	expect("a new reason after the gap: at once", "ns/a NoPlacement: no worker has room")
	clk.Step(time.Second)
	th.set(ctx, "ns/a", "NoPlacement", "no worker has room, still")
	th.set(ctx, "ns/a", "Pending", "quota 1 of 2")
	th.set(ctx, "ns/a", "NoPlacement", "no worker has room again")
	th.set(ctx, "ns/a", "Pending", "quota 0 of 2")
	expect("a reason flipping every cycle is held back")
	clk.Step(PendingReasonGap - time.Second)
	expect("one write after the gap, with the latest reason", "ns/a Pending: quota 0 of 2")
	th.set(ctx, "ns/a", "Inadmissible", "LocalQueue missing")
	expect("and the gap starts again")
	clk.Step(PendingReasonGap)
	expect("the next reason after it", "ns/a Inadmissible: LocalQueue missing")

	clk.Step(PendingRefresh)
	expect("nothing held back, nothing written")
	th.set(ctx, "ns/a", "Inadmissible", "LocalQueue still missing")
	expect("refresh over: at once", "ns/a Inadmissible: LocalQueue still missing")

	th.set(ctx, "ns/a", "Inadmissible", "held back")
	th.forget("ns/a")
	clk.Step(PendingRefresh)
	expect("forgotten (admitted): the held-back message is dropped")
	th.set(ctx, "ns/a", "Inadmissible", "after admission and eviction")
	expect("forgotten: the next message at once", "ns/a Inadmissible: after admission and eviction")
}
