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

// Renewer renews the manager's Lease in every connected worker. Each worker is renewed on its
// own: a worker whose API server hangs (frozen, partitioned) holds up only its own renewal, never
// the others', or every healthy worker would fence while one is unreachable.
type Renewer struct {
	Registry Workers
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

	mu sync.Mutex
	// inFlight are the workers whose renewal has not returned yet.
	inFlight map[string]bool
	wg       sync.WaitGroup
}

// Workers is what the Renewer needs of the registry: the connected workers, and where to record
// each renewal's outcome (the MultiKueueCluster's FencingLease condition).
type Workers interface {
	Names() []string
	Get(name string) (*registry.Worker, registry.Health)
	Lease(name string) registry.LeaseHealth
	LeaseRenewal(name, reason string, err error)
}

// NeedLeaderElection: only the leader speaks for the manager.
func (r *Renewer) NeedLeaderElection() bool { return true }

// Start renews every Interval until ctx ends.
func (r *Renewer) Start(ctx context.Context) error {
	t := time.NewTicker(r.Interval)
	defer t.Stop()
	defer r.wg.Wait()
	for {
		r.RenewAll(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// RenewAll starts a renewal in every connected worker whose previous one has returned, and
// returns without waiting for them (Wait does); a renewal gives up after the lease's duration,
// by when the agent has fenced anyway.
func (r *Renewer) RenewAll(ctx context.Context) {
	for _, name := range r.Registry.Names() {
		w, h := r.Registry.Get(name)
		if w == nil || !h.Active {
			if r.Registry.Lease(name).Renewed {
				r.Registry.LeaseRenewal(name, registry.ReasonLeaseRenewFailed, fmt.Errorf(
					"not renewed while the worker is unreachable (see condition Active): its agent fences %s after the last renewal", r.Duration))
			}
			continue
		}
		r.mu.Lock()
		if r.inFlight == nil {
			r.inFlight = map[string]bool{}
		}
		busy := r.inFlight[name]
		r.inFlight[name] = true
		r.mu.Unlock()
		if busy {
			r.Log.V(1).Info("Lease renewal still waiting for the worker; not starting another", "cluster", name)
			continue
		}
		r.wg.Go(func() {
			defer func() {
				r.mu.Lock()
				delete(r.inFlight, name)
				r.mu.Unlock()
			}()
			r.renewOne(ctx, w)
		})
	}
}

// Wait returns once every renewal RenewAll started has returned.
func (r *Renewer) Wait() { r.wg.Wait() }

// renewOne renews in one worker and records the outcome for its MultiKueueCluster.
func (r *Renewer) renewOne(ctx context.Context, w *registry.Worker) {
	rctx, cancel := context.WithTimeout(ctx, max(r.Duration, time.Second))
	defer cancel()
	name := w.Name
	err := r.renew(rctx, w)
	switch {
	case err == nil:
		r.Registry.LeaseRenewal(name, "", nil)
	case errors.Is(err, errForeignHolder):
		metrics.LeaseRenewFailed(name, metrics.LeaseForeignHolder)
		r.Registry.LeaseRenewal(name, registry.ReasonLeaseHeldElsewhere, err)
		r.Log.Info("Lease not renewed: another manager speaks for this origin there", "cluster", name, "error", err.Error())
	case ctx.Err() != nil:
		// Shutting down or losing leadership: not the worker's fault.
	default:
		metrics.LeaseRenewFailed(name, metrics.LeaseError)
		r.Registry.LeaseRenewal(name, registry.ReasonLeaseRenewFailed, err)
		r.Log.V(1).Info("Lease not renewed", "cluster", name, "error", err.Error())
	}
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
			return fmt.Errorf("creating lease %s in worker %s: %w%s", key, w.Name, err, r.hint(err))
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading lease %s in worker %s: %w%s", key, w.Name, err, r.hint(err))
	}
	if r.foreign(l) {
		return fmt.Errorf("lease %s in worker %s is %w (%s) with the same origin %q: its agent would run both managers' copies; give each manager its own multiCluster.origin",
			key, w.Name, errForeignHolder, ptr.Deref(l.Spec.HolderIdentity, ""), r.Origin)
	}
	l.Spec.HolderIdentity = ptr.To(r.holder())
	l.Spec.LeaseDurationSeconds = ptr.To(int32(r.Duration / time.Second))
	l.Spec.RenewTime = &now
	if err := w.Client.Update(ctx, l); err != nil {
		return fmt.Errorf("renewing lease %s in worker %s: %w%s", key, w.Name, err, r.hint(err))
	}
	return nil
}

// hint says how to fix the renewal failures a user can cause: the agent's namespace missing in
// the worker (creating a Lease there answers NotFound), or a worker identity that may not touch
// Leases. Until fixed the worker's agent admits with no Lease to fence against, or fences.
func (r *Renewer) hint(err error) string {
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Sprintf("; namespace %s does not exist in the worker: install the agent there (charts/fleetq-agent into namespace %s), or set multiCluster.agentNamespace to the namespace the agent runs in", r.Namespace, r.Namespace)
	case apierrors.IsForbidden(err):
		return fmt.Sprintf("; the identity in the worker's kubeconfig may not get, create and update coordination.k8s.io leases in namespace %s: use the agent chart's manager-access ServiceAccount, or grant those verbs", r.Namespace)
	}
	return ""
}
