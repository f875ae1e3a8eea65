// Package copies runs dispatched workloads in their worker: for a workload the scheduler placed
// (status.clusterName), it creates the Namespace (when missing), the Job and the Workload copy in
// that worker, turns the worker's verdict into the MultiKueue admission check (Ready: running
// there; Retry: evicted there, rejected there or lost with it), mirrors the worker's Job status
// into the management cluster's Job, and deletes the copies, after checking they are its own,
// when the workload finishes, is evicted or deleted.
package copies

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/hashicorp/go-multierror"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	fleetq "github.com/fleetq/fleetq/api/fleetq/v1alpha1"
	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/config"
	"github.com/fleetq/fleetq/dispatch/checks"
	"github.com/fleetq/fleetq/dispatch/placement"
	"github.com/fleetq/fleetq/dispatch/registry"
	"github.com/fleetq/fleetq/internal/integration"
	"github.com/fleetq/fleetq/internal/workload"
	"github.com/fleetq/fleetq/manager/jobs"
	"github.com/fleetq/fleetq/manager/metrics"
)

// Labels and annotations the manager puts on what it creates in workers.
const (
	// WorkloadNameAnnotation on a remote Job names the Workload it runs, to map its events back.
	WorkloadNameAnnotation = "fleetq.dev/workload-name"
	// CreatedByLabel marks Namespaces fleetq created in a worker.
	CreatedByLabel = "fleetq.dev/created-by"
)

// Reasons of admission check states and evictions this package writes.
const (
	ReasonRunning  = "Running"
	ReasonRejected = "Rejected"
)

// Reconciler syncs one dispatched workload with its worker.
type Reconciler struct {
	Client client.Client
	// Integrations are the kinds of jobs a workload may belong to.
	Integrations *integration.Registry
	Registry     *registry.Registry
	Book         *placement.Book
	Checks       *checks.Index
	Clock        clock.PassiveClock
	Log          logr.Logger
	Recorder     events.EventRecorder
	// Origin labels every remote object; only objects carrying it are ever deleted.
	Origin string
	// WorkerLostTimeout is how long an unreachable worker keeps its workloads; after it their
	// copies are taken as gone (the agent fenced them) and the workloads are placed elsewhere.
	WorkerLostTimeout time.Duration
	// RejectAfter is how long a copy may wait unadmitted in its worker, or the worker may refuse
	// to create it, before the workload is placed again.
	RejectAfter time.Duration
	// RefuseFor is how long a worker that refused a workload's copy is not tried again for it.
	RefuseFor time.Duration
	// MirrorInterval is the least time between two mirrors of a running job's status.
	MirrorInterval time.Duration
	// LostWorkerPolicy says whether the workloads of a worker unreachable for WorkerLostTimeout
	// are placed elsewhere (AtLeastOnce) or wait for it (AtMostOnce).
	LostWorkerPolicy string
	// Requeuing is the backoff applied when an evicted workload queues again.
	Requeuing config.RequeuingStrategy
	// Remote receives manager workloads to reconcile after a change seen in a worker.
	Remote chan event.TypedGenericEvent[*kueue.Workload]

	mu           sync.Mutex
	pendingSince map[string]time.Time
	lastMirror   map[string]time.Time
	// endingSince remembers since when a workload's job copy has been ending (its result decided,
	// its finish not yet written by its worker's controller).
	endingSince map[string]time.Time
	// namespaces remembers the namespaces seen to exist in workers ("cluster/namespace"), with
	// the resourceVersion of the management namespace whose Pod Security labels they were
	// brought in line with, so a reconcile does not ask the worker's API server again
	// (namespaces are not cached); a copy refused with NotFound forgets its namespace.
	namespaces map[string]string
	// unregistered remembers since when a worker that workloads are placed on is unregistered.
	unregistered map[string]time.Time
}

// SetupWithManager registers the controller.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.pendingSince, r.lastMirror, r.unregistered = map[string]time.Time{}, map[string]time.Time{}, map[string]time.Time{}
	r.endingSince = map[string]time.Time{}
	r.namespaces = map[string]string{}
	b := ctrl.NewControllerManagedBy(mgr).
		Named("dispatch").
		For(&kueue.Workload{}).
		WatchesRawSource(source.Channel(r.Remote, &handler.TypedEnqueueRequestForObject[*kueue.Workload]{}))
	for _, a := range r.Integrations.Adapters() {
		if g, ok := a.(integration.Grouper); ok {
			// A member that joins a dispatched group (a failed one's replacement) changes no
			// Workload: its creation here is what brings its copy.
			b = b.Watches(a.New(), handler.EnqueueRequestsFromMapFunc(func(_ context.Context, obj client.Object) []reconcile.Request {
				if name := obj.GetLabels()[g.GroupLabel()]; name != "" {
					return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: name}}}
				}
				return nil
			}), builder.WithPredicates(predicate.Funcs{
				// Updates are mostly this controller's own mirrored status: only a member's
				// arrival or departure changes what the group's copies must be.
				UpdateFunc: func(event.UpdateEvent) bool { return false },
			}))
		}
	}
	return b.WithOptions(controller.Options{MaxConcurrentReconciles: 8}).Complete(r)
}

// RemoteChanged is the registry's OnChange hook for copies: it maps a remote Workload or Job to
// the manager workload it belongs to.
func (r *Reconciler) RemoteChanged(_ string, obj client.Object) {
	if obj.GetLabels()[kueue.MultiKueueOriginLabel] != r.Origin {
		return
	}
	wl := &kueue.Workload{}
	wl.Namespace = obj.GetNamespace()
	switch o := obj.(type) {
	case *kueue.Workload:
		wl.Name = o.Name
	default:
		wl.Name = o.GetAnnotations()[WorkloadNameAnnotation]
	}
	if wl.Name == "" {
		return
	}
	r.Remote <- event.TypedGenericEvent[*kueue.Workload]{Object: wl}
}

// Reconcile moves one workload's copies a step; a write that lost a race with another
// controller is retried from fresh state, without logging it as an error.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	res, err := r.reconcile(ctx, req)
	if apierrors.IsConflict(err) {
		return reconcile.Result{Requeue: true}, nil
	}
	return res, err
}

