package engine_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetq/fleetq/internal/engine"
	. "github.com/fleetq/fleetq/internal/engine/enginetest"
)

// cpuQueue is a queue with cpu quota in flavor f; limits are borrowingLimit then lendingLimit.
func cpuQueue(name, cohort, nominal string, limits ...string) engine.ClusterQueue {
	return MakeClusterQueue(name).Cohort(cohort).ResourceGroup(MakeFlavorQuotas("f").Resource("cpu", nominal, limits...).Obj()).Obj()
}

func cpuCohort(name, parent, nominal string, limits ...string) engine.Cohort {
	c := MakeCohort(name).Parent(parent)
	if nominal != "" {
		c.ResourceGroup(MakeFlavorQuotas("f").Resource("cpu", nominal, limits...).Obj())
	}
	return c.Obj()
}

func cpuJob(key, cq, cpu string) *WorkloadWrapper {
	return MakeWorkload(key, cq).Request(1, "cpu", cpu)
}

func TestQuota(t *testing.T) {
	admitF := map[string]string{"main/cpu": "f"}
	cases := map[string]struct {
		queues   []engine.ClusterQueue
		cohorts  []engine.Cohort
		admitted []engine.Workload
		pending  engine.Workload
		want     summary
	}{
		"nominal quota without cohort": {
			queues:  []engine.ClusterQueue{cpuQueue("a", "", "4")},
			pending: cpuJob("ns/w", "a", "5").Obj(),
			want: summary{Kind: engine.Pending, Key: "ns/w", Reason: engine.InsufficientQuota, Parked: true,
				Message: "insufficient quota for cpu in flavor f: requests 5, available 4 (nominal 4, used 0)"},
		},
		"borrowing within borrowingLimit": {
			queues:  []engine.ClusterQueue{cpuQueue("a", "c", "4", "2"), cpuQueue("b", "c", "4")},
			pending: cpuJob("ns/w", "a", "6").Obj(),
			want:    summary{Kind: engine.Admit, Key: "ns/w", Borrows: true, Flavors: admitF},
		},
		"borrowingLimit caps what the cohort could lend": {
			queues:  []engine.ClusterQueue{cpuQueue("a", "c", "4", "2"), cpuQueue("b", "c", "4")},
			pending: cpuJob("ns/w", "a", "7").Obj(),
			want: summary{Kind: engine.Pending, Key: "ns/w", Reason: engine.InsufficientQuota, Parked: true,
				Message: "insufficient quota for cpu in flavor f: requests 7, available 6 (nominal 4, used 0, borrowingLimit 2 allows 2 more)"},
		},
		"the cohort lends what others leave unused": {
			queues:   []engine.ClusterQueue{cpuQueue("a", "c", "8", "4"), cpuQueue("b", "c", "4")},
			admitted: []engine.Workload{cpuJob("ns/a1", "a", "6").AdmittedIn("f", 1).Obj(), cpuJob("ns/b1", "b", "4").AdmittedIn("f", 1).Obj()},
			pending:  cpuJob("ns/w", "a", "4").Obj(),
			want: summary{Kind: engine.Pending, Key: "ns/w", Reason: engine.InsufficientQuota, Parked: true,
				Message: "insufficient quota for cpu in flavor f: requests 4, available 2 (nominal 8, used 6, cohort c lends 0)"},
		},
		"lendingLimit keeps the rest for the lender": {
			queues:  []engine.ClusterQueue{cpuQueue("a", "c", "4", "", "1"), cpuQueue("b", "c", "0")},
			pending: cpuJob("ns/w", "b", "2").Obj(),
			want: summary{Kind: engine.Pending, Key: "ns/w", Reason: engine.InsufficientQuota, Parked: true,
				Message: "insufficient quota for cpu in flavor f: requests 2, available 1 (nominal 0, used 0, cohort c lends 1)"},
		},
		"the lender still uses its guaranteed part when the lent part is taken": {
			queues:   []engine.ClusterQueue{cpuQueue("a", "c", "4", "", "1"), cpuQueue("b", "c", "0")},
			admitted: []engine.Workload{cpuJob("ns/b1", "b", "1").AdmittedIn("f", 1).Obj()},
			pending:  cpuJob("ns/w", "a", "3").Obj(),
			want:     summary{Kind: engine.Admit, Key: "ns/w", Flavors: admitF},
		},
		"hierarchical: a cohort's own quota is shared by its subtree": {
			queues:  []engine.ClusterQueue{cpuQueue("a", "team-1", "2"), cpuQueue("b", "team-2", "2")},
			cohorts: []engine.Cohort{cpuCohort("org", "", "4"), cpuCohort("team-1", "org", ""), cpuCohort("team-2", "org", "")},
			pending: cpuJob("ns/w", "a", "8").Obj(),
			want:    summary{Kind: engine.Admit, Key: "ns/w", Borrows: true, Flavors: admitF},
		},
		"hierarchical: a cohort's borrowingLimit caps its whole subtree": {
			queues:  []engine.ClusterQueue{cpuQueue("a", "team-1", "2"), cpuQueue("b", "team-2", "2")},
			cohorts: []engine.Cohort{cpuCohort("org", "", "4"), cpuCohort("team-1", "org", "0", "1"), cpuCohort("team-2", "org", "")},
			pending: cpuJob("ns/w", "a", "4").Obj(),
			want: summary{Kind: engine.Pending, Key: "ns/w", Reason: engine.InsufficientQuota, Parked: true,
				Message: "insufficient quota for cpu in flavor f: requests 4, available 3 (nominal 2, used 0, cohort team-1 lends 1)"},
		},
		"hierarchical: a cohort's lendingLimit keeps quota in its subtree": {
			queues:  []engine.ClusterQueue{cpuQueue("a", "team-1", "2"), cpuQueue("b", "team-2", "2")},
			cohorts: []engine.Cohort{cpuCohort("org", "", "4"), cpuCohort("team-1", "org", ""), cpuCohort("team-2", "org", "0", "", "0")},
			pending: cpuJob("ns/w", "a", "7").Obj(),
			want: summary{Kind: engine.Pending, Key: "ns/w", Reason: engine.InsufficientQuota, Parked: true,
				Message: "insufficient quota for cpu in flavor f: requests 7, available 6 (nominal 2, used 0, cohort team-1 lends 4)"},
		},
		"usage is accounted up the tree": {
			queues:   []engine.ClusterQueue{cpuQueue("a", "team-1", "2"), cpuQueue("b", "team-2", "2")},
			cohorts:  []engine.Cohort{cpuCohort("org", "", "4"), cpuCohort("team-1", "org", ""), cpuCohort("team-2", "org", "")},
			admitted: []engine.Workload{cpuJob("ns/b1", "b", "5").AdmittedIn("f", 1).Obj()},
			pending:  cpuJob("ns/w", "a", "4").Obj(),
			want: summary{Kind: engine.Pending, Key: "ns/w", Reason: engine.InsufficientQuota, Parked: true,
				Message: "insufficient quota for cpu in flavor f: requests 4, available 3 (nominal 2, used 0, cohort team-1 lends 1)"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := engine.Input{Flavors: []engine.ResourceFlavor{MakeFlavor("f").Obj()}, ClusterQueues: tc.queues, Cohorts: tc.cohorts, Admitted: tc.admitted}
			got, _, _ := runCycle(in, []engine.Workload{tc.pending}, engine.Options{})
			if diff := cmp.Diff([]summary{tc.want}, summarize(got), cmpSummary); diff != "" {
				t.Errorf("decisions (-want +got):\n%s", diff)
			}
		})
	}
}
