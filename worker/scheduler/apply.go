package scheduler

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sort"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetq "github.com/fleetq/fleetq/api/fleetq/v1alpha1"
	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/internal/engine/nodefit"
	"github.com/fleetq/fleetq/internal/integration"
	"github.com/fleetq/fleetq/internal/workload"
	"github.com/fleetq/fleetq/worker/admission"
	"github.com/fleetq/fleetq/worker/capacity"
)

// apply writes a plan: evictions first (they only free room), then admissions, then the reasons of
// copies left pending.
func (s *Scheduler) apply(ctx context.Context, copies []*copyState, plan admission.Plan) []error {
	byKey := make(map[string]*copyState, len(copies))
	for _, c := range copies {
		byKey[c.plan.Key] = c
	}
	var errs []error
	for _, e := range plan.Evict {
		c := byKey[e.Key]
		if err := s.evict(ctx, c, kueue.WorkloadEvictedByPreemption, e.Message, true); err != nil {
			errs = append(errs, err)
			continue
		}
		s.Recorder.Eventf(c.wl, byKey[e.Preemptor].wl, corev1.EventTypeNormal, "Preempted", "Preempt", "%s", e.Message)
	}
	for _, a := range plan.Admit {
		if err := s.admit(ctx, byKey[a.Key], a.Placements); err != nil {
			errs = append(errs, err)
		}
	}
	for _, c := range copies {
		msg, pending := plan.Pending[c.plan.Key]
		if c.invalid != "" {
			msg, pending = c.invalid, true
		}
		if !pending || c.plan.Phase != admission.Pending {
			continue
		}
		errs = append(errs, s.setPending(ctx, c, msg))
	}
	return errs
}

// fence evicts every admitted copy because the manager's lease expired (unless keepRunning), and says
// so on pending ones, which are not admitted while fenced.
func (s *Scheduler) fence(ctx context.Context, copies []*copyState, why string, keepRunning bool) []error {
	var errs []error
	for _, c := range copies {
		switch c.plan.Phase {
		case admission.Admitted:
			if keepRunning {
				continue // fencingPolicy KeepRunning: it rides out the outage
			}
			msg := fmt.Sprintf("Fenced in cluster %s: %s; the job was suspended so it cannot run in two clusters", s.ClusterName, why)
			if err := s.evict(ctx, c, fleetq.EvictedByFencing, msg, false); err != nil {
				errs = append(errs, err)
				continue
			}
			s.Recorder.Eventf(c.wl, nil, corev1.EventTypeWarning, fleetq.EvictedByFencing, "Fence", "%s", msg)
		case admission.Pending:
			msg := c.invalid
			if msg == "" {
				msg = fmt.Sprintf("not admitted while cluster %s is fenced: %s", s.ClusterName, why)
			}
			errs = append(errs, s.setPending(ctx, c, msg))
		}
	}
	return errs
}

// admit reserves the copy's place (status.admission, QuotaReserved and Admitted) and starts its job.
func (s *Scheduler) admit(ctx context.Context, c *copyState, placements []nodefit.Placement) error {
	wl := c.wl.DeepCopy()
	wl.Status.Admission = admissionOf(c)
	now := s.Clock.Now()
	// The planned nodes go in the conditions, which are written anyway, rather than in an event
	// of their own: a routine admission is not a decision anyone acts on, and an event per copy
	// was one more write per workload on a busy worker.
	msg := workload.Truncate(fmt.Sprintf("Admitted by fleetq-agent in cluster %s on %s", s.ClusterName, describe(placements)))
	workload.SetCondition(wl, kueue.WorkloadQuotaReserved, metav1.ConditionTrue, fleetq.AdmittedReason, msg, now)
	workload.SetCondition(wl, kueue.WorkloadAdmitted, metav1.ConditionTrue, fleetq.AdmittedReason, msg, now)
	if err := s.patchStatus(ctx, c.wl, wl); err != nil {
		return err
	}
	s.mu.Lock()
	s.admitted[c.wl.UID] = assumedAdmission{at: now}
	s.planned[c.wl.UID] = placements
	s.mu.Unlock()
	admissionsTotal.Inc()
	s.Log.V(1).Info("Admitted", "workload", klog(c.wl), "placements", placements)
	return s.setSuspend(ctx, c, false)
}

