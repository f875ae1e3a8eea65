// Package jobs integrates batch/v1 Jobs: a Job labelled with kueue.x-k8s.io/queue-name is created
// suspended (webhook), gets one Workload, starts when the Workload is admitted (with its flavor's
// node labels and tolerations injected), stops and requeues when it is evicted, and releases its
// quota the moment it finishes or is deleted. Pending jobs create no pods, ever.
package jobs

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/go-logr/logr"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/config"
	"github.com/fleetq/fleetq/internal/workload"
)

// Labels and values the integration uses.
const (
	// JobUIDLabel on a Workload holds the UID of the Job it was created for (as in Kueue).
	JobUIDLabel = "kueue.x-k8s.io/job-uid"
	// OwnerJobIndex indexes Workloads by the name of the Job that owns them.
	OwnerJobIndex = "fleetq.ownerJob"
	// ManagedByMultiKueue is the spec.managedBy of Jobs that run in a worker cluster: the
	// management cluster's job controller leaves them alone and dispatch mirrors their status.
	ManagedByMultiKueue = kueue.MultiKueueControllerName
)

// Reasons of the events and conditions this package writes.
const (
	ReasonCreatedWorkload = "CreatedWorkload"
	ReasonStarted         = "Started"
	ReasonStopped         = "Stopped"
	ReasonPending         = "Pending"
)

// Reconciler drives one Job and its Workload through their life.
type Reconciler struct {
	Client   client.Client
	Clock    clock.PassiveClock
	Recorder events.EventRecorder
	Log      logr.Logger
	Config   *config.Configuration
}

// SetupIndexes registers the field index from Workload to owning Job name.
func SetupIndexes(ctx context.Context, mgr ctrl.Manager) error {
	return mgr.GetFieldIndexer().IndexField(ctx, &kueue.Workload{}, OwnerJobIndex, func(o client.Object) []string {
		for _, ref := range o.GetOwnerReferences() {
			if ref.Kind == "Job" && ref.APIVersion == batchv1.SchemeGroupVersion.String() {
				return []string{ref.Name}
			}
		}
		return nil
	})
}

// SetupWithManager registers the controller; Workload changes reach the owning Job.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("jobs").
		For(&batchv1.Job{}).
		Watches(&kueue.Workload{}, handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), &batchv1.Job{}, handler.OnlyControllerOwner())).
		WithOptions(controller.Options{MaxConcurrentReconciles: 16}).
		Complete(r)
}

// Reconcile moves one Job a step; every step is decided from what the objects say now.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	res, err := r.reconcile(ctx, req)
	if apierrors.IsConflict(err) {
		// A write raced with the scheduler's (admission, eviction): retried from fresh state,
		// not logged as an error.
		return reconcile.Result{Requeue: true}, nil
	}
	return res, err
}

func (r *Reconciler) reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	job := &batchv1.Job{}
	if err := r.Client.Get(ctx, req.NamespacedName, job); err != nil {
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, r.deleteOrphans(ctx, req.NamespacedName, "")
		}
		return reconcile.Result{}, err
	}
	if !Managed(job, r.Config) {
		return reconcile.Result{}, nil
	}
	// Workloads of an earlier Job with the same name go; quota they hold is released.
	if err := r.deleteOrphans(ctx, req.NamespacedName, job.UID); err != nil {
		return reconcile.Result{}, err
	}
	wl, err := r.ensureWorkload(ctx, job)
	if err != nil || wl == nil {
		return reconcile.Result{}, err
	}
	log := r.Log.WithValues("job", req.NamespacedName, "workload", wl.Name)

	if done, reason, msg := Finished(job); done {
		return reconcile.Result{}, r.finish(ctx, wl, reason, msg)
	}
	if workload.IsFinished(wl) {
		return reconcile.Result{}, nil
	}
	switch {
	case workload.HasQuotaReservation(wl) && (workload.IsEvicted(wl) || !workload.IsActive(wl)):
		return r.stop(ctx, log, job, wl)
	case workload.IsAdmitted(wl) && !workload.IsEvicted(wl):
		return reconcile.Result{}, r.start(ctx, log, job, wl)
	case !workload.HasQuotaReservation(wl):
		return reconcile.Result{}, r.keepSuspended(ctx, job, wl)
	}
	return reconcile.Result{}, nil
}