func (r *Reconciler) reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	key := req.Namespace + "/" + req.Name
	wl := &kueue.Workload{}
	if err := r.Client.Get(ctx, req.NamespacedName, wl); err != nil {
		if !apierrors.IsNotFound(err) {
			return reconcile.Result{}, err
		}
		r.forget(key)
		r.Book.Release(key)
		return reconcile.Result{}, r.removeCopies(ctx, req.NamespacedName, copyRef{}, "", "")
	}
	cluster := workload.ClusterName(wl)
	check, ok := r.multiKueueCheck(wl)
	if !ok {
		if controllerutil.ContainsFinalizer(wl, fleetq.CopiesFinalizer) && (wl.DeletionTimestamp != nil || !workload.HasQuotaReservation(wl) || workload.IsFinished(wl)) {
			return r.stop(ctx, wl, cluster)
		}
		return reconcile.Result{}, nil
	}
	if wl.DeletionTimestamp != nil || !workload.HasQuotaReservation(wl) || workload.IsFinished(wl) || workload.IsEvicted(wl) || !workload.IsActive(wl) {
		return r.stop(ctx, wl, cluster)
	}
	if cluster == "" {
		// Quota reserved without a placement (e.g. by a manager that did not know the check
		// yet): place it again rather than hold quota nowhere.
		return reconcile.Result{}, r.evict(ctx, wl, check, "quota was reserved without a worker placement; placing it again")
	}
	w, h := r.Registry.Get(cluster)
	// Looked at on every pass, so a worker registered again loses its mark: its next removal
	// counts afresh.
	since, unregistered := r.unregisteredSince(cluster)
	if w == nil || !h.Active {
		if unregistered {
			// Its MultiKueueCluster (or Cluster API Cluster) is gone: the admin took the worker out.
			if r.Clock.Since(since) >= r.WorkerLostTimeout {
				metrics.WorkerLost(cluster, since)
				return reconcile.Result{}, r.evict(ctx, wl, check, fmt.Sprintf("worker %s lost: no longer registered (its MultiKueueCluster was deleted) for longer than workerLostTimeout (%s)", cluster, r.WorkerLostTimeout))
			}
			return reconcile.Result{RequeueAfter: time.Second}, r.setCheck(ctx, wl, check, kueue.CheckStatePending,
				fmt.Sprintf("worker %s is not registered (no MultiKueueCluster names it); placed elsewhere after workerLostTimeout (%s) unless it is registered again", cluster, r.WorkerLostTimeout))
		}
		if r.lost(cluster, h) {
			metrics.WorkerLost(cluster, h.Since)
			return reconcile.Result{}, r.evict(ctx, wl, check, fmt.Sprintf("worker %s lost: unreachable since %s (%s), longer than workerLostTimeout (%s)",
				cluster, h.Since.UTC().Format(time.RFC3339), h.Message, r.WorkerLostTimeout))
		}
		msg := fmt.Sprintf("waiting for worker %s to answer: %s", cluster, h.Message)
		if r.unreachableFor(h) >= r.WorkerLostTimeout {
			why := "multiCluster.lostWorkerPolicy: " + config.AtMostOnce
			if r.LostWorkerPolicy == config.AtLeastOnce {
				why = "its agent's fencingPolicy: " + config.FenceKeepRunning
			}
			msg = fmt.Sprintf("worker %s unreachable since %s (%s); its copy may still run there, so the workload is not placed elsewhere (%s): it goes on when the worker answers, or delete its MultiKueueCluster if the worker is gone for good",
				cluster, h.Since.UTC().Format(time.RFC3339), h.Message, why)
		}
		return reconcile.Result{RequeueAfter: time.Second}, r.setCheck(ctx, wl, check, kueue.CheckStatePending, msg)
	}
	job, err := r.managerJob(ctx, wl)
	if err != nil || job == nil {
		return reconcile.Result{}, err
	}
	if !jobs.Dispatched(job.a, job.obj, wl) {
		// Its own controller here would run it too: it is never copied (the workloads controller
		// keeps it pending with the reason once its reservation is released).
		msg := jobs.ManagedByProblem(r.Integrations, wl, string(wl.Status.Admission.ClusterQueue), true)
		if msg == "" {
			msg = fmt.Sprintf("%s %s is not managed by %s, so it would run in this cluster as well; not dispatched", job.a.GVK().Kind, job.obj.GetName(), jobs.ManagedByMultiKueue)
		}
		return reconcile.Result{}, r.evict(ctx, wl, check, msg)
	}
	remote, err := r.ensureCopies(ctx, w, wl, job)
	if err != nil {
		return r.copyFailed(ctx, wl, check, cluster, err)
	}
	res, err := r.follow(ctx, wl, check, w, remote)
	if err != nil {
		return res, err
	}
	return r.mirror(ctx, w, wl, job, res)
}

func (r *Reconciler) multiKueueCheck(wl *kueue.Workload) (kueue.AdmissionCheckReference, bool) {
	for _, ac := range wl.Status.AdmissionChecks {
		if r.Checks.IsMultiKueue(ac.Name) {
			return ac.Name, true
		}
	}
	return "", false
}

// unreachableFor is how long an inactive worker has been unreachable (0 when it is active or
// never answered).
func (r *Reconciler) unreachableFor(h registry.Health) time.Duration {
	if h.Active || h.Since.IsZero() {
		return 0
	}
	return r.Clock.Since(h.Since)
}

// lost reports whether an unreachable worker's copies count as gone, workerLostTimeout after
// it stopped answering, when the policy is at least once (its agent has fenced them, or the job
// may run twice); or workerLostTimeout after it was seen unregistered (its admin removed it: it
// is gone for good), whatever the policy. At most once, a worker that is merely unreachable keeps
// its workloads until it answers and their copies are confirmed gone.
func (r *Reconciler) lost(cluster string, h registry.Health) bool {
	if since, unregistered := r.unregisteredSince(cluster); unregistered {
		return r.Clock.Since(since) >= r.WorkerLostTimeout
	}
	if r.unreachableFor(h) < r.WorkerLostTimeout {
		return false
	}
	// At least once trusts the agent to have suspended the copies: not one that keeps them running.
	return r.LostWorkerPolicy == config.AtLeastOnce && !r.Book.KeepsRunningWhenFenced(cluster)
}

// unregisteredSince says whether a worker is unregistered and since when this reconciler has
// seen it so: counted from the first time it looked, not from the deletion (right after the
// manager starts workers are not registered yet, and their workloads must not count as lost),
// and the same time for every workload of the worker, so the outage is counted once.
func (r *Reconciler) unregisteredSince(cluster string) (time.Time, bool) {
	registered := r.Registry.Registered(cluster)
	r.mu.Lock()
	defer r.mu.Unlock()
	if registered {
		delete(r.unregistered, cluster)
		return time.Time{}, false
	}
	since, ok := r.unregistered[cluster]
	if !ok {
		since = r.Clock.Now()
		r.unregistered[cluster] = since
	}
	return since, true
}

func (r *Reconciler) forget(key string) {
	r.Book.Forget(key)
	r.mu.Lock()
	delete(r.pendingSince, key)
	delete(r.lastMirror, key)
	delete(r.endingSince, key)
	r.mu.Unlock()
}