// admissionOf is the status.admission of an admitted copy: the origin ClusterQueue, and per pod
// set the flavors the manager admitted it with and count × per-pod requests.
func admissionOf(c *copyState) *kueue.Admission {
	a := &kueue.Admission{ClusterQueue: kueue.ClusterQueueReference(c.wl.Annotations[fleetq.OriginClusterQueueAnnotation])}
	flavors := podSetFlavors(c.wl)
	for _, ps := range c.plan.PodSets {
		usage := capacity.Amounts{}
		usage.AddScaled(ps.Requests, int64(ps.Count))
		delete(usage, corev1.ResourcePods)
		psa := kueue.PodSetAssignment{
			Name:          kueue.PodSetReference(ps.Name),
			ResourceUsage: usage.List(),
			Count:         ptr.To(ps.Count),
		}
		if f := flavors[psa.Name]; len(f) > 0 {
			psa.Flavors = maps.Clone(f)
		}
		a.PodSetAssignments = append(a.PodSetAssignments, psa)
	}
	return a
}

// evict suspends the copy's job and marks its Workload Evicted (and Preempted, for a preemption).
func (s *Scheduler) evict(ctx context.Context, c *copyState, reason, msg string, preempted bool) error {
	wl := c.wl.DeepCopy()
	now := s.Clock.Now()
	workload.SetCondition(wl, kueue.WorkloadEvicted, metav1.ConditionTrue, reason, msg, now)
	if preempted {
		workload.SetCondition(wl, kueue.WorkloadPreempted, metav1.ConditionTrue, kueue.InClusterQueueReason, msg, now)
	}
	if err := s.patchStatus(ctx, c.wl, wl); err != nil {
		return err
	}
	s.mu.Lock()
	s.evictions[c.wl.UID] = true
	delete(s.admitted, c.wl.UID)
	s.mu.Unlock()
	evictionsTotal.WithLabelValues(reason).Inc()
	s.Log.Info("Evicted", "workload", klog(c.wl), "reason", reason, "message", msg)
	return s.setSuspend(ctx, c, true)
}

// setPending records why a copy is not admitted, writing only when the reason changed.
func (s *Scheduler) setPending(ctx context.Context, c *copyState, msg string) error {
	wl := c.wl.DeepCopy()
	if !workload.SetCondition(wl, kueue.WorkloadQuotaReserved, metav1.ConditionFalse, fleetq.PendingReason, msg, s.Clock.Now()) {
		return nil
	}
	return s.patchStatus(ctx, c.wl, wl)
}

// finish mirrors a finished job into the copy's Finished condition.
func (s *Scheduler) finish(ctx context.Context, c *copyState) error {
	wl := c.wl.DeepCopy()
	if !workload.SetCondition(wl, kueue.WorkloadFinished, metav1.ConditionTrue, c.finished.reason, c.finished.message, s.Clock.Now()) {
		return nil
	}
	return s.patchStatus(ctx, c.wl, wl)
}

// converge keeps each copy's job in the state its Workload calls for: running when admitted,
// suspended otherwise (a write that failed halfway is completed by the next pass), and releases an
// evicted copy's admission once its pods are gone.
func (s *Scheduler) converge(ctx context.Context, copies []*copyState) []error {
	var errs []error
	for _, c := range copies {
		_, assumed := s.assumed(c.wl)
		switch {
		case workload.IsEvicted(c.wl) || s.evicted(c.wl):
			if err := s.setSuspend(ctx, c, true); err != nil {
				errs = append(errs, err)
				continue
			}
			// Only once the cache shows the eviction, so the release patches the current object.
			if workload.IsEvicted(c.wl) && c.wl.Status.Admission != nil && len(c.plan.Held) == 0 {
				errs = append(errs, s.release(ctx, c))
			}
		case workload.HasQuotaReservation(c.wl) || assumed:
			errs = append(errs, s.setSuspend(ctx, c, false))
		default:
			// Not admitted here: whoever unsuspended it, its pods must not start.
			errs = append(errs, s.setSuspend(ctx, c, true))
		}
	}
	return errs
}

