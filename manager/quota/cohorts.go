package quota

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/manager/cache"
	"github.com/fleetq/fleetq/manager/queue"
)

// CohortReconciler keeps Cohorts (their own quota and parent) in the cache and writes their
// fair-sharing status.
type CohortReconciler struct {
	Client      client.Client
	Cache       *cache.Cache
	Queues      *queue.Queues
	Trigger     *Trigger
	FairSharing bool
}

// SetupWithManager registers the controller.
func (r *CohortReconciler) SetupWithManager(mgr manager.Manager) error {
	return ctrl.ControllerManagedBy(mgr).Named("cohorts").For(&kueue.Cohort{}).Complete(r)
}

// Reconcile syncs one Cohort.
func (r *CohortReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	co := &kueue.Cohort{}
	if err := r.Client.Get(ctx, req.NamespacedName, co); err != nil {
		if !apierrors.IsNotFound(err) {
			return reconcile.Result{}, err
		}
		r.Trigger.refresh(r.Queues, r.Cache.DeleteCohort(req.Name))
		return reconcile.Result{}, nil
	}
	r.Trigger.refresh(r.Queues, r.Cache.AddOrUpdateCohort(co))
	if !r.FairSharing {
		return reconcile.Result{}, nil
	}
	st, ok := r.Cache.CohortStatus(co.Name)
	if !ok || (co.Status.FairSharing != nil && co.Status.FairSharing.WeightedShare == st.WeightedShare) {
		return reconcile.Result{}, nil
	}
	orig := co.DeepCopy()
	co.Status.FairSharing = &kueue.FairSharingStatus{WeightedShare: st.WeightedShare}
	return reconcile.Result{}, client.IgnoreNotFound(r.Client.Status().Patch(ctx, co, client.MergeFrom(orig)))
}
