package bench

import (
	"context"
	"fmt"
	"time"

	"k8s.io/client-go/kubernetes"
)

// Restarter is a system whose manager the bench can restart in place, for the time from a
// restart to the first admission.
type Restarter interface {
	// RestartManager stops the manager (gracefully, as an upgrade would) and starts it again with
	// the same command line; it returns when the new process was started.
	RestartManager(ctx context.Context) (started time.Time, err error)
}

// restartFirst restarts procs[0], the manager, and keeps its PID current.
func restartFirst(ctx context.Context, procs []Proc) (time.Time, error) {
	if len(procs) == 0 {
		return time.Time{}, fmt.Errorf("restart: no manager process")
	}
	m := &procs[0]
	if err := m.proc.Stop(ctx, stopGrace); err != nil {
		return time.Time{}, fmt.Errorf("restart %s: %w", m.proc.State.Name, err)
	}
	started := time.Now()
	if err := m.proc.Start(true); err != nil {
		return time.Time{}, fmt.Errorf("restart %s: %w", m.proc.State.Name, err)
	}
	m.PID = m.proc.State.PID
	return started, nil
}

// ScaleResult are a probe scenario's figures (Scenario.Probes).
type ScaleResult struct {
	// Settled is when the load was queued (every job's Workload seen) and reservations had
	// stopped changing; Reserved how many of the load's workloads held quota then, Pending how
	// many waited.
	Settled           time.Time
	Reserved, Pending int
	// Probes are the warm probes: each job's create call → its quota reserved.
	Probes []time.Duration
	// Restart is the manager's restart → the restart probe's quota reserved (its job created as
	// soon as the new manager's webhook took it); RestartCreated the part until it was created.
	Restart, RestartCreated time.Duration
	// RestartPeakRSSMiB is the restarted manager's peak RSS once it admitted the probe (it
	// read every object back).
	RestartPeakRSSMiB float64
	// RestartTimedOut says the restart probe got no quota within probeTimeout: Restart is then
	// how long it waited, a lower bound.
	RestartTimedOut bool
}

// settleQuiet is how long reservations must stay unchanged for the load to count as settled.
const settleQuiet = 10 * time.Second

// probeTimeout bounds one probe: its create (retried while a restarted manager's webhook is not
// serving yet) and its admission.
const probeTimeout = 5 * time.Minute

// settle waits until every job of the load was created and its Workload seen, and the number
// holding quota stayed the same for quiet after that. A load of which nothing got quota is
// an error: the probes would measure a broken setup.
func settle(ctx context.Context, rec *Recorder, total int, quiet time.Duration, procs []Proc, progress func(string, ...any)) (*ScaleResult, error) {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	lastReport, lastReserved, since := time.Now(), -1, time.Now()
	var allQueued time.Time
	for {
		queued := rec.Count(func(r *Record) bool { return !r.Queued.IsZero() })
		reserved := rec.Count(func(r *Record) bool { return !r.QuotaReserved.IsZero() })
		if reserved != lastReserved {
			lastReserved, since = reserved, time.Now()
		}
		if queued == total && allQueued.IsZero() {
			allQueued = time.Now()
		}
		if !allQueued.IsZero() && time.Since(later(since, allQueued)) >= quiet {
			if reserved == 0 {
				return nil, fmt.Errorf("settling: none of the %d workloads got quota in %s; a Workload's QuotaReserved condition says why (kubectl get workloads -A -o yaml, with the lab's management kubeconfig)", total, quiet)
			}
			return &ScaleResult{Settled: since, Reserved: reserved, Pending: total - reserved}, nil
		}
		if err := checkRunning(procs); err != nil {
			return nil, err
		}
		if time.Since(lastReport) > 10*time.Second {
			lastReport = time.Now()
			progress("queued %d of %d, quota reserved %d", queued, total, reserved)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("settling: %d of %d workloads queued, %d reserved: %w", queued, total, reserved, ctx.Err())
		case <-tick.C:
		}
	}
}

// probeKey is the record key of the probe job of queue i.
func probeKey(i int) string { return TeamNamespace(i) + "/probe" }

// probe submits one job of the scenario's first class to probe queue i, retrying the create while
// it fails (a restarting manager's webhook refuses it), and waits until its quota is reserved. It
// returns when the create succeeded and when the reservation was seen.
func probe(ctx context.Context, cs kubernetes.Interface, rec *Recorder, s *Scenario, i int) (created, reserved time.Time, err error) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	class := s.class(s.Waves[0].Classes[0])
	job := jobFor(submission{class: class, queue: i})
	job.Name = "probe"
	rec.Expect(probeKey(i), class.Name, i, class.amount(s.mainResource()))
	create := createIn(cs)
	var lastErr error
	for {
		submitted := time.Now()
		if lastErr = create(ctx, submission{}, job.DeepCopy()); lastErr == nil {
			created = time.Now()
			rec.Mark(probeKey(i), func(r *Record) { r.Submitted, r.Created = submitted, created })
			break
		}
		select {
		case <-ctx.Done():
			return time.Time{}, time.Time{}, fmt.Errorf("probe %s: create: %w (last error: %v)", probeKey(i), ctx.Err(), lastErr)
		case <-time.After(50 * time.Millisecond):
		}
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		var at time.Time
		rec.Mark(probeKey(i), func(r *Record) { at = r.QuotaReserved })
		if !at.IsZero() {
			return created, at, nil
		}
		select {
		case <-ctx.Done():
			return created, time.Time{}, fmt.Errorf("probe %s: no quota reserved: %w", probeKey(i), ctx.Err())
		case <-tick.C:
		}
	}
}

// warmProbes times a probe in every probe queue but the last (kept for the restart), one after
// another, while the load waits in the other queues.
func warmProbes(ctx context.Context, cs kubernetes.Interface, rec *Recorder, s *Scenario, sr *ScaleResult) error {
	for i := s.QueueCount(); i < s.queueTotal()-1; i++ {
		created, reserved, err := probe(ctx, cs, rec, s, i)
		if err != nil {
			return err
		}
		sr.Probes = append(sr.Probes, reserved.Sub(created))
	}
	return nil
}

// restartProbe restarts the manager and times the last probe queue's job: from the restart until
// its quota is reserved.
func restartProbe(ctx context.Context, r Restarter, cs kubernetes.Interface, rec *Recorder, s *Scenario, sr *ScaleResult) error {
	started, err := r.RestartManager(ctx)
	if err != nil {
		return err
	}
	created, reserved, err := probe(ctx, cs, rec, s, s.queueTotal()-1)
	switch {
	case err != nil && !created.IsZero() && ctx.Err() == nil:
		// Created but never admitted in probeTimeout: a figure (a lower bound), not a failure.
		sr.Restart, sr.RestartCreated, sr.RestartTimedOut = time.Since(started), created.Sub(started), true
		return nil
	case err != nil:
		return fmt.Errorf("after the manager's restart: %w", err)
	}
	sr.Restart, sr.RestartCreated = reserved.Sub(started), created.Sub(started)
	return nil
}

// withoutProbes drops the probes' records: the load's figures are the load's.
func withoutProbes(s *Scenario, recs []Record) []Record {
	out := recs[:0]
	for _, r := range recs {
		if !s.isProbe(r.Queue) {
			out = append(out, r)
		}
	}
	return out
}
