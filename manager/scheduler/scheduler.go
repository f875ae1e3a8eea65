// Package scheduler runs the manager's admission loop. One cycle, top to bottom:
//
//  1. Wait until something may have changed what fits (a workload queued, quota freed, a queue
//     or flavor edited) — the queues signal it — or the safety tick fires.
//  2. Under the cache and queue locks, hand the engine one consistent snapshot and the pending
//     heaps (engine.Run); record every admission it decides in the cache at once ("assume"), so
//     the next cycle never admits the same quota twice while the API write is in flight.
//  3. Outside the locks, write the decisions through the shared rate-limited client: admit
//     (one status patch: admission, QuotaReserved, Admitted or pending admission checks),
//     preempt (victims get Evicted and Preempted), pending (a condition, only when its message
//     changed). Every patch carries the resourceVersion it was computed from; on a conflict or
//     any error the assumption is dropped and the workload queues again.
package scheduler

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/internal/engine"
	enginequeue "github.com/fleetq/fleetq/internal/engine/queue"
	"github.com/fleetq/fleetq/internal/workload"
	"github.com/fleetq/fleetq/manager/cache"
	"github.com/fleetq/fleetq/manager/metrics"
	"github.com/fleetq/fleetq/manager/queue"
)

// Reasons of the conditions the scheduler writes.
const (
	ReasonQuotaReserved = "QuotaReserved"
	ReasonAdmitted      = "Admitted"
	ReasonPending       = "Pending"
	// ReasonNoPlacement: quota fits but no worker has room for all the workload's pods now.
	ReasonNoPlacement = "NoPlacement"
)

// Scheduler is the admission loop; it runs only on the elected leader.
type Scheduler struct {
	Client   client.Client
	Cache    *cache.Cache
	Queues   *queue.Queues
	Clock    clock.PassiveClock
	Recorder events.EventRecorder
	Log      logr.Logger
	Options  engine.Options
	// Workers bounds the API writes in flight at once.
	Workers int
	// Tick re-runs a cycle even without a signal, as a safety net.
	Tick time.Duration
	// Placer, when set, must find a worker for admissions in ClusterQueues with a MultiKueue
	// check before their quota is reserved (see package dispatch).
	Placer Placer

	throttleOnce sync.Once
	throttle     *pendingThrottle
}

// Placer picks the worker cluster an admission runs on, or explains why none has room; ok with
// an empty cluster means the queue does not dispatch.
type Placer interface {
	Place(w *engine.Workload, a *engine.Admission, checks []kueue.AdmissionCheckReference) (cluster string, ok bool, why string)
	// Forget undoes a placement whose admission was not written.
	Forget(key string)
	// PlaceAfter says whether the preemptor would have a worker with room once the victims'
	// pods are gone, or why not; it places nothing.
	PlaceAfter(w *engine.Workload, a *engine.Admission, checks []kueue.AdmissionCheckReference, victims []*engine.Workload) (ok bool, why string)
	// Shielded says why an admitted workload may not be preempted now ("" when it may).
	Shielded(w *engine.Workload) string
}

// placement is where an admitted workload was placed, and why there.
type placement struct{ cluster, why string }

// NeedLeaderElection makes the loop run only on the leader.
func (s *Scheduler) NeedLeaderElection() bool { return true }

// Start runs cycles until ctx ends.
func (s *Scheduler) Start(ctx context.Context) error {
	if s.Workers <= 0 {
		s.Workers = 8
	}
	if s.Tick <= 0 {
		s.Tick = 10 * time.Second
	}
	if s.Client != nil {
		// After a restart or fail-over, no cycle before the usage of every admitted workload is
		// back in the cache: it would admit into quota those workloads hold.
		if err := s.waitAccounted(ctx); err != nil {
			return err
		}
	}
	s.pendingThrottle(ctx) // its writers live as long as the scheduler
	ticker := time.NewTicker(s.Tick)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.Queues.Signal():
		case <-ticker.C:
		}
		s.Cycle(ctx)
	}
}