// stop removes the copies of a workload that no longer runs in its worker. Once the worker
// confirms they are gone (or the worker is lost and its agent fenced them), it clears the
// mirrored job status and, for an evicted workload, requeues it: no copy can start again while
// the workload waits for, or runs in, another placement.
func (r *Reconciler) stop(ctx context.Context, wl *kueue.Workload, cluster string) (reconcile.Result, error) {
	key := workload.Key(wl)
	name := types.NamespacedName{Namespace: wl.Namespace, Name: wl.Name}
	finished, refused, err := r.finishedThere(ctx, wl, cluster)
	if err != nil || finished {
		// The copy finished as it was being stopped: its result stands, the workload is
		// Finished rather than run again.
		return reconcile.Result{}, err
	}
	ref := r.copyRefOf(wl)
	// A workload that did not finish here keeps the copy that finished (or is finishing) in its
	// worker: its result is mirrored on the next pass rather than deleted and the job run
	// again; unless this cluster's API server refused that result.
	keepIn := cluster
	if workload.IsFinished(wl) || wl.DeletionTimestamp != nil || refused {
		keepIn = ""
	}
	if err := r.removeCopies(ctx, name, ref, wl.UID, keepIn); err != nil {
		if errors.Is(err, errFinishedThere) {
			return reconcile.Result{RequeueAfter: time.Second}, nil
		}
		return reconcile.Result{RequeueAfter: time.Second}, err
	}
	if gone, err := r.copiesGone(ctx, name, ref, wl.UID, cluster); err != nil || !gone {
		// Deletions in flight, or pods still terminating; the worker's watch events bring us
		// back, and the requeue covers pods (not watched).
		return reconcile.Result{RequeueAfter: time.Second}, err
	}
	if err := r.holdCopies(ctx, wl, false); err != nil {
		return reconcile.Result{}, err
	}
	r.forget(key)
	if workload.IsFinished(wl) || wl.DeletionTimestamp != nil {
		r.Book.Release(key)
		return reconcile.Result{}, nil
	}
	job, err := r.managerJob(ctx, wl)
	if err != nil || job == nil {
		return reconcile.Result{}, err
	}
	for _, obj := range job.objects() {
		if job.a.Status(obj).Finished {
			continue // a group's member that ended: its result stands (a Pod cannot go back)
		}
		orig := obj.DeepCopyObject().(client.Object)
		if job.a.MirrorStatus(obj, nil) {
			// As the kind's controller does for a suspended job: no pods, so the next copy's
			// status can be mirrored.
			if err := r.Client.Status().Patch(ctx, obj, client.MergeFrom(orig)); err != nil {
				return reconcile.Result{}, client.IgnoreNotFound(err)
			}
		}
	}
	if !workload.HasQuotaReservation(wl) {
		return reconcile.Result{}, nil
	}
	if slices.ContainsFunc(job.objects(), func(o client.Object) bool { return !job.a.Suspended(o) }) {
		// The job integration suspends the job first; its Job is not watched here.
		return reconcile.Result{RequeueAfter: time.Second}, nil
	}
	return reconcile.Result{}, jobs.Requeue(ctx, r.Client, r.Clock, r.Requeuing, wl)
}

// finishedThere mirrors the final status of a copy that finished in its worker while its
// workload was being stopped (evicted as it completed, or while its worker was cut off), so the
// job integration records the result instead of running the job again. It reports whether it
// did. The copy is read from the worker's API server: right after a partition the cache may
// still show it running. refused says the management cluster's API server refused the result
// (the job then runs again).
func (r *Reconciler) finishedThere(ctx context.Context, wl *kueue.Workload, cluster string) (finished, refused bool, err error) {
	if workload.IsFinished(wl) || wl.DeletionTimestamp != nil || cluster == "" {
		return false, false, nil
	}
	w, h := r.Registry.Get(cluster)
	if w == nil || !h.Active {
		return false, false, nil
	}
	job, err := r.managerJob(ctx, wl)
	if err != nil || job == nil || !jobs.Dispatched(job.a, job.obj, wl) {
		return false, false, err
	}
	if job.finished(job.objects()) {
		return true, false, nil // already mirrored; the job integration finishes the workload
	}
	// Finished there only when every copy did (each member of a group).
	remotes := make([]client.Object, 0, len(job.objects()))
	for _, obj := range job.objects() {
		rjob := job.a.New()
		if err := w.Reader.Get(ctx, client.ObjectKeyFromObject(obj), rjob); err != nil {
			return false, false, client.IgnoreNotFound(err)
		}
		if !job.a.Status(rjob).Finished || rjob.GetAnnotations()[kueue.MultiKueueOriginUIDAnnotation] != string(wl.UID) {
			return false, false, nil
		}
		remotes = append(remotes, rjob)
	}
	for i, obj := range job.objects() {
		if err := r.writeMirror(ctx, job.a, obj, remotes[i]); err != nil {
			if apierrors.IsInvalid(err) {
				r.Log.Info("Finished copy's status not accepted; the job will run again", "job", client.ObjectKeyFromObject(obj), "kind", job.a.GVK().Kind, "error", err.Error())
				return false, true, nil
			}
			return false, false, err
		}
	}
	return true, false, nil
}

// copiesGone confirms with the API server of the workload's worker (not a cache) that its copies
// no longer exist; a lost worker counts as confirmed: its agent fenced them.
func (r *Reconciler) copiesGone(ctx context.Context, name types.NamespacedName, ref copyRef, uid types.UID, cluster string) (bool, error) {
	if cluster == "" {
		return true, nil
	}
	w, h := r.Registry.Get(cluster)
	if w == nil || !h.Active {
		return r.lost(cluster, h), nil
	}
	rwl := &kueue.Workload{}
	if err := w.Reader.Get(ctx, name, rwl); err == nil {
		if rwl.Annotations[kueue.MultiKueueOriginUIDAnnotation] == string(uid) {
			return false, nil
		}
	} else if !apierrors.IsNotFound(err) {
		return false, err
	}
	rjobs, err := r.jobCopies(ctx, w, w.Reader, name, ref)
	if err != nil {
		return false, err
	}
	for _, j := range rjobs {
		if j.obj.GetAnnotations()[kueue.MultiKueueOriginUIDAnnotation] == string(uid) {
			return false, nil
		}
	}
	if uid == "" {
		return true, nil
	}
	// A copy counts as gone only once its pods are: a deleted Job's pods run on through their
	// termination grace period, and the workload must not start elsewhere meanwhile.
	pods := &metav1.PartialObjectMetadataList{}
	pods.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PodList"))
	if err := w.Reader.List(ctx, pods, client.InNamespace(name.Namespace), client.MatchingLabels{fleetq.WorkloadUIDLabel: string(uid)}, client.Limit(1)); err != nil {
		return false, fmt.Errorf("listing pods of %s: %w", name, err)
	}
	return len(pods.Items) == 0, nil
}

// holdCopies puts (hold) or removes the finalizer that keeps a workload, and its quota, while
// copies of it may exist: put before the first copy is created, removed once they are
// confirmed gone.
func (r *Reconciler) holdCopies(ctx context.Context, wl *kueue.Workload, hold bool) error {
	if controllerutil.ContainsFinalizer(wl, fleetq.CopiesFinalizer) == hold {
		return nil
	}
	orig := wl.DeepCopy()
	if hold {
		controllerutil.AddFinalizer(wl, fleetq.CopiesFinalizer)
	} else {
		controllerutil.RemoveFinalizer(wl, fleetq.CopiesFinalizer)
	}
	return client.IgnoreNotFound(r.Client.Patch(ctx, wl, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})))
}

// copyRef names the job copy of a workload: its kind and the job's name (a copy has its job's
// name). Without a name (a group's workload, whose members come and go) it means every copy of
// the kind made for the workload; a zero copyRef (the workload is gone, so its job is unknown)
// searches every kind.
type copyRef struct {
	a    integration.Adapter
	name string
}

