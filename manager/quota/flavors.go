package quota

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/manager"
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
	return ctrl.ControllerManagedBy(mgr).Named("resourceflavors").For(&kueue.ResourceFlavor{}).Complete(r)
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
	users := r.Cache.ClusterQueuesUsingFlavor(rf.Name)
	if rf.DeletionTimestamp != nil {
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
