package integration_test

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/internal/integration"
	"github.com/fleetq/fleetq/internal/integration/batchjob"
	"github.com/fleetq/fleetq/internal/integration/pod"
)

func TestRegistryRefusesAKindTwice(t *testing.T) {
	_, err := integration.NewRegistry(batchjob.Adapter{}, batchjob.Adapter{})
	if err == nil || !strings.Contains(err.Error(), "integrated twice") {
		t.Errorf("error = %v, want a kind integrated twice", err)
	}
}

func TestSelectNamesTheKnownIntegrations(t *testing.T) {
	_, err := integration.Select([]integration.Adapter{batchjob.Adapter{}}, []string{"batch/job", "ray.io/rayjob"})
	if err == nil || !strings.Contains(err.Error(), `integration "ray.io/rayjob" is not known; known integrations: batch/job`) {
		t.Errorf("error = %v", err)
	}
}

func TestOwnerFindsTheControllingJob(t *testing.T) {
	r, err := integration.NewRegistry(batchjob.Adapter{})
	if err != nil {
		t.Fatal(err)
	}
	wl := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{
		{APIVersion: "v1", Kind: "ConfigMap", Name: "not-it"},
		{APIVersion: "batch/v1", Kind: "Job", Name: "train", UID: "u", Controller: ptr.To(true)},
	}}}
	ref, a, ok := r.Owner(wl)
	if !ok || ref.Name != "train" || a.Framework() != batchjob.Framework {
		t.Errorf("Owner = %v %v %v", ref, a, ok)
	}
	wl.OwnerReferences[1].Controller = nil
	if _, _, ok := r.Owner(wl); ok {
		t.Error("a non-controller reference counted as the owner")
	}
}

func TestPlacementsLabelEveryPodSetWithItsIdentity(t *testing.T) {
	wl := &kueue.Workload{
		ObjectMeta: metav1.ObjectMeta{UID: "wl-uid"},
		Status: kueue.WorkloadStatus{Admission: &kueue.Admission{PodSetAssignments: []kueue.PodSetAssignment{
			{Name: "head", Count: ptr.To[int32](1)}, {Name: "workers", Count: ptr.To[int32](4)},
		}}},
	}
	ps := integration.Placements(wl, nil, nil)
	if len(ps) != 2 {
		t.Fatalf("placements: %+v", ps)
	}
	for _, p := range ps {
		if p.Labels[integration.WorkloadUIDLabel] != "wl-uid" || p.Labels[integration.PodSetLabel] != string(p.Name) {
			t.Errorf("pod set %s labels %v", p.Name, p.Labels)
		}
	}
	if *ps[1].Count != 4 {
		t.Errorf("count of workers = %d", *ps[1].Count)
	}
}

func TestGroupOfKnowsAGroupsWorkloadByItsGroupLabel(t *testing.T) {
	r, err := integration.NewRegistry(batchjob.Adapter{}, pod.Adapter{})
	if err != nil {
		t.Fatal(err)
	}
	wl := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Name: "trainers", Labels: map[string]string{pod.GroupNameLabel: "trainers"}}}
	a, name, ok := r.GroupOf(wl)
	if !ok || name != "trainers" || a.GVK().Kind != "Pod" {
		t.Errorf("GroupOf = %v, %q, %v; want the Pod adapter and group trainers", a, name, ok)
	}
	if _, _, ok := r.GroupOf(&kueue.Workload{}); ok {
		t.Error("a Workload without a group label is a group's")
	}
	if _, _, ok := (*integration.Registry)(nil).GroupOf(wl); ok {
		t.Error("a nil registry knows a group")
	}
}
