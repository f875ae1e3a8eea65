// Package nodefit decides whether a whole workload can be placed on a set of nodes at once (a
// gang: every pod or none), the way dispatch judges a worker's capacity report and the worker
// agent judges its own nodes. It is pure and deterministic: the same nodes and pod sets always
// give the same placement, and a failure comes with a reason that has numbers in it.
//
// Placement is a heuristic, not an exhaustive bin packing: pod sets go largest first, and every
// pod goes to the feasible node it fills most snugly (best fit), which keeps large free blocks
// intact for later pods and later workloads.
package nodefit

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"

	"github.com/fleetq/fleetq/internal/engine"
	"github.com/fleetq/fleetq/internal/engine/affinity"
)

// Node is a node as a capacity report describes it: free amounts in engine canonical units.
type Node struct {
	Name   string
	Labels map[string]string
	Taints []corev1.Taint
	Free   map[corev1.ResourceName]int64
}

// PodSet is a group of identical pods. FlavorLabels are the node labels of the flavors the
// admission assigned (Kueue adds them to the pods' node selector); they are kept apart so a
// failure can say whether the flavor or the pods' own selector ruled the nodes out.
type PodSet struct {
	Name                 string
	Count                int32
	Requests             map[corev1.ResourceName]int64
	NodeSelector         map[string]string
	RequiredNodeAffinity *corev1.NodeSelector
	Tolerations          []corev1.Toleration
	FlavorLabels         map[string]string
}

// NodeCount says how many pods of a pod set go to one node.
type NodeCount struct {
	Node  string
	Count int32
}

// Placement is the pod-to-node assignment of one pod set, nodes in name order.
type Placement struct {
	PodSet string
	Nodes  []NodeCount
}

// Result is the outcome of Fit.
type Result struct {
	Fits bool
	// Placements follow the order of the pod sets given.
	Placements []Placement
	// Reason explains a failure, e.g. `pod set "main": largest node fit 4 of 8 nvidia.com/gpu`.
	Reason string
	// Score rates a successful placement for choosing between clusters: for each requested
	// resource, the largest free amount left on any node divided by the largest before, averaged.
	// 1 means no node's largest free block was cut into; prefer the cluster with the higher score.
	Score float64
}

// Fit places all pods of all pod sets at once, or explains why it cannot.
func Fit(nodes []Node, podSets []PodSet) Result {
	sorted := append([]Node(nil), nodes...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	free := make([]map[corev1.ResourceName]int64, len(sorted))
	for i, n := range sorted {
		free[i] = make(map[corev1.ResourceName]int64, len(n.Free))
		for r, v := range n.Free {
			free[i][r] = v
		}
	}
	eligible := make([][]int, len(podSets))
	for i := range podSets {
		var why string
		eligible[i], why = eligibleNodes(sorted, &podSets[i])
		if len(eligible[i]) == 0 {
			return Result{Reason: fmt.Sprintf("pod set %q: %s", podSets[i].Name, why)}
		}
	}
	scale := largestFree(sorted, podSets)
	order := make([]int, len(podSets))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		return podSize(&podSets[order[a]], scale) > podSize(&podSets[order[b]], scale)
	})
	placed := make([]map[int]int32, len(podSets))
	for _, pi := range order {
		ps := &podSets[pi]
		placed[pi] = map[int]int32{}
		remaining := ps.Count
		for remaining > 0 {
			best, bestLeft, room := -1, 0.0, int32(0)
			for _, ni := range eligible[pi] {
				k := podsThatFit(free[ni], ps.Requests, remaining)
				if k == 0 {
					continue
				}
				left := leftover(free[ni], ps.Requests, scale)
				if best < 0 || left < bestLeft {
					best, bestLeft, room = ni, left, k
				}
			}
			if best < 0 {
				return Result{Reason: shortfall(sorted, eligible[pi], ps, ps.Count-remaining)}
			}
			// Best fit keeps choosing the node it just filled (its leftover only shrinks), so
			// placing as many pods there as fit at once is the same as placing them one by one.
			for r, v := range ps.Requests {
				free[best][r] -= v * int64(room)
			}
			placed[pi][best] += room
			remaining -= room
		}
	}
	res := Result{Fits: true, Score: score(sorted, free, podSets)}
	for pi, ps := range podSets {
		pl := Placement{PodSet: ps.Name}
		idx := make([]int, 0, len(placed[pi]))
		for ni := range placed[pi] {
			idx = append(idx, ni)
		}
		sort.Ints(idx)
		for _, ni := range idx {
			pl.Nodes = append(pl.Nodes, NodeCount{Node: sorted[ni].Name, Count: placed[pi][ni]})
		}
		res.Placements = append(res.Placements, pl)
	}
	return res
}

