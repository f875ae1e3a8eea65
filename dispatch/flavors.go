package dispatch

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
)

// flavorWatch triggers a flavor sync to the workers whenever a ResourceFlavor changes.
type flavorWatch struct{ d *Dispatcher }

func (f *flavorWatch) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("flavorsync").For(&kueue.ResourceFlavor{}).Complete(f)
}

// Reconcile asks for a sync; the syncer compares all flavors at once.
func (f *flavorWatch) Reconcile(context.Context, reconcile.Request) (reconcile.Result, error) {
	f.d.flavors.Trigger()
	return reconcile.Result{}, nil
}