// Cycle runs one admission cycle and writes its decisions; it returns them for tests and metrics.
func (s *Scheduler) Cycle(ctx context.Context) []engine.Decision {
	var decisions []engine.Decision
	admitted := map[string]*engine.Workload{}
	placed := map[string]placement{}
	opts := s.Options
	if s.Placer != nil {
		checks := s.Cache.AllChecks()
		opts.Place = func(w *engine.Workload, a *engine.Admission) (bool, string) {
			cluster, ok, why := s.Placer.Place(w, a, checks[w.ClusterQueue])
			if ok && cluster != "" {
				placed[w.Key] = placement{cluster, why}
			}
			return ok, why
		}
		opts.PlaceAfter = func(w *engine.Workload, a *engine.Admission, victims []*engine.Workload) (bool, string) {
			return s.Placer.PlaceAfter(w, a, checks[w.ClusterQueue], victims)
		}
		opts.Shielded = s.Placer.Shielded
	}
	s.Cache.WithSnapshot(func(snap *engine.Snapshot) {
		s.Queues.WithLocked(func(m *enginequeue.Manager) {
			rec := &recordingQueues{Manager: m, popped: map[string]*engine.Workload{}}
			decisions = engine.Run(snap, rec, opts)
			for i := range decisions {
				d := &decisions[i]
				if d.Kind != engine.Admit {
					continue
				}
				wl := rec.popped[d.Workload]
				wl.Admission = d.Admission
				wl.AdmittedAt = s.Clock.Now().UnixNano()
				admitted[d.Workload] = wl
			}
		})
	})
	// Assume after the cycle, still before any write: the cache takes its own lock.
	for key, wl := range admitted {
		lq := s.Queues.LocalQueueOf(key)
		if s.Cache.HoldsQuota(key) {
			// A stale copy of an admitted workload was queued again; never admit twice.
			delete(admitted, key)
			s.forgetPlacement(key, placed)
			continue
		}
		if err := s.Cache.Assume(*wl, lq, len(s.Cache.RouteChecks(wl.ClusterQueue)) == 0); err != nil {
			s.Log.Error(err, "Assuming an admission", "workload", key)
		}
		s.Queues.Delete(key)
	}
	s.apply(ctx, decisions, admitted, placed)
	return decisions
}

func (s *Scheduler) forgetPlacement(key string, placed map[string]placement) {
	if _, ok := placed[key]; ok && s.Placer != nil {
		s.Placer.Forget(key)
	}
}

// recordingQueues remembers the workloads a cycle popped, to assume the admitted ones.
type recordingQueues struct {
	*enginequeue.Manager
	popped map[string]*engine.Workload
}

func (r *recordingQueues) Pop(cq string) *engine.Workload {
	w := r.Manager.Pop(cq)
	if w != nil {
		r.popped[w.Key] = w
	}
	return w
}

func (s *Scheduler) apply(ctx context.Context, decisions []engine.Decision, admitted map[string]*engine.Workload, placed map[string]placement) {
	metrics.AdmissionAttempts(decisions)
	work := make(chan func(), len(decisions))
	for i := range decisions {
		d := decisions[i]
		switch d.Kind {
		case engine.Admit:
			if wl, ok := admitted[d.Workload]; ok {
				p, dispatched := placed[d.Workload]
				work <- func() {
					if !s.admit(ctx, d, wl, p) && dispatched {
						s.Placer.Forget(d.Workload)
					}
				}
			}
		case engine.Preempt:
			work <- func() { s.preempt(ctx, d) }
		case engine.Pending:
			s.pending(ctx, d.Workload, d.Reason, d.Message) // only queued: no worker needed
		}
	}
	close(work)
	var wg sync.WaitGroup
	for range min(s.Workers, len(work)) { // the admissions and preemptions queued
		wg.Go(func() {
			for f := range work {
				f()
			}
		})
	}
	wg.Wait()
}

// admit writes an admission and reports whether it landed.
func (s *Scheduler) admit(ctx context.Context, d engine.Decision, ewl *engine.Workload, p placement) bool {
	log := s.Log.WithValues("workload", d.Workload, "clusterQueue", d.ClusterQueue)
	err := s.writeAdmission(ctx, d, p)
	if err == nil {
		s.pendingThrottle(ctx).forget(d.Workload)
		log.V(2).Info("Admitted", "borrows", d.Borrows, "cluster", p.cluster)
		return true
	}
	// Drop the assumption and queue the workload again; the next cycle decides afresh.
	s.Queues.Wake(s.Cache.Release(d.Workload)...)
	if apierrors.IsNotFound(err) {
		return false
	}
	log.V(1).Info("Admission not written; requeueing", "error", err.Error())
	ewl.Admission = nil
	s.Queues.Add(ewl, s.Queues.LocalQueueOf(d.Workload), time.Time{})
	return false
}

