// Package jobs runs every integrated kind of job through its Workload, through the kind's
// integration.Adapter: a job labelled with kueue.x-k8s.io/queue-name is created suspended
// (webhook), gets one Workload, starts when the Workload is admitted (with its flavors' node
// labels, tolerations and fleetq's identity labels injected per pod set), stops and requeues when
// it is evicted, and releases its quota the moment it finishes or is deleted. Pending jobs create
// no pods, ever. One controller runs per integrated kind.
package jobs

import (
	"context"
	"fmt"
	"strings"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
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

	fleetq "github.com/fleetq/fleetq/api/fleetq/v1alpha1"
	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/config"
	"github.com/fleetq/fleetq/internal/integration"
	"github.com/fleetq/fleetq/internal/workload"
)

// Labels and values the integration uses.
const (
	// JobUIDLabel on a Workload holds the UID of the job it was created for (as in Kueue).
	JobUIDLabel = "kueue.x-k8s.io/job-uid"
	// OwnerIndex indexes Workloads by the kind and name of the job that owns them (OwnerKey).
	OwnerIndex = "fleetq.ownerJob"
	// ManagedByMultiKueue is the managedBy of jobs that run in a worker cluster: the management
	// cluster's controllers leave them alone and dispatch mirrors their status.
	ManagedByMultiKueue = kueue.MultiKueueControllerName
)

// Reasons of the events and conditions this package writes.
const (
	ReasonStarted = "Started"
	ReasonStopped = "Stopped"
	ReasonPending = "Pending"
)

// Reconciler drives the jobs of one kind and their Workloads through their life.
type Reconciler struct {
	Adapter integration.Adapter
	// Integrations tells jobs that another integrated job owns (a RayJob's RayCluster, a
	// JobSet's Jobs): those are left to their owner's workload.
	Integrations *integration.Registry
	Client       client.Client
	Clock        clock.PassiveClock
	Recorder     events.EventRecorder
	Log          logr.Logger
	Config       *config.Configuration
}

// OwnerKey is the OwnerIndex value of a job: "<group>/<Kind>/<name>".
func OwnerKey(gvk schema.GroupVersionKind, name string) string {
	return gvk.Group + "/" + gvk.Kind + "/" + name
}

// SetupIndexes registers the field index from Workload to owning job.
func SetupIndexes(ctx context.Context, mgr ctrl.Manager) error {
	return mgr.GetFieldIndexer().IndexField(ctx, &kueue.Workload{}, OwnerIndex, func(o client.Object) []string {
		ref := metav1.GetControllerOf(o)
		if ref == nil {
			return nil
		}
		gv, err := schema.ParseGroupVersion(ref.APIVersion)
		if err != nil {
			return nil
		}
		return []string{OwnerKey(gv.WithKind(ref.Kind), ref.Name)}
	})
}

// SetupWithManager registers the kind's controller; Workload changes reach the owning job.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName(r.Adapter)).
		For(r.Adapter.New()).
		Watches(&kueue.Workload{}, handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), r.Adapter.New(), handler.OnlyControllerOwner())).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(r.podOwner)).
		WithOptions(controller.Options{MaxConcurrentReconciles: 16}).
		Complete(r)
}

// ControllerName names a kind's controller in logs and metrics: "jobs" for batch/v1 Jobs (as
// before there were other kinds), "jobs-<kind>" for the others.
func ControllerName(a integration.Adapter) string {
	if a.GVK().Group == "batch" && a.GVK().Kind == "Job" {
		return "jobs"
	}
	return "jobs-" + strings.ToLower(a.GVK().Kind)
}

// Reconcile moves one job a step; every step is decided from what the objects say now.
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
	obj := r.Adapter.New()
	if err := r.Client.Get(ctx, req.NamespacedName, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, r.deleteOrphans(ctx, req.NamespacedName, "")
		}
		return reconcile.Result{}, err
	}
	if !Managed(obj, r.Config, r.Integrations) || Grouped(r.Adapter, obj) {
		return reconcile.Result{}, nil // a group's members are the group controller's
	}
	// Workloads of an earlier job with the same name go; quota they hold is released.
	if err := r.deleteOrphans(ctx, req.NamespacedName, obj.GetUID()); err != nil {
		return reconcile.Result{}, err
	}
	st := r.Adapter.Status(obj)
	wl, err := r.ensureWorkload(ctx, obj, st)
	if err != nil || wl == nil {
		return reconcile.Result{}, err
	}
	log := r.Log.WithValues(strings.ToLower(r.Adapter.GVK().Kind), req.NamespacedName, "workload", wl.Name)

	if st.Finished {
		return reconcile.Result{}, r.finish(ctx, wl, st)
	}
	if workload.IsFinished(wl) {
		return reconcile.Result{}, nil
	}
	switch {
	case workload.HasQuotaReservation(wl) && (workload.IsEvicted(wl) || !workload.IsActive(wl)):
		return r.stop(ctx, log, obj, wl, st)
	case workload.IsAdmitted(wl) && !workload.IsEvicted(wl):
		return reconcile.Result{}, r.start(ctx, log, obj, wl)
	case !workload.HasQuotaReservation(wl):
		return reconcile.Result{}, r.keepSuspended(ctx, obj, wl)
	}
	return reconcile.Result{}, nil
}

