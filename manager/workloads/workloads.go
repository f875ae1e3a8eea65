// Package workloads keeps the manager's cache and queues in step with Workload objects: a
// workload holding quota is accounted, a pending one is queued in its ClusterQueue (or shown why
// it cannot be), a finished or deleted one releases its quota at once and wakes exactly the
// queues that quota can unblock. It reads the state of the world on every reconcile, so a
// restarted manager rebuilds the same cache from the API server alone.
package workloads

import (
	"context"
	"fmt"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	fleetq "github.com/fleetq/fleetq/api/fleetq/v1alpha1"
	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/internal/workload"
	"github.com/fleetq/fleetq/manager/cache"
	"github.com/fleetq/fleetq/manager/queue"
	"github.com/fleetq/fleetq/manager/scheduler"
)

// QueueNameIndex indexes Workloads by spec.queueName, to find a LocalQueue's workloads.
const QueueNameIndex = "spec.queueName"

// Reconciler feeds one Workload into the cache and queues.
type Reconciler struct {
	Client client.Client
	Cache  *cache.Cache
	Queues *queue.Queues
	Clock  clock.PassiveClock
	Log    logr.Logger
	// Requeue receives workloads to look at again after a queue, flavor or namespace changed.
	Requeue chan event.TypedGenericEvent[*kueue.Workload]
	// Admissible, when set, says why a routed workload cannot run through its ClusterQueue at all
	// (its job's managedBy does not fit how the queue runs workloads); "" when it can.
	Admissible func(wl *kueue.Workload, route cache.Route) string
}

// SetupIndexes registers the field indexes this package lists by.
func SetupIndexes(ctx context.Context, mgr ctrl.Manager) error {
	return mgr.GetFieldIndexer().IndexField(ctx, &kueue.Workload{}, QueueNameIndex, func(o client.Object) []string {
		return []string{string(o.(*kueue.Workload).Spec.QueueName)}
	})
}

// SetupWithManager registers the controller (leader only, like the scheduler it feeds).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("workloads").
		WatchesRawSource(source.Kind(mgr.GetCache(), &kueue.Workload{}, &reservationsFirst{})).
		WatchesRawSource(source.Channel(r.Requeue, &reservationsFirst{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: 4}).
		Complete(r)
}

// reservationsFirst queues Workload events as controller-runtime's own handler does, except that
// of the informers' initial list (a restart or fail-over) the workloads that hold quota come
// before those that wait, and so do they among the workloads sent back by a queue's change
// (Requeue). The scheduler's first cycle waits until every reservation is accounted; with 20,000
// waiting, the 1,000 reservations were spread through the whole list and accounted only once
// nearly all of it was reconciled. Worse, every ClusterQueue and LocalQueue reaching the cache
// sent all its workloads back at the default priority, ahead of the list: 42,000 reconciles
// before the last reservation.
type reservationsFirst struct {
	handler.TypedEnqueueRequestForObject[*kueue.Workload]
}

// Generic queues a workload sent back by a queue's change at the low priority of the initial
// list, unless it holds quota.
func (h *reservationsFirst) Generic(ctx context.Context, e event.TypedGenericEvent[*kueue.Workload], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	if !h.add(q, e.Object, ptr.To(handler.LowPriority)) {
		h.TypedEnqueueRequestForObject.Generic(ctx, e, q)
	}
}

// Create gives a reservation of the initial list the default priority instead of the list's low one.
func (h *reservationsFirst) Create(ctx context.Context, e event.TypedCreateEvent[*kueue.Workload], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	if !e.IsInInitialList || !h.add(q, e.Object, nil) {
		h.TypedEnqueueRequestForObject.Create(ctx, e, q)
	}
}

// add queues wl at the default priority if it holds quota, at waiting otherwise (nil: leave it to
// controller-runtime's handler), and says whether it did; not on a queue without priorities.
func (h *reservationsFirst) add(q workqueue.TypedRateLimitingInterface[reconcile.Request], wl *kueue.Workload, waiting *int) bool {
	pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request])
	if !ok || wl == nil {
		return false
	}
	var priority *int // the default
	if !workload.HasQuotaReservation(wl) {
		if waiting == nil {
			return false
		}
		priority = waiting
	}
	pq.AddWithOpts(priorityqueue.AddOpts{Priority: priority}, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(wl)})
	return true
}