func (s *Scheduler) writeAdmission(ctx context.Context, d engine.Decision, p placement) error {
	wl := &kueue.Workload{}
	if err := s.Client.Get(ctx, workload.SplitKey(d.Workload), wl); err != nil {
		return err
	}
	if workload.HasQuotaReservation(wl) || workload.IsFinished(wl) || !workload.IsActive(wl) {
		return fmt.Errorf("workload %s changed since it was queued", d.Workload)
	}
	orig := wl.DeepCopy()
	now := s.Clock.Now()
	wl.Status.Admission = cache.Admission(d.Admission)
	checks := s.Cache.RouteChecks(d.ClusterQueue)
	msg := fmt.Sprintf("Quota reserved in ClusterQueue %s", d.ClusterQueue)
	if d.Borrows {
		msg += ", borrowing from its cohort"
	}
	workload.SetCondition(wl, kueue.WorkloadQuotaReserved, metav1.ConditionTrue, ReasonQuotaReserved, msg, now)
	// A fresh reservation ends the previous eviction.
	if workload.IsEvicted(wl) {
		workload.SetCondition(wl, kueue.WorkloadEvicted, metav1.ConditionFalse, ReasonQuotaReserved, "Previously evicted workload got quota again", now)
	}
	if len(checks) == 0 {
		workload.SetCondition(wl, kueue.WorkloadAdmitted, metav1.ConditionTrue, ReasonAdmitted, "The workload is admitted", now)
	} else {
		checkMsg := ""
		if p.cluster != "" {
			wl.Status.ClusterName = &p.cluster
			wl.Status.NominatedClusterNames = nil
			msg += ", placed on worker " + p.cluster
			checkMsg = fmt.Sprintf("Dispatching to worker %s. Placement: %s", p.cluster, p.why)
		}
		for _, name := range checks {
			setCheckState(wl, name, kueue.CheckStatePending, checkMsg, now)
		}
	}
	if err := s.Client.Status().Patch(ctx, wl, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("patching workload %s: %w", d.Workload, err)
	}
	metrics.QuotaReserved(wl, now)
	if s.Recorder != nil {
		// One event per decision: the reservation and, on a multi-cluster queue, the placement
		// with its reasons (one write fewer per dispatched workload than an event for each).
		note := msg + "; " + admissionSummary(d.Admission)
		if p.cluster != "" {
			note += fmt.Sprintf("; Placed on worker %s: %s", p.cluster, p.why)
		}
		s.Recorder.Eventf(wl, nil, "Normal", ReasonQuotaReserved, "Admit", "%s", note)
	}
	return nil
}

func (s *Scheduler) preempt(ctx context.Context, d engine.Decision) {
	for _, v := range d.Victims {
		if err := s.evict(ctx, d.Workload, v); err != nil {
			s.Log.V(1).Info("Preemption not written", "victim", v.Key, "preemptor", d.Workload, "error", err.Error())
			continue
		}
		s.Cache.SetEvicting(v.Key)
	}
	s.pending(ctx, d.Workload, ReasonPending, fmt.Sprintf("Preempting %d workload(s) to free quota: %s", len(d.Victims), victimNames(d.Victims)))
}

func (s *Scheduler) evict(ctx context.Context, preemptor string, v engine.Victim) error {
	wl := &kueue.Workload{}
	if err := s.Client.Get(ctx, workload.SplitKey(v.Key), wl); err != nil {
		return err
	}
	if !workload.HasQuotaReservation(wl) || workload.IsEvicted(wl) {
		return nil
	}
	orig := wl.DeepCopy()
	now := s.Clock.Now()
	msg := fmt.Sprintf("Preempted to accommodate workload %s: %s", preemptor, v.Message)
	workload.SetCondition(wl, kueue.WorkloadEvicted, metav1.ConditionTrue, kueue.WorkloadEvictedByPreemption, msg, now)
	workload.SetCondition(wl, kueue.WorkloadPreempted, metav1.ConditionTrue, string(v.Reason), msg, now)
	if err := s.Client.Status().Patch(ctx, wl, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("patching workload %s: %w", v.Key, err)
	}
	metrics.Evicted(wl, kueue.WorkloadEvictedByPreemption)
	if s.Recorder != nil {
		s.Recorder.Eventf(wl, nil, "Normal", "Preempted", "Preempt", "%s", msg)
	}
	return nil
}

