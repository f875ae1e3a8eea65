// Package batchjob integrates batch/v1 Jobs: one pod set of parallelism pods (never more than
// completions) with the Job's pod template, suspended through spec.suspend, dispatched through
// spec.managedBy (immutable, so it is decided when the Job is created).
package batchjob

import (
	"maps"
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/internal/integration"
)

// Framework is the integration's name in integrations.frameworks.
const Framework = "batch/job"

// PodSetName is the one pod set of a Job.
const PodSetName kueue.PodSetReference = kueue.DefaultPodSetName

// Adapter is the batch/v1 Job integration.
type Adapter struct{}

var _ integration.Adapter = Adapter{}
var _ integration.Reclaimer = Adapter{}
var _ integration.EndTracker = Adapter{}

// Framework implements integration.Adapter.
func (Adapter) Framework() string { return Framework }

// GVK implements integration.Adapter.
func (Adapter) GVK() schema.GroupVersionKind { return batchv1.SchemeGroupVersion.WithKind("Job") }

// Fields implements integration.Adapter.
func (Adapter) Fields() integration.Fields {
	return integration.Fields{Suspend: "spec.suspend", ManagedBy: "spec.managedBy", Size: "spec.parallelism"}
}

// New implements integration.Adapter.
func (Adapter) New() client.Object { return &batchv1.Job{} }

func job(obj client.Object) *batchv1.Job { return obj.(*batchv1.Job) }

// PodSets is one set of parallelism pods (never more than completions) with the Job's template.
func (Adapter) PodSets(obj client.Object) ([]kueue.PodSet, error) {
	j := job(obj)
	count := ptr.Deref(j.Spec.Parallelism, 1)
	if c := j.Spec.Completions; c != nil && *c < count {
		count = *c
	}
	return []kueue.PodSet{{Name: PodSetName, Template: *j.Spec.Template.DeepCopy(), Count: count}}, nil
}

// Suspended implements integration.Adapter.
func (Adapter) Suspended(obj client.Object) bool { return ptr.Deref(job(obj).Spec.Suspend, false) }

// SetSuspended implements integration.Adapter.
func (Adapter) SetSuspended(obj client.Object, suspended bool) {
	job(obj).Spec.Suspend = ptr.To(suspended)
}

// ApplyPlacements injects the placement into the template and lowers parallelism to a partial
// admission's count.
func (a Adapter) ApplyPlacements(obj client.Object, placements []integration.PodSetPlacement) error {
	j := job(obj)
	for _, p := range placements {
		if p.Name != PodSetName {
			return integration.ErrNoPodSet(a, obj, p.Name)
		}
		integration.Inject(&j.Spec.Template, p.Placement)
		if p.Count != nil && *p.Count < ptr.Deref(j.Spec.Parallelism, 1) {
			j.Spec.Parallelism = ptr.To(*p.Count)
		}
	}
	return nil
}

// RestorePodSets implements integration.Adapter.
func (Adapter) RestorePodSets(obj client.Object, original []kueue.PodSet) bool {
	ps := integration.FindPodSet(original, PodSetName)
	if ps == nil {
		return false
	}
	return integration.Restore(&job(obj).Spec.Template, &ps.Template)
}

// Status reads the Job's terminal condition; its pods are gone once the job controller counts
// none active or terminating and, for a Job that ran, has marked it suspended.
func (Adapter) Status(obj client.Object) integration.Status {
	j := job(obj)
	var st integration.Status
	for _, c := range j.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobSuccessCriteriaMet, batchv1.JobFailureTarget:
			st.Ending = true
		case batchv1.JobComplete:
			st.Finished, st.Message = true, "Job finished successfully"
		case batchv1.JobFailed:
			st.Finished, st.Failed, st.Message = true, true, c.Message
			if st.Message == "" {
				st.Message = "Job failed: " + c.Reason
			}
		}
	}
	st.Active = j.Status.Active > 0 || ptr.Deref(j.Status.Terminating, 0) > 0 ||
		(j.Status.StartTime != nil && !suspendedCondition(j))
	return st
}

// EndNotRecorded: the job controller removes its tracking finalizer from a pod once the Job's
// status counts the pod's end; a Succeeded pod that still has it is not counted yet.
func (Adapter) EndNotRecorded(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded && slices.Contains(pod.Finalizers, batchv1.JobTrackingFinalizer)
}

// suspendedCondition says whether the job controller has marked the Job suspended.
func suspendedCondition(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == batchv1.JobSuspended {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// ReclaimablePods are the Job's succeeded pods that no longer need room: once fewer completions
// remain than parallelism, the rest of the pod set will not run again.
func (a Adapter) ReclaimablePods(obj client.Object) map[kueue.PodSetReference]int32 {
	j := job(obj)
	if j.Spec.Completions == nil {
		return nil
	}
	sets, _ := a.PodSets(obj)
	remaining := max(0, *j.Spec.Completions-j.Status.Succeeded)
	if n := sets[0].Count - remaining; n > 0 {
		return map[kueue.PodSetReference]int32{PodSetName: n}
	}
	return nil
}

// ManagedBy implements integration.Adapter.
func (Adapter) ManagedBy(obj client.Object) string { return ptr.Deref(job(obj).Spec.ManagedBy, "") }

// SetManagedBy implements integration.Adapter.
func (Adapter) SetManagedBy(obj client.Object, controller string) {
	j := job(obj)
	if controller == "" {
		j.Spec.ManagedBy = nil
		return
	}
	j.Spec.ManagedBy = ptr.To(controller)
}

// Copy keeps the Job's spec without the selector and the controller-uid labels the management
// cluster's API server generated (the worker's generates its own).
func (Adapter) Copy(obj client.Object) client.Object {
	j := job(obj)
	spec := *j.Spec.DeepCopy()
	spec.Selector, spec.ManualSelector = nil, nil
	for _, l := range []string{batchv1.ControllerUidLabel, batchv1.JobNameLabel, "controller-uid", "job-name"} {
		delete(spec.Template.Labels, l)
	}
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: j.Name, Namespace: j.Namespace, Labels: maps.Clone(j.Labels), Annotations: maps.Clone(j.Annotations)},
		Spec:       spec,
	}
}

// MirrorStatus replaces the local Job's status with its copy's (lists such as
// uncountedTerminatedPods must match exactly), keeping the local start time: the API server
// refuses to move an unsuspended Job's startTime once set, so a job dispatched again after a
// preemption keeps its first start (else its finish could never be mirrored).
func (Adapter) MirrorStatus(local, remote client.Object) bool {
	l := job(local)
	if remote == nil {
		// No pods, and no start time while suspended: startTime is immutable while a Job runs.
		st := *l.Status.DeepCopy()
		st.Active = 0
		for _, n := range []**int32{&st.Ready, &st.Terminating} {
			if ptr.Deref(*n, 0) != 0 {
				*n = ptr.To[int32](0)
			}
		}
		if ptr.Deref(l.Spec.Suspend, false) {
			st.StartTime = nil
		}
		if equality.Semantic.DeepEqual(l.Status, st) {
			return false
		}
		l.Status = st
		return true
	}
	st := *job(remote).Status.DeepCopy()
	if l.Status.StartTime != nil {
		st.StartTime = l.Status.StartTime
	}
	if equality.Semantic.DeepEqual(l.Status, st) {
		return false
	}
	l.Status = st
	return true
}
