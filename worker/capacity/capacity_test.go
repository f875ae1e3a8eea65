package capacity

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleetq "github.com/fleetq/fleetq/api/fleetq/v1alpha1"
	kueue "github.com/fleetq/fleetq/api/v1beta2"
)

const gpu corev1.ResourceName = "nvidia.com/gpu"

var gpuTaint = corev1.Taint{Key: string(gpu), Effect: corev1.TaintEffectNoSchedule}

// nodeBuilder builds test nodes: only what a test states differs from an empty node.
type nodeBuilder struct{ n corev1.Node }

func makeNode(name string) *nodeBuilder {
	return &nodeBuilder{corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}}
}

func (b *nodeBuilder) label(k, v string) *nodeBuilder { b.n.Labels[k] = v; return b }
func (b *nodeBuilder) taint(t corev1.Taint) *nodeBuilder {
	b.n.Spec.Taints = append(b.n.Spec.Taints, t)
	return b
}
func (b *nodeBuilder) cordon() *nodeBuilder { b.n.Spec.Unschedulable = true; return b }
func (b *nodeBuilder) alloc(kv ...string) *nodeBuilder {
	b.n.Status.Allocatable = resources(kv...)
	return b
}
func (b *nodeBuilder) obj() *corev1.Node { return &b.n }

func a100Node(name string) *corev1.Node {
	return makeNode(name).label("gpu", "a100").taint(gpuTaint).alloc("cpu", "96", "memory", "768Gi", "pods", "110", string(gpu), "8").obj()
}

func l4Node(name string) *corev1.Node {
	return makeNode(name).label("gpu", "l4").alloc("cpu", "48", "memory", "192Gi", "pods", "110", string(gpu), "4").obj()
}

func resources(kv ...string) corev1.ResourceList {
	rl := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		rl[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return rl
}

func pod(name, node string, phase corev1.PodPhase, kv ...string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{
			Name: "c", Resources: corev1.ResourceRequirements{Requests: resources(kv...)},
		}}},
		Status: corev1.PodStatus{Phase: phase},
	}
}

func flavor(name string, labels map[string]string, tolerations []corev1.Toleration, nodeTaints []corev1.Taint) *kueue.ResourceFlavor {
	return &kueue.ResourceFlavor{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       kueue.ResourceFlavorSpec{NodeLabels: labels, Tolerations: tolerations, NodeTaints: nodeTaints},
	}
}

