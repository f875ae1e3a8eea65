package engine_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetq/fleetq/internal/engine"
	. "github.com/fleetq/fleetq/internal/engine/enginetest"
)

func TestOrdering(t *testing.T) {
	admitF := map[string]string{"main/cpu": "f"}
	strict := MakeClusterQueue("a").Strategy(engine.StrictFIFO).ResourceGroup(MakeFlavorQuotas("f").Resource("cpu", "4").Obj()).Obj()
	cases := map[string]struct {
		queues  []engine.ClusterQueue
		pending []engine.Workload
		want    []summary
	}{
		"StrictFIFO blocks behind its head": {
			queues:  []engine.ClusterQueue{strict},
			pending: []engine.Workload{cpuJob("ns/big", "a", "5").Timestamp(1).Obj(), cpuJob("ns/small", "a", "1").Timestamp(2).Obj()},
			want: []summary{{Kind: engine.Pending, Key: "ns/big", Reason: engine.InsufficientQuota,
				Message: "insufficient quota for cpu in flavor f: requests 5, available 4 (nominal 4, used 0)"}},
		},
		"BestEffortFIFO parks the head and lets a later workload go ahead": {
			queues:  []engine.ClusterQueue{cpuQueue("a", "", "4")},
			pending: []engine.Workload{cpuJob("ns/big", "a", "5").Timestamp(1).Obj(), cpuJob("ns/small", "a", "1").Timestamp(2).Obj()},
			want: []summary{
				{Kind: engine.Pending, Key: "ns/big", Reason: engine.InsufficientQuota, Parked: true,
					Message: "insufficient quota for cpu in flavor f: requests 5, available 4 (nominal 4, used 0)"},
				{Kind: engine.Admit, Key: "ns/small", Flavors: admitF},
			},
		},
		"priority before timestamp within a queue": {
			queues:  []engine.ClusterQueue{cpuQueue("a", "", "4")},
			pending: []engine.Workload{cpuJob("ns/low", "a", "3").Timestamp(1).Obj(), cpuJob("ns/high", "a", "3").Priority(5).Timestamp(2).Obj()},
			want: []summary{
				{Kind: engine.Admit, Key: "ns/high", Flavors: admitF},
				{Kind: engine.Pending, Key: "ns/low", Reason: engine.InsufficientQuota, Parked: true,
					Message: "insufficient quota for cpu in flavor f: requests 3, available 1 (nominal 4, used 3)"},
			},
		},
		"across queues, a head that fits without borrowing goes before a higher-priority borrower": {
			queues:  []engine.ClusterQueue{cpuQueue("a", "c", "2"), cpuQueue("b", "c", "2")},
			pending: []engine.Workload{cpuJob("ns/a1", "a", "3").Priority(100).Obj(), cpuJob("ns/b1", "b", "2").Obj()},
			want: []summary{
				{Kind: engine.Admit, Key: "ns/b1", Flavors: admitF},
				{Kind: engine.Pending, Key: "ns/a1", Reason: engine.InsufficientQuota, Parked: true,
					Message: "insufficient quota for cpu in flavor f: requests 3, available 2 (nominal 2, used 0, cohort c lends 0)"},
			},
		},
		"several admissions per queue and per cohort in one cycle, re-accounted exactly": {
			queues: []engine.ClusterQueue{cpuQueue("a", "c", "4"), cpuQueue("b", "c", "4")},
			pending: []engine.Workload{
				cpuJob("a/1", "a", "2").Timestamp(1).Obj(), cpuJob("a/2", "a", "2").Timestamp(2).Obj(), cpuJob("a/3", "a", "2").Timestamp(3).Obj(),
				cpuJob("b/1", "b", "2").Timestamp(1).Obj(), cpuJob("b/2", "b", "2").Timestamp(2).Obj(), cpuJob("b/3", "b", "2").Timestamp(3).Obj(),
			},
			want: []summary{
				{Kind: engine.Admit, Key: "a/1", Flavors: admitF},
				{Kind: engine.Admit, Key: "b/1", Flavors: admitF},
				{Kind: engine.Admit, Key: "a/2", Flavors: admitF},
				{Kind: engine.Admit, Key: "b/2", Flavors: admitF},
				{Kind: engine.Pending, Key: "b/3", Reason: engine.InsufficientQuota, Parked: true,
					Message: "insufficient quota for cpu in flavor f: requests 2, available 0 (nominal 4, used 4, cohort c lends 0)"},
				{Kind: engine.Pending, Key: "a/3", Reason: engine.InsufficientQuota, Parked: true,
					Message: "insufficient quota for cpu in flavor f: requests 2, available 0 (nominal 4, used 4, cohort c lends 0)"},
			},
		},
		"borrowers share what is left, one at a time": {
			queues: []engine.ClusterQueue{cpuQueue("a", "c", "1"), cpuQueue("b", "c", "1"), cpuQueue("idle", "c", "4")},
			pending: []engine.Workload{
				cpuJob("a/1", "a", "3").Timestamp(1).Obj(), cpuJob("b/1", "b", "3").Timestamp(2).Obj(), cpuJob("a/2", "a", "1").Timestamp(3).Obj(),
			},
			want: []summary{
				{Kind: engine.Admit, Key: "a/1", Borrows: true, Flavors: admitF},
				{Kind: engine.Admit, Key: "b/1", Borrows: true, Flavors: admitF},
				{Kind: engine.Pending, Key: "a/2", Reason: engine.InsufficientQuota, Parked: true,
					Message: "insufficient quota for cpu in flavor f: requests 1, available 0 (nominal 1, used 3, cohort c lends 0)"},
			},
		},
		"an inactive queue parks its workloads with the reason": {
			queues:  []engine.ClusterQueue{MakeClusterQueue("a").Stopped().Obj()},
			pending: []engine.Workload{cpuJob("ns/w", "a", "1").Obj()},
			want: []summary{{Kind: engine.Pending, Key: "ns/w", Reason: engine.ClusterQueueInactive, Parked: true,
				Message: `clusterqueue a is inactive: clusterqueue "a" is stopped (spec.stopPolicy); set it to None to admit again`}},
		},
		"an unknown queue parks its workloads": {
			pending: []engine.Workload{cpuJob("ns/w", "ghost", "1").Obj()},
			want: []summary{{Kind: engine.Pending, Key: "ns/w", Reason: engine.ClusterQueueNotFound, Parked: true,
				Message: "clusterqueue ghost not found"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := engine.Input{Flavors: []engine.ResourceFlavor{MakeFlavor("f").Obj()}, ClusterQueues: tc.queues}
			got, _, _ := runCycle(in, tc.pending, engine.Options{})
			if diff := cmp.Diff(tc.want, summarize(got), cmpSummary); diff != "" {
				t.Errorf("decisions (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRequeue checks what the queues hold after a cycle and that a trigger wakes a parked head.
func TestRequeue(t *testing.T) {
	in := engine.Input{
		Flavors: []engine.ResourceFlavor{MakeFlavor("f").Obj()},
		ClusterQueues: []engine.ClusterQueue{
			cpuQueue("a", "", "4"),
			MakeClusterQueue("s").Strategy(engine.StrictFIFO).ResourceGroup(MakeFlavorQuotas("f").Resource("cpu", "1").Obj()).Obj(),
		},
		Admitted: []engine.Workload{cpuJob("ns/running", "a", "3").AdmittedIn("f", 1).Obj()},
	}
	_, q, snap := runCycle(in, []engine.Workload{
		cpuJob("ns/big", "a", "2").Timestamp(1).Obj(),
		cpuJob("ns/strict-head", "s", "2").Timestamp(1).Obj(),
		cpuJob("ns/strict-next", "s", "1").Timestamp(2).Obj(),
	}, engine.Options{})
	type lens struct{ Active, Parked int }
	get := func(cq string) lens { a, p := q.Len(cq); return lens{a, p} }
	if diff := cmp.Diff(map[string]lens{"a": {0, 1}, "s": {2, 0}}, map[string]lens{"a": get("a"), "s": get("s")}); diff != "" {
		t.Errorf("queue lengths (-want +got):\n%s", diff)
	}
	cq, _ := snap.Remove("ns/running")
	q.Wake(snap.AffectedQueues(engine.Event{Kind: engine.QuotaFreed, Name: cq})...)
	got := summarize(engine.Run(snap, q, engine.Options{}))
	want := []summary{
		{Kind: engine.Pending, Key: "ns/strict-head", Reason: engine.InsufficientQuota,
			Message: "insufficient quota for cpu in flavor f: requests 2, available 1 (nominal 1, used 0)"},
		{Kind: engine.Admit, Key: "ns/big", Flavors: map[string]string{"main/cpu": "f"}},
	}
	if diff := cmp.Diff(want, got, cmpSummary); diff != "" {
		t.Errorf("second cycle (-want +got):\n%s", diff)
	}
}