// pending records why a workload waits, writing only when the message changed, and a changed
// message with the same reason at most once per PendingRefresh.
func (s *Scheduler) pending(ctx context.Context, key string, reason engine.PendingReason, message string) {
	s.pendingThrottle(ctx).set(key, string(reasonFor(reason)), message)
}

// pendingThrottle is the scheduler's, made on first use; its writers run until ctx (the first
// caller's: Start's) ends.
func (s *Scheduler) pendingThrottle(ctx context.Context) *pendingThrottle {
	s.throttleOnce.Do(func() {
		clk, ok := s.Clock.(clock.WithDelayedExecution)
		if !ok {
			clk = clock.RealClock{}
		}
		s.throttle = newPendingThrottle(ctx, clk, pendingWriters, func(ctx context.Context, key, reason, message string) {
			if err := SetPending(ctx, s.Client, s.Clock, key, reason, message); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				s.Log.V(1).Info("Pending condition not written", "workload", key, "error", err.Error())
			}
		})
	})
	return s.throttle
}

func reasonFor(r engine.PendingReason) string {
	switch r {
	case engine.ClusterQueueInactive, engine.ClusterQueueNotFound:
		return kueue.WorkloadInadmissible
	case engine.NoPlacement:
		return ReasonNoPlacement
	default:
		return ReasonPending
	}
}

// SetPending sets QuotaReserved False with the reason and message on a workload that holds no
// quota, unless it already says exactly that; the workloads controller uses it too.
func SetPending(ctx context.Context, c client.Client, clk clock.PassiveClock, key, reason, message string) error {
	wl := &kueue.Workload{}
	if err := c.Get(ctx, workload.SplitKey(key), wl); err != nil {
		return err
	}
	if workload.HasQuotaReservation(wl) || workload.IsFinished(wl) {
		return nil
	}
	orig := wl.DeepCopy()
	if !workload.SetCondition(wl, kueue.WorkloadQuotaReserved, metav1.ConditionFalse, reason, message, clk.Now()) {
		return nil
	}
	return c.Status().Patch(ctx, wl, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
}

func setCheckState(wl *kueue.Workload, name kueue.AdmissionCheckReference, state kueue.CheckState, msg string, now time.Time) {
	for i := range wl.Status.AdmissionChecks {
		if wl.Status.AdmissionChecks[i].Name == name {
			if wl.Status.AdmissionChecks[i].State != state {
				wl.Status.AdmissionChecks[i].State = state
				wl.Status.AdmissionChecks[i].LastTransitionTime = metav1.NewTime(now)
			}
			wl.Status.AdmissionChecks[i].Message = msg
			return
		}
	}
	wl.Status.AdmissionChecks = append(wl.Status.AdmissionChecks, kueue.AdmissionCheckState{
		Name: name, State: state, Message: msg, LastTransitionTime: metav1.NewTime(now),
	})
}

func admissionSummary(a *engine.Admission) string {
	out := ""
	for _, ps := range a.PodSets {
		if out != "" {
			out += "; "
		}
		out += fmt.Sprintf("pod set %s:", ps.Name)
		resources := make([]string, 0, len(ps.Flavors))
		for r := range ps.Flavors {
			resources = append(resources, string(r))
		}
		sort.Strings(resources)
		for _, name := range resources {
			r := corev1.ResourceName(name)
			out += fmt.Sprintf(" %s=%s in %s", r, engine.FormatAmount(r, ps.Usage[r]), ps.Flavors[r])
		}
	}
	return out
}

func victimNames(vs []engine.Victim) string {
	out := ""
	for i, v := range vs {
		if i > 0 {
			out += ", "
		}
		out += v.Key
	}
	return out
}