// Managed reports whether fleetq manages the Job: it names a queue, or the configuration
// manages jobs without one. Jobs owned by another workload-managing object are left alone.
func Managed(job *batchv1.Job, cfg *config.Configuration) bool {
	if _, ok := job.Labels[kueue.QueueNameLabel]; ok {
		return true
	}
	return cfg != nil && cfg.ManageJobsWithoutQueueName
}

// Dispatched reports whether a Job runs in a worker cluster (spec.managedBy is MultiKueue's):
// its pods never exist here and its status is mirrored from the worker's copy.
func Dispatched(job *batchv1.Job) bool {
	return job.Spec.ManagedBy != nil && *job.Spec.ManagedBy == ManagedByMultiKueue
}

// Finished reports whether a Job has finished, with the workload reason and a message.
func Finished(job *batchv1.Job) (bool, string, string) {
	for _, c := range job.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			return true, kueue.WorkloadFinishedReasonSucceeded, "Job finished successfully"
		case batchv1.JobFailed:
			msg := c.Message
			if msg == "" {
				msg = "Job failed"
			}
			return true, kueue.WorkloadFinishedReasonFailed, msg
		}
	}
	return false, "", ""
}

func (r *Reconciler) ensureWorkload(ctx context.Context, job *batchv1.Job) (*kueue.Workload, error) {
	name := workload.NameFor("Job", job.Name, job.UID)
	wl := &kueue.Workload{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: job.Namespace, Name: name}, wl)
	if err == nil {
		if !workload.HasQuotaReservation(wl) && !workload.IsFinished(wl) && !PodSetsEqual(wl.Spec.PodSets, PodSets(job)) {
			// The job was edited while it waited: the workload follows it.
			orig := wl.DeepCopy()
			wl.Spec.PodSets = PodSets(job)
			if err := r.Client.Patch(ctx, wl, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
				return nil, fmt.Errorf("updating workload %s/%s of job %s: %w", wl.Namespace, wl.Name, job.Name, err)
			}
		}
		return wl, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, err
	}
	if done, _, _ := Finished(job); done {
		return nil, nil // finished before we saw it: nothing to account
	}
	wl, err = r.newWorkload(ctx, job, name)
	if err != nil {
		r.event(job, corev1.EventTypeWarning, "WorkloadNotCreated", "%v", err)
		return nil, err
	}
	if err := r.Client.Create(ctx, wl); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil, nil // created by an earlier reconcile; the watch brings it
		}
		return nil, fmt.Errorf("creating workload for job %s/%s: %w", job.Namespace, job.Name, err)
	}
	r.event(job, corev1.EventTypeNormal, ReasonCreatedWorkload, "Created Workload: %s/%s", wl.Namespace, wl.Name)
	return wl, nil
}

func (r *Reconciler) newWorkload(ctx context.Context, job *batchv1.Job, name string) (*kueue.Workload, error) {
	wl := &kueue.Workload{
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: job.Namespace,
			Labels:    map[string]string{JobUIDLabel: string(job.UID)},
		},
		Spec: kueue.WorkloadSpec{
			PodSets:   PodSets(job),
			QueueName: kueue.LocalQueueName(job.Labels[kueue.QueueNameLabel]),
		},
	}
	if err := r.setPriority(ctx, job, wl); err != nil {
		return nil, err
	}
	if err := controllerutil.SetControllerReference(job, wl, r.Client.Scheme()); err != nil {
		return nil, err
	}
	return wl, nil
}