var (
	tolerateGPU = []corev1.Toleration{{Key: string(gpu), Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	a100Flavor  = flavor("a100", map[string]string{"gpu": "a100"}, tolerateGPU, nil)
	l4Flavor    = flavor("l4", map[string]string{"gpu": "l4"}, nil, nil)
)

func TestMatches(t *testing.T) {
	cases := map[string]struct {
		node   *corev1.Node
		flavor *kueue.ResourceFlavor
		want   bool
	}{
		"labels and a tolerated taint": {node: a100Node("n"), flavor: a100Flavor, want: true},
		"a missing label": {
			node:   makeNode("n").label("gpu", "a100").obj(),
			flavor: flavor("f", map[string]string{"gpu": "a100", "zone": "a"}, nil, nil),
		},
		"a label with another value":           {node: l4Node("n"), flavor: a100Flavor},
		"a taint the flavor does not tolerate": {node: a100Node("n"), flavor: flavor("f", map[string]string{"gpu": "a100"}, nil, nil)},
		"a taint the flavor lists in nodeTaints": {
			node: a100Node("n"), flavor: flavor("f", map[string]string{"gpu": "a100"}, nil, []corev1.Taint{gpuTaint}),
			want: true,
		},
		"a nodeTaint with another value does not cover the taint": {
			node:   makeNode("n").taint(corev1.Taint{Key: "pool", Value: "a", Effect: corev1.TaintEffectNoExecute}).obj(),
			flavor: flavor("f", nil, nil, []corev1.Taint{{Key: "pool", Value: "b", Effect: corev1.TaintEffectNoExecute}}),
		},
		"PreferNoSchedule taints never exclude": {
			node: makeNode("n").taint(corev1.Taint{Key: "spot", Effect: corev1.TaintEffectPreferNoSchedule}).obj(), flavor: flavor("f", nil, nil, nil),
			want: true,
		},
		"an empty flavor matches an untainted node":     {node: l4Node("n"), flavor: flavor("default", nil, nil, nil), want: true},
		"an empty flavor does not match a tainted node": {node: a100Node("n"), flavor: flavor("default", nil, nil, nil)},
		"a cordoned node keeps its flavor": {
			node:   makeNode("n").label("gpu", "l4").cordon().taint(corev1.Taint{Key: "node.kubernetes.io/unschedulable", Effect: corev1.TaintEffectNoSchedule}).obj(),
			flavor: l4Flavor, want: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			n := NewNode(tc.node)
			if got := Matches(&n, tc.flavor); got != tc.want {
				t.Errorf("Matches = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestNodes(t *testing.T) {
	cases := map[string]struct {
		nodes []*corev1.Node
		pods  []*corev1.Pod
		want  map[string]Amounts // used per node
		// unschedulable lists the nodes expected unschedulable.
		unschedulable []string
	}{
		"pods that hold resources are charged to their node": {
			nodes: []*corev1.Node{a100Node("a"), a100Node("b")},
			pods: []*corev1.Pod{
				pod("running", "a", corev1.PodRunning, "cpu", "2", string(gpu), "4"),
				pod("pending-bound", "a", corev1.PodPending, "cpu", "500m"),
				pod("succeeded", "a", corev1.PodSucceeded, "cpu", "8", string(gpu), "4"),
				pod("failed", "b", corev1.PodFailed, "cpu", "8"),
				pod("unbound", "", corev1.PodPending, "cpu", "8"),
				pod("elsewhere", "gone", corev1.PodRunning, "cpu", "8"),
			},
			want: map[string]Amounts{"a": {"cpu": 2500, gpu: 4, "pods": 2}, "b": {}},
		},
		"cordoned and not-ready nodes are unschedulable": {
			nodes: []*corev1.Node{
				makeNode("cordoned").cordon().obj(),
				makeNode("not-ready").taint(corev1.Taint{Key: "node.kubernetes.io/not-ready", Effect: corev1.TaintEffectNoExecute}).obj(),
				makeNode("pressure-preferred").taint(corev1.Taint{Key: "node.kubernetes.io/memory-pressure", Effect: corev1.TaintEffectPreferNoSchedule}).obj(),
			},
			want:          map[string]Amounts{"cordoned": {}, "not-ready": {}, "pressure-preferred": {}},
			unschedulable: []string{"cordoned", "not-ready"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Nodes(tc.nodes, tc.pods)
			used := map[string]Amounts{}
			var unsched []string
			for _, n := range got {
				used[n.Name] = n.Used
				if n.Unschedulable {
					unsched = append(unsched, n.Name)
				}
			}
			if diff := cmp.Diff(tc.want, used); diff != "" {
				t.Errorf("used (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.unschedulable, unsched); diff != "" {
				t.Errorf("unschedulable (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReport(t *testing.T) {
	cases := map[string]struct {
		nodes    []*corev1.Node
		pods     []*corev1.Pod
		flavors  []*kueue.ResourceFlavor
		reserved map[string]Amounts
		want     fleetq.CapacityReportStatus
	}{
		"two flavors, a pod, a reservation, an unmatched node and a cordoned node": {
			nodes: []*corev1.Node{
				a100Node("a100-0"), a100Node("a100-1"), l4Node("l4-0"),
				makeNode("l4-cordoned").label("gpu", "l4").cordon().alloc("cpu", "48", string(gpu), "4").obj(),
				makeNode("cpu-0").alloc("cpu", "8", "memory", "32Gi").taint(corev1.Taint{Key: "system", Effect: corev1.TaintEffectNoSchedule}).obj(),
			},
			pods: []*corev1.Pod{
				pod("p0", "a100-0", corev1.PodRunning, "cpu", "10", "memory", "64Gi", string(gpu), "6"),
				pod("p1", "l4-0", corev1.PodRunning, "cpu", "1", string(gpu), "1"),
			},
			flavors:  []*kueue.ResourceFlavor{l4Flavor, a100Flavor},
			reserved: map[string]Amounts{"a100-1": {"cpu": 4000, gpu: 4, "pods": 1}},
			want: fleetq.CapacityReportStatus{
				ClusterName: "us-east",
				FlavorCount: 2,
				Summary:     "a100: 6/16 nvidia.com/gpu, l4: 3/8 nvidia.com/gpu",
				Flavors: []fleetq.FlavorCapacity{{
					Name: "a100", Nodes: 2,
					Allocatable:     resources("cpu", "192", "memory", "1536Gi", "pods", "220", string(gpu), "16"),
					Used:            resources("cpu", "10", "memory", "64Gi", "pods", "1", string(gpu), "6"),
					Reserved:        resources("cpu", "4", "pods", "1", string(gpu), "4"),
					Free:            resources("cpu", "178", "memory", "1472Gi", "pods", "218", string(gpu), "6"),
					LargestNodeFree: resources("cpu", "92", "memory", "768Gi", "pods", "109", string(gpu), "4"),
				}, {
					Name: "l4", Nodes: 2,
					Allocatable:     resources("cpu", "96", "memory", "192Gi", "pods", "110", string(gpu), "8"),
					Used:            resources("cpu", "1", "pods", "1", string(gpu), "1"),
					Free:            resources("cpu", "47", "memory", "192Gi", "pods", "109", string(gpu), "3"),
					LargestNodeFree: resources("cpu", "47", "memory", "192Gi", "pods", "109", string(gpu), "3"),
				}},
				Nodes: []fleetq.NodeCapacity{
					{Name: "a100-0", Flavors: []string{"a100"}, Allocatable: resources("cpu", "96", "memory", "768Gi", "pods", "110", string(gpu), "8"),
						Free: resources("cpu", "86", "memory", "704Gi", "pods", "109", string(gpu), "2")},
					{Name: "a100-1", Flavors: []string{"a100"}, Allocatable: resources("cpu", "96", "memory", "768Gi", "pods", "110", string(gpu), "8"),
						Free: resources("cpu", "92", "memory", "768Gi", "pods", "109", string(gpu), "4")},
					{Name: "l4-0", Flavors: []string{"l4"}, Allocatable: resources("cpu", "48", "memory", "192Gi", "pods", "110", string(gpu), "4"),
						Free: resources("cpu", "47", "memory", "192Gi", "pods", "109", string(gpu), "3")},
					{Name: "l4-cordoned", Flavors: []string{"l4"}, Allocatable: resources("cpu", "48", string(gpu), "4"), Unschedulable: true},
				},
				UnmatchedNodes: 1,
			},
		},
		"a node matching two flavors counts in both": {
			nodes:   []*corev1.Node{l4Node("l4-0")},
			flavors: []*kueue.ResourceFlavor{l4Flavor, flavor("any", nil, nil, nil)},
			want: fleetq.CapacityReportStatus{
				ClusterName: "us-east",
				FlavorCount: 2,
				Summary:     "any: 4/4 nvidia.com/gpu, l4: 4/4 nvidia.com/gpu",
				Flavors: []fleetq.FlavorCapacity{{
					Name: "any", Nodes: 1,
					Allocatable:     resources("cpu", "48", "memory", "192Gi", "pods", "110", string(gpu), "4"),
					Free:            resources("cpu", "48", "memory", "192Gi", "pods", "110", string(gpu), "4"),
					LargestNodeFree: resources("cpu", "48", "memory", "192Gi", "pods", "110", string(gpu), "4"),
				}, {
					Name: "l4", Nodes: 1,
					Allocatable:     resources("cpu", "48", "memory", "192Gi", "pods", "110", string(gpu), "4"),
					Free:            resources("cpu", "48", "memory", "192Gi", "pods", "110", string(gpu), "4"),
					LargestNodeFree: resources("cpu", "48", "memory", "192Gi", "pods", "110", string(gpu), "4"),
				}},
				Nodes: []fleetq.NodeCapacity{{Name: "l4-0", Flavors: []string{"any", "l4"},
					Allocatable: resources("cpu", "48", "memory", "192Gi", "pods", "110", string(gpu), "4"),
					Free:        resources("cpu", "48", "memory", "192Gi", "pods", "110", string(gpu), "4")}},
			},
		},
		"no flavors: every node is unmatched": {
			nodes: []*corev1.Node{l4Node("l4-0"), a100Node("a100-0")},
			want:  fleetq.CapacityReportStatus{ClusterName: "us-east", UnmatchedNodes: 2},
		},
		"a flavor without accelerators is summarised by CPUs, and an over-committed node has nothing free": {
			nodes:   []*corev1.Node{makeNode("cpu-0").alloc("cpu", "8").obj()},
			pods:    []*corev1.Pod{pod("big", "cpu-0", corev1.PodRunning, "cpu", "10")},
			flavors: []*kueue.ResourceFlavor{flavor("default", nil, nil, nil)},
			want: fleetq.CapacityReportStatus{
				ClusterName: "us-east", FlavorCount: 1, Summary: "default: 0/8 cpu",
				Flavors: []fleetq.FlavorCapacity{{Name: "default", Nodes: 1, Allocatable: resources("cpu", "8"), Used: resources("cpu", "10", "pods", "1")}},
				Nodes:   []fleetq.NodeCapacity{{Name: "cpu-0", Flavors: []string{"default"}, Allocatable: resources("cpu", "8")}},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Report("us-east", Nodes(tc.nodes, tc.pods), tc.flavors, tc.reserved, false)
			if !SameContent(&tc.want, &got) {
				t.Errorf("report (-want +got):\n%s", cmp.Diff(tc.want, got, quantityByValue))
			}
		})
	}
}

// quantityByValue compares quantities as numbers, for readable diffs.
var quantityByValue = cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })

func TestSameContent(t *testing.T) {
	base := Report("c", Nodes([]*corev1.Node{l4Node("l4-0")}, nil), []*kueue.ResourceFlavor{l4Flavor}, nil, false)
	cases := map[string]struct {
		change func(*fleetq.CapacityReportStatus)
		want   bool
	}{
		"revision and time do not count": {change: func(s *fleetq.CapacityReportStatus) {
			s.Revision = 9
			s.UpdateTime = metav1.Now()
		}, want: true},
		"a quantity spelt another way is the same": {change: func(s *fleetq.CapacityReportStatus) {
			s.Nodes[0].Free["memory"] = resource.MustParse("206158430208")
		}, want: true},
		"a free amount":  {change: func(s *fleetq.CapacityReportStatus) { s.Nodes[0].Free[gpu] = resource.MustParse("3") }},
		"fenced":         {change: func(s *fleetq.CapacityReportStatus) { s.Fenced = true }},
		"unmatched node": {change: func(s *fleetq.CapacityReportStatus) { s.UnmatchedNodes = 1 }},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			changed := *base.DeepCopy()
			tc.change(&changed)
			if got := SameContent(&base, &changed); got != tc.want {
				t.Errorf("SameContent = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestReportSize checks that the report of a 1,000-node cluster with real-world resource lists stays
// far below etcd's 1.5 MB request limit.
func TestReportSize(t *testing.T) {
	var nodes []*corev1.Node
	for i := range 1000 {
		nodes = append(nodes, makeNode(fmt.Sprintf("gke-prod-us-east1-a100-pool-7f3c9d2e-%04d", i)).label("gpu", "a100").taint(gpuTaint).
			alloc("cpu", "95690m", "memory", "1342077584Ki", "pods", "110", string(gpu), "8", "ephemeral-storage", "4043214Mi",
				"hugepages-1Gi", "0", "hugepages-2Mi", "0").obj())
	}
	var pods []*corev1.Pod
	for i := range 3000 {
		pods = append(pods, pod(fmt.Sprintf("p%d", i), nodes[i%1000].Name, corev1.PodRunning, "cpu", "1500m", "memory", "7Gi", string(gpu), "1"))
	}
	st := Report("us-east", Nodes(nodes, pods), []*kueue.ResourceFlavor{a100Flavor, flavor("a100-spot", map[string]string{"gpu": "a100"}, tolerateGPU, nil)}, nil, false)
	data, err := json.Marshal(&fleetq.CapacityReport{Status: st})
	if err != nil {
		t.Fatal(err)
	}
	const limit = 512 << 10
	t.Logf("1,000-node report: %d bytes (limit %d)", len(data), limit)
	if len(data) > limit {
		t.Errorf("1,000-node report is %d bytes; keep it under %d", len(data), limit)
	}
}
