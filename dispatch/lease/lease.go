// Package lease renews, in every connected worker, the Lease its agent watches: while renewals
// arrive the agent runs the copies it admitted; when they stop for the lease's duration (the
// manager's fenceTimeout, shorter than its workerLostTimeout) the agent suspends them, so a
// partitioned worker has stopped its copies before the manager places them elsewhere.
package lease

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	fleetq "github.com/fleetq/fleetq/api/fleetq/v1alpha1"
	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/dispatch/registry"
)

// Renewer renews the manager's Lease in every connected worker.
type Renewer struct {
	Registry *registry.Registry
	Clock    clock.PassiveClock
	Log      logr.Logger
	// Namespace is where the agents run (and watch the Lease).
	Namespace string
	Origin    string
	Identity  string
	// Interval between renewals; Duration is the lease duration (fenceTimeout).
	Interval, Duration time.Duration
}

// NeedLeaderElection: only the leader speaks for the manager.
func (r *Renewer) NeedLeaderElection() bool { return true }

// Start renews every Interval until ctx ends.
func (r *Renewer) Start(ctx context.Context) error {
	t := time.NewTicker(r.Interval)
	defer t.Stop()
	for {
		r.RenewAll(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// RenewAll renews the lease in every connected worker, in parallel.
func (r *Renewer) RenewAll(ctx context.Context) {
	var wg sync.WaitGroup
	for _, name := range r.Registry.Names() {
		w, h := r.Registry.Get(name)
		if w == nil || !h.Active {
			continue
		}
		wg.Go(func() {
			if err := r.renew(ctx, w); err != nil {
				r.Log.V(1).Info("Lease not renewed", "cluster", name, "error", err.Error())
			}
		})
	}
	wg.Wait()
}

func (r *Renewer) renew(ctx context.Context, w *registry.Worker) error {
	now := metav1.NewMicroTime(r.Clock.Now())
	key := types.NamespacedName{Namespace: r.Namespace, Name: fleetq.ManagerLeaseName(r.Origin)}
	l := &coordinationv1.Lease{}
	err := w.Client.Get(ctx, key, l)
	if apierrors.IsNotFound(err) {
		l = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, Labels: map[string]string{kueue.MultiKueueOriginLabel: r.Origin}},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity:       ptr.To(r.Identity),
				LeaseDurationSeconds: ptr.To(int32(r.Duration / time.Second)),
				AcquireTime:          &now,
				RenewTime:            &now,
			},
		}
		if err := w.Client.Create(ctx, l); err != nil {
			return fmt.Errorf("creating lease %s in worker %s: %w", key, w.Name, err)
		}
		return nil
	}
	if err != nil {
		return err
	}
	l.Spec.HolderIdentity = ptr.To(r.Identity)
	l.Spec.LeaseDurationSeconds = ptr.To(int32(r.Duration / time.Second))
	l.Spec.RenewTime = &now
	if err := w.Client.Update(ctx, l); err != nil {
		return fmt.Errorf("renewing lease %s in worker %s: %w", key, w.Name, err)
	}
	return nil
}
