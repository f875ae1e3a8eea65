package nodefit

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

func gpuNode(name string, gpus int64, labels map[string]string, taints ...corev1.Taint) Node {
	return Node{Name: name, Labels: labels, Taints: taints, Free: map[corev1.ResourceName]int64{"nvidia.com/gpu": gpus, "cpu": 64000}}
}

func TestFit(t *testing.T) {
	a100 := map[string]string{"gpu": "a100"}
	gpuTaint := corev1.Taint{Key: "nvidia.com/gpu", Effect: corev1.TaintEffectNoSchedule}
	tol := []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists}}
	req := func(gpu int64) map[corev1.ResourceName]int64 {
		return map[corev1.ResourceName]int64{"nvidia.com/gpu": gpu, "cpu": 4000}
	}
	cases := map[string]struct {
		nodes   []Node
		podSets []PodSet
		want    Result
	}{
		"best fit fills the tightest node and keeps the big block": {
			nodes:   []Node{gpuNode("big", 8, a100), gpuNode("small", 2, a100)},
			podSets: []PodSet{{Name: "main", Count: 2, Requests: req(1), FlavorLabels: a100}},
			want: Result{Fits: true, Placements: []Placement{{PodSet: "main", Nodes: []NodeCount{{Node: "small", Count: 2}}}},
				Score: 1},
		},
		"a gang spreads over nodes when it must": {
			nodes:   []Node{gpuNode("n1", 4, a100), gpuNode("n2", 4, a100)},
			podSets: []PodSet{{Name: "main", Count: 3, Requests: req(2), FlavorLabels: a100}},
			want: Result{Fits: true, Placements: []Placement{{PodSet: "main", Nodes: []NodeCount{{Node: "n1", Count: 2}, {Node: "n2", Count: 1}}}},
				Score: 0.5*(2.0/4.0) + 0.5*(60000.0/64000.0)},
		},
		"a pod larger than any node": {
			nodes:   []Node{gpuNode("n1", 4, a100), gpuNode("n2", 2, a100)},
			podSets: []PodSet{{Name: "main", Count: 1, Requests: req(8), FlavorLabels: a100}},
			want:    Result{Reason: `pod set "main": largest node fit 4 of 8 nvidia.com/gpu`},
		},
		"all or nothing": {
			nodes:   []Node{gpuNode("n1", 4, a100), gpuNode("n2", 4, a100)},
			podSets: []PodSet{{Name: "main", Count: 3, Requests: req(3), FlavorLabels: a100}},
			want:    Result{Reason: `pod set "main": only 2 of 3 pods fit at once on 2 eligible node(s)`},
		},
		"flavor labels rule nodes out": {
			nodes:   []Node{gpuNode("n1", 8, map[string]string{"gpu": "l4"})},
			podSets: []PodSet{{Name: "main", Count: 1, Requests: req(1), FlavorLabels: a100}},
			want:    Result{Reason: `pod set "main": no node matches flavor labels`},
		},
		"the pods' selector rules nodes out": {
			nodes:   []Node{gpuNode("n1", 8, a100)},
			podSets: []PodSet{{Name: "main", Count: 1, Requests: req(1), FlavorLabels: a100, NodeSelector: map[string]string{"zone": "b"}}},
			want:    Result{Reason: `pod set "main": no node matches the pods' node selector or affinity`},
		},
		"untolerated taints rule nodes out": {
			nodes:   []Node{gpuNode("n1", 8, a100, gpuTaint)},
			podSets: []PodSet{{Name: "main", Count: 1, Requests: req(1), FlavorLabels: a100}},
			want:    Result{Reason: `pod set "main": every matching node has a taint the pods do not tolerate (nvidia.com/gpu:NoSchedule)`},
		},
		"tolerated taints are fine": {
			nodes:   []Node{gpuNode("n1", 8, a100, gpuTaint)},
			podSets: []PodSet{{Name: "main", Count: 1, Requests: req(8), FlavorLabels: a100, Tolerations: tol}},
			want: Result{Fits: true, Placements: []Placement{{PodSet: "main", Nodes: []NodeCount{{Node: "n1", Count: 1}}}},
				Score: 0.5 * (60000.0 / 64000.0)},
		},
		"largest pod set first, so the small ones fill the gaps": {
			nodes: []Node{gpuNode("n1", 8, a100), gpuNode("n2", 4, a100)},
			podSets: []PodSet{
				{Name: "workers", Count: 4, Requests: req(1), FlavorLabels: a100},
				{Name: "trainer", Count: 1, Requests: req(8), FlavorLabels: a100},
			},
			want: Result{Fits: true, Placements: []Placement{
				{PodSet: "workers", Nodes: []NodeCount{{Node: "n2", Count: 4}}},
				{PodSet: "trainer", Nodes: []NodeCount{{Node: "n1", Count: 1}}},
			}, Score: 0.5 * (60000.0 / 64000.0)},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Fit(tc.nodes, tc.podSets)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Fit (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFitIsDeterministic(t *testing.T) {
	a100 := map[string]string{"gpu": "a100"}
	nodes := []Node{gpuNode("c", 4, a100), gpuNode("a", 4, a100), gpuNode("b", 4, a100)}
	ps := []PodSet{{Name: "main", Count: 5, Requests: map[corev1.ResourceName]int64{"nvidia.com/gpu": 2}, FlavorLabels: a100}}
	first := Fit(nodes, ps)
	reversed := []Node{nodes[2], nodes[1], nodes[0]}
	if diff := cmp.Diff(first, Fit(reversed, ps)); diff != "" {
		t.Errorf("node order changed the result (-first +reversed):\n%s", diff)
	}
}
