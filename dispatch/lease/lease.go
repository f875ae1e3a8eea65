// Package lease renews, in every connected worker, the Lease its agent watches: while renewals
// arrive the agent runs the copies it admitted; when they stop for the lease's duration (the
// manager's fenceTimeout, shorter than its workerLostTimeout) the agent suspends them, so a
// partitioned worker has stopped its copies before the manager places them elsewhere.
package lease

import (
	"context"
	"errors"
	"fmt"
	"strings"
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
	"github.com/fleetq/fleetq/manager/metrics"
)

// Renewer renews the manager's Lease in every connected worker.
type Renewer struct {
	Registry *registry.Registry
	Clock    clock.PassiveClock
	Log      logr.Logger
	// Namespace is where the agents run (and watch the Lease).
	Namespace string
	Origin    string
	// ManagerID names this manager's management cluster (its kube-system namespace's UID): the
	// Lease's holder is "<ManagerID>/<Identity>", so replicas of one manager take over from each
	// other while a manager of another management cluster with the same origin is refused.
	ManagerID string
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
			err := r.renew(ctx, w)
			switch {
			case errors.Is(err, errForeignHolder):
				metrics.LeaseRenewFailed(name, metrics.LeaseForeignHolder)
				r.Log.Info("Lease not renewed: another manager speaks for this origin there", "cluster", name, "error", err.Error())
			case err != nil:
				metrics.LeaseRenewFailed(name, metrics.LeaseError)
				r.Log.V(1).Info("Lease not renewed", "cluster", name, "error", err.Error())
			}
		})
	}
	wg.Wait()
}

// errForeignHolder marks a Lease another management cluster's manager renews.
var errForeignHolder = errors.New("held by another management cluster's manager")

// holder is the Lease holder identity of this replica.
func (r *Renewer) holder() string { return r.ManagerID + "/" + r.Identity }

// foreign reports whether a Lease is held, and renewed within its duration, by a manager of
// another management cluster; a stale one (that manager is gone) may be taken over.
func (r *Renewer) foreign(l *coordinationv1.Lease) bool {
	h := ptr.Deref(l.Spec.HolderIdentity, "")
	if h == "" || r.ManagerID == "" || strings.HasPrefix(h, r.ManagerID+"/") || !strings.Contains(h, "/") {
		return false // ours, or written before holders named their cluster
	}
	if l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
		return false
	}
	return r.Clock.Since(l.Spec.RenewTime.Time) < time.Duration(*l.Spec.LeaseDurationSeconds)*time.Second
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
				HolderIdentity:       ptr.To(r.holder()),
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
	if r.foreign(l) {
		return fmt.Errorf("lease %s in worker %s is %w (%s) with the same origin %q: its agent would run both managers' copies; give each manager its own multiCluster.origin",
			key, w.Name, errForeignHolder, ptr.Deref(l.Spec.HolderIdentity, ""), r.Origin)
	}
	l.Spec.HolderIdentity = ptr.To(r.holder())
	l.Spec.LeaseDurationSeconds = ptr.To(int32(r.Duration / time.Second))
	l.Spec.RenewTime = &now
	if err := w.Client.Update(ctx, l); err != nil {
		return fmt.Errorf("renewing lease %s in worker %s: %w", key, w.Name, err)
	}
	return nil
}