// Managed reports whether fleetq manages a job: it names a queue, or the configuration manages
// jobs without one. A job another integrated job owns (a RayJob's RayCluster, whose labels KubeRay
// copies from the RayJob) is its owner's business: its owner's workload accounts for it.
func Managed(obj client.Object, cfg *config.Configuration, integrations *integration.Registry) bool {
	if integrations != nil {
		if _, _, owned := integrations.Owner(obj); owned {
			return false
		}
	}
	if _, ok := obj.GetLabels()[kueue.QueueNameLabel]; ok {
		return true
	}
	return cfg != nil && cfg.ManageJobsWithoutQueueName
}

// Dispatched reports whether a job runs in a worker cluster: its managedBy is MultiKueue's, or,
// for a kind without managedBy, its workload was placed on a worker. Its pods never exist here
// and its status is mirrored from the worker's copy.
func Dispatched(a integration.Adapter, obj client.Object, wl *kueue.Workload) bool {
	if a.Fields().ManagedBy == "" {
		return wl != nil && workload.ClusterName(wl) != ""
	}
	return a.ManagedBy(obj) == ManagedByMultiKueue
}

// StaysSuspended reports whether a dispatched job of this kind stays suspended here while its
// copy runs: a kind without managedBy has no other way to keep its controller here from
// running it too.
func StaysSuspended(a integration.Adapter) bool { return a.Fields().ManagedBy == "" }

// WorkloadName is the name of a job's Workload: its group's name for a member of a group.
func WorkloadName(a integration.Adapter, obj client.Object) string {
	if g, ok := a.(integration.Grouper); ok {
		if name, _, err := g.Group(obj); err == nil && name != "" {
			return name
		}
	}
	return workload.NameFor(a.GVK().Kind, obj.GetName(), obj.GetUID())
}

// Grouped reports whether obj is a member of a group (integration.Grouper), which runs as one
// workload through the group controller rather than as a job of its own.
func Grouped(a integration.Adapter, obj client.Object) bool {
	g, ok := a.(integration.Grouper)
	if !ok {
		return false
	}
	_, ok = obj.GetLabels()[g.GroupLabel()]
	return ok
}

func (r *Reconciler) ensureWorkload(ctx context.Context, obj client.Object, st integration.Status) (*kueue.Workload, error) {
	name := WorkloadName(r.Adapter, obj)
	wl := &kueue.Workload{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: obj.GetNamespace(), Name: name}, wl)
	if err == nil {
		if !workload.HasQuotaReservation(wl) && !workload.IsFinished(wl) {
			podSets, err := r.Adapter.PodSets(obj)
			if err != nil {
				return nil, nil // the job was edited into something invalid; its webhook refuses that
			}
			// The job was edited while it waited (its queue-name label fixed, its size or
			// managedBy changed): the workload follows it, in one write.
			managedBy, recorded := wl.Annotations[fleetq.JobManagedByAnnotation]
			managedByChanged := recorded && managedBy != r.Adapter.ManagedBy(obj)
			q := kueue.LocalQueueName(obj.GetLabels()[kueue.QueueNameLabel])
			moved := q != "" && q != wl.Spec.QueueName
			resized := !integration.PodSetsEqual(wl.Spec.PodSets, podSets)
			if managedByChanged || moved || resized {
				orig := wl.DeepCopy()
				if managedByChanged {
					wl.Annotations[fleetq.JobManagedByAnnotation] = r.Adapter.ManagedBy(obj)
				}
				if moved {
					wl.Spec.QueueName = q
				}
				if resized {
					wl.Spec.PodSets = podSets
				}
				if err := r.Client.Patch(ctx, wl, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
					return nil, fmt.Errorf("updating workload %s/%s of %s %s: %w", wl.Namespace, wl.Name, r.Adapter.GVK().Kind, obj.GetName(), err)
				}
			}
		}
		return wl, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, err
	}
	if st.Finished {
		return nil, nil // finished before we saw it: nothing to account
	}
	wl, err = r.newWorkload(ctx, obj, name)
	if err != nil {
		r.event(obj, corev1.EventTypeWarning, "WorkloadNotCreated", "%v", err)
		return nil, err
	}
	if err := r.Client.Create(ctx, wl); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil, nil // created by an earlier reconcile; the watch brings it
		}
		err = fmt.Errorf("creating workload for %s %s/%s: %w", r.Adapter.GVK().Kind, obj.GetNamespace(), obj.GetName(), err)
		if apierrors.IsInvalid(err) || apierrors.IsForbidden(err) {
			// Refused for what the job says (validation, a webhook): retrying cannot help until
			// the job changes, and the user must hear why.
			r.event(obj, corev1.EventTypeWarning, "WorkloadNotCreated", "%v", err)
		}
		return nil, err
	}
	// No event for the creation: a bookkeeping step the user acts on no more than on the
	// Workload itself; the decisions (quota reserved and where, started, stopped) have theirs.
	return wl, nil
}