// eligibleNodes lists the nodes whose labels and taints accept the pod set, or says which rule
// excluded them all.
func eligibleNodes(nodes []Node, ps *PodSet) ([]int, string) {
	var out []int
	flavorOK, selectorOK := 0, 0
	var taint corev1.Taint
	for i := range nodes {
		n := &nodes[i]
		if !affinity.Matches(n.Labels, ps.FlavorLabels, nil, affinity.Node) {
			continue
		}
		flavorOK++
		if !affinity.Matches(n.Labels, ps.NodeSelector, ps.RequiredNodeAffinity, affinity.Node) {
			continue
		}
		selectorOK++
		if t, bad := affinity.UntoleratedTaint(n.Taints, ps.Tolerations); bad {
			taint = t
			continue
		}
		out = append(out, i)
	}
	switch {
	case len(out) > 0:
		return out, ""
	case len(nodes) == 0:
		return nil, "no nodes"
	case flavorOK == 0:
		return nil, "no node matches flavor labels"
	case selectorOK == 0:
		return nil, "no node matches the pods' node selector or affinity"
	default:
		return nil, fmt.Sprintf("every matching node has a taint the pods do not tolerate (%s)", affinity.TaintString(taint))
	}
}

// largestFree is, per requested resource, the largest free amount on any node: the yardstick
// that makes different resources comparable.
func largestFree(nodes []Node, podSets []PodSet) map[corev1.ResourceName]int64 {
	out := map[corev1.ResourceName]int64{}
	for _, ps := range podSets {
		for r := range ps.Requests {
			out[r] = 0
		}
	}
	for _, n := range nodes {
		for r := range out {
			out[r] = max(out[r], n.Free[r])
		}
	}
	return out
}

// podSize is a pod's largest request relative to the largest free block of that resource.
func podSize(ps *PodSet, scale map[corev1.ResourceName]int64) float64 {
	size := 0.0
	for r, v := range ps.Requests {
		if s := scale[r]; s > 0 {
			size = max(size, float64(v)/float64(s))
		}
	}
	return size
}

// podsThatFit is how many pods (up to limit) fit in free.
func podsThatFit(free map[corev1.ResourceName]int64, req map[corev1.ResourceName]int64, limit int32) int32 {
	k := int64(limit)
	for r, v := range req {
		if v <= 0 {
			continue
		}
		k = min(k, free[r]/v)
	}
	return int32(max(0, k))
}

// leftover is what a node keeps free after one more pod, summed over resources on the common scale.
func leftover(free map[corev1.ResourceName]int64, req map[corev1.ResourceName]int64, scale map[corev1.ResourceName]int64) float64 {
	left := 0.0
	for r, v := range req {
		if s := scale[r]; s > 0 {
			left += float64(free[r]-v) / float64(s)
		}
	}
	return left
}

// shortfall explains why the pods of ps could not all be placed, with numbers.
func shortfall(nodes []Node, eligible []int, ps *PodSet, placed int32) string {
	names := make([]corev1.ResourceName, 0, len(ps.Requests))
	for r := range ps.Requests {
		names = append(names, r)
	}
	sort.Slice(names, func(i, j int) bool { return names[i] < names[j] })
	// A single pod that fits on no eligible node even when it is empty.
	for _, r := range names {
		need := ps.Requests[r]
		largest := int64(0)
		for _, ni := range eligible {
			largest = max(largest, nodes[ni].Free[r])
		}
		if largest < need {
			return fmt.Sprintf("pod set %q: largest node fit %s of %s %s", ps.Name,
				engine.FormatAmount(r, largest), engine.FormatAmount(r, need), r)
		}
	}
	return fmt.Sprintf("pod set %q: only %d of %d pods fit at once on %d eligible node(s)", ps.Name, placed, ps.Count, len(eligible))
}

func score(nodes []Node, free []map[corev1.ResourceName]int64, podSets []PodSet) float64 {
	before := largestFree(nodes, podSets)
	sum, n := 0.0, 0
	names := make([]corev1.ResourceName, 0, len(before))
	for r := range before {
		names = append(names, r)
	}
	sort.Slice(names, func(i, j int) bool { return names[i] < names[j] })
	for _, r := range names {
		if before[r] <= 0 {
			continue
		}
		after := int64(0)
		for i := range nodes {
			after = max(after, free[i][r])
		}
		sum += float64(after) / float64(before[r])
		n++
	}
	if n == 0 {
		return 1
	}
	return sum / float64(n)
}