// setPriority takes the priority from the job's WorkloadPriorityClass label, else from its pod
// template's PriorityClass, else 0.
func (r *Reconciler) setPriority(ctx context.Context, job *batchv1.Job, wl *kueue.Workload) error {
	if name := job.Labels[kueue.PriorityClassLabel]; name != "" {
		wpc := &kueue.WorkloadPriorityClass{}
		if err := r.Client.Get(ctx, types.NamespacedName{Name: name}, wpc); err != nil {
			return fmt.Errorf("job %s/%s: label %s names WorkloadPriorityClass %q: %w", job.Namespace, job.Name, kueue.PriorityClassLabel, name, err)
		}
		wl.Spec.PriorityClassRef = &kueue.PriorityClassRef{Group: kueue.WorkloadPriorityClassGroup, Kind: kueue.WorkloadPriorityClassKind, Name: name}
		wl.Spec.Priority = ptr.To(wpc.Value)
		return nil
	}
	if name := job.Spec.Template.Spec.PriorityClassName; name != "" {
		pc := &schedulingv1.PriorityClass{}
		if err := r.Client.Get(ctx, types.NamespacedName{Name: name}, pc); err != nil {
			return fmt.Errorf("job %s/%s: spec.template.spec.priorityClassName names PriorityClass %q: %w", job.Namespace, job.Name, name, err)
		}
		wl.Spec.PriorityClassRef = &kueue.PriorityClassRef{Group: kueue.PodPriorityClassGroup, Kind: kueue.PodPriorityClassKind, Name: name}
		wl.Spec.Priority = ptr.To(pc.Value)
		return nil
	}
	wl.Spec.Priority = ptr.To[int32](0)
	return nil
}

func (r *Reconciler) finish(ctx context.Context, wl *kueue.Workload, reason, msg string) error {
	if workload.IsFinished(wl) {
		return nil
	}
	orig := wl.DeepCopy()
	workload.SetCondition(wl, kueue.WorkloadFinished, metav1.ConditionTrue, reason, msg, r.Clock.Now())
	return client.IgnoreNotFound(r.Client.Status().Patch(ctx, wl, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})))
}

// start injects the admitted flavors' placement into the pod template and unsuspends the Job,
// in one write. Job patches carry no resourceVersion: the job controller rewrites status all the
// time, and the fields written here (suspend, the template while suspended) are ours alone.
func (r *Reconciler) start(ctx context.Context, log logr.Logger, job *batchv1.Job, wl *kueue.Workload) error {
	if !ptr.Deref(job.Spec.Suspend, false) {
		return nil
	}
	flavors, err := r.flavorsOf(ctx, wl)
	if err != nil {
		return err
	}
	orig := job.DeepCopy()
	// A dispatched job runs from its copy in the worker, which gets the placement there; its
	// template here stays as the user wrote it.
	dispatched := Dispatched(job)
	for i := range wl.Status.Admission.PodSetAssignments {
		psa := &wl.Status.Admission.PodSetAssignments[i]
		if psa.Name == PodSetName && !dispatched {
			Inject(&job.Spec.Template, PlacementFor(psa, flavors, wl.Status.AdmissionChecks))
			if psa.Count != nil && *psa.Count < ptr.Deref(job.Spec.Parallelism, 1) {
				job.Spec.Parallelism = ptr.To(*psa.Count) // partial admission
			}
		}
	}
	job.Spec.Suspend = ptr.To(false)
	if err := r.Client.Patch(ctx, job, client.MergeFrom(orig)); err != nil {
		return fmt.Errorf("starting job %s/%s: %w", job.Namespace, job.Name, err)
	}
	log.V(2).Info("Job started")
	r.event(job, corev1.EventTypeNormal, ReasonStarted, "Admitted by ClusterQueue %s", wl.Status.Admission.ClusterQueue)
	return nil
}

