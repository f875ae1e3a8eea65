// Package flavorsync keeps every connected worker's ResourceFlavors equal to the manager's, so
// the agent computes capacity per flavor with the same node labels and taints the manager
// admits against. Copies carry the origin label; flavors a worker's admin created are untouched.
package flavorsync

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"github.com/hashicorp/go-multierror"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/dispatch/registry"
)

// Syncer copies ResourceFlavors to workers, on demand (Trigger) and every Interval.
type Syncer struct {
	client   client.Client
	registry *registry.Registry
	log      logr.Logger
	origin   string
	interval time.Duration
	trigger  chan struct{}
}

// New returns a Syncer for the workers of a registry.
func New(c client.Client, reg *registry.Registry, log logr.Logger, origin string, interval time.Duration) *Syncer {
	return &Syncer{client: c, registry: reg, log: log, origin: origin, interval: interval, trigger: make(chan struct{}, 1)}
}

// Trigger asks for a sync soon (a flavor changed, a worker connected); it never blocks.
func (s *Syncer) Trigger() {
	select {
	case s.trigger <- struct{}{}:
	default:
	}
}

// NeedLeaderElection: only the leader writes to workers.
func (s *Syncer) NeedLeaderElection() bool { return true }

// Start syncs on triggers and every Interval until ctx ends.
func (s *Syncer) Start(ctx context.Context) error {
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		if err := s.SyncAll(ctx); err != nil {
			s.log.Info("Flavor sync incomplete; retrying", "error", err.Error())
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-s.trigger:
		}
	}
}

// SyncAll makes every connected worker's flavor copies match the manager's flavors.
func (s *Syncer) SyncAll(ctx context.Context) error {
	want := &kueue.ResourceFlavorList{}
	if err := s.client.List(ctx, want); err != nil {
		return err
	}
	var errs *multierror.Error
	for _, name := range s.registry.Names() {
		w, h := s.registry.Get(name)
		if w == nil || !h.Active {
			continue
		}
		if err := s.sync(ctx, w, want.Items); err != nil {
			errs = multierror.Append(errs, fmt.Errorf("worker %s: %w", name, err))
		}
	}
	return errs.ErrorOrNil()
}

func (s *Syncer) sync(ctx context.Context, w *registry.Worker, want []kueue.ResourceFlavor) error {
	have := &kueue.ResourceFlavorList{}
	if err := w.Client.List(ctx, have, client.MatchingLabels{kueue.MultiKueueOriginLabel: s.origin}); err != nil {
		return err
	}
	existing := map[string]*kueue.ResourceFlavor{}
	for i := range have.Items {
		existing[have.Items[i].Name] = &have.Items[i]
	}
	var errs *multierror.Error
	for _, rf := range want {
		if rf.DeletionTimestamp != nil {
			continue
		}
		cur, ok := existing[rf.Name]
		delete(existing, rf.Name)
		if !ok {
			cp := &kueue.ResourceFlavor{
				ObjectMeta: metav1.ObjectMeta{Name: rf.Name, Labels: map[string]string{kueue.MultiKueueOriginLabel: s.origin}},
				Spec:       *rf.Spec.DeepCopy(),
			}
			if err := w.Client.Create(ctx, cp); err != nil && !apierrors.IsAlreadyExists(err) {
				errs = multierror.Append(errs, fmt.Errorf("creating flavor %s: %w", rf.Name, err))
			}
			continue
		}
		if equality.Semantic.DeepEqual(cur.Spec, rf.Spec) {
			continue
		}
		orig := cur.DeepCopy()
		cur.Spec = *rf.Spec.DeepCopy()
		if err := w.Client.Patch(ctx, cur, client.MergeFrom(orig)); err != nil {
			errs = multierror.Append(errs, fmt.Errorf("updating flavor %s: %w", rf.Name, err))
		}
	}
	for name, stale := range existing {
		err := w.Client.Delete(ctx, stale, client.Preconditions{UID: ptr.To(stale.UID)})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = multierror.Append(errs, fmt.Errorf("deleting flavor %s: %w", name, err))
		}
	}
	return errs.ErrorOrNil()
}