func (r *Reconciler) newWorkload(ctx context.Context, obj client.Object, name string) (*kueue.Workload, error) {
	podSets, err := r.Adapter.PodSets(obj)
	if err != nil {
		return nil, err
	}
	wl := &kueue.Workload{
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: obj.GetNamespace(),
			Labels:    map[string]string{JobUIDLabel: string(obj.GetUID())},
		},
		Spec: kueue.WorkloadSpec{
			PodSets:   podSets,
			QueueName: kueue.LocalQueueName(obj.GetLabels()[kueue.QueueNameLabel]),
		},
	}
	if r.Adapter.Fields().ManagedBy != "" {
		wl.Annotations = map[string]string{fleetq.JobManagedByAnnotation: r.Adapter.ManagedBy(obj)}
	}
	if err := setPriority(ctx, r.Client, r.Adapter.GVK().Kind, obj, wl); err != nil {
		return nil, err
	}
	if err := controllerutil.SetControllerReference(obj, wl, r.Client.Scheme()); err != nil {
		return nil, err
	}
	return wl, nil
}

// setPriority takes the priority from the job's WorkloadPriorityClass label, else from the first
// pod set's PriorityClass, else 0.
func setPriority(ctx context.Context, c client.Reader, kind string, obj client.Object, wl *kueue.Workload) error {
	if name := obj.GetLabels()[kueue.PriorityClassLabel]; name != "" {
		wpc := &kueue.WorkloadPriorityClass{}
		if err := c.Get(ctx, types.NamespacedName{Name: name}, wpc); err != nil {
			return fmt.Errorf("%s %s/%s: label %s names WorkloadPriorityClass %q: %w", kind, obj.GetNamespace(), obj.GetName(), kueue.PriorityClassLabel, name, err)
		}
		wl.Spec.PriorityClassRef = &kueue.PriorityClassRef{Group: kueue.WorkloadPriorityClassGroup, Kind: kueue.WorkloadPriorityClassKind, Name: name}
		wl.Spec.Priority = ptr.To(wpc.Value)
		return nil
	}
	for _, ps := range wl.Spec.PodSets {
		name := ps.Template.Spec.PriorityClassName
		if name == "" {
			continue
		}
		pc := &schedulingv1.PriorityClass{}
		if err := c.Get(ctx, types.NamespacedName{Name: name}, pc); err != nil {
			return fmt.Errorf("%s %s/%s: pod set %q's priorityClassName names PriorityClass %q: %w", kind, obj.GetNamespace(), obj.GetName(), ps.Name, name, err)
		}
		wl.Spec.PriorityClassRef = &kueue.PriorityClassRef{Group: kueue.PodPriorityClassGroup, Kind: kueue.PodPriorityClassKind, Name: name}
		wl.Spec.Priority = ptr.To(pc.Value)
		return nil
	}
	wl.Spec.Priority = ptr.To[int32](0)
	return nil
}

