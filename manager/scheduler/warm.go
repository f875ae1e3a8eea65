package scheduler

import (
	"context"
	"fmt"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	fleetq "github.com/fleetq/fleetq/api/fleetq/v1alpha1"
	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/internal/workload"
	"github.com/fleetq/fleetq/manager/cache"
)

// unaccounted lists what the cache does not hold yet of the objects the informers have: every
// ClusterQueue, and the reservation of every workload that holds quota in a known one. Until it
// is empty after a restart or fail-over, a cycle would see free quota that admitted workloads
// use, and admit past nominal quota.
func unaccounted(c *cache.Cache, cqs []kueue.ClusterQueue, wls []kueue.Workload) []string {
	var out []string
	known := map[string]bool{}
	for i := range cqs {
		name := cqs[i].Name
		if c.HasClusterQueue(name) {
			known[name] = true
		} else {
			out = append(out, "clusterqueue "+name)
		}
	}
	for i := range wls {
		wl := &wls[i]
		if !workload.HasQuotaReservation(wl) || workload.IsFinished(wl) || wl.Status.Admission == nil {
			continue
		}
		if wl.DeletionTimestamp != nil && !controllerutil.ContainsFinalizer(wl, fleetq.CopiesFinalizer) {
			continue // released as it goes
		}
		if !known[string(wl.Status.Admission.ClusterQueue)] {
			continue // its queue is gone: it holds nothing anyone could be admitted against
		}
		if key := workload.Key(wl); !c.HoldsQuota(key) {
			out = append(out, "workload "+key)
		}
	}
	return out
}

// waitAccounted blocks the first cycle until the cache accounts for every reservation the
// informers hold (the workloads controller rebuilds it); it says what it waits for every 30 s.
func (s *Scheduler) waitAccounted(ctx context.Context) error {
	start, lastLog := time.Now(), time.Now()
	for {
		cqs, wls := &kueue.ClusterQueueList{}, &kueue.WorkloadList{}
		if err := s.Client.List(ctx, cqs); err != nil {
			return fmt.Errorf("listing clusterqueues: %w", err)
		}
		if err := s.Client.List(ctx, wls, client.UnsafeDisableDeepCopy); err != nil {
			return fmt.Errorf("listing workloads: %w", err)
		}
		missing := unaccounted(s.Cache, cqs.Items, wls.Items)
		if len(missing) == 0 {
			s.Log.Info("Usage rebuilt; admission starts", "clusterQueues", len(cqs.Items), "workloads", len(wls.Items), "after", time.Since(start).Round(time.Millisecond).String())
			return nil
		}
		if time.Since(lastLog) >= 30*time.Second {
			lastLog = time.Now()
			s.Log.Info("Admission waits until the usage of admitted workloads is rebuilt", "missing", len(missing), "first", missing[:min(5, len(missing))])
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(100 * time.Millisecond):
		}
	}
}
