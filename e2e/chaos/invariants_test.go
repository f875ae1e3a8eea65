package chaos

import (
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
)

const gpu = corev1.ResourceName("nvidia.com/gpu")

func cq(name, cohort string, nominal int64, borrowing *int64) kueue.ClusterQueue {
	rq := kueue.ResourceQuota{Name: gpu, NominalQuota: *resource.NewQuantity(nominal, resource.DecimalSI)}
	if borrowing != nil {
		rq.BorrowingLimit = resource.NewQuantity(*borrowing, resource.DecimalSI)
	}
	return kueue.ClusterQueue{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: kueue.ClusterQueueSpec{CohortName: kueue.CohortReference(cohort), ResourceGroups: []kueue.ResourceGroup{{
			CoveredResources: []corev1.ResourceName{gpu},
			Flavors:          []kueue.FlavorQuotas{{Name: "a100", Resources: []kueue.ResourceQuota{rq}}},
		}}},
	}
}

// holding is a workload of queue cq holding gpus of flavor a100; finished ones hold nothing.
func holding(name, cq string, gpus int64, finished bool) kueue.Workload {
	wl := kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: name}}
	wl.Status.Admission = &kueue.Admission{ClusterQueue: kueue.ClusterQueueReference(cq), PodSetAssignments: []kueue.PodSetAssignment{{
		Name: "main", Flavors: map[corev1.ResourceName]kueue.ResourceFlavorReference{gpu: "a100"},
		ResourceUsage: corev1.ResourceList{gpu: *resource.NewQuantity(gpus, resource.DecimalSI)},
	}}}
	wl.Status.Conditions = []metav1.Condition{{Type: kueue.WorkloadQuotaReserved, Status: metav1.ConditionTrue}}
	if finished {
		wl.Status.Conditions = append(wl.Status.Conditions, metav1.Condition{Type: kueue.WorkloadFinished, Status: metav1.ConditionTrue})
	}
	return wl
}

func TestQuotaViolations(t *testing.T) {
	queues := []kueue.ClusterQueue{cq("a", "c", 24, ptr.To[int64](8)), cq("b", "c", 24, ptr.To[int64](8)), cq("alone", "", 4, nil), cq("open", "d", 4, nil), cq("d2", "d", 4, nil)}
	cases := map[string]struct {
		wls  []kueue.Workload
		want []string
	}{
		"within nominal and borrowing":    {wls: []kueue.Workload{holding("w1", "a", 30, false), holding("w2", "b", 16, false), holding("w3", "alone", 4, false)}},
		"finished workloads hold nothing": {wls: []kueue.Workload{holding("w1", "a", 32, false), holding("w2", "a", 8, true)}},
		"over the borrowing limit": {wls: []kueue.Workload{holding("w1", "a", 24, false), holding("w2", "a", 9, false)},
			want: []string{"clusterqueue a holds 33 nvidia.com/gpu of flavor a100, over its limit 32 (nominal 24 + borrowing limit 8); workloads holding quota: team/w1, team/w2"}},
		"over nominal without a cohort": {wls: []kueue.Workload{holding("w1", "alone", 5, false)},
			want: []string{"clusterqueue alone holds 5 nvidia.com/gpu of flavor a100, over its limit 4 (nominal 4)"}},
		"the cohort bounds a queue with no borrowing limit": {wls: []kueue.Workload{holding("w1", "open", 7, false), holding("w2", "d2", 2, false)},
			want: []string{"cohort d (d2, open) holds 9 nvidia.com/gpu of flavor a100, over its members' nominal quota 8"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := QuotaViolations(queues, tc.wls)
			if len(got) != len(tc.want) {
				t.Fatalf("got %d violations %q, want %d %q", len(got), got, len(tc.want), tc.want)
			}
			for i := range got {
				if !strings.HasPrefix(got[i], tc.want[i]) {
					t.Errorf("violation %d = %q, want it to start with %q", i, got[i], tc.want[i])
				}
			}
		})
	}
}

func TestJobOutcome(t *testing.T) {
	job := func(cond batchv1.JobConditionType) *batchv1.Job {
		j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "j"}, Spec: batchv1.JobSpec{Completions: ptr.To[int32](2)}}
		if cond != "" {
			j.Status.Conditions = []batchv1.JobCondition{{Type: cond, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded"}}
		}
		return j
	}
	pending := func(msg string) *kueue.Workload {
		return &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "job-j"}, Status: kueue.WorkloadStatus{
			Conditions: []metav1.Condition{{Type: kueue.WorkloadQuotaReserved, Status: metav1.ConditionFalse, Message: msg}}}}
	}
	admitted := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "job-j"}, Status: kueue.WorkloadStatus{
		Conditions: []metav1.Condition{{Type: kueue.WorkloadAdmitted, Status: metav1.ConditionTrue}}}}
	cases := map[string]struct {
		job       *batchv1.Job
		wl        *kueue.Workload
		succeeded map[string]int
		outcome   Outcome
		violation string
	}{
		"finished once": {job: job(batchv1.JobComplete), wl: admitted, succeeded: map[string]int{"us-east": 2}, outcome: Finished},
		"finished once, after a copy evicted part-way": {job: job(batchv1.JobComplete), succeeded: map[string]int{"us-east": 1, "eu-west": 2}, outcome: Finished},
		"finished in two clusters":                     {job: job(batchv1.JobComplete), succeeded: map[string]int{"us-east": 2, "us-west": 2}, violation: "job team/j ran to completion in 2 clusters: us-east, us-west"},
		"complete, never seen":                         {job: job(batchv1.JobComplete), violation: "no cluster was seen to run its 2 completions (succeeded pods: none)"},
		"complete, split":                              {job: job(batchv1.JobComplete), succeeded: map[string]int{"us-east": 1, "us-west": 1}, violation: "succeeded pods: us-east 1, us-west 1"},
		"failed":                                       {job: job(batchv1.JobFailed), violation: "job team/j failed: BackoffLimitExceeded"},
		"no workload":                                  {job: job(""), violation: "job team/j has no Workload"},
		"pending with a reason":                        {job: job(""), wl: pending("insufficient quota"), outcome: Pending},
		"pending, no reason":                           {job: job(""), wl: pending(""), violation: "pending with no reason"},
		"admitted, not finished":                       {job: job(""), wl: admitted, violation: "is admitted"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			outcome, violation := JobOutcome(tc.job, tc.wl, tc.succeeded)
			if outcome != tc.outcome || !strings.Contains(violation, tc.violation) || (tc.violation == "") != (violation == "") {
				t.Errorf("JobOutcome = %q, %q; want %q, %q", outcome, violation, tc.outcome, tc.violation)
			}
		})
	}
}