// stop suspends an evicted Job, then restores its template, and once its pods are gone releases
// the reservation and requeues the workload with backoff. The API server accepts a template change
// only on a suspended Job that is not started (the job controller clears status.startTime once it
// has suspended it), so suspending and restoring are two writes.
func (r *Reconciler) stop(ctx context.Context, log logr.Logger, job *batchv1.Job, wl *kueue.Workload) (reconcile.Result, error) {
	reason, msg := evictionCause(wl)
	if !ptr.Deref(job.Spec.Suspend, false) {
		orig := job.DeepCopy()
		job.Spec.Suspend = ptr.To(true)
		if err := r.Client.Patch(ctx, job, client.MergeFrom(orig)); err != nil {
			return reconcile.Result{}, fmt.Errorf("suspending job %s/%s: %w", job.Namespace, job.Name, err)
		}
		log.V(2).Info("Job suspended", "reason", reason)
		r.event(job, corev1.EventTypeNormal, ReasonStopped, "%s", msg)
		return reconcile.Result{}, nil
	}
	if Dispatched(job) {
		// Dispatch requeues it once the worker's copies are confirmed gone, so no copy can
		// start again while the workload is placed elsewhere.
		return reconcile.Result{}, nil
	}
	if job.Status.Active > 0 || ptr.Deref(job.Status.Terminating, 0) > 0 || (job.Status.StartTime != nil && !jobSuspendedCondition(job)) {
		return reconcile.Result{}, nil // the job controller is still stopping it; its status update brings us back
	}
	if len(wl.Spec.PodSets) > 0 {
		orig := job.DeepCopy()
		Restore(&job.Spec.Template, &wl.Spec.PodSets[0].Template)
		if !equality.Semantic.DeepEqual(orig.Spec.Template, job.Spec.Template) {
			err := r.Client.Patch(ctx, job, client.MergeFrom(orig))
			switch {
			case apierrors.IsInvalid(err):
				// An API server without mutable scheduling directives for suspended Jobs (before
				// Kubernetes 1.35) keeps the template: the workload is requeued all the same.
				log.Info("Template of the suspended job could not be restored", "error", err.Error())
			case err != nil:
				return reconcile.Result{}, fmt.Errorf("restoring the template of job %s/%s: %w", job.Namespace, job.Name, err)
			}
		}
	}
	return reconcile.Result{}, Requeue(ctx, r.Client, r.Clock, r.Config.RequeuingStrategy, wl)
}

// jobSuspendedCondition says whether the job controller has marked the Job suspended.
func jobSuspendedCondition(job *batchv1.Job) bool {
	for _, c := range job.Status.Conditions {
		if c.Type == batchv1.JobSuspended {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

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

// keepSuspended re-suspends a pending Job that someone unsuspended: it must not create pods
// before admission (the webhook refuses such edits; this covers jobs from before fleetq ran).
func (r *Reconciler) keepSuspended(ctx context.Context, job *batchv1.Job, wl *kueue.Workload) error {
	if ptr.Deref(job.Spec.Suspend, false) || Dispatched(job) {
		return nil
	}
	orig := job.DeepCopy()
	job.Spec.Suspend = ptr.To(true)
	if err := r.Client.Patch(ctx, job, client.MergeFrom(orig)); err != nil {
		return fmt.Errorf("suspending pending job %s/%s: %w", job.Namespace, job.Name, err)
	}
	r.event(job, corev1.EventTypeNormal, ReasonStopped, "Suspended: workload %s is not admitted", wl.Name)
	return nil
}

func (r *Reconciler) flavorsOf(ctx context.Context, wl *kueue.Workload) (map[kueue.ResourceFlavorReference]*kueue.ResourceFlavor, error) {
	out := map[kueue.ResourceFlavorReference]*kueue.ResourceFlavor{}
	for _, psa := range wl.Status.Admission.PodSetAssignments {
		for _, name := range psa.Flavors {
			if _, ok := out[name]; ok {
				continue
			}
			rf := &kueue.ResourceFlavor{}
			if err := r.Client.Get(ctx, types.NamespacedName{Name: string(name)}, rf); err != nil {
				return nil, fmt.Errorf("workload %s/%s: resourceflavor %q: %w", wl.Namespace, wl.Name, name, err)
			}
			out[name] = rf
		}
	}
	return out, nil
}

// deleteOrphans deletes the workloads of a job name whose owner is not the job with uid (all
// of them when uid is empty: the job is gone). Deleting releases their quota at once, without
// waiting for the garbage collector.
func (r *Reconciler) deleteOrphans(ctx context.Context, job types.NamespacedName, uid types.UID) error {
	list := &kueue.WorkloadList{}
	if err := r.Client.List(ctx, list, client.InNamespace(job.Namespace), client.MatchingFields{OwnerJobIndex: job.Name}); err != nil {
		return fmt.Errorf("listing workloads of job %s: %w", job, err)
	}
	for i := range list.Items {
		wl := &list.Items[i]
		if metav1.IsControlledBy(wl, &metav1.ObjectMeta{UID: uid}) && uid != "" {
			continue
		}
		if err := r.Client.Delete(ctx, wl, client.Preconditions{UID: &wl.UID}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting workload %s/%s of deleted job %s: %w", wl.Namespace, wl.Name, job, err)
		}
	}
	return nil
}

func (r *Reconciler) event(job *batchv1.Job, typ, reason, format string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(job, nil, typ, reason, reason, format, args...)
	}
}