// copyRefOf names the job copy of a workload from its owner reference, or the kind of the group
// it runs.
func (r *Reconciler) copyRefOf(wl *kueue.Workload) copyRef {
	if a, _, ok := r.Integrations.GroupOf(wl); ok {
		return copyRef{a: a}
	}
	if ref, a, ok := r.Integrations.Owner(wl); ok {
		return copyRef{a: a, name: ref.Name}
	}
	return copyRef{}
}

// jobCopies reads the job copies of a workload from a worker through reader (its cache or its
// API server): by name when the workload's job is known, else by listing this manager's copies
// of every kind in the namespace.
func (r *Reconciler) jobCopies(ctx context.Context, w *registry.Worker, reader client.Reader, wl types.NamespacedName, ref copyRef) ([]job, error) {
	var candidates []job
	if ref.a != nil && ref.name != "" {
		if !w.Serves(ref.a.GVK()) {
			return nil, nil
		}
		j := ref.a.New()
		if err := reader.Get(ctx, types.NamespacedName{Namespace: wl.Namespace, Name: ref.name}, j); err != nil {
			return nil, client.IgnoreNotFound(err)
		}
		candidates = append(candidates, job{a: ref.a, obj: j})
	} else {
		kinds := r.Integrations.Adapters()
		if ref.a != nil {
			kinds = []integration.Adapter{ref.a}
		}
		for _, a := range kinds {
			if !w.Serves(a.GVK()) {
				continue
			}
			list, err := integration.NewList(a, r.Client.Scheme())
			if err != nil {
				return nil, err
			}
			if err := reader.List(ctx, list, client.InNamespace(wl.Namespace), client.MatchingLabels{kueue.MultiKueueOriginLabel: r.Origin}); err != nil {
				return nil, fmt.Errorf("listing %s copies: %w", a.GVK().Kind, err)
			}
			items, err := integration.Items(list)
			if err != nil {
				return nil, err
			}
			for _, obj := range items {
				candidates = append(candidates, job{a: a, obj: obj})
			}
		}
	}
	var out []job
	for _, j := range candidates {
		if j.obj.GetLabels()[kueue.MultiKueueOriginLabel] == r.Origin && j.obj.GetAnnotations()[WorkloadNameAnnotation] == wl.Name {
			out = append(out, j)
		}
	}
	return out, nil
}

// errFinishedThere says a job copy was kept because it finished (or is finishing) in its worker:
// its result is mirrored before the workload may be stopped.
var errFinishedThere = errors.New("the job copy finished in its worker; its result is kept")

// removeCopies deletes a workload's Workload and job copies from every worker, only those that
// carry this manager's origin and, when uid is set, that workload's UID. A worker that cannot be
// reached holds its copies until it is lost (its agent fenced them) or back (then they go).
//
// Copies are read from the worker's cache, and job copies deleted only at the version read, so a
// copy that finished since the cache saw it fails with a conflict rather than being deleted
// unseen; in worker keepIn, a copy that finished or is finishing stays (with its Workload copy)
// and errFinishedThere is returned. A copy the cache does not show yet is left for the next
// pass: copiesGone confirms with the API server of the workload's worker before it moves on,
// and the garbage collector removes what an unreachable worker kept.
func (r *Reconciler) removeCopies(ctx context.Context, wl types.NamespacedName, ref copyRef, uid types.UID, keepIn string) error {
	var errs *multierror.Error
	for _, c := range r.Registry.Names() {
		w, h := r.Registry.Get(c)
		if w == nil || !h.Active {
			// Its copies stay until it answers or is lost; copiesGone says so, and the caller
			// comes back, without an error to log every second meanwhile.
			continue
		}
		if err := r.removeFrom(ctx, w, wl, ref, uid, c == keepIn); err != nil {
			errs = multierror.Append(errs, fmt.Errorf("worker %s: %w", c, err))
		}
	}
	return errs.ErrorOrNil()
}

// removeFrom deletes a workload's copies from one worker: its job copies first, then, once no
// job copy is kept, its Workload copy (which the agent needs to account for a kept job copy).
// With keepFinished, the copies stay when every one finished or is finishing (a group's whole
// run; one member's end alone is not the group's result).
func (r *Reconciler) removeFrom(ctx context.Context, w *registry.Worker, wl types.NamespacedName, ref copyRef, uid types.UID, keepFinished bool) error {
	rjobs, err := r.jobCopies(ctx, w, w.Client, wl, ref)
	if err != nil {
		return err
	}
	rjobs = slices.DeleteFunc(rjobs, func(j job) bool { return !r.ours(j.obj, uid) })
	if keepFinished && len(rjobs) > 0 {
		if keep, err := r.keep(ctx, w, rjobs, uid); err != nil || keep {
			return cmp.Or(err, errFinishedThere)
		}
	}
	for _, j := range rjobs {
		if err := deleteAt(ctx, w, j.obj, true); err != nil {
			return err
		}
	}
	rwl := &kueue.Workload{}
	if err := w.Client.Get(ctx, wl, rwl); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !r.ours(rwl, uid) {
		return nil
	}
	return deleteAt(ctx, w, rwl, false)
}

// keep says whether every job copy finished or is finishing, by its status or by its pods.
func (r *Reconciler) keep(ctx context.Context, w *registry.Worker, rjobs []job, uid types.UID) (bool, error) {
	for _, j := range rjobs {
		if st := j.a.Status(j.obj); st.Finished || st.Ending {
			continue
		}
		if unrecorded, err := r.endsNotRecorded(ctx, w, j, uid); err != nil || !unrecorded {
			return false, err
		}
	}
	return true, nil
}

// endsNotRecorded says whether a pod of the job copy succeeded and the copy's status does not
// count it yet (its worker's job controller lags, e.g. just restarted with its API server): the
// copy may have run to its end, and must not be deleted before its status says so.
func (r *Reconciler) endsNotRecorded(ctx context.Context, w *registry.Worker, j job, uid types.UID) (bool, error) {
	t, ok := j.a.(integration.EndTracker)
	if !ok || uid == "" {
		return false, nil
	}
	pods := &corev1.PodList{}
	if err := w.Reader.List(ctx, pods, client.InNamespace(j.obj.GetNamespace()), client.MatchingLabels{fleetq.WorkloadUIDLabel: string(uid)}); err != nil {
		return false, fmt.Errorf("listing pods of %s copy %s/%s: %w", j.a.GVK().Kind, j.obj.GetNamespace(), j.obj.GetName(), err)
	}
	return slices.ContainsFunc(pods.Items, func(p corev1.Pod) bool { return t.EndNotRecorded(&p) }), nil
}

// ours says whether a copy read from a worker is this manager's, not already being deleted and,
// when uid is set, of that workload; a copy of another incarnation is left to garbage collection.
func (r *Reconciler) ours(obj client.Object, uid types.UID) bool {
	if obj.GetLabels()[kueue.MultiKueueOriginLabel] != r.Origin || obj.GetDeletionTimestamp() != nil {
		return false
	}
	return uid == "" || obj.GetAnnotations()[kueue.MultiKueueOriginUIDAnnotation] == string(uid)
}

