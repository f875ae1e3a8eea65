// Package integration is the one contract between fleetq and the kinds of jobs it queues. An
// Adapter describes one kind (batch/v1 Job, a Kubeflow training job, a RayJob, ...): its pod sets,
// how to suspend and start it with the admitted flavors injected per pod set, whether it finished,
// its managedBy field, the copy a worker runs and how that copy's status comes back. The manager's
// job controller and webhook, dispatch and the worker's agent reach a kind only through this
// contract; nothing else in fleetq knows about kinds.
//
// Identity: every pod template fleetq starts carries WorkloadUIDLabel (the management cluster
// Workload's UID) and PodSetLabel, so pods are found, counted and matched to their pod set the same
// way for every kind, locally and in workers.
package integration

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetq "github.com/fleetq/fleetq/api/fleetq/v1alpha1"
	kueue "github.com/fleetq/fleetq/api/v1beta2"
)

// Labels fleetq puts on the pod templates it starts (see the package comment).
const (
	// WorkloadUIDLabel carries the UID of the management cluster's Workload.
	WorkloadUIDLabel = fleetq.WorkloadUIDLabel
	// PodSetLabel carries the pod set's name (Kueue's label).
	PodSetLabel = fleetq.PodSetLabel
	// ManagedLabel ("true") marks every pod fleetq manages: the pods it started and the plain
	// Pods it holds; the manager caches only pods carrying it.
	ManagedLabel = "kueue.x-k8s.io/managed"
)

// Adapter integrates one kind of job. Its methods are pure: they read or change the object they
// are given and never call the API server; the caller reads and writes.
type Adapter interface {
	// Framework is the kind's name in the configuration's integrations.frameworks, as in Kueue
	// ("batch/job", "kubeflow.org/pytorchjob", "ray.io/rayjob").
	Framework() string
	// GVK is the kind's group, version and kind.
	GVK() schema.GroupVersionKind
	// Fields names the kind's fields in messages to users.
	Fields() Fields
	// New returns an empty object of the kind, with its GVK set when it is unstructured.
	New() client.Object

	// PodSets describes the job as its workload's pod sets: a name, a count and the pod template
	// as the user wrote it, in a stable order. An error names the field that is wrong.
	PodSets(obj client.Object) ([]kueue.PodSet, error)

	// Suspended reports whether the job creates no pods (its suspend field, or a scheduling gate).
	Suspended(obj client.Object) bool
	// SetSuspended sets the suspend field.
	SetSuspended(obj client.Object, suspended bool)
	// ApplyPlacements injects each pod set's admitted placement (flavor node selector and
	// tolerations, identity labels, partial-admission count) into its pod template.
	ApplyPlacements(obj client.Object, placements []PodSetPlacement) error
	// RestorePodSets puts back the scheduling fields of the templates the user wrote (kept in the
	// workload's pod sets), undoing ApplyPlacements; it reports whether anything changed.
	RestorePodSets(obj client.Object, original []kueue.PodSet) bool

	// Status reads where the job is in its life.
	Status(obj client.Object) Status

	// ManagedBy is the job's managedBy field ("" when unset, which means the kind's own
	// controller).
	ManagedBy(obj client.Object) string
	// SetManagedBy sets the managedBy field; "" clears it.
	SetManagedBy(obj client.Object, controller string)

	// Copy is the object a worker runs: name, namespace, labels and annotations of obj, and its
	// spec without what the management cluster's controllers or API server filled in (status,
	// generated selectors). The caller suspends it, clears managedBy and applies placements.
	Copy(obj client.Object) client.Object
	// MirrorStatus copies the worker copy's status into the local object and reports whether it
	// changed anything. A nil remote means the copy is gone: the local status stops saying that
	// pods run (as the kind's controller would for a suspended job), so the next copy's status can
	// be mirrored.
	MirrorStatus(local, remote client.Object) bool
}

