package engine_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetq/fleetq/internal/engine"
	. "github.com/fleetq/fleetq/internal/engine/enginetest"
)

func TestPreemption(t *testing.T) {
	within := func(p engine.PreemptionPolicy) engine.ClusterQueue {
		return MakeClusterQueue("a").ResourceGroup(MakeFlavorQuotas("f").Resource("cpu", "4").Obj()).WithinClusterQueue(p).Obj()
	}
	reclaimer := func(p engine.PreemptionPolicy) *ClusterQueueWrapper {
		return MakeClusterQueue("a").Cohort("c").ResourceGroup(MakeFlavorQuotas("f").Resource("cpu", "4").Obj()).ReclaimWithinCohort(p)
	}
	adm := func(key, cq, cpu string, prio int32, at int64) engine.Workload {
		return cpuJob(key, cq, cpu).Priority(prio).Timestamp(at).AdmittedIn("f", at).Obj()
	}
	threshold := int32(5)
	borrowQueues := func(policy engine.BorrowWithinCohortPolicy, th *int32) []engine.ClusterQueue {
		return []engine.ClusterQueue{
			MakeClusterQueue("a").Cohort("c").ResourceGroup(MakeFlavorQuotas("f").Resource("cpu", "2").Obj()).
				ReclaimWithinCohort(engine.PreemptLowerPriority).BorrowWithinCohort(policy, th).Obj(),
			cpuQueue("b", "c", "2"),
		}
	}
	borrowAdmitted := []engine.Workload{adm("ns/b1", "b", "2", 0, 1), adm("ns/b2", "b", "2", 6, 2), adm("ns/b3", "b", "2", 6, 3)}
	cases := map[string]struct {
		queues   []engine.ClusterQueue
		cohorts  []engine.Cohort
		admitted []engine.Workload
		pending  []engine.Workload
		want     []summary
		// parked counts, per queue, the workloads set aside after the cycle (when given).
		parked map[string]int
	}{
		"withinClusterQueue LowerPriority preempts the most recently admitted lower-priority workload": {
			queues:   []engine.ClusterQueue{within(engine.PreemptLowerPriority)},
			admitted: []engine.Workload{adm("ns/low1", "a", "2", 0, 1), adm("ns/low2", "a", "2", 0, 2)},
			pending:  []engine.Workload{cpuJob("ns/high", "a", "2").Priority(10).Obj()},
			want: []summary{{Kind: engine.Preempt, Key: "ns/high", Victims: []string{"ns/low2"},
				Reasons: []engine.PreemptionReason{engine.InClusterQueue}}},
		},
		"lowest priority goes first, whatever its admission time": {
			queues:   []engine.ClusterQueue{within(engine.PreemptLowerPriority)},
			admitted: []engine.Workload{adm("ns/lowest", "a", "2", -5, 1), adm("ns/low", "a", "2", 0, 2)},
			pending:  []engine.Workload{cpuJob("ns/high", "a", "2").Priority(10).Obj()},
			want: []summary{{Kind: engine.Preempt, Key: "ns/high", Victims: []string{"ns/lowest"},
				Reasons: []engine.PreemptionReason{engine.InClusterQueue}}},
		},
		"LowerPriority protects equal priority": {
			queues:   []engine.ClusterQueue{within(engine.PreemptLowerPriority)},
			admitted: []engine.Workload{adm("ns/peer", "a", "4", 10, 5)},
			pending:  []engine.Workload{cpuJob("ns/high", "a", "2").Priority(10).Timestamp(1).Obj()},
			want: []summary{{Kind: engine.Pending, Key: "ns/high", Reason: engine.InsufficientQuota, Parked: true,
				Message: "insufficient quota for cpu in flavor f: requests 2, available 0 (nominal 4, used 4); preemption the policies allow cannot free enough quota"}},
		},
		"LowerOrNewerEqualPriority preempts an equal-priority workload queued later": {
			queues:   []engine.ClusterQueue{within(engine.PreemptLowerOrNewerEqualPriority)},
			admitted: []engine.Workload{adm("ns/older", "a", "2", 10, 0), adm("ns/newer", "a", "2", 10, 5)},
			pending:  []engine.Workload{cpuJob("ns/high", "a", "2").Priority(10).Timestamp(1).Obj()},
			want: []summary{{Kind: engine.Preempt, Key: "ns/high", Victims: []string{"ns/newer"},
				Reasons: []engine.PreemptionReason{engine.InClusterQueue}}},
		},
		"Never preempts nothing": {
			queues:   []engine.ClusterQueue{within(engine.PreemptNever)},
			admitted: []engine.Workload{adm("ns/low", "a", "4", 0, 1)},
			pending:  []engine.Workload{cpuJob("ns/high", "a", "2").Priority(10).Obj()},
			want: []summary{{Kind: engine.Pending, Key: "ns/high", Reason: engine.InsufficientQuota, Parked: true,
				Message: "insufficient quota for cpu in flavor f: requests 2, available 0 (nominal 4, used 4)"}},
		},
		"the victim set is minimal: a victim taken on the way is spared when not needed": {
			queues:   []engine.ClusterQueue{within(engine.PreemptLowerPriority)},
			admitted: []engine.Workload{adm("ns/big", "a", "3", 0, 1), adm("ns/small", "a", "1", 0, 3)},
			pending:  []engine.Workload{cpuJob("ns/high", "a", "3").Priority(10).Obj()},
			want: []summary{{Kind: engine.Preempt, Key: "ns/high", Victims: []string{"ns/big"},
				Reasons: []engine.PreemptionReason{engine.InClusterQueue}}},
		},
		"never preempt when even preempting everything would not make it fit": {
			queues:   []engine.ClusterQueue{within(engine.PreemptLowerPriority)},
			admitted: []engine.Workload{adm("ns/low", "a", "2", 0, 1)},
			pending:  []engine.Workload{cpuJob("ns/huge", "a", "5").Priority(10).Obj()},
			want: []summary{{Kind: engine.Pending, Key: "ns/huge", Reason: engine.InsufficientQuota, Parked: true,
				Message: "insufficient quota for cpu in flavor f: requests 5, available 2 (nominal 4, used 2); preemption the policies allow cannot free enough quota"}},
		},
		"reclaimWithinCohort LowerPriority takes only lower-priority borrowers": {
			queues:   []engine.ClusterQueue{reclaimer(engine.PreemptLowerPriority).Obj(), cpuQueue("b", "c", "4")},
			admitted: []engine.Workload{adm("ns/b1", "b", "2", 0, 1), adm("ns/b2", "b", "2", 20, 2), adm("ns/b3", "b", "2", 0, 3)},
			pending:  []engine.Workload{cpuJob("ns/a1", "a", "4").Priority(10).Obj()},
			want: []summary{{Kind: engine.Preempt, Key: "ns/a1", Victims: []string{"ns/b3"},
				Reasons: []engine.PreemptionReason{engine.InCohortReclamation}}},
		},
		"only borrowers lose work to a reclaiming queue": {
			queues:   []engine.ClusterQueue{reclaimer(engine.PreemptAny).Obj(), cpuQueue("b", "c", "4")},
			admitted: []engine.Workload{adm("ns/a0", "a", "4", 0, 1), adm("ns/b1", "b", "4", 0, 1)},
			pending:  []engine.Workload{cpuJob("ns/a1", "a", "2").Priority(10).Obj()},
			want: []summary{{Kind: engine.Pending, Key: "ns/a1", Reason: engine.InsufficientQuota, Parked: true,
				Message: "insufficient quota for cpu in flavor f: requests 2, available 0 (nominal 4, used 4, cohort c lends 0); preemption the policies allow cannot free enough quota"}},
		},
		"borrowWithinCohort preempts lower-priority borrowers while borrowing": {
			queues:   borrowQueues(engine.BorrowWithinCohortLowerPriority, nil),
			cohorts:  []engine.Cohort{cpuCohort("c", "", "4")},
			admitted: borrowAdmitted,
			pending:  []engine.Workload{cpuJob("ns/a1", "a", "6").Priority(10).Obj()},
			want: []summary{{Kind: engine.Preempt, Key: "ns/a1", Borrows: true, Victims: []string{"ns/b1", "ns/b3"},
				Reasons: []engine.PreemptionReason{engine.InCohortReclaimWhileBorrowing, engine.InCohortReclaimWhileBorrowing}}},
		},
		"borrowWithinCohort maxPriorityThreshold protects higher priorities": {
			queues:   borrowQueues(engine.BorrowWithinCohortLowerPriority, &threshold),
			cohorts:  []engine.Cohort{cpuCohort("c", "", "4")},
			admitted: borrowAdmitted,
			pending:  []engine.Workload{cpuJob("ns/a1", "a", "6").Priority(10).Obj()},
			want: []summary{{Kind: engine.Pending, Key: "ns/a1", Reason: engine.InsufficientQuota, Parked: true,
				Message: "insufficient quota for cpu in flavor f: requests 6, available 2 (nominal 2, used 0, cohort c lends 0); preemption the policies allow cannot free enough quota"}},
		},
		"the threshold still lets a borrower preempt below it": {
			queues:   borrowQueues(engine.BorrowWithinCohortLowerPriority, &threshold),
			cohorts:  []engine.Cohort{cpuCohort("c", "", "4")},
			admitted: borrowAdmitted,
			pending:  []engine.Workload{cpuJob("ns/a1", "a", "4").Priority(10).Obj()},
			want: []summary{{Kind: engine.Preempt, Key: "ns/a1", Borrows: true, Victims: []string{"ns/b1"},
				Reasons: []engine.PreemptionReason{engine.InCohortReclaimWhileBorrowing}}},
		},
		"without borrowWithinCohort a borrowing workload cannot preempt in the cohort": {
			queues:   borrowQueues(engine.BorrowWithinCohortNever, nil),
			cohorts:  []engine.Cohort{cpuCohort("c", "", "4")},
			admitted: borrowAdmitted,
			pending:  []engine.Workload{cpuJob("ns/a1", "a", "4").Priority(10).Obj()},
			want: []summary{{Kind: engine.Pending, Key: "ns/a1", Reason: engine.InsufficientQuota, Parked: true,
				Message: "insufficient quota for cpu in flavor f: requests 4, available 2 (nominal 2, used 0, cohort c lends 0); it needs more than the queue's nominal quota, and preempting while borrowing needs borrowWithinCohort"}},
		},
		// Found by the differential suite (seed 123): fleetq evicted the queue's own workload so
		// that a workload larger than the queue's nominal quota could borrow; Kueue does not.
		"a workload over its queue's nominal quota does not preempt its own queue in order to borrow": {
			queues: []engine.ClusterQueue{
				MakeClusterQueue("a").Cohort("c").ResourceGroup(MakeFlavorQuotas("f").Resource("cpu", "4").Obj()).WithinClusterQueue(engine.PreemptLowerPriority).Obj(),
				cpuQueue("b", "c", "4"),
			},
			admitted: []engine.Workload{adm("ns/low", "a", "4", 0, 1)},
			pending:  []engine.Workload{cpuJob("ns/big", "a", "6").Priority(10).Obj()},
			want: []summary{{Kind: engine.Pending, Key: "ns/big", Reason: engine.InsufficientQuota, Parked: true,
				Message: "insufficient quota for cpu in flavor f: requests 6, available 4 (nominal 4, used 4, cohort c lends 4); it needs more than the queue's nominal quota, and preempting while borrowing needs borrowWithinCohort"}},
		},
		"a workload over its queue's nominal quota may preempt its own queue when a cohort below the root holds it": {
			queues: []engine.ClusterQueue{
				MakeClusterQueue("a").Cohort("c").ResourceGroup(MakeFlavorQuotas("f").Resource("cpu", "4").Obj()).WithinClusterQueue(engine.PreemptLowerPriority).Obj(),
				cpuQueue("b", "r", "4"),
			},
			cohorts: []engine.Cohort{cpuCohort("r", "", ""), cpuCohort("c", "r", "6")},
			// c holds 10 (its own 6, a's 4); the root 14. a would use 8: c still has room for it,
			// but the root is full with b's borrowing.
			admitted: []engine.Workload{adm("ns/low", "a", "2", 0, 1), adm("ns/b", "b", "8", 0, 1)},
			pending:  []engine.Workload{cpuJob("ns/big", "a", "6").Priority(10).Obj()},
			want: []summary{{Kind: engine.Preempt, Key: "ns/big", Borrows: true, Victims: []string{"ns/low"},
				Reasons: []engine.PreemptionReason{engine.InClusterQueue}}},
		},
		// Found by the differential suite (seed 116): b borrows, but only from its own cohort c,
		// which stays within its quota; Kueue never reclaims that from outside c.
		"borrowing covered by a sub-cohort's own quota is not reclaimed from outside it": {
			queues: []engine.ClusterQueue{
				MakeClusterQueue("a").Cohort("r").ResourceGroup(MakeFlavorQuotas("f").Resource("cpu", "2").Obj()).
					ReclaimWithinCohort(engine.PreemptAny).BorrowWithinCohort(engine.BorrowWithinCohortLowerPriority, nil).Obj(),
				cpuQueue("b", "c", "2"),
			},
			cohorts:  []engine.Cohort{cpuCohort("r", "", ""), cpuCohort("c", "r", "4")},
			admitted: []engine.Workload{adm("ns/a", "a", "4", 0, 1), adm("ns/b", "b", "4", 0, 1)},
			pending:  []engine.Workload{cpuJob("ns/high", "a", "2").Priority(10).Obj()},
			want: []summary{{Kind: engine.Pending, Key: "ns/high", Reason: engine.InsufficientQuota, Parked: true,
				Message: "insufficient quota for cpu in flavor f: requests 2, available 0 (nominal 2, used 4, cohort r lends 0); preemption the policies allow cannot free enough quota"}},
		},
		"with borrowWithinCohort, a workload over its queue's nominal quota may preempt its own queue to borrow": {
			queues: []engine.ClusterQueue{
				MakeClusterQueue("a").Cohort("c").ResourceGroup(MakeFlavorQuotas("f").Resource("cpu", "4").Obj()).WithinClusterQueue(engine.PreemptLowerPriority).
					ReclaimWithinCohort(engine.PreemptLowerPriority).BorrowWithinCohort(engine.BorrowWithinCohortLowerPriority, nil).Obj(),
				cpuQueue("b", "c", "4"),
			},
			admitted: []engine.Workload{adm("ns/low", "a", "4", 0, 1)},
			pending:  []engine.Workload{cpuJob("ns/big", "a", "6").Priority(10).Obj()},
			want: []summary{{Kind: engine.Preempt, Key: "ns/big", Borrows: true, Victims: []string{"ns/low"},
				Reasons: []engine.PreemptionReason{engine.InClusterQueue}}},
		},
		"evictions under way that suffice make the preemptor wait instead of preempting more": {
			queues: []engine.ClusterQueue{reclaimer(engine.PreemptAny).Obj(), cpuQueue("b", "c", "4")},
			admitted: []engine.Workload{adm("ns/b1", "b", "2", 0, 1), adm("ns/b2", "b", "2", 0, 2), adm("ns/b3", "b", "2", 0, 3),
				cpuJob("ns/b4", "b", "2").AdmittedIn("f", 4).Evicting().Obj()},
			pending: []engine.Workload{cpuJob("ns/a1", "a", "2").Obj()},
			want: []summary{{Kind: engine.Pending, Key: "ns/a1", Reason: engine.WaitingForEvictions, Parked: true,
				Message: "insufficient quota for cpu in flavor f: requests 2, available 0 (nominal 4, used 0, 4 of it in use by other queues in cohort c); waiting for 1 workload(s) already being evicted to release quota"}},
		},
		"a workload being evicted is never a victim again, and its release counts": {
			queues: []engine.ClusterQueue{reclaimer(engine.PreemptAny).Obj(), cpuQueue("b", "c", "4")},
			admitted: []engine.Workload{adm("ns/b1", "b", "2", 0, 1), adm("ns/b2", "b", "2", 0, 2), adm("ns/b3", "b", "2", 0, 3),
				cpuJob("ns/b4", "b", "2").AdmittedIn("f", 4).Evicting().Obj()},
			pending: []engine.Workload{cpuJob("ns/a1", "a", "4").Obj()},
			want: []summary{{Kind: engine.Preempt, Key: "ns/a1", Victims: []string{"ns/b3"},
				Reasons: []engine.PreemptionReason{engine.InCohortReclamation}}},
		},
		"two preemptors of different queues in one cycle pick different victims": {
			queues: []engine.ClusterQueue{reclaimer(engine.PreemptAny).Obj(),
				MakeClusterQueue("a2").Cohort("c").ResourceGroup(MakeFlavorQuotas("f").Resource("cpu", "4").Obj()).ReclaimWithinCohort(engine.PreemptAny).Obj(),
				cpuQueue("b", "c", "4")},
			admitted: []engine.Workload{adm("ns/b1", "b", "2", 0, 1), adm("ns/b2", "b", "2", 0, 2), adm("ns/b3", "b", "2", 0, 3),
				adm("ns/b4", "b", "2", 0, 4), adm("ns/b5", "b", "2", 0, 5), adm("ns/b6", "b", "2", 0, 6)},
			pending: []engine.Workload{cpuJob("ns/a1", "a", "2").Timestamp(1).Obj(), cpuJob("ns/a2", "a2", "2").Timestamp(2).Obj()},
			want: []summary{
				{Kind: engine.Preempt, Key: "ns/a1", Victims: []string{"ns/b6"}, Reasons: []engine.PreemptionReason{engine.InCohortReclamation}},
				{Kind: engine.Preempt, Key: "ns/a2", Victims: []string{"ns/b5"}, Reasons: []engine.PreemptionReason{engine.InCohortReclamation}},
			},
		},
		// The second workload of a queue that is preempting gets no decision (no write): it is
		// parked until the first one's evictions land.
		"a queue preempts for one workload at a time": {
			queues:   []engine.ClusterQueue{reclaimer(engine.PreemptAny).Obj(), cpuQueue("b", "c", "4")},
			admitted: []engine.Workload{adm("ns/b1", "b", "2", 0, 1), adm("ns/b2", "b", "2", 0, 2), adm("ns/b3", "b", "2", 0, 3), adm("ns/b4", "b", "2", 0, 4)},
			pending:  []engine.Workload{cpuJob("ns/a1", "a", "2").Timestamp(1).Obj(), cpuJob("ns/a2", "a", "2").Timestamp(2).Obj()},
			want: []summary{
				{Kind: engine.Preempt, Key: "ns/a1", Victims: []string{"ns/b4"}, Reasons: []engine.PreemptionReason{engine.InCohortReclamation}},
			},
			parked: map[string]int{"a": 1},
		},
		"a queue waiting for its evictions preempts for nobody else meanwhile": {
			queues: []engine.ClusterQueue{reclaimer(engine.PreemptAny).Obj(), cpuQueue("b", "c", "4")},
			admitted: []engine.Workload{adm("ns/b1", "b", "2", 0, 1), adm("ns/b2", "b", "2", 0, 2), adm("ns/b3", "b", "2", 0, 3),
				cpuJob("ns/b4", "b", "2").AdmittedIn("f", 4).Evicting().Obj()},
			pending: []engine.Workload{cpuJob("ns/a1", "a", "2").Timestamp(1).Obj(), cpuJob("ns/a2", "a", "2").Timestamp(2).Obj()},
			want: []summary{{Kind: engine.Pending, Key: "ns/a1", Reason: engine.WaitingForEvictions, Parked: true,
				Message: "insufficient quota for cpu in flavor f: requests 2, available 0 (nominal 4, used 0, 4 of it in use by other queues in cohort c); waiting for 1 workload(s) already being evicted to release quota"}},
			parked: map[string]int{"a": 2},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := engine.Input{Flavors: []engine.ResourceFlavor{MakeFlavor("f").Obj()}, ClusterQueues: tc.queues, Cohorts: tc.cohorts, Admitted: tc.admitted}
			got, q, _ := runCycle(in, tc.pending, engine.Options{})
			if diff := cmp.Diff(tc.want, summarize(got), cmpSummary); diff != "" {
				t.Errorf("decisions (-want +got):\n%s", diff)
			}
			for name, want := range tc.parked {
				if _, parked := q.Len(name); parked != want {
					t.Errorf("queue %s: %d parked, want %d", name, parked, want)
				}
			}
		})
	}
}
