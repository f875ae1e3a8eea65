package pod

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetq/fleetq/internal/integration"
)

func userPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "research", Name: "notebook", Labels: map[string]string{"kueue.x-k8s.io/queue-name": "team-queue"}},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{"disk": "ssd"},
			Containers:   []corev1.Container{{Name: "main", Image: "jupyter"}},
		},
	}
}

func TestHoldAndStart(t *testing.T) {
	a := Adapter{}
	p := userPod()
	if a.Suspended(p) || !a.Status(p).Active {
		t.Fatalf("an ungated Pod reads as held: %+v", a.Status(p))
	}
	a.SetSuspended(p, true)
	a.SetSuspended(p, true)
	if !a.Suspended(p) || len(p.Spec.SchedulingGates) != 1 || p.Labels[integration.ManagedLabel] != "true" {
		t.Fatalf("held Pod: gates %v, labels %v", p.Spec.SchedulingGates, p.Labels)
	}
	if st := a.Status(p); st.Active || st.Finished {
		t.Errorf("a gated Pod without a node is active: %+v", st)
	}
	sets, err := a.PodSets(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(sets) != 1 || sets[0].Name != PodSetName || sets[0].Count != 1 || len(sets[0].Template.Spec.SchedulingGates) != 0 ||
		sets[0].Template.Labels["kueue.x-k8s.io/queue-name"] != "team-queue" {
		t.Errorf("pod sets %+v", sets)
	}

	placement := integration.Placement{
		NodeSelector: map[string]string{"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"},
		Tolerations:  []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists}},
		Labels:       map[string]string{integration.WorkloadUIDLabel: "uid-1"},
	}
	if err := a.ApplyPlacements(p, []integration.PodSetPlacement{{Name: PodSetName, Placement: placement}}); err != nil {
		t.Fatal(err)
	}
	a.SetSuspended(p, false)
	want := map[string]string{"disk": "ssd", "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}
	if diff := cmp.Diff(want, p.Spec.NodeSelector); diff != "" || len(p.Spec.Tolerations) != 1 || p.Labels[integration.WorkloadUIDLabel] != "uid-1" || a.Suspended(p) {
		t.Errorf("started Pod: selector diff %s, tolerations %v, labels %v, gates %v", diff, p.Spec.Tolerations, p.Labels, p.Spec.SchedulingGates)
	}
	if err := a.ApplyPlacements(p, []integration.PodSetPlacement{{Name: "worker"}}); err == nil {
		t.Errorf("a placement for another pod set was accepted")
	}
	if a.RestorePodSets(p, sets) {
		t.Errorf("a Pod's scheduling fields were restored; it is deleted instead")
	}
	if !a.StopByDeletion() || !a.Fields().LocalOnly {
		t.Errorf("a Pod must stop by deletion and run only where it was created")
	}
}

func TestStatus(t *testing.T) {
	a := Adapter{}
	p := userPod()
	p.Status.Phase = corev1.PodSucceeded
	if st := a.Status(p); !st.Finished || st.Failed {
		t.Errorf("succeeded: %+v", st)
	}
	p.Status.Phase, p.Status.Reason = corev1.PodFailed, "Evicted"
	if st := a.Status(p); !st.Finished || !st.Failed || st.Message != "Pod failed: Evicted" {
		t.Errorf("failed: %+v", st)
	}
	p = userPod()
	a.SetSuspended(p, true)
	p.Spec.NodeName = "node-1" // bound before the gate was seen: it may run
	if !a.Status(p).Active {
		t.Errorf("a bound Pod is not active")
	}
}

func TestPodGroupsRefused(t *testing.T) {
	p := userPod()
	p.Labels[GroupNameLabel] = "trainers"
	_, err := Adapter{}.PodSets(p)
	if err == nil || !strings.Contains(err.Error(), `metadata.labels[kueue.x-k8s.io/pod-group-name] is "trainers", but fleetq does not run pod groups yet`) || !strings.Contains(err.Error(), "run the group as a Job") {
		t.Errorf("a grouped Pod: %v", err)
	}
}
