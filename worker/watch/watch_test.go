package watch

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	fleetq "github.com/fleetq/fleetq/api/fleetq/v1alpha1"
	"github.com/fleetq/fleetq/worker/capacity"
)

func TestBoundPodsSelector(t *testing.T) {
	want := "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"
	if got := BoundPodsSelector.String(); got != want {
		t.Errorf("selector = %q, want %q", got, want)
	}
}

func fullPod() *corev1.Pod {
	always := corev1.ContainerRestartPolicyAlways
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "p", Namespace: "ns", UID: "u", ResourceVersion: "7",
			Labels: map[string]string{batchv1.ControllerUidLabel: "job-uid", "app": "x", batchv1.JobNameLabel: "j",
				fleetq.WorkloadUIDLabel: "wl-uid", fleetq.PodSetLabel: "main"},
			Annotations:   map[string]string{"big": "annotation"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}},
		},
		Spec: corev1.PodSpec{
			NodeName: "n0",
			Overhead: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")},
			InitContainers: []corev1.Container{
				{Name: "init", Image: "i", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}}},
				{Name: "sidecar", Image: "s", RestartPolicy: &always, Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}},
			},
			Containers: []corev1.Container{{Name: "c", Image: "c", Env: []corev1.EnvVar{{Name: "A", Value: "B"}},
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), "nvidia.com/gpu": resource.MustParse("1")}}}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
}

func TestStripPodKeepsWhatCapacityReads(t *testing.T) {
	p := fullPod()
	out, err := StripPod(p)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*corev1.Pod)
	if diff := cmp.Diff(capacity.PodRequests(&p.Spec), capacity.PodRequests(&got.Spec)); diff != "" {
		t.Errorf("requests (-full +stripped):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{fleetq.WorkloadUIDLabel: "wl-uid", fleetq.PodSetLabel: "main"}, got.Labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
	if got.Spec.NodeName != "n0" || got.Status.Phase != corev1.PodRunning || got.Annotations != nil || got.ManagedFields != nil || got.Status.Conditions != nil {
		t.Errorf("stripped pod keeps too much or too little: %+v", got)
	}
	if other, _ := StripPod("tombstone"); other != "tombstone" {
		t.Errorf("non-pods must pass through, got %v", other)
	}
}

func TestPredicates(t *testing.T) {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"gpu": "a100"}},
		Status:     corev1.NodeStatus{Allocatable: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}},
	}
	pod := fullPod()
	cases := map[string]struct {
		old, new func() client.Object
		node     bool
		want     bool
	}{
		"node heartbeat": {node: true, old: func() client.Object { return node }, new: func() client.Object {
			n := node.DeepCopy()
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now()}}
			return n
		}},
		"node label": {node: true, want: true, old: func() client.Object { return node }, new: func() client.Object {
			n := node.DeepCopy()
			n.Labels["gpu"] = "h100"
			return n
		}},
		"node cordoned": {node: true, want: true, old: func() client.Object { return node }, new: func() client.Object {
			n := node.DeepCopy()
			n.Spec.Unschedulable = true
			return n
		}},
		"node allocatable": {node: true, want: true, old: func() client.Object { return node }, new: func() client.Object {
			n := node.DeepCopy()
			n.Status.Allocatable["nvidia.com/gpu"] = resource.MustParse("7")
			return n
		}},
		"pod becomes ready": {old: func() client.Object { return pod }, new: func() client.Object {
			p := pod.DeepCopy()
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.ContainersReady, Status: corev1.ConditionTrue})
			return p
		}},
		"pod succeeds": {want: true, old: func() client.Object { return pod }, new: func() client.Object {
			p := pod.DeepCopy()
			p.Status.Phase = corev1.PodSucceeded
			return p
		}},
		"pod resized": {want: true, old: func() client.Object { return pod }, new: func() client.Object {
			p := pod.DeepCopy()
			p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("5")
			return p
		}},
		"pod deletion starts": {old: func() client.Object { return pod }, new: func() client.Object {
			p := pod.DeepCopy()
			p.DeletionTimestamp = ptr.To(metav1.Now())
			return p
		}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			pred := PodChanged()
			if tc.node {
				pred = NodeChanged()
			}
			got := pred.Update(event.UpdateEvent{ObjectOld: tc.old(), ObjectNew: tc.new()})
			if got != tc.want {
				t.Errorf("update passes = %v, want %v", got, tc.want)
			}
		})
	}
}
