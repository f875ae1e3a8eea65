package engine_test

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/fleetq/fleetq/internal/engine"
	. "github.com/fleetq/fleetq/internal/engine/enginetest"
)

func TestAmount(t *testing.T) {
	cases := map[string]struct {
		name corev1.ResourceName
		q    string
		want int64
		text string
	}{
		"cpu whole":       {name: "cpu", q: "2", want: 2000, text: "2"},
		"cpu milli":       {name: "cpu", q: "1500m", want: 1500, text: "1500m"},
		"memory binary":   {name: "memory", q: "512Mi", want: 512 << 20, text: "512Mi"},
		"memory gibi":     {name: "memory", q: "4Gi", want: 4 << 30, text: "4Gi"},
		"gpu count":       {name: "nvidia.com/gpu", q: "4", want: 4, text: "4"},
		"hugepages bytes": {name: "hugepages-2Mi", q: "2Mi", want: 2 << 20, text: "2Mi"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := engine.Amount(tc.name, resource.MustParse(tc.q))
			if got != tc.want {
				t.Errorf("Amount = %d, want %d", got, tc.want)
			}
			if text := engine.FormatAmount(tc.name, got); text != tc.text {
				t.Errorf("FormatAmount = %q, want %q", text, tc.text)
			}
		})
	}
}

