package differential

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
)

// twoQueues: q0 has 2 cores of f0 and f1, in cohort c0 with q1; w0-w2 ask for 2 cores each.
func twoQueues() *Scenario {
	quota := func(f string) Quota { return Quota{Flavor: f, Nominal: map[string]int64{"cpu": 2}} }
	w := func(name string) Workload {
		return Workload{Name: name, Queue: "q0", PodSets: []PodSet{{Name: "ps0", Count: 2, Requests: map[string]int64{"cpu": 1}}}}
	}
	return &Scenario{
		Resources: []corev1.ResourceName{corev1.ResourceCPU},
		Queues: []Queue{
			{Name: "q0", Cohort: "c0", Quotas: []Quota{quota("f0"), quota("f1")}},
			{Name: "q1", Cohort: "c0", Quotas: []Quota{quota("f0")}},
		},
		Steps: []Step{{Kind: Create, Workloads: []Workload{w("w0"), w("w1"), w("w2")}}},
	}
}

func on(flavor string) Decision {
	return Decision{Reserved: true, Flavors: []string{"ps0/cpu=" + flavor}}
}

func TestCompareStep(t *testing.T) {
	cases := map[string]struct {
		kueue, fleetq StepResult
		want          *Difference
	}{
		"same decisions": {
			kueue:  StepResult{State: State{"w0": on("f0"), "w1": {}}},
			fleetq: StepResult{State: State{"w0": on("f0"), "w1": {}}},
		},
		"a different workload holds quota, within nominal": {
			kueue:  StepResult{State: State{"w0": on("f0"), "w1": {}}},
			fleetq: StepResult{State: State{"w0": {}, "w1": on("f0")}},
			want: &Difference{Kind: Admission, Workloads: []string{"w0", "w1"},
				Kueue:  map[string]string{"w0": "reserved on ps0/cpu=f0 (evicted 0×)", "w1": "pending (evicted 0×)"},
				Fleetq: map[string]string{"w0": "pending (evicted 0×)", "w1": "reserved on ps0/cpu=f0 (evicted 0×)"}},
		},
		"one more workload holds quota, over nominal": {
			kueue:  StepResult{State: State{"w0": on("f0"), "w1": on("f1"), "w2": {}}},
			fleetq: StepResult{State: State{"w0": on("f0"), "w1": on("f1"), "w2": on("f0")}},
			want: &Difference{Kind: Borrowing, Workloads: []string{"w2"},
				Kueue:  map[string]string{"w2": "pending (evicted 0×)"},
				Fleetq: map[string]string{"w2": "reserved on ps0/cpu=f0 (evicted 0×)"}},
		},
		"same workloads, other flavor": {
			kueue:  StepResult{State: State{"w0": on("f0")}},
			fleetq: StepResult{State: State{"w0": on("f1")}},
			want: &Difference{Kind: Flavors, Workloads: []string{"w0"},
				Kueue:  map[string]string{"w0": "reserved on ps0/cpu=f0 (evicted 0×)"},
				Fleetq: map[string]string{"w0": "reserved on ps0/cpu=f1 (evicted 0×)"}},
		},
		"other victims": {
			kueue:  StepResult{State: State{"w0": {Evictions: 1}, "w1": on("f0")}, Evictions: []Eviction{{Workload: "w0", Reason: "InClusterQueue"}}},
			fleetq: StepResult{State: State{"w0": on("f0"), "w1": {Evictions: 1}}, Evictions: []Eviction{{Workload: "w1", Reason: "InClusterQueue"}}},
			want: &Difference{Kind: Victims, Workloads: []string{"w0", "w1"},
				Kueue:           map[string]string{"w0": "pending (evicted 1×)", "w1": "reserved on ps0/cpu=f0 (evicted 0×)"},
				Fleetq:          map[string]string{"w0": "reserved on ps0/cpu=f0 (evicted 0×)", "w1": "pending (evicted 1×)"},
				KueueEvictions:  []Eviction{{Workload: "w0", Reason: "InClusterQueue"}},
				FleetqEvictions: []Eviction{{Workload: "w1", Reason: "InClusterQueue"}}},
		},
		"same victim, other reason": {
			kueue:  StepResult{State: State{"w0": {Evictions: 1}}, Evictions: []Eviction{{Workload: "w0", Reason: "InCohortReclamation"}}},
			fleetq: StepResult{State: State{"w0": {Evictions: 1}}, Evictions: []Eviction{{Workload: "w0", Reason: "InClusterQueue"}}},
			want: &Difference{Kind: Reasons, Kueue: map[string]string{}, Fleetq: map[string]string{},
				KueueEvictions:  []Eviction{{Workload: "w0", Reason: "InCohortReclamation"}},
				FleetqEvictions: []Eviction{{Workload: "w0", Reason: "InClusterQueue"}}},
		},
		"finished in one system only": {
			kueue:  StepResult{State: State{"w0": {Gone: true}}},
			fleetq: StepResult{State: State{"w0": on("f0")}},
			want: &Difference{Kind: Admission, Workloads: []string{"w0"},
				Kueue: map[string]string{"w0": "gone"}, Fleetq: map[string]string{"w0": "reserved on ps0/cpu=f0 (evicted 0×)"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := compareStep(twoQueues(), 3, tc.kueue, tc.fleetq)
			if tc.want != nil {
				tc.want.Step = 3
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("difference (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCompareFindsTheFirstDifferingStep(t *testing.T) {
	same := StepResult{State: State{"w0": on("f0")}}
	other := StepResult{State: State{"w0": on("f1")}}
	got := Compare(twoQueues(), []StepResult{same, same, other, other}, []StepResult{same, same, same, same})
	if got == nil || got.Step != 2 {
		t.Fatalf("Compare = %v, want the difference at step 2", got)
	}
	if got := Compare(twoQueues(), []StepResult{same, same}, []StepResult{same, same}); got != nil {
		t.Errorf("Compare of equal results = %v, want nil", got)
	}
}

func TestBorrowingFollowsEditedQuota(t *testing.T) {
	s := twoQueues()
	s.Steps = append(s.Steps, Step{Kind: EditQuota, Queue: "q0", Flavor: "f0", Nominal: map[string]int64{"cpu": 4}})
	k := StepResult{State: State{"w0": on("f0"), "w1": {}}}
	f := StepResult{State: State{"w0": on("f0"), "w1": on("f0")}}
	if d := compareStep(s, 0, k, f); d == nil || d.Kind != Borrowing {
		t.Errorf("before the edit: %v, want borrowing (4 cores of 2 nominal)", d)
	}
	if d := compareStep(s, 1, k, f); d == nil || d.Kind != Admission {
		t.Errorf("after the edit: %v, want admission order (4 cores of 4 nominal)", d)
	}
}

func TestResolveTargetPicksFromTheAgreedState(t *testing.T) {
	prev := State{"w0": on("f0"), "w1": {}, "w2": on("f1"), "w3": {Gone: true}}
	cases := map[string]struct {
		step Step
		prev State
		want string
	}{
		"finish picks among reserved":  {Step{Kind: Finish, Pick: 3}, prev, "w2"},
		"delete picks among live":      {Step{Kind: Delete, Pick: 4}, prev, "w1"},
		"finish with nothing reserved": {Step{Kind: Finish, Pick: 1, Target: "stale"}, State{"w1": {}}, ""},
		"create has no target":         {Step{Kind: Create}, prev, ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			st := tc.step
			resolveTarget(&st, tc.prev)
			if st.Target != tc.want {
				t.Errorf("target %q, want %q", st.Target, tc.want)
			}
		})
	}
}

func TestObserveReadsDecisionsOffWorkloads(t *testing.T) {
	n := Names{Namespace: "s1", Prefix: "s1-"}
	cond := func(typ string) metav1.Condition { return metav1.Condition{Type: typ, Status: metav1.ConditionTrue} }
	now := metav1.Now()
	wls := []kueue.Workload{
		{ObjectMeta: metav1.ObjectMeta{Name: "reserved"}, Status: kueue.WorkloadStatus{
			Conditions: []metav1.Condition{cond(kueue.WorkloadQuotaReserved)},
			Admission: &kueue.Admission{ClusterQueue: "s1-q0", PodSetAssignments: []kueue.PodSetAssignment{
				{Name: "ps1", Flavors: map[corev1.ResourceName]kueue.ResourceFlavorReference{"cpu": "s1-f1"}},
				{Name: "ps0", Flavors: map[corev1.ResourceName]kueue.ResourceFlavorReference{"cpu": "s1-f0", "memory": "s1-f0"}},
			}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "pending"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "finished"}, Status: kueue.WorkloadStatus{Conditions: []metav1.Condition{cond(kueue.WorkloadFinished), cond(kueue.WorkloadQuotaReserved)}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "deleting", DeletionTimestamp: &now}},
	}
	want := State{
		"reserved": {Reserved: true, Flavors: []string{"ps0/cpu=f0", "ps0/memory=f0", "ps1/cpu=f1"}},
		"pending":  {Evictions: 2},
		"finished": {Gone: true},
		"deleting": {Gone: true},
	}
	if diff := cmp.Diff(want, observe(n, wls, map[string]int{"pending": 2})); diff != "" {
		t.Errorf("state (-want +got):\n%s", diff)
	}
}
