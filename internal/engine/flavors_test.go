package engine_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/fleetq/fleetq/internal/engine"
	. "github.com/fleetq/fleetq/internal/engine/enginetest"
)

func TestFlavorAssignment(t *testing.T) {
	flavors := []engine.ResourceFlavor{
		MakeFlavor("a100").NodeLabel("gpu", "a100").Taint("nvidia.com/gpu", "", corev1.TaintEffectNoSchedule).Obj(),
		MakeFlavor("l4").NodeLabel("gpu", "l4").Obj(),
		MakeFlavor("spot").NodeLabel("capacity", "spot").Taint("spot", "true", corev1.TaintEffectNoSchedule).
			Toleration(corev1.Toleration{Key: "spot", Operator: corev1.TolerationOpExists}).Obj(),
		MakeFlavor("on-demand").NodeLabel("capacity", "on-demand").Obj(),
	}
	gpuQueue := func() *ClusterQueueWrapper {
		return MakeClusterQueue("cq").Cohort("c").ResourceGroup(
			MakeFlavorQuotas("a100").Resource("nvidia.com/gpu", "4").Obj(),
			MakeFlavorQuotas("l4").Resource("nvidia.com/gpu", "4").Obj(),
		)
	}
	gpuTol := corev1.Toleration{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists}
	lender := MakeClusterQueue("lender").Cohort("c").ResourceGroup(
		MakeFlavorQuotas("a100").Resource("nvidia.com/gpu", "4").Obj(),
		MakeFlavorQuotas("l4").Resource("nvidia.com/gpu", "4").Obj(),
	).Obj()
	cases := map[string]struct {
		queues   []engine.ClusterQueue
		admitted []engine.Workload
		pending  engine.Workload
		want     summary
	}{
		"first flavor in order": {
			queues:  []engine.ClusterQueue{gpuQueue().Obj()},
			pending: MakeWorkload("ns/w", "cq").PodSets(MakePodSet("main", 2).Request("nvidia.com/gpu", "1").Toleration(gpuTol).Obj()).Obj(),
			want:    summary{Kind: engine.Admit, Key: "ns/w", Flavors: map[string]string{"main/nvidia.com/gpu": "a100"}},
		},
		"untolerated taint skips the flavor": {
			queues:  []engine.ClusterQueue{gpuQueue().Obj()},
			pending: MakeWorkload("ns/w", "cq").Request(2, "nvidia.com/gpu", "1").Obj(),
			want:    summary{Kind: engine.Admit, Key: "ns/w", Flavors: map[string]string{"main/nvidia.com/gpu": "l4"}},
		},
		"node selector skips the flavor": {
			queues:  []engine.ClusterQueue{gpuQueue().Obj()},
			pending: MakeWorkload("ns/w", "cq").PodSets(MakePodSet("main", 1).Request("nvidia.com/gpu", "1").Toleration(gpuTol).NodeSelector("gpu", "l4").Obj()).Obj(),
			want:    summary{Kind: engine.Admit, Key: "ns/w", Flavors: map[string]string{"main/nvidia.com/gpu": "l4"}},
		},
		"required affinity skips the flavor": {
			queues: []engine.ClusterQueue{gpuQueue().Obj()},
			pending: MakeWorkload("ns/w", "cq").PodSets(MakePodSet("main", 1).Request("nvidia.com/gpu", "1").Toleration(gpuTol).
				RequiredNodeAffinity("gpu", corev1.NodeSelectorOpNotIn, "a100").Obj()).Obj(),
			want: summary{Kind: engine.Admit, Key: "ns/w", Flavors: map[string]string{"main/nvidia.com/gpu": "l4"}},
		},
		"flavor tolerations count against the flavor's own taints": {
			queues: []engine.ClusterQueue{MakeClusterQueue("cq").ResourceGroup(
				MakeFlavorQuotas("spot").Resource("cpu", "4").Obj(), MakeFlavorQuotas("on-demand").Resource("cpu", "4").Obj()).Obj()},
			pending: MakeWorkload("ns/w", "cq").Request(1, "cpu", "1").Obj(),
			want:    summary{Kind: engine.Admit, Key: "ns/w", Flavors: map[string]string{"main/cpu": "spot"}},
		},
		"no compatible flavor": {
			queues:  []engine.ClusterQueue{gpuQueue().Obj()},
			pending: MakeWorkload("ns/w", "cq").PodSets(MakePodSet("main", 1).Request("nvidia.com/gpu", "1").NodeSelector("gpu", "h100").Obj()).Obj(),
			want: summary{Kind: engine.Pending, Key: "ns/w", Reason: engine.NoCompatibleFlavor, Parked: true,
				Message: "flavor a100 does not match the pods' node selector or affinity; flavor l4 does not match the pods' node selector or affinity"},
		},
		"resource not covered is inadmissible, naming the resource": {
			queues:  []engine.ClusterQueue{gpuQueue().Obj()},
			pending: MakeWorkload("ns/w", "cq").Request(1, "cpu", "1", "nvidia.com/gpu", "1").Obj(),
			want: summary{Kind: engine.Pending, Key: "ns/w", Reason: engine.ResourceNotCovered, Parked: true,
				Message: "resource cpu is not covered by clusterqueue cq"},
		},
		"a pod count × request beyond int64 is refused, not wrapped to negative usage": {
			// Reproduced on the lab: parallelism 2147483647 × 8Gi was admitted with usage -8Gi.
			queues:  []engine.ClusterQueue{MakeClusterQueue("cq").ResourceGroup(MakeFlavorQuotas("on-demand").Resource("memory", "64Gi").Obj()).Obj()},
			pending: MakeWorkload("ns/w", "cq").Request(2147483647, "memory", "8Gi").Obj(),
			want: summary{Kind: engine.Pending, Key: "ns/w", Reason: engine.RequestTooLarge, Parked: true,
				Message: "2147483647 pods × 8Gi memory is more than any quota can hold; lower the pod count (parallelism) or the per-pod request"},
		},
		"an absurd request names its pod set": {
			queues: []engine.ClusterQueue{MakeClusterQueue("cq").ResourceGroup(MakeFlavorQuotas("on-demand").Resource("memory", "64Gi").Obj()).Obj()},
			pending: MakeWorkload("ns/w", "cq").PodSets(MakePodSet("driver", 1).Request("memory", "1Gi").Obj(),
				MakePodSet("workers", 1<<20).Request("memory", "4Ei").Obj()).Obj(),
			want: summary{Kind: engine.Pending, Key: "ns/w", Reason: engine.RequestTooLarge, Parked: true,
				Message: `pod set "workers": 1048576 pods × 4Ei memory is more than any quota can hold; lower the pod count (parallelism) or the per-pod request`},
		},
		"a large request that fits int64 is compared against quota as usual": {
			queues:  []engine.ClusterQueue{MakeClusterQueue("cq").ResourceGroup(MakeFlavorQuotas("on-demand").Resource("memory", "64Gi").Obj()).Obj()},
			pending: MakeWorkload("ns/w", "cq").Request(1024, "memory", "1Ti").Obj(),
			want: summary{Kind: engine.Pending, Key: "ns/w", Reason: engine.InsufficientQuota, Parked: true,
				Message: "insufficient quota for memory in flavor on-demand: requests 1Pi, available 64Gi (nominal 64Gi, used 0)"},
		},
		"falls through to the next flavor when the first is full": {
			queues:   []engine.ClusterQueue{gpuQueue().Obj()},
			admitted: []engine.Workload{MakeWorkload("ns/old", "cq").Request(4, "nvidia.com/gpu", "1").AdmittedIn("a100", 1).Obj()},
			pending:  MakeWorkload("ns/w", "cq").PodSets(MakePodSet("main", 2).Request("nvidia.com/gpu", "1").Toleration(gpuTol).Obj()).Obj(),
			want:     summary{Kind: engine.Admit, Key: "ns/w", Flavors: map[string]string{"main/nvidia.com/gpu": "l4"}},
		},
		"whenCanBorrow MayStopSearch borrows in the first flavor": {
			queues:   []engine.ClusterQueue{gpuQueue().Obj(), lender},
			admitted: []engine.Workload{MakeWorkload("ns/old", "cq").Request(4, "nvidia.com/gpu", "1").AdmittedIn("a100", 1).Obj()},
			pending:  MakeWorkload("ns/w", "cq").PodSets(MakePodSet("main", 2).Request("nvidia.com/gpu", "1").Toleration(gpuTol).Obj()).Obj(),
			want:     summary{Kind: engine.Admit, Key: "ns/w", Borrows: true, Flavors: map[string]string{"main/nvidia.com/gpu": "a100"}},
		},
		"whenCanBorrow TryNextFlavor prefers a flavor that fits without borrowing": {
			queues:   []engine.ClusterQueue{gpuQueue().Fungibility(engine.TryNextFlavor, engine.TryNextFlavor).Obj(), lender},
			admitted: []engine.Workload{MakeWorkload("ns/old", "cq").Request(4, "nvidia.com/gpu", "1").AdmittedIn("a100", 1).Obj()},
			pending:  MakeWorkload("ns/w", "cq").PodSets(MakePodSet("main", 2).Request("nvidia.com/gpu", "1").Toleration(gpuTol).Obj()).Obj(),
			want:     summary{Kind: engine.Admit, Key: "ns/w", Flavors: map[string]string{"main/nvidia.com/gpu": "l4"}},
		},
		"whenCanBorrow TryNextFlavor still borrows when no flavor fits outright": {
			queues: []engine.ClusterQueue{gpuQueue().Fungibility(engine.TryNextFlavor, engine.TryNextFlavor).Obj(), lender},
			admitted: []engine.Workload{
				MakeWorkload("ns/old", "cq").Request(4, "nvidia.com/gpu", "1").AdmittedIn("a100", 1).Obj(),
				MakeWorkload("ns/old2", "cq").Request(4, "nvidia.com/gpu", "1").AdmittedIn("l4", 1).Obj(),
			},
			pending: MakeWorkload("ns/w", "cq").PodSets(MakePodSet("main", 2).Request("nvidia.com/gpu", "1").Toleration(gpuTol).Obj()).Obj(),
			want:    summary{Kind: engine.Admit, Key: "ns/w", Borrows: true, Flavors: map[string]string{"main/nvidia.com/gpu": "a100"}},
		},
		"whenCanPreempt TryNextFlavor takes the next flavor instead of preempting": {
			queues: []engine.ClusterQueue{gpuQueue().WithinClusterQueue(engine.PreemptLowerPriority).Obj()},
			admitted: []engine.Workload{
				MakeWorkload("ns/low", "cq").Request(4, "nvidia.com/gpu", "1").AdmittedIn("a100", 1).Obj(),
			},
			pending: MakeWorkload("ns/w", "cq").Priority(10).PodSets(MakePodSet("main", 2).Request("nvidia.com/gpu", "1").Toleration(gpuTol).Obj()).Obj(),
			want:    summary{Kind: engine.Admit, Key: "ns/w", Flavors: map[string]string{"main/nvidia.com/gpu": "l4"}},
		},
		"whenCanPreempt MayStopSearch preempts in the first flavor": {
			queues: []engine.ClusterQueue{gpuQueue().WithinClusterQueue(engine.PreemptLowerPriority).Fungibility("", engine.MayStopSearch).Obj()},
			admitted: []engine.Workload{
				MakeWorkload("ns/low", "cq").Request(4, "nvidia.com/gpu", "1").AdmittedIn("a100", 1).Obj(),
			},
			pending: MakeWorkload("ns/w", "cq").Priority(10).PodSets(MakePodSet("main", 2).Request("nvidia.com/gpu", "1").Toleration(gpuTol).Obj()).Obj(),
			want: summary{Kind: engine.Preempt, Key: "ns/w", Victims: []string{"ns/low"},
				Reasons: []engine.PreemptionReason{engine.InClusterQueue}},
		},
		"pod sets accumulate in a shared flavor": {
			queues: []engine.ClusterQueue{MakeClusterQueue("cq").ResourceGroup(
				MakeFlavorQuotas("on-demand").Resource("cpu", "4").Obj(), MakeFlavorQuotas("spot").Resource("cpu", "4").Obj()).Obj()},
			pending: MakeWorkload("ns/w", "cq").PodSets(
				MakePodSet("driver", 1).Request("cpu", "2").Obj(),
				MakePodSet("workers", 3).Request("cpu", "1").Obj(),
			).Obj(),
			want: summary{Kind: engine.Admit, Key: "ns/w", Flavors: map[string]string{"driver/cpu": "on-demand", "workers/cpu": "spot"}},
		},
		"separate resource groups get separate flavors": {
			queues: []engine.ClusterQueue{MakeClusterQueue("cq").
				ResourceGroup(MakeFlavorQuotas("on-demand").Resource("cpu", "4").Resource("memory", "4Gi").Obj()).
				ResourceGroup(MakeFlavorQuotas("a100").Resource("nvidia.com/gpu", "1").Obj(), MakeFlavorQuotas("l4").Resource("nvidia.com/gpu", "4").Obj()).Obj()},
			pending: MakeWorkload("ns/w", "cq").Request(2, "cpu", "1", "memory", "1Gi", "nvidia.com/gpu", "1").Obj(),
			want: summary{Kind: engine.Admit, Key: "ns/w", Flavors: map[string]string{
				"main/cpu": "on-demand", "main/memory": "on-demand", "main/nvidia.com/gpu": "l4"}},
		},
		"multi pod set reasons name the pod set": {
			queues: []engine.ClusterQueue{MakeClusterQueue("cq").ResourceGroup(MakeFlavorQuotas("on-demand").Resource("cpu", "4").Obj()).Obj()},
			pending: MakeWorkload("ns/w", "cq").PodSets(
				MakePodSet("driver", 1).Request("cpu", "1").Obj(),
				MakePodSet("workers", 4).Request("cpu", "1").Obj(),
			).Obj(),
			want: summary{Kind: engine.Pending, Key: "ns/w", Reason: engine.InsufficientQuota, Parked: true,
				Message: `pod set "workers": insufficient quota for cpu in flavor on-demand: requests 5, available 4 (nominal 4, used 0)`},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, _, _ := runCycle(engine.Input{Flavors: flavors, ClusterQueues: tc.queues, Admitted: tc.admitted}, []engine.Workload{tc.pending}, engine.Options{})
			if diff := cmp.Diff([]summary{tc.want}, summarize(got), cmpSummary); diff != "" {
				t.Errorf("decisions (-want +got):\n%s", diff)
			}
		})
	}
}
