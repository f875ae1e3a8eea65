package jobs

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	fleetq "github.com/fleetq/fleetq/api/fleetq/v1alpha1"
	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/internal/integration"
	"github.com/fleetq/fleetq/internal/integration/batchjob"
	"github.com/fleetq/fleetq/internal/integration/pod"
)

func TestManagedByProblem(t *testing.T) {
	reg, err := integration.NewRegistry(batchjob.Adapter{}, pod.Adapter{})
	if err != nil {
		t.Fatal(err)
	}
	owned := func(annotations map[string]string) *kueue.Workload {
		return &kueue.Workload{ObjectMeta: metav1.ObjectMeta{
			Annotations:     annotations,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "train", Controller: ptr.To(true)}},
		}, Spec: kueue.WorkloadSpec{QueueName: "team-queue"}}
	}
	by := func(v string) map[string]string { return map[string]string{fleetq.JobManagedByAnnotation: v} }
	ownedPod := func() *kueue.Workload {
		return &kueue.Workload{ObjectMeta: metav1.ObjectMeta{
			Annotations:     by(""),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "notebook", Controller: ptr.To(true)}},
		}}
	}
	cases := map[string]struct {
		wl    *kueue.Workload
		multi bool
		want  []string // substrings; none means no problem
	}{
		"dispatched job on a multi-cluster queue": {wl: owned(by(ManagedByMultiKueue)), multi: true},
		"local job on a local queue":              {wl: owned(by(""))},
		"job-controller job on a local queue":     {wl: owned(by("kubernetes.io/job-controller"))},
		"job naming its own controller on a multi-cluster queue": {wl: owned(by("kubernetes.io/job-controller")), multi: true,
			want: []string{"ClusterQueue cq runs its workloads in worker clusters", `Job train's spec.managedBy is "kubernetes.io/job-controller"`, "delete the Job and create it again"}},
		"job created before its queue pointed at a multi-cluster queue": {wl: owned(by("")), multi: true,
			want: []string{"spec.managedBy is unset", "delete the Job and create it again"}},
		"dispatched job on a local queue": {wl: owned(by(ManagedByMultiKueue)),
			want: []string{"runs its workloads in this cluster", "no controller here would run it", "point LocalQueue team-queue at a multi-cluster ClusterQueue"}},
		"plain Pod on a multi-cluster queue (held gated here)": {wl: ownedPod(), multi: true},
		"plain Pod on a local queue":                           {wl: ownedPod()},
		"pod group on a multi-cluster queue (held gated here)": {wl: &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{kueue.PodGroupNameLabel: "trainers"}}}, multi: true},
		"pod group on a local queue":                           {wl: &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{kueue.PodGroupNameLabel: "trainers"}}}},
		"a workload without a job is not checked":              {wl: &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Annotations: by("x")}}, multi: true},
		"a workload from before the annotation":                {wl: owned(nil), multi: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := ManagedByProblem(reg, tc.wl, "cq", tc.multi)
			if (got == "") != (len(tc.want) == 0) {
				t.Fatalf("problem = %q, want one containing %q", got, tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("problem %q does not say %q", got, w)
				}
			}
		})
	}
}
