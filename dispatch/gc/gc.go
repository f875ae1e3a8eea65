// Package gc deletes copies in workers that no workload of this manager accounts for any more:
// their workload is gone, is a new incarnation, runs in another worker, or no longer holds
// quota. It only ever deletes objects labelled with this manager's origin, and checks the UID it
// read before deleting, so it never removes another manager's or a user's objects.
package gc

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"github.com/hashicorp/go-multierror"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/dispatch/copies"
	"github.com/fleetq/fleetq/dispatch/registry"
	"github.com/fleetq/fleetq/internal/integration"
	"github.com/fleetq/fleetq/internal/workload"
)

// Collector runs garbage collection every Interval (0 disables it).
type Collector struct {
	// Client reads the manager's workloads.
	Client   client.Client
	Registry *registry.Registry
	// Integrations are the kinds of job copies to collect besides Workloads.
	Integrations *integration.Registry
	Log          logr.Logger
	Origin       string
	Interval     time.Duration
}

// NeedLeaderElection: only the leader owns copies.
func (c *Collector) NeedLeaderElection() bool { return true }

// Start collects every Interval until ctx ends.
func (c *Collector) Start(ctx context.Context) error {
	if c.Interval <= 0 {
		return nil
	}
	t := time.NewTicker(c.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if n, err := c.Collect(ctx); err != nil {
			c.Log.Error(err, "Garbage collection of worker copies", "deleted", n)
		} else if n > 0 {
			c.Log.Info("Deleted orphaned copies in workers", "count", n)
		}
	}
}

// Collect runs one pass over every connected worker and returns how many objects it deleted.
func (c *Collector) Collect(ctx context.Context) (int, error) {
	var errs *multierror.Error
	deleted := 0
	for _, name := range c.Registry.Names() {
		n, err := c.CollectCluster(ctx, name)
		deleted += n
		errs = multierror.Append(errs, err)
	}
	return deleted, errs.ErrorOrNil()
}

// CollectCluster runs one pass over one worker, e.g. right after it answers again, so copies
// it held while it was lost go at once.
func (c *Collector) CollectCluster(ctx context.Context, name string) (int, error) {
	w, h := c.Registry.Get(name)
	if w == nil || !h.Active {
		return 0, nil
	}
	n, err := c.collect(ctx, w)
	if err != nil {
		return n, fmt.Errorf("worker %s: %w", name, err)
	}
	return n, nil
}

func (c *Collector) collect(ctx context.Context, w *registry.Worker) (int, error) {
	origin := client.MatchingLabels{kueue.MultiKueueOriginLabel: c.Origin}
	wls := &kueue.WorkloadList{}
	if err := w.Client.List(ctx, wls, origin); err != nil {
		return 0, err
	}
	var objs []client.Object
	for i := range wls.Items {
		objs = append(objs, &wls.Items[i])
	}
	for _, a := range c.Integrations.Adapters() {
		if !w.Serves(a.GVK()) {
			continue
		}
		list, err := integration.NewList(a, c.Client.Scheme())
		if err != nil {
			return 0, err
		}
		if err := w.Client.List(ctx, list, origin); err != nil {
			return 0, fmt.Errorf("listing %s copies: %w", a.GVK().Kind, err)
		}
		items, err := integration.Items(list)
		if err != nil {
			return 0, err
		}
		objs = append(objs, items...)
	}
	var errs *multierror.Error
	deleted := 0
	for _, obj := range objs {
		if obj.GetDeletionTimestamp() != nil {
			continue
		}
		orphan, err := c.orphan(ctx, w.Name, obj)
		if err != nil {
			errs = multierror.Append(errs, err)
			continue
		}
		if !orphan {
			continue
		}
		err = w.Client.Delete(ctx, obj, client.Preconditions{UID: ptr.To(obj.GetUID())}, client.PropagationPolicy(metav1.DeletePropagationBackground))
		switch {
		case err == nil:
			deleted++
		case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
			// Already gone (the cache lagged), or replaced by a new object of the same name.
		default:
			errs = multierror.Append(errs, fmt.Errorf("deleting %T %s/%s: %w", obj, obj.GetNamespace(), obj.GetName(), err))
		}
	}
	return deleted, errs.ErrorOrNil()
}

// orphan decides whether a copy in cluster still belongs to a workload running there.
func (c *Collector) orphan(ctx context.Context, cluster string, obj client.Object) (bool, error) {
	name := obj.GetName()
	if _, isWorkload := obj.(*kueue.Workload); !isWorkload {
		name = obj.GetAnnotations()[copies.WorkloadNameAnnotation]
	}
	wl := &kueue.Workload{}
	err := c.Client.Get(ctx, types.NamespacedName{Namespace: obj.GetNamespace(), Name: name}, wl)
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	return string(wl.UID) != obj.GetAnnotations()[kueue.MultiKueueOriginUIDAnnotation] ||
		workload.ClusterName(wl) != cluster || !workload.HasQuotaReservation(wl), nil
}
