// Package capacity computes what a worker cluster can take: each node's allocatable and free amounts
// (allocatable minus the requests of its non-terminal pods, counted as kube-scheduler counts them),
// which synced ResourceFlavors each node belongs to, and the CapacityReport the agent publishes. It is
// pure: the same nodes, pods and flavors always give the same report, so the agent's controllers and
// the tests share one definition of "free".
package capacity

import (
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/internal/engine"
	"github.com/fleetq/fleetq/internal/engine/affinity"
	"github.com/fleetq/fleetq/internal/podrequest"
)

// Amounts are resource amounts in the engine's canonical units (milli-CPU, bytes, counts), so sums
// and differences are exact int64 arithmetic, and nodefit takes them as they are.
type Amounts map[corev1.ResourceName]int64

// Add adds b into a.
func (a Amounts) Add(b Amounts) {
	for r, v := range b {
		a[r] += v
	}
}

// AddScaled adds n times b into a.
func (a Amounts) AddScaled(b Amounts, n int64) {
	for r, v := range b {
		a[r] += v * n
	}
}

// Sub subtracts b from a; results may go below zero (an over-committed node).
func (a Amounts) Sub(b Amounts) {
	for r, v := range b {
		a[r] -= v
	}
}

// Clone returns a copy of a that callers may change.
func (a Amounts) Clone() Amounts {
	out := make(Amounts, len(a))
	for r, v := range a {
		out[r] = v
	}
	return out
}

// AmountsOf converts a resource list to canonical amounts.
func AmountsOf(rl corev1.ResourceList) Amounts {
	out := make(Amounts, len(rl))
	for r, q := range rl {
		out[r] = engine.Amount(r, q)
	}
	return out
}

// PodRequests is what one pod with this spec takes from its node, in canonical amounts, including
// one of the node's "pods" allocatable, as kube-scheduler counts it.
func PodRequests(spec *corev1.PodSpec) Amounts {
	out := AmountsOf(podrequest.Of(spec))
	out[corev1.ResourcePods]++
	return out
}

// List converts amounts back to a resource list, leaving out zero and negative entries (a missing
// entry reads as zero), in the units a person writes ("96", "500m", "768Gi").
func (a Amounts) List() corev1.ResourceList {
	out := corev1.ResourceList{}
	for r, v := range a {
		if v <= 0 {
			continue
		}
		out[r] = quantity(r, v)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func quantity(r corev1.ResourceName, v int64) resource.Quantity {
	switch {
	case r == corev1.ResourceCPU:
		return *resource.NewMilliQuantity(v, resource.DecimalSI)
	case byteResource(r):
		return *resource.NewQuantity(v, resource.BinarySI)
	}
	return *resource.NewQuantity(v, resource.DecimalSI)
}

func byteResource(r corev1.ResourceName) bool {
	switch r {
	case corev1.ResourceMemory, corev1.ResourceEphemeralStorage, corev1.ResourceStorage:
		return true
	}
	return strings.HasPrefix(string(r), corev1.ResourceHugePagesPrefix)
}

// Node is one node as the agent sees it.
type Node struct {
	Name   string
	Labels map[string]string
	// Taints are the node's taints that say what kind of node it is; condition taints
	// (node.kubernetes.io/..., which make a node Unschedulable) are left out, so a cordoned or
	// not-ready node keeps its flavor.
	Taints      []corev1.Taint
	Allocatable Amounts
	// Used sums the requests of the non-terminal pods bound to the node.
	Used Amounts
	// Unschedulable is set for a cordoned node or one with a NoSchedule/NoExecute condition taint:
	// nothing new goes there, whatever it has free.
	Unschedulable bool
}

// Free is what the node has left after its pods and the given reservation, never below zero;
// nothing for an unschedulable node.
func (n *Node) Free(reserved Amounts) Amounts {
	out := Amounts{}
	if n.Unschedulable {
		return out
	}
	for r, v := range n.Allocatable {
		if left := v - n.Used[r] - reserved[r]; left > 0 {
			out[r] = left
		}
	}
	return out
}

// conditionTaintPrefixes are the taint keys Kubernetes sets for a node's state (not-ready,
// unreachable, cordoned, pressure, uninitialized) rather than its kind.
var conditionTaintPrefixes = []string{"node.kubernetes.io/", "node.cloudprovider.kubernetes.io/"}

func conditionTaint(t *corev1.Taint) bool {
	for _, p := range conditionTaintPrefixes {
		if strings.HasPrefix(t.Key, p) {
			return true
		}
	}
	return false
}

// NewNode reads a Node object, with no pods yet.
func NewNode(n *corev1.Node) Node {
	out := Node{
		Name:          n.Name,
		Labels:        n.Labels,
		Allocatable:   AmountsOf(n.Status.Allocatable),
		Used:          Amounts{},
		Unschedulable: n.Spec.Unschedulable,
	}
	for i := range n.Spec.Taints {
		t := &n.Spec.Taints[i]
		if !conditionTaint(t) {
			out.Taints = append(out.Taints, *t)
			continue
		}
		if t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute {
			out.Unschedulable = true
		}
	}
	return out
}

// Terminal reports whether a pod has finished and so holds nothing on its node.
func Terminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// Nodes reads nodes and charges each with the requests of its non-terminal pods; unbound pods and
// pods on unknown nodes are ignored. The result is sorted by name.
func Nodes(nodes []*corev1.Node, pods []*corev1.Pod) []Node {
	out := make([]Node, 0, len(nodes))
	for _, n := range nodes {
		out = append(out, NewNode(n))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	idx := make(map[string]int, len(out))
	for i := range out {
		idx[out[i].Name] = i
	}
	for _, p := range pods {
		i, ok := idx[p.Spec.NodeName]
		if !ok || Terminal(p) {
			continue
		}
		out[i].Used.Add(PodRequests(&p.Spec))
	}
	return out
}

// Matches reports whether a node belongs to a flavor: it has all of the flavor's nodeLabels, and
// each of its NoSchedule and NoExecute taints is tolerated by the flavor's tolerations or is one of
// the flavor's nodeTaints (which name the taints the flavor's nodes carry).
func Matches(n *Node, f *kueue.ResourceFlavor) bool {
	if !affinity.Matches(n.Labels, f.Spec.NodeLabels, nil, affinity.Node) {
		return false
	}
	_, untolerated := affinity.UntoleratedTaint(n.Taints, f.Spec.Tolerations, taintsAsTolerations(f.Spec.NodeTaints))
	return !untolerated
}

func taintsAsTolerations(taints []corev1.Taint) []corev1.Toleration {
	out := make([]corev1.Toleration, 0, len(taints))
	for _, t := range taints {
		out = append(out, corev1.Toleration{Key: t.Key, Operator: corev1.TolerationOpEqual, Value: t.Value, Effect: t.Effect})
	}
	return out
}

// FlavorsOf lists, in name order, the flavors a node matches; flavors must be sorted by name.
func FlavorsOf(n *Node, flavors []*kueue.ResourceFlavor) []string {
	var out []string
	for _, f := range flavors {
		if Matches(n, f) {
			out = append(out, f.Name)
		}
	}
	return out
}

// SortFlavors sorts flavors by name, the order reports and matching use.
func SortFlavors(flavors []*kueue.ResourceFlavor) {
	sort.Slice(flavors, func(i, j int) bool { return flavors[i].Name < flavors[j].Name })
}
