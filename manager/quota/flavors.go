package quota

import (
	"context"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/manager/cache"
	"github.com/fleetq/fleetq/manager/queue"
)

// FlavorReconciler keeps ResourceFlavors in the cache and holds the resource-in-use finalizer
// while a ClusterQueue names the flavor.
type FlavorReconciler struct {
	Client  client.Client
	Cache   *cache.Cache
	Queues  *queue.Queues
	Trigger *Trigger
}

// SetupWithManager registers the controller.
func (r *FlavorReconciler) SetupWithManager(mgr manager.Manager) error {
	return ctrl.ControllerManagedBy(mgr).Named("resourceflavors").For(&kueue.ResourceFlavor{}).
		// A Terminating flavor goes when the last ClusterQueue naming it does (or stops naming it):
		// only a queue's deletion or spec change can free a flavor, not its frequent status writes.
		Watches(&kueue.ClusterQueue{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			var out []reconcile.Request
			for _, f := range flavorsOf(o.(*kueue.ClusterQueue)) {
				out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: f}})
			}
			return out
		}), ctrl.WithPredicates(predicate.Funcs{
			CreateFunc:  func(event.CreateEvent) bool { return false },
			UpdateFunc:  func(e event.UpdateEvent) bool { return e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration() },
			GenericFunc: func(event.GenericEvent) bool { return false },
		})).
		Complete(r)
}

// flavorsOf lists the flavors a ClusterQueue names.
func flavorsOf(cq *kueue.ClusterQueue) []string {
	var out []string
	for _, rg := range cq.Spec.ResourceGroups {
		for _, f := range rg.Flavors {
			out = append(out, string(f.Name))
		}
	}
	return out
}

// namedBy lists the ClusterQueues that name a flavor, from the informer (which has dropped a
// deleted queue by the time its event arrives, unlike the cache, which may not have yet).
func (r *FlavorReconciler) namedBy(ctx context.Context, flavor string) ([]string, error) {
	cqs := &kueue.ClusterQueueList{}
	if err := r.Client.List(ctx, cqs, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	var out []string
	for i := range cqs.Items {
		if slices.Contains(flavorsOf(&cqs.Items[i]), flavor) {
			out = append(out, cqs.Items[i].Name)
		}
	}
	return out, nil
}

// Reconcile syncs one ResourceFlavor.
func (r *FlavorReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	rf := &kueue.ResourceFlavor{}
	if err := r.Client.Get(ctx, req.NamespacedName, rf); err != nil {
		if !apierrors.IsNotFound(err) {
			return reconcile.Result{}, err
		}
		r.Trigger.refresh(r.Queues, r.Cache.DeleteFlavor(req.Name))
		return reconcile.Result{}, nil
	}
	if rf.DeletionTimestamp != nil {
		users, err := r.namedBy(ctx, rf.Name)
		if err != nil {
			return reconcile.Result{}, err
		}
		if len(users) > 0 || !controllerutil.ContainsFinalizer(rf, kueue.ResourceInUseFinalizerName) {
			// Still named by queues: it stays (Terminating) so their admitted work keeps a flavor.
			return reconcile.Result{}, nil
		}
		orig := rf.DeepCopy()
		controllerutil.RemoveFinalizer(rf, kueue.ResourceInUseFinalizerName)
		return reconcile.Result{}, client.IgnoreNotFound(r.Client.Patch(ctx, rf, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})))
	}
	r.Trigger.refresh(r.Queues, r.Cache.AddOrUpdateFlavor(rf))
	if controllerutil.ContainsFinalizer(rf, kueue.ResourceInUseFinalizerName) {
		return reconcile.Result{}, nil
	}
	orig := rf.DeepCopy()
	controllerutil.AddFinalizer(rf, kueue.ResourceInUseFinalizerName)
	return reconcile.Result{}, client.IgnoreNotFound(r.Client.Patch(ctx, rf, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})))
}
