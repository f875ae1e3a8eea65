package capacity

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	fleetq "github.com/fleetq/fleetq/api/fleetq/v1alpha1"
	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/internal/engine"
)

// Report computes a report's content from nodes (as Nodes returns them), the synced flavors and
// the amounts reserved per node for admitted pods that are not bound yet. Revision and UpdateTime
// are left for the publisher, which knows whether the content changed.
func Report(clusterName string, nodes []Node, flavors []*kueue.ResourceFlavor, reserved map[string]Amounts, fenced bool) fleetq.CapacityReportStatus {
	sorted := append([]*kueue.ResourceFlavor(nil), flavors...)
	SortFlavors(sorted)
	type sums struct {
		nodes                                int32
		alloc, used, reserved, free, largest Amounts
	}
	perFlavor := make([]sums, len(sorted))
	for i := range perFlavor {
		perFlavor[i] = sums{alloc: Amounts{}, used: Amounts{}, reserved: Amounts{}, free: Amounts{}, largest: Amounts{}}
	}
	st := fleetq.CapacityReportStatus{ClusterName: clusterName, Fenced: fenced}
	for i := range nodes {
		n := &nodes[i]
		var names []string
		free := n.Free(reserved[n.Name])
		for fi, f := range sorted {
			if !Matches(n, f) {
				continue
			}
			names = append(names, f.Name)
			s := &perFlavor[fi]
			s.nodes++
			s.alloc.Add(n.Allocatable)
			s.used.Add(n.Used)
			s.reserved.Add(reserved[n.Name])
			s.free.Add(free)
			for r, v := range free {
				s.largest[r] = max(s.largest[r], v)
			}
		}
		if len(names) == 0 {
			st.UnmatchedNodes++
			continue
		}
		st.Nodes = append(st.Nodes, fleetq.NodeCapacity{
			Name:          n.Name,
			Flavors:       names,
			Allocatable:   n.Allocatable.List(),
			Free:          free.List(),
			Unschedulable: n.Unschedulable,
		})
	}
	sort.Slice(st.Nodes, func(i, j int) bool { return st.Nodes[i].Name < st.Nodes[j].Name })
	var summary []string
	for fi, f := range sorted {
		s := &perFlavor[fi]
		st.Flavors = append(st.Flavors, fleetq.FlavorCapacity{
			Name:            f.Name,
			Nodes:           s.nodes,
			Allocatable:     s.alloc.List(),
			Used:            s.used.List(),
			Reserved:        s.reserved.List(),
			Free:            s.free.List(),
			LargestNodeFree: s.largest.List(),
		})
		summary = append(summary, summarize(f.Name, s.free, s.alloc))
	}
	st.FlavorCount = int32(len(st.Flavors))
	st.Summary = truncate(strings.Join(summary, ", "), 1024)
	return st
}

// summarize reads "a100-flavor: 24/32 nvidia.com/gpu": the flavor's accelerators (extended
// resources), or its CPUs when it has none.
func summarize(flavor string, free, alloc Amounts) string {
	var names []corev1.ResourceName
	for r := range alloc {
		if extended(r) {
			names = append(names, r)
		}
	}
	if len(names) == 0 {
		names = []corev1.ResourceName{corev1.ResourceCPU}
	}
	sort.Slice(names, func(i, j int) bool { return names[i] < names[j] })
	parts := make([]string, 0, len(names))
	for _, r := range names {
		parts = append(parts, fmt.Sprintf("%s/%s %s", engine.FormatAmount(r, free[r]), engine.FormatAmount(r, alloc[r]), r))
	}
	return flavor + ": " + strings.Join(parts, " ")
}

// extended tells accelerators and other device-plugin resources (nvidia.com/gpu) from the
// resources every node has.
func extended(r corev1.ResourceName) bool {
	switch r {
	case corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods, corev1.ResourceEphemeralStorage, corev1.ResourceStorage:
		return false
	}
	return strings.Contains(string(r), "/") && !strings.HasPrefix(string(r), "kubernetes.io/") && !byteResource(r)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

// SameContent reports whether two reports say the same, ignoring revision and update time, with
// quantities compared by value (a report read back from the API server spells them its own way).
func SameContent(a, b *fleetq.CapacityReportStatus) bool {
	x, y := *a, *b
	x.Revision, y.Revision = 0, 0
	x.UpdateTime = y.UpdateTime
	return equality.Semantic.DeepEqual(x, y)
}
