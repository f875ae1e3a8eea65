package engine_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetq/fleetq/internal/engine"
	. "github.com/fleetq/fleetq/internal/engine/enginetest"
)

func TestFairSharing(t *testing.T) {
	adm := func(key, cq, cpu string, at int64) engine.Workload {
		return cpuJob(key, cq, cpu).Timestamp(at).AdmittedIn("f", at).Obj()
	}
	fair := engine.Options{FairSharing: &engine.FairSharingOptions{}}
	// Three queues share 8 cpu; b borrows 2 (share 2/8) and a fits within its nominal.
	fsQueues := []engine.ClusterQueue{
		MakeClusterQueue("a").Cohort("c").ResourceGroup(MakeFlavorQuotas("f").Resource("cpu", "3").Obj()).ReclaimWithinCohort(engine.PreemptAny).Obj(),
		cpuQueue("b", "c", "3"), cpuQueue("idle", "c", "2"),
	}
	fsAdmitted := []engine.Workload{adm("ns/a0", "a", "3", 1), adm("ns/b1", "b", "1", 1), adm("ns/b2", "b", "1", 2), adm("ns/b3", "b", "3", 3)}
	cases := map[string]struct {
		queues   []engine.ClusterQueue
		admitted []engine.Workload
		pending  []engine.Workload
		opts     engine.Options
		want     []summary
	}{
		"without fair sharing, priority decides between two borrowers": {
			queues:   []engine.ClusterQueue{cpuQueue("a", "c", "2"), cpuQueue("b", "c", "2"), cpuQueue("idle", "c", "3")},
			admitted: []engine.Workload{adm("ns/a0", "a", "4", 1), adm("ns/b0", "b", "2", 1)},
			pending:  []engine.Workload{cpuJob("ns/a1", "a", "1").Priority(10).Obj(), cpuJob("ns/b1", "b", "1").Obj()},
			want: []summary{
				{Kind: engine.Admit, Key: "ns/a1", Borrows: true, Flavors: map[string]string{"main/cpu": "f"}},
				{Kind: engine.Pending, Key: "ns/b1", Reason: engine.InsufficientQuota, Parked: true,
					Message: "insufficient quota for cpu in flavor f: requests 1, available 0 (nominal 2, used 2, cohort c lends 0)"},
			},
		},
		"with fair sharing, the queue with the lower share goes first": {
			queues:   []engine.ClusterQueue{cpuQueue("a", "c", "2"), cpuQueue("b", "c", "2"), cpuQueue("idle", "c", "3")},
			admitted: []engine.Workload{adm("ns/a0", "a", "4", 1), adm("ns/b0", "b", "2", 1)},
			pending:  []engine.Workload{cpuJob("ns/a1", "a", "1").Priority(10).Obj(), cpuJob("ns/b1", "b", "1").Obj()},
			opts:     fair,
			want: []summary{
				{Kind: engine.Admit, Key: "ns/b1", Borrows: true, Flavors: map[string]string{"main/cpu": "f"}},
				{Kind: engine.Pending, Key: "ns/a1", Reason: engine.InsufficientQuota, Parked: true,
					Message: "insufficient quota for cpu in flavor f: requests 1, available 0 (nominal 2, used 4, cohort c lends 0)"},
			},
		},
		"weights scale shares": {
			queues: []engine.ClusterQueue{
				MakeClusterQueue("a").Cohort("c").ResourceGroup(MakeFlavorQuotas("f").Resource("cpu", "2").Obj()).Weight(4).Obj(),
				cpuQueue("b", "c", "2"), cpuQueue("idle", "c", "3"),
			},
			admitted: []engine.Workload{adm("ns/a0", "a", "4", 1), adm("ns/b0", "b", "2", 1)},
			pending:  []engine.Workload{cpuJob("ns/a1", "a", "1").Obj(), cpuJob("ns/b1", "b", "1").Obj()},
			opts:     fair,
			want: []summary{
				{Kind: engine.Admit, Key: "ns/a1", Borrows: true, Flavors: map[string]string{"main/cpu": "f"}},
				{Kind: engine.Pending, Key: "ns/b1", Reason: engine.InsufficientQuota, Parked: true,
					Message: "insufficient quota for cpu in flavor f: requests 1, available 0 (nominal 2, used 2, cohort c lends 0)"},
			},
		},
		"LessThanOrEqualToFinalShare prefers a smaller victim that keeps the target's share at or above the preemptor's": {
			queues:   fsQueues,
			admitted: fsAdmitted,
			pending:  []engine.Workload{cpuJob("ns/a1", "a", "1").Obj()},
			opts:     fair,
			want: []summary{{Kind: engine.Preempt, Key: "ns/a1", Borrows: true, Victims: []string{"ns/b2"},
				Reasons: []engine.PreemptionReason{engine.InCohortFairSharing}}},
		},
		"LessThanInitialShare compares with the target's share before preemption": {
			queues:   fsQueues,
			admitted: fsAdmitted,
			pending:  []engine.Workload{cpuJob("ns/a1", "a", "1").Obj()},
			opts:     engine.Options{FairSharing: &engine.FairSharingOptions{Strategies: []engine.FairSharingStrategy{engine.LessThanInitialShare}}},
			want: []summary{{Kind: engine.Preempt, Key: "ns/a1", Borrows: true, Victims: []string{"ns/b3"},
				Reasons: []engine.PreemptionReason{engine.InCohortFairSharing}}},
		},
		"no fair-sharing preemption when the preemptor would end with the larger share": {
			queues:   fsQueues,
			admitted: fsAdmitted,
			pending:  []engine.Workload{cpuJob("ns/a1", "a", "3").Obj()},
			opts:     fair,
			want: []summary{{Kind: engine.Pending, Key: "ns/a1", Reason: engine.InsufficientQuota, Parked: true,
				Message: "insufficient quota for cpu in flavor f: requests 3, available 0 (nominal 3, used 3, cohort c lends 0); preemption the policies allow cannot free enough quota"}},
		},
		"reclaiming nominal quota needs no share argument": {
			queues:   fsQueues,
			admitted: []engine.Workload{adm("ns/b1", "b", "1", 1), adm("ns/b2", "b", "1", 2), adm("ns/b3", "b", "3", 3), adm("ns/idle", "idle", "2", 1), adm("ns/b4", "b", "1", 4)},
			pending:  []engine.Workload{cpuJob("ns/a1", "a", "2").Obj()},
			opts:     fair,
			want: []summary{{Kind: engine.Preempt, Key: "ns/a1", Victims: []string{"ns/b3"},
				Reasons: []engine.PreemptionReason{engine.InCohortReclamation}}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := engine.Input{Flavors: []engine.ResourceFlavor{MakeFlavor("f").Obj()}, ClusterQueues: tc.queues, Admitted: tc.admitted}
			got, _, _ := runCycle(in, tc.pending, tc.opts)
			if diff := cmp.Diff(tc.want, summarize(got), cmpSummary); diff != "" {
				t.Errorf("decisions (-want +got):\n%s", diff)
			}
		})
	}
}
