// Package workload reads and changes the state of a Workload the same way everywhere: which phase
// it is in (pending, reserved, admitted, evicted, finished), when it queued, and the condition
// updates that move it between phases. Manager, dispatch and agent all use it, so a workload means
// the same thing to each of them.
package workload

import (
	"fmt"
	"hash/fnv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
)

// Key is how the engine and the queues name a workload: namespace/name.
func Key(wl *kueue.Workload) string { return wl.Namespace + "/" + wl.Name }

// SplitKey returns the namespace and name of a Key.
func SplitKey(key string) types.NamespacedName {
	ns, name, _ := strings.Cut(key, "/")
	return types.NamespacedName{Namespace: ns, Name: name}
}

// HasQuotaReservation reports whether the workload holds quota (QuotaReserved True with an admission).
func HasQuotaReservation(wl *kueue.Workload) bool {
	return wl.Status.Admission != nil && meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadQuotaReserved)
}

// IsAdmitted reports whether the workload is admitted: quota reserved and every check Ready.
func IsAdmitted(wl *kueue.Workload) bool {
	return meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadAdmitted)
}

// IsFinished reports whether the workload's job has finished.
func IsFinished(wl *kueue.Workload) bool {
	return meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadFinished)
}

// IsEvicted reports whether an eviction is under way or done.
func IsEvicted(wl *kueue.Workload) bool {
	return meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadEvicted)
}

// IsActive reports whether spec.active allows the workload to queue (unset means true).
func IsActive(wl *kueue.Workload) bool { return wl.Spec.Active == nil || *wl.Spec.Active }

// QueueTime is when the workload (re)joined its queue: its creation, or the last time it was
// requeued after an eviction, so an evicted workload does not jump ahead of ones that waited.
func QueueTime(wl *kueue.Workload) time.Time {
	t := wl.CreationTimestamp.Time
	if c := meta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadRequeued); c != nil && c.Status == metav1.ConditionTrue && c.LastTransitionTime.After(t) {
		t = c.LastTransitionTime.Time
	}
	return t
}

// RequeueAt is when a backed-off workload may queue again; zero when it may queue now.
func RequeueAt(wl *kueue.Workload) time.Time {
	if rs := wl.Status.RequeueState; rs != nil && rs.RequeueAt != nil {
		return rs.RequeueAt.Time
	}
	return time.Time{}
}

// ClusterName is the worker a workload was dispatched to, or "".
func ClusterName(wl *kueue.Workload) string {
	if wl.Status.ClusterName == nil {
		return ""
	}
	return *wl.Status.ClusterName
}

// SetCondition sets a condition with the given observation time and reports whether anything
// (status, reason or message) changed, so callers write only when it did.
func SetCondition(wl *kueue.Workload, typ string, status metav1.ConditionStatus, reason, message string, now time.Time) bool {
	c := metav1.Condition{
		Type:               typ,
		Status:             status,
		Reason:             reason,
		Message:            Truncate(message),
		ObservedGeneration: wl.Generation,
		LastTransitionTime: metav1.NewTime(now),
	}
	old := meta.FindStatusCondition(wl.Status.Conditions, typ)
	if old != nil && old.Status == c.Status && old.Reason == c.Reason && old.Message == c.Message && old.ObservedGeneration == c.ObservedGeneration {
		return false
	}
	meta.SetStatusCondition(&wl.Status.Conditions, c)
	return true
}

// Truncate keeps a condition message within the API's 32768-character limit.
func Truncate(msg string) string {
	const limit = 32768
	if len(msg) <= limit {
		return msg
	}
	return msg[:limit-3] + "..."
}

// NameFor derives a workload name from the owning object's kind, name and UID: readable, unique
// per object instance (a re-created job gets a new workload) and within name length limits.
func NameFor(kind, ownerName string, uid types.UID) string {
	h := fnv.New32a()
	h.Write([]byte(uid))
	suffix := fmt.Sprintf("%05x", h.Sum32()&0xfffff)
	prefix := strings.ToLower(kind) + "-" + ownerName
	if max := validation.DNS1123SubdomainMaxLength - len(suffix) - 1; len(prefix) > max {
		prefix = strings.TrimRight(prefix[:max], "-.")
	}
	return prefix + "-" + suffix
}