func (r *Reconciler) finish(ctx context.Context, wl *kueue.Workload, st integration.Status) error {
	if workload.IsFinished(wl) {
		return nil
	}
	orig := wl.DeepCopy()
	msg := st.Message
	if msg == "" {
		msg = r.Adapter.GVK().Kind + " finished"
	}
	workload.SetCondition(wl, kueue.WorkloadFinished, metav1.ConditionTrue, st.FinishedReason(), msg, r.Clock.Now())
	return client.IgnoreNotFound(r.Client.Status().Patch(ctx, wl, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})))
}

// start injects the admitted placement into the pod templates and unsuspends the job, in one
// write. Job patches carry no resourceVersion: the kind's controller rewrites status all the
// time, and the fields written here (suspend, the templates while suspended) are ours alone.
func (r *Reconciler) start(ctx context.Context, log logr.Logger, obj client.Object, wl *kueue.Workload) error {
	if !r.Adapter.Suspended(obj) {
		return nil
	}
	dispatched := Dispatched(r.Adapter, obj, wl)
	if (workload.ClusterName(wl) != "") != dispatched {
		// Admitted to run where its managedBy does not let it (its ClusterQueue changed since it
		// was queued): never started here, and dispatch never copies it; the workloads controller
		// keeps it pending with the reason once it is requeued.
		log.Info("Admitted job not started: its managedBy does not match where it was placed", "managedBy", r.Adapter.ManagedBy(obj), "cluster", workload.ClusterName(wl))
		return nil
	}
	if dispatched && StaysSuspended(r.Adapter) {
		return nil
	}
	orig := obj.DeepCopyObject().(client.Object)
	// A dispatched job runs from its copy in the worker, which gets the placement there; its
	// templates here stay as the user wrote them.
	if !dispatched {
		flavors, err := Flavors(ctx, r.Client, wl)
		if err != nil {
			return err
		}
		if err := r.Adapter.ApplyPlacements(obj, integration.Placements(wl, flavors, wl.Status.AdmissionChecks)); err != nil {
			return fmt.Errorf("starting %s %s/%s: %w", r.Adapter.GVK().Kind, obj.GetNamespace(), obj.GetName(), err)
		}
	}
	r.Adapter.SetSuspended(obj, false)
	if err := r.Client.Patch(ctx, obj, client.MergeFrom(orig)); err != nil {
		return fmt.Errorf("starting %s %s/%s: %w", r.Adapter.GVK().Kind, obj.GetNamespace(), obj.GetName(), err)
	}
	log.V(2).Info("Job started")
	r.event(obj, corev1.EventTypeNormal, ReasonStarted, "Admitted by ClusterQueue %s", wl.Status.Admission.ClusterQueue)
	return nil
}

// stop suspends an evicted job, then restores its templates, and once its pods are gone releases
// the reservation and requeues the workload. The API server accepts a template change only on a
// suspended job whose pods are gone (for a batch/v1 Job, once the job controller cleared its start
// time), so suspending and restoring are two writes.
func (r *Reconciler) stop(ctx context.Context, log logr.Logger, obj client.Object, wl *kueue.Workload, st integration.Status) (reconcile.Result, error) {
	reason, msg := evictionCause(wl)
	if integration.StopsByDeletion(r.Adapter) && !r.Adapter.Suspended(obj) {
		// A started Pod cannot be held again: it is deleted, and its workload goes with it once
		// the pod is gone (its quota with it); nothing is requeued.
		if obj.GetDeletionTimestamp() == nil {
			if err := r.Client.Delete(ctx, obj, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
				return reconcile.Result{}, fmt.Errorf("deleting %s %s/%s to stop it: %w", r.Adapter.GVK().Kind, obj.GetNamespace(), obj.GetName(), err)
			}
			log.V(2).Info("Job deleted to stop it", "reason", reason)
			r.event(obj, corev1.EventTypeNormal, ReasonStopped, "%s; deleted, since a started %s cannot be held again", msg, r.Adapter.GVK().Kind)
		}
		return reconcile.Result{}, nil
	}
	if !r.Adapter.Suspended(obj) {
		orig := obj.DeepCopyObject().(client.Object)
		r.Adapter.SetSuspended(obj, true)
		if err := r.Client.Patch(ctx, obj, client.MergeFrom(orig)); err != nil {
			return reconcile.Result{}, fmt.Errorf("suspending %s %s/%s: %w", r.Adapter.GVK().Kind, obj.GetNamespace(), obj.GetName(), err)
		}
		log.V(2).Info("Job suspended", "reason", reason)
		r.event(obj, corev1.EventTypeNormal, ReasonStopped, "%s", msg)
		return reconcile.Result{}, nil
	}
	if Dispatched(r.Adapter, obj, wl) {
		// Dispatch requeues it once the worker's copies are confirmed gone, so no copy can
		// start again while the workload is placed elsewhere.
		return reconcile.Result{}, nil
	}
	if st.Active {
		return reconcile.Result{}, nil // its controller is still stopping it; its status update brings us back
	}
	if n, err := runningPods(ctx, r.Client, wl); err != nil || n > 0 {
		if n > 0 {
			log.V(2).Info("Waiting for the stopped job's pods to end", "pods", n)
		}
		return reconcile.Result{}, err // the last pod's end brings us back (podOwner)
	}
	orig := obj.DeepCopyObject().(client.Object)
	if r.Adapter.RestorePodSets(obj, wl.Spec.PodSets) {
		err := r.Client.Patch(ctx, obj, client.MergeFrom(orig))
		switch {
		case apierrors.IsInvalid(err):
			// An API server that keeps the templates of suspended jobs immutable (a batch/v1 Job
			// before Kubernetes 1.35) keeps the placement: the workload is requeued all the same.
			log.Info("Templates of the suspended job could not be restored", "error", err.Error())
		case err != nil:
			return reconcile.Result{}, fmt.Errorf("restoring the templates of %s %s/%s: %w", r.Adapter.GVK().Kind, obj.GetNamespace(), obj.GetName(), err)
		}
	}
	return reconcile.Result{}, Requeue(ctx, r.Client, r.Clock, r.Config.RequeuingStrategy, wl)
}