// Fields names a kind's fields in messages, as paths ("spec.suspend").
type Fields struct {
	Suspend string
	// ManagedBy is empty for a kind without one: on a multi-cluster queue its object here stays
	// suspended while its copy runs in a worker (Kubeflow's jobs).
	ManagedBy string
	// Size is where a pod set's pod count is written (spec.parallelism), for messages; empty
	// for kinds with one count per pod set of their own.
	Size string
}

// Status is where a job is in its life, as its kind's status says.
type Status struct {
	// Finished is true once the job ran to its end; Failed tells how, Message says why.
	Finished bool
	Failed   bool
	Message  string
	// Active is true while the job may still have pods (running, or terminating after a
	// suspend): a stopped job's reservation is released only once Active is false.
	Active bool
	// Ending is true once the job's result is decided but its controller has not marked it
	// finished yet (a batch/v1 Job with SuccessCriteriaMet or FailureTarget, waiting for its
	// pods to go): a copy that is ending is kept until it finishes, not deleted and run again.
	Ending bool
}

// EndTracker is implemented by kinds whose controller records a pod's end in the job's status
// some time after the pod ended (a batch/v1 Job, through its tracking finalizer): until it has,
// the job's status understates what ran, and a copy whose pods succeeded may look unfinished.
type EndTracker interface {
	// EndNotRecorded says whether the pod ended successfully and its job's status does not count
	// it yet.
	EndNotRecorded(pod *corev1.Pod) bool
}

// Deleter is implemented by kinds that cannot be suspended again once started (a Pod): fleetq
// stops an evicted one by deleting it instead, and does not requeue it.
type Deleter interface {
	StopByDeletion() bool
}

// StopsByDeletion reports whether a started job of the kind is stopped by deleting it (Deleter)
// rather than by suspending it, for the manager and the agent alike.
func StopsByDeletion(a Adapter) bool {
	d, ok := a.(Deleter)
	return ok && d.StopByDeletion()
}

// Grouper is implemented by kinds whose objects may join a group that runs as one workload, all
// of its members or none (Kueue's pod groups: Pods labelled kueue.x-k8s.io/pod-group-name). The
// group's Workload is named after the group and exists once every member does; the kind's own
// controller leaves grouped objects to the group controller.
type Grouper interface {
	// Group names the group obj belongs to and how many members the group has; name is "" for an
	// object on its own. An error is a *field.Error naming the label or annotation that is wrong.
	Group(obj client.Object) (name string, size int32, err error)
	// GroupLabel is the label whose value is the group's name, to list a group's members.
	GroupLabel() string
	// NewList returns an empty list of the kind.
	NewList() client.ObjectList
	// GroupPodSets describes a group's members as its workload's pod sets, members with the same
	// pod spec in one pod set, in a stable order, and says which pod set each member is in.
	GroupPodSets(members []client.Object) ([]kueue.PodSet, []kueue.PodSetReference)
}

// Reclaimer is implemented by kinds whose pods finish one by one (a Job with completions): how
// many pods of each pod set have finished for good and no longer need room.
type Reclaimer interface {
	ReclaimablePods(obj client.Object) map[kueue.PodSetReference]int32
}

// FinishedReason is the Workload Finished condition's reason for a status.
func (s Status) FinishedReason() string {
	if s.Failed {
		return kueue.WorkloadFinishedReasonFailed
	}
	return kueue.WorkloadFinishedReasonSucceeded
}

// PodSetPlacement is what admission adds to one pod set's template.
type PodSetPlacement struct {
	// Name is the pod set's name.
	Name kueue.PodSetReference
	// Count, when set, is the admitted number of pods (partial admission).
	Count *int32
	Placement
}

// ErrNoPodSet says a placement names a pod set the object does not have.
func ErrNoPodSet(a Adapter, obj client.Object, name kueue.PodSetReference) error {
	return fmt.Errorf("%s %s/%s has no pod set %q", a.GVK().Kind, obj.GetNamespace(), obj.GetName(), name)
}