// deleteAt deletes a copy read from a worker, only that object (its UID) and, with atVersion,
// only as it was read: a copy that changed since (it finished, say) fails with a conflict and
// is looked at again.
func deleteAt(ctx context.Context, w *registry.Worker, obj client.Object, atVersion bool) error {
	pre := client.Preconditions{UID: ptr.To(obj.GetUID())}
	if atVersion {
		pre.ResourceVersion = ptr.To(obj.GetResourceVersion())
	}
	err := w.Client.Delete(ctx, obj, pre, client.PropagationPolicy(metav1.DeletePropagationBackground))
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting %T %s/%s: %w", obj, obj.GetNamespace(), obj.GetName(), err)
	}
	return nil
}

// job is a manager workload's job, with its kind's adapter: one object, or the members of a
// group (integration.Grouper), each copied to the group's worker.
type job struct {
	a   integration.Adapter
	obj client.Object // the job, or a group's first member
	// members are a group's objects, sorted by name, and sets the pod set of each; nil for a
	// job of its own.
	members []client.Object
	sets    []kueue.PodSetReference
}

// objects are the objects a worker runs copies of: the job, or each member of its group.
func (j *job) objects() []client.Object {
	if j.members != nil {
		return j.members
	}
	return []client.Object{j.obj}
}

// finished reports whether every object has finished.
func (j *job) finished(objs []client.Object) bool {
	return !slices.ContainsFunc(objs, func(o client.Object) bool { return !j.a.Status(o).Finished })
}

// managerJob reads the job that owns a workload, or the members of the group it runs (nil when
// it has none, or they are gone).
func (r *Reconciler) managerJob(ctx context.Context, wl *kueue.Workload) (*job, error) {
	if a, _, ok := r.Integrations.GroupOf(wl); ok {
		members, sets, err := jobs.GroupMembers(ctx, r.Client, a, wl)
		if err != nil || len(members) == 0 {
			return nil, err
		}
		return &job{a: a, obj: members[0], members: members, sets: sets}, nil
	}
	ref, a, ok := r.Integrations.Owner(wl)
	if !ok {
		return nil, nil
	}
	obj := integration.NewObject(a, wl.Namespace, *ref)
	if err := r.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	if obj.GetUID() != ref.UID {
		return nil, nil
	}
	return &job{a: a, obj: obj}, nil
}

// ensureCopies creates what the worker needs to run the workload and returns the Workload copy.
func (r *Reconciler) ensureCopies(ctx context.Context, w *registry.Worker, wl *kueue.Workload, j *job) (*kueue.Workload, error) {
	if !w.Serves(j.a.GVK()) {
		return nil, fmt.Errorf("%w: it does not serve %s (install its CRD and operator there)", errNotServed, j.a.GVK().GroupKind())
	}
	if err := r.holdCopies(ctx, wl, true); err != nil {
		return nil, err
	}
	if err := r.ensureNamespace(ctx, w, wl.Namespace); err != nil {
		return nil, err
	}
	flavors, err := jobs.Flavors(ctx, r.Client, wl)
	if err != nil {
		return nil, err
	}
	placements := integration.Placements(wl, flavors, nil)
	var rjob client.Object
	for i, obj := range j.objects() {
		own, err := j.placementsOf(i, obj, placements)
		if err != nil {
			return nil, err
		}
		c, err := getOrCreate(ctx, w, client.ObjectKeyFromObject(obj), j.a.New(), func() (client.Object, error) {
			return r.remoteJob(wl, j.a, obj, own)
		})
		if err != nil {
			if apierrors.IsNotFound(err) {
				// The namespace was deleted in the worker since it was seen: create it again.
				r.namespaceGone(w, wl.Namespace)
			}
			return nil, fmt.Errorf("%s copy %s: %w", j.a.GVK().Kind, obj.GetName(), err)
		}
		if stale, err := r.replaceStale(ctx, w, c, wl.UID); stale || err != nil {
			return nil, err
		}
		// A group's Workload copy is owned by none of its members: the agent finds them by
		// the workload's UID label, and a member it deletes to stop it must not take the
		// Workload copy (and the eviction it records) with it.
		if j.members == nil {
			rjob = c
		}
	}
	rwl, err := getOrCreate(ctx, w, client.ObjectKeyFromObject(wl), &kueue.Workload{}, func() (*kueue.Workload, error) {
		policy, err := r.localPreemption(ctx, wl)
		if err != nil {
			return nil, err
		}
		return r.remoteWorkload(wl, j.a, rjob, policy, placements)
	})
	if err != nil {
		return nil, fmt.Errorf("workload copy: %w", err)
	}
	if stale, err := r.replaceStale(ctx, w, rwl, wl.UID); stale || err != nil {
		return nil, err
	}
	return rwl, nil
}

// placementsOf are the placements the copy of the job's i-th object carries: all of them for a
// job of its own; for a group's member, its pod set's, named after the member's own pod set
// (the group's Workload counts as many members of that shape as were admitted).
func (j *job) placementsOf(i int, obj client.Object, placements []integration.PodSetPlacement) ([]integration.PodSetPlacement, error) {
	if j.members == nil {
		return placements, nil
	}
	p, ok := integration.Find(placements, j.sets[i])
	if !ok {
		return nil, fmt.Errorf("%s %s is in pod set %q, which the workload's admission does not have", j.a.GVK().Kind, obj.GetName(), j.sets[i])
	}
	own, err := j.a.PodSets(obj)
	if err != nil || len(own) != 1 {
		return nil, fmt.Errorf("%s %s: a group's member must have one pod set: %v", j.a.GVK().Kind, obj.GetName(), err)
	}
	p.Name, p.Count = own[0].Name, nil
	return []integration.PodSetPlacement{p}, nil
}

// getOrCreate reads a copy from the worker's cache, or creates it from build when it is missing.
// When an earlier attempt created it and the cache has not seen it yet, it reads the copy from
// the API server: the caller needs what the server filled in (the Job's UID for the owner
// reference of the Workload copy).
func getOrCreate[T client.Object](ctx context.Context, w *registry.Worker, key client.ObjectKey, obj T, build func() (T, error)) (T, error) {
	err := w.Client.Get(ctx, key, obj)
	if !apierrors.IsNotFound(err) {
		return obj, err
	}
	if obj, err = build(); err != nil {
		return obj, err
	}
	err = w.Client.Create(ctx, obj)
	if apierrors.IsAlreadyExists(err) {
		err = w.Reader.Get(ctx, key, obj)
	}
	return obj, err
}

// replaceStale deletes a copy left by an earlier incarnation of the same workload name.
func (r *Reconciler) replaceStale(ctx context.Context, w *registry.Worker, obj client.Object, uid types.UID) (bool, error) {
	if obj.GetLabels()[kueue.MultiKueueOriginLabel] != r.Origin {
		return true, fmt.Errorf("%T %s/%s already exists in worker %s and %w; rename the job or remove that object", obj, obj.GetNamespace(), obj.GetName(), w.Name, errForeign)
	}
	if obj.GetAnnotations()[kueue.MultiKueueOriginUIDAnnotation] == string(uid) {
		return false, nil
	}
	err := w.Client.Delete(ctx, obj, client.Preconditions{UID: ptr.To(obj.GetUID())}, client.PropagationPolicy(metav1.DeletePropagationBackground))
	if err != nil && !apierrors.IsNotFound(err) {
		return true, err
	}
	return true, errors.New("a stale copy from an earlier workload of the same name is being deleted")
}