// Reconcile brings the cache and queues in line with one workload.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	key := req.Namespace + "/" + req.Name
	wl := &kueue.Workload{}
	if err := r.Client.Get(ctx, req.NamespacedName, wl); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(key)
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, err
	}
	if workload.IsFinished(wl) || (wl.DeletionTimestamp != nil && !(workload.HasQuotaReservation(wl) && controllerutil.ContainsFinalizer(wl, fleetq.CopiesFinalizer))) {
		r.forget(key)
		return reconcile.Result{}, nil
	}
	// A deleted workload whose copies may still run in a worker keeps its quota until dispatch
	// confirms them gone and lets it go.
	lqKey := wl.Namespace + "/" + string(wl.Spec.QueueName)
	if workload.HasQuotaReservation(wl) {
		r.Queues.Delete(key)
		if err := r.Cache.SetAdmitted(cache.Workload(wl, ""), lqKey, workload.IsAdmitted(wl)); err != nil {
			// Admitted to a queue the cache does not know (yet): it is accounted as soon
			// as the queue appears.
			r.Log.V(1).Info("Workload holds quota in an unknown ClusterQueue", "workload", key, "error", err.Error())
		}
		return reconcile.Result{}, nil
	}
	// No reservation on the object.
	if r.Cache.IsAssumed(key) {
		return reconcile.Result{}, nil // the scheduler's admission write is in flight
	}
	if r.Cache.HoldsQuota(key) {
		// The reservation was cleared (eviction finished): release it.
		r.Queues.Wake(r.Cache.Release(key)...)
	}
	if !workload.IsActive(wl) {
		r.Queues.Delete(key)
		return reconcile.Result{}, nil
	}
	ns := &corev1.Namespace{}
	if err := r.Client.Get(ctx, types.NamespacedName{Name: wl.Namespace}, ns); err != nil {
		return reconcile.Result{}, fmt.Errorf("namespace of workload %s: %w", key, err)
	}
	route := r.Cache.RouteFor(wl.Namespace, ns.Labels, string(wl.Spec.QueueName))
	if route.Problem != "" {
		r.Queues.Delete(key)
		err := scheduler.SetPending(ctx, r.Client, r.Clock, key, kueue.WorkloadInadmissible, route.Problem)
		if err != nil && !apierrors.IsNotFound(err) {
			return reconcile.Result{}, fmt.Errorf("workload %s: %w", key, err)
		}
		return reconcile.Result{}, nil
	}
	if r.Admissible != nil {
		if problem := r.Admissible(wl, route); problem != "" {
			r.Queues.Delete(key)
			err := scheduler.SetPending(ctx, r.Client, r.Clock, key, kueue.WorkloadInadmissible, problem)
			if err != nil && !apierrors.IsNotFound(err) {
				return reconcile.Result{}, fmt.Errorf("workload %s: %w", key, err)
			}
			return reconcile.Result{}, nil
		}
	}
	ewl := cache.Workload(wl, route.ClusterQueue)
	r.Queues.Add(&ewl, lqKey, workload.RequeueAt(wl))
	return reconcile.Result{}, nil
}

func (r *Reconciler) forget(key string) {
	r.Queues.Delete(key)
	r.Queues.Wake(r.Cache.Release(key)...)
}

// RequeuePending sends every workload that holds no quota back through Reconcile, after something
// that decides whether workloads can run at all changed (an admission check became known).
func RequeuePending(ctx context.Context, c client.Client, ch chan<- event.TypedGenericEvent[*kueue.Workload]) error {
	list := &kueue.WorkloadList{}
	if err := c.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil { // read only
		return fmt.Errorf("listing workloads: %w", err)
	}
	for i := range list.Items {
		if !workload.HasQuotaReservation(&list.Items[i]) {
			ch <- event.TypedGenericEvent[*kueue.Workload]{Object: &list.Items[i]}
		}
	}
	return nil
}

// RequeueLocalQueue sends every workload of a LocalQueue back through Reconcile, after the
// cache learnt about a change that may route them differently.
func RequeueLocalQueue(ctx context.Context, c client.Client, ch chan<- event.TypedGenericEvent[*kueue.Workload], namespace, name string) error {
	list := &kueue.WorkloadList{}
	// Only their names are used: no copies of 20,000 workloads after a restart.
	if err := c.List(ctx, list, client.InNamespace(namespace), client.MatchingFields{QueueNameIndex: name}, client.UnsafeDisableDeepCopy); err != nil {
		return fmt.Errorf("listing workloads of localqueue %s/%s: %w", namespace, name, err)
	}
	for i := range list.Items {
		ch <- event.TypedGenericEvent[*kueue.Workload]{Object: &list.Items[i]}
	}
	return nil
}