// keepSuspended re-suspends a pending job that someone unsuspended: it must not create pods
// before admission (the webhook refuses such edits; this covers jobs from before fleetq ran).
func (r *Reconciler) keepSuspended(ctx context.Context, obj client.Object, wl *kueue.Workload) error {
	if r.Adapter.Suspended(obj) || Dispatched(r.Adapter, obj, wl) {
		return nil
	}
	orig := obj.DeepCopyObject().(client.Object)
	r.Adapter.SetSuspended(obj, true)
	if err := r.Client.Patch(ctx, obj, client.MergeFrom(orig)); err != nil {
		return fmt.Errorf("suspending pending %s %s/%s: %w", r.Adapter.GVK().Kind, obj.GetNamespace(), obj.GetName(), err)
	}
	r.event(obj, corev1.EventTypeNormal, ReasonStopped, "Suspended: workload %s is not admitted", wl.Name)
	return nil
}

// Flavors reads the ResourceFlavors an admitted workload's pod sets were assigned.
func Flavors(ctx context.Context, c client.Reader, wl *kueue.Workload) (integration.Flavors, error) {
	out := integration.Flavors{}
	for _, psa := range wl.Status.Admission.PodSetAssignments {
		for _, name := range psa.Flavors {
			if _, ok := out[name]; ok {
				continue
			}
			rf := &kueue.ResourceFlavor{}
			if err := c.Get(ctx, types.NamespacedName{Name: string(name)}, rf); err != nil {
				return nil, fmt.Errorf("workload %s/%s: resourceflavor %q: %w", wl.Namespace, wl.Name, name, err)
			}
			out[name] = rf
		}
	}
	return out, nil
}

// deleteOrphans deletes the workloads of a job name whose owner is not the job with uid (all of
// them when uid is empty: the job is gone). Deleting releases their quota at once, without
// waiting for the garbage collector.
func (r *Reconciler) deleteOrphans(ctx context.Context, job types.NamespacedName, uid types.UID) error {
	list := &kueue.WorkloadList{}
	if err := r.Client.List(ctx, list, client.InNamespace(job.Namespace), client.MatchingFields{OwnerIndex: OwnerKey(r.Adapter.GVK(), job.Name)}); err != nil {
		return fmt.Errorf("listing workloads of %s %s: %w", r.Adapter.GVK().Kind, job, err)
	}
	for i := range list.Items {
		wl := &list.Items[i]
		if metav1.IsControlledBy(wl, &metav1.ObjectMeta{UID: uid}) && uid != "" {
			continue
		}
		if err := r.Client.Delete(ctx, wl, client.Preconditions{UID: &wl.UID}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting workload %s/%s of deleted %s %s: %w", wl.Namespace, wl.Name, r.Adapter.GVK().Kind, job, err)
		}
	}
	return nil
}

func (r *Reconciler) event(obj client.Object, typ, reason, format string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(obj, nil, typ, reason, reason, format, args...)
	}
}