// remoteJob builds the worker's copy of a job: suspended (the agent starts it when it fits),
// without the queue label and managedBy, with the pod templates the user wrote plus the admitted
// placement (flavors' node selector and tolerations, identity labels).
func (r *Reconciler) remoteJob(wl *kueue.Workload, a integration.Adapter, obj client.Object, placements []integration.PodSetPlacement) (client.Object, error) {
	c := a.Copy(obj)
	labels := maps.Clone(c.GetLabels())
	if labels == nil {
		labels = map[string]string{}
	}
	delete(labels, kueue.QueueNameLabel)
	labels[kueue.MultiKueueOriginLabel] = r.Origin
	c.SetLabels(labels)
	annotations := maps.Clone(c.GetAnnotations())
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[kueue.MultiKueueOriginUIDAnnotation] = string(wl.UID)
	annotations[WorkloadNameAnnotation] = wl.Name
	c.SetAnnotations(annotations)
	a.SetSuspended(c, true)
	a.SetManagedBy(c, "")
	if err := a.ApplyPlacements(c, placements); err != nil {
		return nil, err
	}
	return c, nil
}

// localPreemption lets the agent evict lower-priority copies for this one when the workload's
// ClusterQueue allows any preemption.
func (r *Reconciler) localPreemption(ctx context.Context, wl *kueue.Workload) (fleetq.LocalPreemptionPolicy, error) {
	cq := &kueue.ClusterQueue{}
	if err := r.Client.Get(ctx, types.NamespacedName{Name: string(wl.Status.Admission.ClusterQueue)}, cq); err != nil {
		return "", fmt.Errorf("clusterqueue %s: %w", wl.Status.Admission.ClusterQueue, err)
	}
	if p := cq.Spec.Preemption; p != nil && (allows(p.WithinClusterQueue) || allows(p.ReclaimWithinCohort)) {
		return fleetq.LocalPreemptionLowerPriority, nil
	}
	return fleetq.LocalPreemptionNever, nil
}

func allows(p kueue.PreemptionPolicy) bool { return p != "" && p != kueue.PreemptionPolicyNever }

// remoteWorkload builds the worker's copy of a workload, owned by the job copy (nil rjob: by
// no one, for a group): its pod sets' templates carry the admitted placement, and
// PodSetFlavorsAnnotation the flavors, so the agent needs nothing of the job's kind to fit,
// count and check its pods.
func (r *Reconciler) remoteWorkload(wl *kueue.Workload, a integration.Adapter, rjob client.Object, policy fleetq.LocalPreemptionPolicy, placements []integration.PodSetPlacement) (*kueue.Workload, error) {
	flavors := map[kueue.PodSetReference]map[corev1.ResourceName]kueue.ResourceFlavorReference{}
	for _, psa := range wl.Status.Admission.PodSetAssignments {
		flavors[psa.Name] = psa.Flavors
	}
	flavorsJSON, err := json.Marshal(flavors)
	if err != nil {
		return nil, err
	}
	spec := *wl.Spec.DeepCopy()
	for i := range spec.PodSets {
		if p, ok := integration.Find(placements, spec.PodSets[i].Name); ok {
			integration.Inject(&spec.PodSets[i].Template, p.Placement)
		}
	}
	rwl := &kueue.Workload{
		ObjectMeta: metav1.ObjectMeta{
			Name: wl.Name, Namespace: wl.Namespace,
			Labels: map[string]string{kueue.MultiKueueOriginLabel: r.Origin},
			Annotations: map[string]string{
				kueue.MultiKueueOriginUIDAnnotation: string(wl.UID),
				fleetq.OriginClusterQueueAnnotation: string(wl.Status.Admission.ClusterQueue),
				fleetq.LocalPreemptionAnnotation:    string(policy),
				fleetq.PodSetFlavorsAnnotation:      string(flavorsJSON),
			},
		},
		Spec: spec,
	}
	if rjob != nil {
		rwl.OwnerReferences = []metav1.OwnerReference{{
			APIVersion: a.GVK().GroupVersion().String(), Kind: a.GVK().Kind, Name: rjob.GetName(), UID: rjob.GetUID(),
			Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
		}}
	} else if g, ok := a.(integration.Grouper); ok {
		// A group's copy: the agent knows it by the group label and runs every copy of the
		// kind that carries the workload's UID label.
		rwl.Labels[g.GroupLabel()] = wl.Labels[g.GroupLabel()]
	}
	return rwl, nil
}

// follow turns the worker's verdict on its copy into the admission check.
func (r *Reconciler) follow(ctx context.Context, wl *kueue.Workload, check kueue.AdmissionCheckReference, w *registry.Worker, remote *kueue.Workload) (reconcile.Result, error) {
	key, cluster := workload.Key(wl), w.Name
	if ev := meta.FindStatusCondition(remote.Status.Conditions, kueue.WorkloadEvicted); ev != nil && ev.Status == metav1.ConditionTrue {
		metrics.DispatchRejected(cluster, metrics.RejectedEvicted)
		msg := fmt.Sprintf("worker %s evicted its copy (%s): %s", cluster, ev.Reason, ev.Message)
		if ev.Reason == kueue.WorkloadEvictedByPreemption {
			// The agent made room for a higher-priority copy: a preemption, which queues again
			// at once (as the manager's own preemptions do), not a rejection that backs off.
			return reconcile.Result{}, r.evictPreempted(ctx, wl, check, remote, msg)
		}
		return reconcile.Result{}, r.evict(ctx, wl, check, msg)
	}
	if workload.HasQuotaReservation(remote) || meta.IsStatusConditionTrue(remote.Status.Conditions, kueue.WorkloadAdmitted) {
		r.mu.Lock()
		delete(r.pendingSince, key)
		r.mu.Unlock()
		if c := meta.FindStatusCondition(remote.Status.Conditions, kueue.WorkloadQuotaReserved); c != nil {
			r.Book.Admitted(key, c.LastTransitionTime.Time)
		}
		firstReady := !checkReady(wl, check)
		if err := r.setCheck(ctx, wl, check, kueue.CheckStateReady, fmt.Sprintf("Running in worker %s", cluster)); err != nil {
			return reconcile.Result{}, err
		}
		if firstReady {
			// Counted once the write landed: a conflict retried would count it twice.
			metrics.Dispatched(cluster, wl, r.Clock.Now())
		}
		return reconcile.Result{}, nil
	}
	// Not admitted there (yet): give the agent a moment, then place elsewhere.
	waited := r.waited(key)
	msg := fmt.Sprintf("Dispatched to worker %s, waiting for its agent to start it", cluster)
	c := meta.FindStatusCondition(remote.Status.Conditions, kueue.WorkloadQuotaReserved)
	switch {
	case c != nil && c.Status == metav1.ConditionFalse:
		msg = fmt.Sprintf("Dispatched to worker %s, which cannot start it yet: %s", cluster, c.Message)
		if waited >= r.RejectAfter {
			metrics.DispatchRejected(cluster, metrics.RejectedNotStarted)
			return reconcile.Result{}, r.evict(ctx, wl, check, fmt.Sprintf("worker %s could not start it within %s: %s", cluster, r.RejectAfter, c.Message))
		}
	case c == nil && waited >= r.WorkerLostTimeout:
		// No verdict at all: the agent is down while its API server answers. Its Job copy is
		// still suspended (an agent writes the admission before it unsuspends), so the
		// workload can go elsewhere; the worker takes no more until its agent reports again.
		if silent, err := r.untouched(ctx, w, remote); err != nil || !silent {
			return reconcile.Result{RequeueAfter: time.Second}, err
		}
		metrics.DispatchRejected(cluster, metrics.RejectedAgentSilent)
		r.Book.Silent(cluster)
		return reconcile.Result{}, r.evict(ctx, wl, check, fmt.Sprintf("worker %s's agent did not take up the copy within workerLostTimeout (%s): is fleetq-agent running there? Placing it elsewhere", cluster, r.WorkerLostTimeout))
	}
	notice := PendingNoticeAfter
	if c != nil && c.Status == metav1.ConditionFalse {
		notice = RefusalNoticeAfter
	}
	if waited < notice {
		// Most copies start within a moment: the check's message (one more status write per
		// dispatch) is worth writing only when the wait is long enough for someone to look.
		return reconcile.Result{RequeueAfter: notice - waited + time.Millisecond}, nil
	}
	if err := r.setCheck(ctx, wl, check, kueue.CheckStatePending, msg); err != nil {
		return reconcile.Result{}, err
	}
	deadline := r.RejectAfter
	if c == nil {
		deadline = r.WorkerLostTimeout
	}
	return reconcile.Result{RequeueAfter: max(deadline-waited, 0) + time.Millisecond}, nil
}

