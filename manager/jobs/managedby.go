package jobs

import (
	"fmt"

	fleetq "github.com/fleetq/fleetq/api/fleetq/v1alpha1"
	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/internal/integration"
)

// ManagedByProblem says why a workload's job cannot run through a ClusterQueue that does (multi)
// or does not dispatch to worker clusters, given the managedBy its job reported: a job the
// management cluster's controller would run must not be copied to a worker too, and a job left to
// MultiKueue runs nowhere on a local queue. "" means it can run. A workload without the
// annotation (created directly, not for a job) is not checked.
func ManagedByProblem(integrations *integration.Registry, wl *kueue.Workload, clusterQueue string, multi bool) string {
	if _, _, ok := integrations.GroupOf(wl); ok {
		// A group's members have no managedBy: they stay gated here while their copies run in a
		// worker, or start here on a local queue.
		return ""
	}
	managedBy, ok := wl.Annotations[fleetq.JobManagedByAnnotation]
	if !ok {
		return ""
	}
	ref, a, ok := integrations.Owner(wl)
	if !ok {
		return ""
	}
	field := a.Fields().ManagedBy
	if field == "" {
		return "" // held suspended here while its copy runs in a worker
	}
	kind := a.GVK().Kind
	is := fmt.Sprintf("is %q", managedBy)
	if managedBy == "" {
		is = "is unset (its LocalQueue did not exist, or pointed at another ClusterQueue, when it was created)"
	}
	recreate := fmt.Sprintf("%s cannot be changed: delete the %s and create it again", field, kind)
	switch {
	case multi && managedBy != ManagedByMultiKueue:
		return fmt.Sprintf("ClusterQueue %s runs its workloads in worker clusters, but %s %s's %s %s, so this cluster's controller would run it as well; %s, without %s (fleetq sets it to %s)",
			clusterQueue, kind, ref.Name, field, is, recreate, field, ManagedByMultiKueue)
	case !multi && managedBy == ManagedByMultiKueue:
		return fmt.Sprintf("ClusterQueue %s runs its workloads in this cluster, but %s %s's %s is %q, so no controller here would run it; %s, without %s, or point LocalQueue %s at a multi-cluster ClusterQueue",
			clusterQueue, kind, ref.Name, field, managedBy, recreate, field, wl.Spec.QueueName)
	}
	return ""
}