func TestClusterQueueActivity(t *testing.T) {
	cases := map[string]struct {
		in   engine.Input
		want engine.ClusterQueueStatus
	}{
		"missing flavor makes the queue inactive, naming the flavor": {
			in: engine.Input{ClusterQueues: []engine.ClusterQueue{
				MakeClusterQueue("research-cq").ResourceGroup(MakeFlavorQuotas("a100").Resource("nvidia.com/gpu", "8").Obj()).Obj(),
			}},
			want: engine.ClusterQueueStatus{Name: "research-cq", InactiveReason: engine.FlavorNotFound, Message: `flavor "a100" not found`,
				Usage: []engine.FlavorUsage{{Name: "a100", Resources: []engine.ResourceUsage{{Name: "nvidia.com/gpu"}}}}},
		},
		"cohort cycle makes the queue inactive": {
			in: engine.Input{
				ClusterQueues: []engine.ClusterQueue{MakeClusterQueue("research-cq").Cohort("a").Obj()},
				Cohorts:       []engine.Cohort{MakeCohort("a").Parent("b").Obj(), MakeCohort("b").Parent("a").Obj()},
			},
			want: engine.ClusterQueueStatus{Name: "research-cq", InactiveReason: engine.CohortCycle, Message: `cohort "a" is in a cycle of parents: a -> b -> a`},
		},
		"a cohort under a cycle is inactive too": {
			in: engine.Input{
				ClusterQueues: []engine.ClusterQueue{MakeClusterQueue("research-cq").Cohort("leaf").Obj()},
				Cohorts:       []engine.Cohort{MakeCohort("leaf").Parent("a").Obj(), MakeCohort("a").Parent("b").Obj(), MakeCohort("b").Parent("a").Obj()},
			},
			want: engine.ClusterQueueStatus{Name: "research-cq", InactiveReason: engine.CohortCycle, Message: `cohort "a" is in a cycle of parents: a -> b -> a`},
		},
		"stopped queue": {
			in:   engine.Input{ClusterQueues: []engine.ClusterQueue{MakeClusterQueue("research-cq").Stopped().Obj()}},
			want: engine.ClusterQueueStatus{Name: "research-cq", InactiveReason: engine.Stopped, Message: `clusterqueue "research-cq" is stopped (spec.stopPolicy); set it to None to admit again`},
		},
		"flavor missing a covered resource": {
			in: engine.Input{
				Flavors: []engine.ResourceFlavor{MakeFlavor("f").Obj()},
				ClusterQueues: []engine.ClusterQueue{{Name: "research-cq", ResourceGroups: []engine.ResourceGroup{{
					CoveredResources: []corev1.ResourceName{"cpu", "memory"},
					Flavors:          []engine.FlavorQuotas{MakeFlavorQuotas("f").Resource("cpu", "1").Obj()},
				}}}},
			},
			want: engine.ClusterQueueStatus{Name: "research-cq", InactiveReason: engine.InvalidResourceGroups, Message: `flavor "f" does not list covered resource memory`,
				Usage: []engine.FlavorUsage{{Name: "f", Resources: []engine.ResourceUsage{{Name: "cpu"}, {Name: "memory"}}}}},
		},
		"usage and borrowing are read out per flavor and resource": {
			in: engine.Input{
				Flavors: []engine.ResourceFlavor{MakeFlavor("default-flavor").Obj()},
				ClusterQueues: []engine.ClusterQueue{
					tutorialQueue("research-cq").Obj(), tutorialQueue("inference-cq").Obj(),
				},
				Admitted: []engine.Workload{
					tutorialJob("research/a", "research-cq", 1).AdmittedIn("default-flavor", 1).Obj(),
					tutorialJob("research/b", "research-cq", 2).AdmittedIn("default-flavor", 2).Obj(),
					tutorialJob("research/c", "research-cq", 3).AdmittedIn("default-flavor", 3).Obj(),
				},
			},
			want: engine.ClusterQueueStatus{Name: "research-cq", Active: true, AdmittedWorkloads: 3, WeightedShare: 250,
				Usage: []engine.FlavorUsage{{Name: "default-flavor", Resources: []engine.ResourceUsage{
					{Name: "cpu", Total: 6000, Borrowed: 2000},
					{Name: "memory", Total: 3 << 30},
				}}}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, ok := engine.NewSnapshot(tc.in).ClusterQueueStatus("research-cq")
			if !ok {
				t.Fatalf("research-cq not found")
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCohortStatusAndTriggers(t *testing.T) {
	in := engine.Input{
		Flavors: []engine.ResourceFlavor{MakeFlavor("f").Obj(), MakeFlavor("g").Obj()},
		ClusterQueues: []engine.ClusterQueue{
			MakeClusterQueue("a").Cohort("team-1").ResourceGroup(MakeFlavorQuotas("f").Resource("cpu", "2").Obj()).Obj(),
			MakeClusterQueue("b").Cohort("team-2").ResourceGroup(MakeFlavorQuotas("f").Resource("cpu", "2").Obj()).Obj(),
			MakeClusterQueue("c").ResourceGroup(MakeFlavorQuotas("g").Resource("cpu", "2").Obj()).Obj(),
		},
		Cohorts: []engine.Cohort{
			MakeCohort("org").ResourceGroup(MakeFlavorQuotas("f").Resource("cpu", "4").Obj()).Obj(),
			MakeCohort("team-1").Parent("org").Obj(),
			MakeCohort("team-2").Parent("org").Obj(),
		},
		Admitted: []engine.Workload{
			MakeWorkload("ns/a1", "a").Request(1, "cpu", "3").AdmittedIn("f", 1).Obj(),
			MakeWorkload("ns/b1", "b").Request(1, "cpu", "1").AdmittedIn("f", 2).Obj(),
		},
	}
	snap := engine.NewSnapshot(in)
	got, ok := snap.CohortStatus("team-1")
	if !ok {
		t.Fatal("team-1 not found")
	}
	want := engine.CohortStatus{Name: "team-1", WeightedShare: 125,
		Usage: []engine.FlavorUsage{{Name: "f", Resources: []engine.ResourceUsage{{Name: "cpu", Total: 3000, Borrowed: 1000}}}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("CohortStatus(team-1) (-want +got):\n%s", diff)
	}
	org, _ := snap.CohortStatus("org")
	wantOrg := engine.CohortStatus{Name: "org",
		Usage: []engine.FlavorUsage{{Name: "f", Resources: []engine.ResourceUsage{{Name: "cpu", Total: 4000}}}}}
	if diff := cmp.Diff(wantOrg, org); diff != "" {
		t.Errorf("CohortStatus(org) (-want +got):\n%s", diff)
	}
	triggers := map[string]struct {
		ev   engine.Event
		want []string
	}{
		"quota freed wakes the whole tree":      {ev: engine.Event{Kind: engine.QuotaFreed, Name: "a"}, want: []string{"a", "b"}},
		"queue without cohort wakes itself":     {ev: engine.Event{Kind: engine.QuotaFreed, Name: "c"}, want: []string{"c"}},
		"unknown queue wakes itself":            {ev: engine.Event{Kind: engine.ClusterQueueChanged, Name: "new"}, want: []string{"new"}},
		"cohort edit wakes its tree":            {ev: engine.Event{Kind: engine.CohortChanged, Name: "team-2"}, want: []string{"a", "b"}},
		"flavor edit wakes the queues using it": {ev: engine.Event{Kind: engine.FlavorChanged, Name: "g"}, want: []string{"c"}},
		"unknown flavor wakes no queue":         {ev: engine.Event{Kind: engine.FlavorChanged, Name: "h"}, want: []string{}},
	}
	for name, tc := range triggers {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, snap.AffectedQueues(tc.ev)); diff != "" {
				t.Errorf("AffectedQueues (-want +got):\n%s", diff)
			}
		})
	}
}

func TestIncrementalSnapshot(t *testing.T) {
	in := engine.Input{
		Flavors:       []engine.ResourceFlavor{MakeFlavor("f").Obj()},
		ClusterQueues: []engine.ClusterQueue{MakeClusterQueue("q").ResourceGroup(MakeFlavorQuotas("f").Resource("cpu", "4").Obj()).Obj()},
	}
	snap := engine.NewSnapshot(in)
	if err := snap.AddAdmitted(MakeWorkload("ns/a", "q").Request(1, "cpu", "3").AdmittedIn("f", 1).Obj()); err != nil {
		t.Fatal(err)
	}
	if err := snap.AddAdmitted(MakeWorkload("ns/x", "missing").Request(1, "cpu", "1").AdmittedIn("f", 1).Obj()); err == nil {
		t.Errorf("AddAdmitted to a missing queue: no error")
	}
	// Quota lowered under admitted work is reported, never silently accepted.
	lowered := in
	lowered.ClusterQueues = []engine.ClusterQueue{MakeClusterQueue("q").ResourceGroup(MakeFlavorQuotas("f").Resource("cpu", "2").Obj()).Obj()}
	lowered.Admitted = []engine.Workload{MakeWorkload("ns/a", "q").Request(1, "cpu", "3").AdmittedIn("f", 1).Obj()}
	if diff := cmp.Diff([]string{`clusterqueue "q": cpu in flavor f: usage 3 exceeds quota 2`}, engine.NewSnapshot(lowered).LimitViolations()); diff != "" {
		t.Errorf("LimitViolations (-want +got):\n%s", diff)
	}
	if cq, ok := snap.Remove("ns/a"); !ok || cq != "q" {
		t.Errorf("Remove = %q, %v", cq, ok)
	}
	st, _ := snap.ClusterQueueStatus("q")
	if st.Usage[0].Resources[0].Total != 0 || st.AdmittedWorkloads != 0 {
		t.Errorf("after Remove: %+v", st)
	}
	if st.WeightedShare != 0 || weightedInfinite(st.WeightedShare) {
		t.Errorf("share = %d", st.WeightedShare)
	}
}

func weightedInfinite(v int64) bool { return v == math.MaxInt64 }