// copyFailed shows on the admission check why the worker does not take the workload's copy
// and retries with backoff; when that lasts RejectAfter (a quota, a policy or an object of the
// same name in the worker, not a passing error), the workload is placed elsewhere and that
// worker is not tried again for it for RefuseFor.
func (r *Reconciler) copyFailed(ctx context.Context, wl *kueue.Workload, check kueue.AdmissionCheckReference, cluster string, cause error) (reconcile.Result, error) {
	key := workload.Key(wl)
	err := fmt.Errorf("workload %s in worker %s: %w", key, cluster, cause)
	within, verb := r.RejectAfter, "does not take"
	switch {
	case refusal(cause):
	case serverError(cause):
		// The worker answers, but fails (a broken webhook there, etcd trouble): given as long as
		// an unreachable worker before it is passed over, since it may recover.
		within, verb = r.WorkerLostTimeout, "fails to take"
	default:
		// Not the worker's answer (it may not have answered at all): the registry's health
		// probe decides about unreachable workers.
		return reconcile.Result{}, err
	}
	if r.waited(key) >= within {
		metrics.DispatchRejected(cluster, metrics.RejectedCopyRefused)
		r.Book.Refused(key, cluster, r.Clock.Now().Add(r.RefuseFor), workload.Truncate(cause.Error()))
		return reconcile.Result{}, r.evict(ctx, wl, check, fmt.Sprintf("worker %s did not take the copy within %s: %v; placing it elsewhere", cluster, within, cause))
	}
	if werr := r.setCheck(ctx, wl, check, kueue.CheckStatePending, fmt.Sprintf("Dispatched to worker %s, which %s the copy yet: %v", cluster, verb, cause)); werr != nil {
		return reconcile.Result{}, werr
	}
	return reconcile.Result{}, err
}

// serverError reports whether the worker's API server answered with a server error (5xx other
// than a timeout, which may mean the copy was created after all and is retried as such).
func serverError(err error) bool {
	code, ok := statusCode(err)
	return ok && code >= 500 && code != 504
}

// statusCode is the HTTP code of the worker API server's answer in err, if err is one.
func statusCode(err error) (int32, bool) {
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		return 0, false
	}
	return st.Status().Code, true
}

// waited is how long the workload's copy has been waiting in its worker, counted from the
// first reconcile that found it not running there.
func (r *Reconciler) waited(key string) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	since, ok := r.pendingSince[key]
	if !ok {
		since = r.Clock.Now()
		r.pendingSince[key] = since
	}
	return r.Clock.Since(since)
}

// errNotServed marks a worker that does not serve the job's kind: it refuses the copy as a worker
// whose API server answered so would.
var errNotServed = errors.New("the worker cannot run it")

// errForeign marks an object in a worker that holds a copy's name but is not this manager's.
var errForeign = errors.New("was not created by this manager")

// refusal reports whether the worker's API server answered the copy with a refusal that the
// same request will meet again (quota, policy, validation, an object of the same name), rather
// than a conflict, throttling or no answer at all.
func refusal(err error) bool {
	if errors.Is(err, errForeign) || errors.Is(err, errNotServed) {
		return true
	}
	code, ok := statusCode(err)
	return ok && code >= 400 && code < 500 && code != 409 && code != 429
}

// untouched re-reads a copy from its worker's API server, past the cache, to be sure its agent
// wrote no verdict before the workload is taken back for that.
func (r *Reconciler) untouched(ctx context.Context, w *registry.Worker, remote *kueue.Workload) (bool, error) {
	cur := &kueue.Workload{}
	if err := w.Reader.Get(ctx, client.ObjectKeyFromObject(remote), cur); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return cur.UID == remote.UID && meta.FindStatusCondition(cur.Status.Conditions, kueue.WorkloadQuotaReserved) == nil, nil
}

// PendingNoticeAfter is how long a copy may wait for its worker's agent's verdict before the
// admission check says it waits for it. Until then the check says where it is being
// dispatched. A busy worker's agent often takes a few seconds, and at 2 s this notice was one
// more status write for most workloads exactly when the management API server was busiest.
const PendingNoticeAfter = 10 * time.Second

// RefusalNoticeAfter is how long a copy its worker's agent cannot start yet waits before the
// admission check gives the agent's reason: that reason is worth showing soon.
const RefusalNoticeAfter = 2 * time.Second

// setCheck sets the MultiKueue check's state, and the Admitted condition when every check is
// Ready, in one status patch; it writes nothing when both already say so.
func (r *Reconciler) setCheck(ctx context.Context, wl *kueue.Workload, check kueue.AdmissionCheckReference, state kueue.CheckState, msg string) error {
	orig := wl.DeepCopy()
	now := r.Clock.Now()
	changed := false
	allReady := true
	for i := range wl.Status.AdmissionChecks {
		ac := &wl.Status.AdmissionChecks[i]
		if ac.Name == check && (ac.State != state || ac.Message != msg) {
			if ac.State != state {
				ac.LastTransitionTime = metav1.NewTime(now)
			}
			ac.State, ac.Message = state, workload.Truncate(msg)
			changed = true
		}
		allReady = allReady && ac.State == kueue.CheckStateReady
	}
	admitted := allReady && workload.SetCondition(wl, kueue.WorkloadAdmitted, metav1.ConditionTrue, "Admitted", "The workload is admitted and runs in worker "+workload.ClusterName(wl), now)
	if !changed && !admitted {
		return nil
	}
	if err := r.Client.Status().Patch(ctx, wl, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return client.IgnoreNotFound(err)
	}
	if admitted {
		metrics.Admitted(wl, now)
	}
	return nil
}

