package lab

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func gpuNode(name string, gpus int64, ready bool) corev1.Node {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.NodeStatus{
			Allocatable: resources("96", "768Gi", "110", gpus),
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status}},
		},
	}
}

func gpuPod(node string, phase corev1.PodPhase, gpus ...string) corev1.Pod {
	p := corev1.Pod{Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: phase}}
	for _, g := range gpus {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{GPUResource: resource.MustParse(g)},
		}})
	}
	return p
}

func TestComputeCapacity(t *testing.T) {
	cases := map[string]struct {
		nodes              []corev1.Node
		pods               []corev1.Pod
		wantNodes, wantRdy int
		wantFree           int64
	}{
		"no pods": {
			nodes: []corev1.Node{gpuNode("a", 8, true), gpuNode("b", 8, false)}, wantNodes: 2, wantRdy: 1, wantFree: 16,
		},
		"running and pending-bound pods hold GPUs, finished and unbound ones do not": {
			nodes: []corev1.Node{gpuNode("a", 8, true), gpuNode("b", 8, true)},
			pods: []corev1.Pod{
				gpuPod("a", corev1.PodRunning, "1", "2"),
				gpuPod("b", corev1.PodPending, "4"),
				gpuPod("b", corev1.PodSucceeded, "8"),
				gpuPod("a", corev1.PodFailed, "8"),
				gpuPod("", corev1.PodPending, "8"),
				gpuPod("elsewhere", corev1.PodRunning, "8"),
			},
			wantNodes: 2, wantRdy: 2, wantFree: 9,
		},
		"overcommitted reads as zero free": {
			nodes: []corev1.Node{gpuNode("a", 1, true)}, pods: []corev1.Pod{gpuPod("a", corev1.PodRunning, "2")},
			wantNodes: 1, wantRdy: 1, wantFree: 0,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := ComputeCapacity(tc.nodes, tc.pods)
			free := c.Free(GPUResource)
			got := []int64{int64(c.Nodes), int64(c.ReadyNodes), free.Value()}
			if diff := cmp.Diff([]int64{int64(tc.wantNodes), int64(tc.wantRdy), tc.wantFree}, got); diff != "" {
				t.Errorf("nodes, ready, free GPUs (-want +got):\n%s", diff)
			}
		})
	}
}
