package engine_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/fleetq/fleetq/internal/engine"
	. "github.com/fleetq/fleetq/internal/engine/enginetest"
)

// TestTutorialGPU follows the tutorial's "Doing this with real GPUs" section: an A100 flavor
// with node labels and a toleration, and a queue with 8 GPUs of nominal quota.
func TestTutorialGPU(t *testing.T) {
	a100 := MakeFlavor("a100-flavor").NodeLabel("nvidia.com/gpu.product", "NVIDIA-A100-SXM4-80GB").
		Toleration(corev1.Toleration{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}).Obj()
	queues := []engine.ClusterQueue{
		MakeClusterQueue("research-gpu-cq").Cohort("ai-platform").ResourceGroup(MakeFlavorQuotas("a100-flavor").
			Resource("cpu", "96").Resource("memory", "768Gi").Resource("nvidia.com/gpu", "8", "4").Obj()).Obj(),
		MakeClusterQueue("inference-gpu-cq").Cohort("ai-platform").ResourceGroup(MakeFlavorQuotas("a100-flavor").
			Resource("cpu", "8").Resource("memory", "64Gi").Resource("nvidia.com/gpu", "0").Obj()).Obj(),
	}
	running := MakeWorkload("research/train-big", "research-gpu-cq").Request(1, "cpu", "8", "memory", "64Gi", "nvidia.com/gpu", "6").AdmittedIn("a100-flavor", 1).Obj()
	cases := map[string]struct {
		pending engine.Workload
		want    summary
	}{
		"a job that fits is admitted in the A100 flavor": {
			pending: MakeWorkload("research/train-small", "research-gpu-cq").Request(1, "cpu", "4", "memory", "32Gi", "nvidia.com/gpu", "2").Obj(),
			want: summary{Kind: engine.Admit, Key: "research/train-small",
				Flavors: map[string]string{"main/cpu": "a100-flavor", "main/memory": "a100-flavor", "main/nvidia.com/gpu": "a100-flavor"}},
		},
		"a job that does not fit says why, with numbers": {
			pending: MakeWorkload("research/train-4", "research-gpu-cq").Request(1, "cpu", "4", "memory", "32Gi", "nvidia.com/gpu", "4").Obj(),
			want: summary{Kind: engine.Pending, Key: "research/train-4", Reason: engine.InsufficientQuota, Parked: true,
				Message: "insufficient quota for nvidia.com/gpu in flavor a100-flavor: requests 4, available 2 (nominal 8, used 6, cohort ai-platform lends 0)"},
		},
		"a queue without GPU quota borrows within the cohort": {
			pending: MakeWorkload("inference/serve", "inference-gpu-cq").Request(1, "cpu", "1", "memory", "1Gi", "nvidia.com/gpu", "2").Obj(),
			want: summary{Kind: engine.Admit, Key: "inference/serve", Borrows: true,
				Flavors: map[string]string{"main/cpu": "a100-flavor", "main/memory": "a100-flavor", "main/nvidia.com/gpu": "a100-flavor"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := engine.Input{Flavors: []engine.ResourceFlavor{a100}, ClusterQueues: queues, Admitted: []engine.Workload{running}}
			got, _, _ := runCycle(in, []engine.Workload{tc.pending}, engine.Options{})
			if diff := cmp.Diff([]summary{tc.want}, summarize(got), cmpSummary); diff != "" {
				t.Errorf("decisions (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAdmissionContent checks what the manager writes: per pod set, the flavor of every resource
// and the usage (count × per-pod request).
func TestAdmissionContent(t *testing.T) {
	in := engine.Input{
		Flavors: []engine.ResourceFlavor{MakeFlavor("f").Obj(), MakeFlavor("g").Obj()},
		ClusterQueues: []engine.ClusterQueue{MakeClusterQueue("q").
			ResourceGroup(MakeFlavorQuotas("f").Resource("cpu", "8").Resource("memory", "8Gi").Obj()).
			ResourceGroup(MakeFlavorQuotas("g").Resource("example.com/gpu", "4").Obj()).Obj()},
	}
	w := MakeWorkload("ns/w", "q").PodSets(
		MakePodSet("driver", 1).Request("cpu", "500m").Request("memory", "512Mi").Obj(),
		MakePodSet("workers", 3).Request("cpu", "2").Request("memory", "1Gi").Request("example.com/gpu", "1").Obj(),
	).Obj()
	got, _, snap := runCycle(in, []engine.Workload{w}, engine.Options{})
	want := &engine.Admission{ClusterQueue: "q", PodSets: []engine.PodSetAssignment{
		{Name: "driver", Count: 1,
			Flavors: map[corev1.ResourceName]string{"cpu": "f", "memory": "f"},
			Usage:   map[corev1.ResourceName]int64{"cpu": 500, "memory": 512 << 20}},
		{Name: "workers", Count: 3,
			Flavors: map[corev1.ResourceName]string{"cpu": "f", "memory": "f", "example.com/gpu": "g"},
			Usage:   map[corev1.ResourceName]int64{"cpu": 6000, "memory": 3 << 30, "example.com/gpu": 3}},
	}}
	if len(got) != 1 || got[0].Kind != engine.Admit {
		t.Fatalf("decisions: %+v", got)
	}
	if diff := cmp.Diff(want, got[0].Admission); diff != "" {
		t.Errorf("admission (-want +got):\n%s", diff)
	}
	// Recording it in the snapshot shows up in the status read-out.
	w.Admission, w.AdmittedAt = got[0].Admission, 1
	if err := snap.AddAdmitted(w); err != nil {
		t.Fatal(err)
	}
	st, _ := snap.ClusterQueueStatus("q")
	wantUsage := []engine.FlavorUsage{
		{Name: "f", Resources: []engine.ResourceUsage{{Name: "cpu", Total: 6500}, {Name: "memory", Total: 3<<30 + 512<<20}}},
		{Name: "g", Resources: []engine.ResourceUsage{{Name: "example.com/gpu", Total: 3}}},
	}
	if diff := cmp.Diff(wantUsage, st.Usage); diff != "" {
		t.Errorf("usage (-want +got):\n%s", diff)
	}
}

// TestHierarchicalFairSharing orders heads by the shares along the cohort path: the subtree that
// borrows less from the root goes first, whatever the queues' own shares.
func TestHierarchicalFairSharing(t *testing.T) {
	in := engine.Input{
		Flavors: []engine.ResourceFlavor{MakeFlavor("f").Obj()},
		ClusterQueues: []engine.ClusterQueue{
			cpuQueue("a1", "org-a", "1"), cpuQueue("a2", "org-a", "1"),
			cpuQueue("b1", "org-b", "2"),
			cpuQueue("spare", "root", "4"),
		},
		Cohorts: []engine.Cohort{cpuCohort("root", "", ""), cpuCohort("org-a", "root", ""), cpuCohort("org-b", "root", "")},
		Admitted: []engine.Workload{
			cpuJob("ns/a1-running", "a1", "1").AdmittedIn("f", 1).Obj(),
			cpuJob("ns/a2-running", "a2", "3").AdmittedIn("f", 1).Obj(),
			cpuJob("ns/b1-running", "b1", "3").AdmittedIn("f", 1).Obj(),
		},
	}
	// org-a borrows 2 of root's 8, org-b borrows 1: org-b's head goes first even though a1 itself
	// borrows nothing yet and has the higher priority.
	pending := []engine.Workload{cpuJob("ns/a1-next", "a1", "1").Priority(10).Obj(), cpuJob("ns/b1-next", "b1", "1").Obj()}
	got, _, _ := runCycle(in, pending, engine.Options{FairSharing: &engine.FairSharingOptions{}})
	want := []summary{
		{Kind: engine.Admit, Key: "ns/b1-next", Borrows: true, Flavors: map[string]string{"main/cpu": "f"}},
		{Kind: engine.Pending, Key: "ns/a1-next", Reason: engine.InsufficientQuota, Parked: true,
			Message: "insufficient quota for cpu in flavor f: requests 1, available 0 (nominal 1, used 1, cohort org-a lends 0)"},
	}
	if diff := cmp.Diff(want, summarize(got), cmpSummary); diff != "" {
		t.Errorf("decisions (-want +got):\n%s", diff)
	}
}