// checkReady reports whether the workload's check is Ready already.
func checkReady(wl *kueue.Workload, check kueue.AdmissionCheckReference) bool {
	for _, ac := range wl.Status.AdmissionChecks {
		if ac.Name == check {
			return ac.State == kueue.CheckStateReady
		}
	}
	return false
}

// evict ends a workload's run in its worker: the check goes to Retry and the workload is
// evicted, so the job integration stops the job and the workload queues for another placement.
func (r *Reconciler) evict(ctx context.Context, wl *kueue.Workload, check kueue.AdmissionCheckReference, msg string) error {
	return r.endRun(ctx, wl, check, msg, kueue.WorkloadEvictedByAdmissionCheck, "", corev1.EventTypeWarning, ReasonRejected)
}

// evictPreempted ends a run its worker's agent preempted: as evict, but the workload is Evicted
// and Preempted for that (the Preempted reason is the agent's), so it queues again without backoff.
func (r *Reconciler) evictPreempted(ctx context.Context, wl *kueue.Workload, check kueue.AdmissionCheckReference, remote *kueue.Workload, msg string) error {
	reason := kueue.InClusterQueueReason
	if p := meta.FindStatusCondition(remote.Status.Conditions, kueue.WorkloadPreempted); p != nil && p.Reason != "" {
		reason = p.Reason
	}
	return r.endRun(ctx, wl, check, msg, kueue.WorkloadEvictedByPreemption, reason, corev1.EventTypeNormal, kueue.WorkloadEvictedByPreemption)
}

// endRun writes the check's Retry and the Evicted condition (and Preempted, when preempted is set)
// in one status patch, then forgets the placement and records the eviction.
func (r *Reconciler) endRun(ctx context.Context, wl *kueue.Workload, check kueue.AdmissionCheckReference, msg, evicted, preempted, eventType, eventReason string) error {
	orig := wl.DeepCopy()
	now := r.Clock.Now()
	for i := range wl.Status.AdmissionChecks {
		if ac := &wl.Status.AdmissionChecks[i]; ac.Name == check {
			ac.State, ac.Message, ac.LastTransitionTime = kueue.CheckStateRetry, workload.Truncate(msg), metav1.NewTime(now)
		}
	}
	workload.SetCondition(wl, kueue.WorkloadEvicted, metav1.ConditionTrue, evicted, msg, now)
	if preempted != "" {
		workload.SetCondition(wl, kueue.WorkloadPreempted, metav1.ConditionTrue, preempted, msg, now)
	}
	if err := r.Client.Status().Patch(ctx, wl, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return client.IgnoreNotFound(err)
	}
	r.Book.Forget(workload.Key(wl))
	metrics.Evicted(wl, evicted)
	if r.Recorder != nil {
		r.Recorder.Eventf(wl, nil, eventType, eventReason, "Dispatch", "%s", msg)
	}
	return nil
}

// writeMirror writes a copy's status into the management cluster's object (an update, not a
// merge patch: lists such as a Job's uncountedTerminatedPods must match the copy exactly).
func (r *Reconciler) writeMirror(ctx context.Context, a integration.Adapter, local, remote client.Object) error {
	if !a.MirrorStatus(local, remote) {
		return nil
	}
	return r.Client.Status().Update(ctx, local)
}

// soonest shortens a result's requeue to d when d comes first.
func soonest(res reconcile.Result, d time.Duration) reconcile.Result {
	if res.RequeueAfter == 0 || d < res.RequeueAfter {
		res.RequeueAfter = d
	}
	return res
}

// EndingWait is how long the status of a job copy that is ending waits to be mirrored together
// with its finish.
const EndingWait = 5 * time.Second

// mirror copies the worker's job status to the management cluster's job (each member's, for a
// group), at most once per MirrorInterval while it runs, at once when it finishes; an ending
// copy's status waits up to EndingWait for its finish.
func (r *Reconciler) mirror(ctx context.Context, w *registry.Worker, wl *kueue.Workload, j *job, res reconcile.Result) (reconcile.Result, error) {
	if !jobs.Dispatched(j.a, j.obj, wl) {
		return res, nil
	}
	if j.a.Suspended(j.obj) && !jobs.StaysSuspended(j.a) {
		// The job integration starts it once the workload is Admitted; a status mirrored into
		// a suspended job would contradict its spec. Once Admitted, look again soon: the worker
		// may not change the copy's status again for a long time. Before, the worker's verdict
		// wakes us; polling then would only queue every copy in flight ahead of those verdicts.
		if !workload.IsAdmitted(wl) {
			return res, nil
		}
		return soonest(res, time.Second), nil
	}
	type change struct{ local, remote client.Object }
	var changes []change
	var remotes []client.Object
	for _, obj := range j.objects() {
		rjob := j.a.New()
		if err := w.Client.Get(ctx, client.ObjectKeyFromObject(obj), rjob); err != nil {
			if !apierrors.IsNotFound(err) {
				return res, err
			}
			continue
		}
		if rjob.GetAnnotations()[kueue.MultiKueueOriginUIDAnnotation] != string(wl.UID) {
			continue
		}
		remotes = append(remotes, rjob)
		if probe := obj.DeepCopyObject().(client.Object); j.a.MirrorStatus(probe, rjob) {
			changes = append(changes, change{obj, rjob})
		}
	}
	if len(changes) == 0 {
		return res, nil
	}
	key := workload.Key(wl)
	done := len(remotes) == len(j.objects()) && j.finished(remotes)
	ending := !done && slices.ContainsFunc(remotes, func(o client.Object) bool { return j.a.Status(o).Ending })
	r.mu.Lock()
	wait := r.MirrorInterval - r.Clock.Since(r.lastMirror[key])
	if ending {
		// Its finish follows within moments (the worker's controller waits for the pods to
		// go): mirrored with it in one write, rather than the ending status first, unless
		// that takes longer than EndingWait.
		since, ok := r.endingSince[key]
		if !ok {
			since = r.Clock.Now()
			r.endingSince[key] = since
		}
		wait = max(wait, EndingWait-r.Clock.Since(since))
	}
	r.mu.Unlock()
	if !done && wait > 0 {
		return soonest(res, wait), nil
	}
	for _, c := range changes {
		if err := r.writeMirror(ctx, j.a, c.local, c.remote); err != nil {
			if apierrors.IsInvalid(err) {
				// The API server refuses this transition (e.g. a copy that finished as it was
				// preempted); retrying the same write cannot help, the next change of the copy may.
				r.Log.Info("Job status not mirrored", "job", client.ObjectKeyFromObject(c.local), "kind", j.a.GVK().Kind, "cluster", w.Name, "error", err.Error())
				return soonest(res, 10*time.Second), nil
			}
			return res, fmt.Errorf("mirroring %s %s/%s from worker %s: %w", j.a.GVK().Kind, c.local.GetNamespace(), c.local.GetName(), w.Name, err)
		}
	}
	r.mu.Lock()
	r.lastMirror[key] = r.Clock.Now()
	r.mu.Unlock()
	return res, nil
}
