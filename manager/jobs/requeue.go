package jobs

import (
	"context"
	"fmt"
	"math"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/config"
	"github.com/fleetq/fleetq/internal/workload"
)

// evictionCause is why a workload that holds quota must stop: its Evicted condition, or
// deactivation.
func evictionCause(wl *kueue.Workload) (reason, msg string) {
	if ev := meta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadEvicted); ev != nil && ev.Status == metav1.ConditionTrue {
		return ev.Reason, ev.Message
	}
	return kueue.WorkloadDeactivated, "The workload is deactivated (spec.active: false)"
}

// Requeue releases a stopped workload's reservation (its job has no pods left anywhere) and
// queues it again: at once after a preemption, else after its backoff, or deactivates it when it
// was requeued too often.
func Requeue(ctx context.Context, c client.Client, clk clock.PassiveClock, rq config.RequeuingStrategy, wl *kueue.Workload) error {
	reason, msg := evictionCause(wl)
	orig := wl.DeepCopy()
	now := clk.Now()
	wl.Status.Admission = nil
	wl.Status.ClusterName = nil
	wl.Status.AdmissionChecks = nil
	workload.SetCondition(wl, kueue.WorkloadQuotaReserved, metav1.ConditionFalse, ReasonPending, "Quota released: "+msg, now)
	workload.SetCondition(wl, kueue.WorkloadAdmitted, metav1.ConditionFalse, ReasonPending, "The workload was evicted: "+msg, now)
	patchStatus := func() error {
		return client.IgnoreNotFound(c.Status().Patch(ctx, wl, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})))
	}
	if !workload.IsActive(wl) {
		return patchStatus()
	}
	if !BacksOff(reason) {
		// Admission is decided by quota alone, so a preempted workload may queue again at once:
		// it is admitted only when there is room, and it queues behind the workloads that waited
		// (its queue order is the time of its eviction), as Kueue does.
		workload.SetCondition(wl, kueue.WorkloadRequeued, metav1.ConditionTrue, reason, "Queued again: "+msg, now)
		return patchStatus()
	}
	rs := wl.Status.RequeueState
	if rs == nil {
		rs = &kueue.RequeueState{}
	}
	count := ptr.Deref(rs.Count, 0) + 1
	if limit := rq.BackoffLimitCount; limit != nil && count > *limit {
		workload.SetCondition(wl, kueue.WorkloadRequeued, metav1.ConditionFalse, kueue.WorkloadRequeuingLimitExceeded,
			fmt.Sprintf("Evicted %d times, more than requeuingStrategy.backoffLimitCount (%d); set spec.active: true to try again", count, *limit), now)
		if err := patchStatus(); err != nil {
			return err
		}
		deact := wl.DeepCopy()
		wl.Spec.Active = ptr.To(false)
		return client.IgnoreNotFound(c.Patch(ctx, wl, client.MergeFrom(deact)))
	}
	delay := Backoff(count, ptr.Deref(rq.BackoffBaseSeconds, 60), ptr.Deref(rq.BackoffMaxSeconds, 3600))
	rs.Count = ptr.To(count)
	rs.RequeueAt = ptr.To(metav1.NewTime(now.Add(delay)))
	wl.Status.RequeueState = rs
	workload.SetCondition(wl, kueue.WorkloadRequeued, metav1.ConditionTrue, reason,
		fmt.Sprintf("Queued again after %s of backoff (eviction %d): %s", delay, count, msg), now)
	return patchStatus()
}

// BacksOff reports whether an eviction for reason waits out the requeuing backoff: a worker
// that rejected or lost the workload, or pods that did not become ready, may do so again if it
// is retried at once; a preemption only says that someone else needed the quota.
func BacksOff(reason string) bool {
	switch reason {
	case kueue.WorkloadEvictedByPreemption, kueue.WorkloadEvictedByClusterQueueStopped, kueue.WorkloadEvictedByLocalQueueStopped:
		return false
	}
	return true
}

// Backoff is the requeue delay after the n-th eviction: base × 2^(n-1), at most max.
func Backoff(n, baseSeconds, maxSeconds int32) time.Duration {
	d := float64(baseSeconds) * math.Pow(2, float64(n-1))
	return time.Duration(math.Min(d, float64(maxSeconds))) * time.Second
}
