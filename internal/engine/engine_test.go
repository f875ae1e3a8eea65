package engine_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/fleetq/fleetq/internal/engine"
	. "github.com/fleetq/fleetq/internal/engine/enginetest"
	"github.com/fleetq/fleetq/internal/engine/queue"
)

// runCycle builds a snapshot, queues the pending workloads and runs one cycle.
func runCycle(in engine.Input, pending []engine.Workload, opts engine.Options) ([]engine.Decision, *queue.Manager, *engine.Snapshot) {
	snap := engine.NewSnapshot(in)
	q := queue.New()
	for i := range pending {
		w := pending[i]
		q.Add(&w)
	}
	return engine.Run(snap, q, opts), q, snap
}

// summary is the part of a decision most tests compare.
type summary struct {
	Kind    engine.DecisionKind
	Key     string
	Borrows bool
	Flavors map[string]string `json:",omitempty"`
	Victims []string
	Reasons []engine.PreemptionReason
	Reason  engine.PendingReason
	Message string
	Parked  bool
}

func summarize(ds []engine.Decision) []summary {
	var out []summary
	for _, d := range ds {
		s := summary{Kind: d.Kind, Key: d.Workload, Borrows: d.Borrows, Reason: d.Reason, Message: d.Message, Parked: d.Parked}
		if d.Admission != nil && d.Kind == engine.Admit {
			s.Flavors = map[string]string{}
			for _, ps := range d.Admission.PodSets {
				for r, f := range ps.Flavors {
					s.Flavors[ps.Name+"/"+string(r)] = f
				}
			}
		}
		for _, v := range d.Victims {
			s.Victims = append(s.Victims, v.Key)
			s.Reasons = append(s.Reasons, v.Reason)
		}
		out = append(out, s)
	}
	return out
}

var cmpSummary = cmpopts.EquateEmpty()

// tutorialQueue is the tutorial's queue: nominal 4 CPU / 4Gi, borrowingLimit 4 / 4Gi, cohort ai-platform.
func tutorialQueue(name string) *ClusterQueueWrapper {
	return MakeClusterQueue(name).Cohort("ai-platform").ResourceGroup(
		MakeFlavorQuotas("default-flavor").Resource("cpu", "4", "4").Resource("memory", "4Gi", "4Gi").Obj())
}

// tutorialJob is the tutorial's job: parallelism 2, 1 CPU and 512Mi per pod.
func tutorialJob(key, cq string, ts int64) *WorkloadWrapper {
	return MakeWorkload(key, cq).Timestamp(ts).Request(2, "cpu", "1", "memory", "512Mi")
}

func TestTutorial(t *testing.T) {
	flavors := []engine.ResourceFlavor{MakeFlavor("default-flavor").Obj()}
	admittedResearch := []engine.Workload{
		tutorialJob("research/train-1", "research-cq", 1).AdmittedIn("default-flavor", 1).Obj(),
		tutorialJob("research/train-2", "research-cq", 2).AdmittedIn("default-flavor", 2).Obj(),
		tutorialJob("research/train-3", "research-cq", 3).AdmittedIn("default-flavor", 3).Obj(),
		tutorialJob("research/train-4", "research-cq", 4).AdmittedIn("default-flavor", 4).Obj(),
	}
	cpuMem := map[string]string{"main/cpu": "default-flavor", "main/memory": "default-flavor"}
	cases := map[string]struct {
		queues   []engine.ClusterQueue
		admitted []engine.Workload
		pending  []engine.Workload
		want     []summary
	}{
		"four research jobs admitted, the last two borrowing; the fifth waits at the borrowing limit": {
			queues: []engine.ClusterQueue{tutorialQueue("research-cq").Obj(), tutorialQueue("inference-cq").Obj()},
			pending: []engine.Workload{
				tutorialJob("research/train-1", "research-cq", 1).Obj(),
				tutorialJob("research/train-2", "research-cq", 2).Obj(),
				tutorialJob("research/train-3", "research-cq", 3).Obj(),
				tutorialJob("research/train-4", "research-cq", 4).Obj(),
				tutorialJob("research/train-5", "research-cq", 5).Obj(),
			},
			want: []summary{
				{Kind: engine.Admit, Key: "research/train-1", Flavors: cpuMem},
				{Kind: engine.Admit, Key: "research/train-2", Flavors: cpuMem},
				{Kind: engine.Admit, Key: "research/train-3", Borrows: true, Flavors: cpuMem},
				{Kind: engine.Admit, Key: "research/train-4", Borrows: true, Flavors: cpuMem},
				{Kind: engine.Pending, Key: "research/train-5", Reason: engine.InsufficientQuota, Parked: true,
					Message: "insufficient quota for cpu in flavor default-flavor: requests 2, available 0 (nominal 4, used 8, borrowingLimit 4 reached)"},
			},
		},
		"an inference job waits while research borrows, with reclaimWithinCohort Never": {
			queues:   []engine.ClusterQueue{tutorialQueue("research-cq").Obj(), tutorialQueue("inference-cq").Obj()},
			admitted: admittedResearch,
			pending:  []engine.Workload{tutorialJob("inference/serve-1", "inference-cq", 10).Obj()},
			want: []summary{
				{Kind: engine.Pending, Key: "inference/serve-1", Reason: engine.InsufficientQuota, Parked: true,
					Message: "insufficient quota for cpu in flavor default-flavor: requests 2, available 0 (nominal 4, used 0, 4 of it in use by other queues in cohort ai-platform); reclaimWithinCohort is Never, so it waits for borrowers to finish"},
			},
		},
		"with reclaimWithinCohort Any the inference job preempts exactly one research borrower": {
			queues: []engine.ClusterQueue{
				tutorialQueue("research-cq").Obj(),
				tutorialQueue("inference-cq").ReclaimWithinCohort(engine.PreemptAny).WithinClusterQueue(engine.PreemptLowerPriority).Obj(),
			},
			admitted: admittedResearch,
			pending:  []engine.Workload{tutorialJob("inference/serve-1", "inference-cq", 10).Obj()},
			want: []summary{
				{Kind: engine.Preempt, Key: "inference/serve-1", Victims: []string{"research/train-4"},
					Reasons: []engine.PreemptionReason{engine.InCohortReclamation}},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, _, _ := runCycle(engine.Input{Flavors: flavors, ClusterQueues: tc.queues, Admitted: tc.admitted}, tc.pending, engine.Options{})
			if diff := cmp.Diff(tc.want, summarize(got), cmpSummary); diff != "" {
				t.Errorf("decisions (-want +got):\n%s", diff)
			}
		})
	}
}
