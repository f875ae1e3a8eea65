// Package drain evicts the admitted workloads of a ClusterQueue or LocalQueue whose stopPolicy
// is HoldAndDrain, as Kueue does. Hold needs nothing here: the engine admits nothing from a
// stopped ClusterQueue and the queues hold the workloads of a stopped LocalQueue, while what was
// admitted runs on. An evicted workload goes the usual way (its job is suspended, its copies
// removed, its quota released) and waits, saying its queue is stopped, until the policy is None.
package drain

import (
	"context"
	"fmt"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/internal/workload"
	"github.com/fleetq/fleetq/manager/metrics"
	"github.com/fleetq/fleetq/manager/workloads"
)

// Reconciler evicts one admitted Workload when its ClusterQueue or LocalQueue drains.
type Reconciler struct {
	Client   client.Client
	Clock    clock.PassiveClock
	Recorder events.EventRecorder
	Log      logr.Logger
}

// SetupWithManager registers the controller (leader only, like the scheduler that admits). A
// queue set to HoldAndDrain brings each of its workloads here; a workload admitted as the policy
// changed comes by its own watch, so none is missed.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("drain").
		For(&kueue.Workload{}).
		// Only spec changes (a new stopPolicy) matter: a queue's status is written on every
		// admission, and each write would list its workloads again.
		Watches(&kueue.ClusterQueue{}, handler.EnqueueRequestsFromMapFunc(r.clusterQueueWorkloads), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&kueue.LocalQueue{}, handler.EnqueueRequestsFromMapFunc(r.localQueueWorkloads), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Complete(r)
}

func draining(p *kueue.StopPolicy) bool { return p != nil && *p == kueue.HoldAndDrain }

// Cause says why an admitted workload must be evicted, given its ClusterQueue and LocalQueue
// (either may be nil when it is gone); ok is false when neither drains or the workload holds no
// quota, is finished or is already being evicted.
func Cause(wl *kueue.Workload, cq *kueue.ClusterQueue, lq *kueue.LocalQueue) (reason, message string, ok bool) {
	if !workload.HasQuotaReservation(wl) || workload.IsFinished(wl) || workload.IsEvicted(wl) {
		return "", "", false
	}
	switch {
	case cq != nil && draining(cq.Spec.StopPolicy):
		return kueue.WorkloadEvictedByClusterQueueStopped, fmt.Sprintf(
			"ClusterQueue %s is stopped (spec.stopPolicy: HoldAndDrain): its admitted workloads are evicted and it admits none until spec.stopPolicy is None (kubectl fleetq resume clusterqueue %s)",
			cq.Name, cq.Name), true
	case lq != nil && draining(lq.Spec.StopPolicy):
		return kueue.WorkloadEvictedByLocalQueueStopped, fmt.Sprintf(
			"LocalQueue %s is stopped (spec.stopPolicy: HoldAndDrain): its admitted workloads are evicted and it admits none until spec.stopPolicy is None (kubectl fleetq resume localqueue %s -n %s)",
			lq.Name, lq.Name, lq.Namespace), true
	}
	return "", "", false
}

// Reconcile evicts the workload if its queue drains.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	wl := &kueue.Workload{}
	if err := r.Client.Get(ctx, req.NamespacedName, wl); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !workload.HasQuotaReservation(wl) || workload.IsFinished(wl) || workload.IsEvicted(wl) {
		return reconcile.Result{}, nil
	}
	cq, err := get(ctx, r.Client, types.NamespacedName{Name: string(wl.Status.Admission.ClusterQueue)}, &kueue.ClusterQueue{})
	if err != nil {
		return reconcile.Result{}, err
	}
	lq, err := get(ctx, r.Client, types.NamespacedName{Namespace: wl.Namespace, Name: string(wl.Spec.QueueName)}, &kueue.LocalQueue{})
	if err != nil {
		return reconcile.Result{}, err
	}
	reason, msg, ok := Cause(wl, cq, lq)
	if !ok {
		return reconcile.Result{}, nil
	}
	orig := wl.DeepCopy()
	workload.SetCondition(wl, kueue.WorkloadEvicted, metav1.ConditionTrue, reason, msg, r.Clock.Now())
	if err := r.Client.Status().Patch(ctx, wl, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		// A conflict means someone else moved it on; the watch brings it back.
		return reconcile.Result{}, client.IgnoreNotFound(fmt.Errorf("evicting workload %s: %w", req, err))
	}
	metrics.Evicted(wl, reason)
	r.Log.Info("Workload evicted: its queue drains", "workload", req.String(), "reason", reason)
	if r.Recorder != nil {
		r.Recorder.Eventf(wl, nil, "Normal", "EvictedDueTo"+reason, "Evict", "%s", msg)
	}
	return reconcile.Result{}, nil
}

// get reads a queue; nil when it is gone.
func get[T client.Object](ctx context.Context, c client.Client, key types.NamespacedName, obj T) (T, error) {
	var none T
	if key.Name == "" {
		return none, nil
	}
	if err := c.Get(ctx, key, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return none, nil
		}
		return none, fmt.Errorf("reading %T %s: %w", obj, key, err)
	}
	return obj, nil
}

// clusterQueueWorkloads lists the workloads admitted to a draining ClusterQueue.
func (r *Reconciler) clusterQueueWorkloads(ctx context.Context, obj client.Object) []reconcile.Request {
	if !draining(obj.(*kueue.ClusterQueue).Spec.StopPolicy) {
		return nil
	}
	list := &kueue.WorkloadList{}
	if err := r.Client.List(ctx, list); err != nil {
		r.Log.Error(err, "Listing the workloads of a draining ClusterQueue", "clusterQueue", obj.GetName())
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		wl := &list.Items[i]
		if wl.Status.Admission != nil && string(wl.Status.Admission.ClusterQueue) == obj.GetName() {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(wl)})
		}
	}
	return out
}

// localQueueWorkloads lists the workloads of a draining LocalQueue.
func (r *Reconciler) localQueueWorkloads(ctx context.Context, obj client.Object) []reconcile.Request {
	if !draining(obj.(*kueue.LocalQueue).Spec.StopPolicy) {
		return nil
	}
	list := &kueue.WorkloadList{}
	if err := r.Client.List(ctx, list, client.InNamespace(obj.GetNamespace()), client.MatchingFields{workloads.QueueNameIndex: obj.GetName()}); err != nil {
		r.Log.Error(err, "Listing the workloads of a draining LocalQueue", "localQueue", client.ObjectKeyFromObject(obj))
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return out
}