// release clears an evicted copy's admission once none of its pods hold room any more.
func (s *Scheduler) release(ctx context.Context, c *copyState) error {
	wl := c.wl.DeepCopy()
	msg := "evicted; its pods are gone"
	if ev := findCondition(wl, kueue.WorkloadEvicted); ev != nil {
		msg = ev.Message
	}
	now := s.Clock.Now()
	wl.Status.Admission = nil
	workload.SetCondition(wl, kueue.WorkloadQuotaReserved, metav1.ConditionFalse, fleetq.PendingReason, msg, now)
	workload.SetCondition(wl, kueue.WorkloadAdmitted, metav1.ConditionFalse, fleetq.NoReservationReason, "The workload has no reservation", now)
	return s.patchStatus(ctx, c.wl, wl)
}

func findCondition(wl *kueue.Workload, typ string) *metav1.Condition {
	for i := range wl.Status.Conditions {
		if wl.Status.Conditions[i].Type == typ {
			return &wl.Status.Conditions[i]
		}
	}
	return nil
}

// patchStatus writes a Workload's status with optimistic locking: the manager may write the same
// object, and a JSON merge patch replaces the whole conditions list.
func (s *Scheduler) patchStatus(ctx context.Context, orig, changed *kueue.Workload) error {
	err := s.Client.Status().Patch(ctx, changed, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
	switch {
	case err == nil:
		return nil
	case apierrors.IsConflict(err):
		// The cache is behind a newer version (often our own last write); its event brings
		// another pass, which decides again on the current object.
		return errStale
	case apierrors.IsNotFound(err):
		return errStale
	}
	return fmt.Errorf("workload %q: patch status: %w", workload.Key(orig), err)
}

// setSuspend suspends or starts a copy's job (every member, for a group) when it is not so
// already.
func (s *Scheduler) setSuspend(ctx context.Context, c *copyState, suspend bool) error {
	var errs []error
	for _, obj := range c.objects() {
		errs = append(errs, s.setSuspendOne(ctx, c.a, obj, suspend))
	}
	return errors.Join(errs...)
}

// setSuspendOne suspends or starts one job copy. A started copy of a kind that cannot be held
// again (a Pod) is deleted instead, unless it finished: the manager requeues its workload, whose
// gated Pod never ran in the management cluster.
func (s *Scheduler) setSuspendOne(ctx context.Context, a integration.Adapter, obj client.Object, suspend bool) error {
	name := obj.GetNamespace() + "/" + obj.GetName()
	if a.Suspended(obj) == suspend || obj.GetDeletionTimestamp() != nil {
		return nil
	}
	if suspend && integration.StopsByDeletion(a) {
		if a.Status(obj).Finished {
			return nil
		}
		err := s.Client.Delete(ctx, obj, client.Preconditions{UID: ptr.To(obj.GetUID())}, client.PropagationPolicy(metav1.DeletePropagationBackground))
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("%s %q: delete to stop it: %w", a.GVK().Kind, name, err)
		}
		s.Log.Info("Copy deleted to stop it: a started one cannot be held again", "kind", a.GVK().Kind, "job", name)
		return nil
	}
	changed := obj.DeepCopyObject().(client.Object)
	a.SetSuspended(changed, suspend)
	if err := s.Client.Patch(ctx, changed, client.MergeFrom(obj)); apierrors.IsNotFound(err) {
		return errStale
	} else if err != nil {
		return fmt.Errorf("%s %q: set suspended=%t: %w", a.GVK().Kind, name, suspend, err)
	}
	a.SetSuspended(obj, suspend)
	return nil
}

// errStale means a write found the object changed or gone since the cache read it: not a failure,
// the pass that the change triggers decides again.
var errStale = errors.New("object changed since it was read")

func describe(placements []nodefit.Placement) string {
	var parts []string
	for _, pl := range placements {
		for _, nc := range pl.Nodes {
			parts = append(parts, fmt.Sprintf("%s×%d", nc.Node, nc.Count))
		}
	}
	sort.Strings(parts)
	return fmt.Sprint(parts)
}

func klog(wl *kueue.Workload) string { return workload.Key(wl) }
