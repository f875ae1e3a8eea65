package quota

import (
	"context"
	"fmt"
	"sort"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/manager/cache"
	"github.com/fleetq/fleetq/manager/queue"
	"github.com/fleetq/fleetq/manager/workloads"
)

// Reasons of the LocalQueue Active condition.
const (
	LocalQueueReady                   = "Ready"
	LocalQueueClusterQueueDoesntExist = "ClusterQueueDoesNotExist"
	LocalQueueClusterQueueInactive    = "ClusterQueueIsInactive"
	LocalQueueStopped                 = "Stopped"
)

// LocalQueueReconciler keeps LocalQueues in the cache, routes their workloads again when they
// change, and writes their status.
type LocalQueueReconciler struct {
	Client    client.Client
	Cache     *cache.Cache
	Queues    *queue.Queues
	Clock     clock.PassiveClock
	Log       logr.Logger
	Trigger   *Trigger
	Workloads chan event.TypedGenericEvent[*kueue.Workload]

	track *tracker
}

// SetupWithManager registers the controller; a ClusterQueue change refreshes its LocalQueues'
// Active condition.
func (r *LocalQueueReconciler) SetupWithManager(mgr manager.Manager) error {
	r.track = newTracker()
	return ctrl.ControllerManagedBy(mgr).
		Named("localqueues").
		For(&kueue.LocalQueue{}).
		WatchesRawSource(source.Channel(r.Trigger.LocalQueues, &handler.TypedEnqueueRequestForObject[*kueue.LocalQueue]{})).
		Watches(&kueue.ClusterQueue{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			var out []reconcile.Request
			for _, key := range r.Cache.LocalQueuesOf(o.GetName()) {
				ns, name := splitKey(key)
				out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}})
			}
			return out
		})).
		WithOptions(controller.Options{MaxConcurrentReconciles: QueueWorkers}).
		Complete(r)
}

// Reconcile syncs one LocalQueue.
func (r *LocalQueueReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	key := req.Namespace + "/" + req.Name
	lq := &kueue.LocalQueue{}
	if err := r.Client.Get(ctx, req.NamespacedName, lq); err != nil {
		if !apierrors.IsNotFound(err) {
			return reconcile.Result{}, err
		}
		r.Cache.DeleteLocalQueue(req.Namespace, req.Name)
		r.track.forget(key)
		return reconcile.Result{}, workloads.RequeueLocalQueue(ctx, r.Client, r.Workloads, req.Namespace, req.Name)
	}
	if r.track.changed(key, fmt.Sprintf("%d", lq.Generation)) {
		r.Cache.AddOrUpdateLocalQueue(lq)
		if err := workloads.RequeueLocalQueue(ctx, r.Client, r.Workloads, lq.Namespace, lq.Name); err != nil {
			return reconcile.Result{}, err
		}
		// As for ClusterQueues: every queue in the cache before any status write.
		return reconcile.Result{Requeue: true}, nil
	}
	return r.writeStatus(ctx, lq)
}

func (r *LocalQueueReconciler) writeStatus(ctx context.Context, lq *kueue.LocalQueue) (reconcile.Result, error) {
	key := lq.Namespace + "/" + lq.Name
	usage := r.Cache.LocalQueueUsage(key)
	want := lq.Status.DeepCopy()
	want.PendingWorkloads = int32(r.Queues.Pending(key))
	want.ReservingWorkloads = int32(usage.Reserving)
	want.AdmittedWorkloads = int32(usage.Admitted)
	want.FlavorsReservation = localUsage(usage.Usage)
	want.FlavorsUsage = localUsage(usage.Usage)

	cond := metav1.Condition{Type: kueue.LocalQueueActive, Status: metav1.ConditionTrue, Reason: LocalQueueReady, Message: "Can submit new workloads to localQueue", ObservedGeneration: lq.Generation}
	cq := &kueue.ClusterQueue{}
	switch err := r.Client.Get(ctx, types.NamespacedName{Name: string(lq.Spec.ClusterQueue)}, cq); {
	case apierrors.IsNotFound(err):
		cond.Status, cond.Reason = metav1.ConditionFalse, LocalQueueClusterQueueDoesntExist
		cond.Message = fmt.Sprintf("Can't submit new workloads to clusterQueue: ClusterQueue %s doesn't exist; create it or point spec.clusterQueue at an existing one", lq.Spec.ClusterQueue)
	case err != nil:
		return reconcile.Result{}, err
	case lq.Spec.StopPolicy != nil && *lq.Spec.StopPolicy != kueue.None:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, LocalQueueStopped, "LocalQueue is stopped (spec.stopPolicy)"
	case !meta.IsStatusConditionTrue(cq.Status.Conditions, kueue.ClusterQueueActive):
		cond.Status, cond.Reason = metav1.ConditionFalse, LocalQueueClusterQueueInactive
		cond.Message = fmt.Sprintf("Can't submit new workloads to clusterQueue: ClusterQueue %s is inactive (kubectl get clusterqueue %s -o jsonpath='{.status.conditions}')", cq.Name, cq.Name)
	}
	meta.SetStatusCondition(&want.Conditions, cond)
	return r.track.writeStatus(ctx, r.Client, r.Clock, key, lq, &lq.Status, want)
}

func localUsage(in map[string]map[corev1.ResourceName]int64) []kueue.LocalQueueFlavorUsage {
	flavors := make([]string, 0, len(in))
	for f := range in {
		flavors = append(flavors, f)
	}
	sort.Strings(flavors)
	out := make([]kueue.LocalQueueFlavorUsage, 0, len(in))
	for _, f := range flavors {
		fu := kueue.LocalQueueFlavorUsage{Name: kueue.ResourceFlavorReference(f)}
		names := make([]string, 0, len(in[f]))
		for r := range in[f] {
			names = append(names, string(r))
		}
		sort.Strings(names)
		for _, n := range names {
			r := corev1.ResourceName(n)
			fu.Resources = append(fu.Resources, kueue.LocalQueueResourceUsage{Name: r, Total: quantity(r, in[f][r])})
		}
		out = append(out, fu)
	}
	return out
}
