package main

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// age prints a duration the way kubectl does: 45s, 5m, 3h, 2d.
func age(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < 2*time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < 2*time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	default:
		return fmt.Sprintf("%dd", int(d.Hours()/24))
	}
}

// shown picks the resources worth a column: accelerators (extended resources) when a flavor has
// any, else cpu and memory.
func shown(total corev1.ResourceList) []corev1.ResourceName {
	var ext, basic []corev1.ResourceName
	for r := range total {
		switch {
		case strings.Contains(string(r), "/"):
			ext = append(ext, r)
		case r == corev1.ResourceCPU || r == corev1.ResourceMemory:
			basic = append(basic, r)
		}
	}
	out := ext
	if len(out) == 0 {
		out = basic
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// freeOverTotal prints "12/16 nvidia.com/gpu" for each shown resource.
func freeOverTotal(free, total corev1.ResourceList) string {
	var parts []string
	for _, r := range shown(total) {
		f, t := free[r], total[r]
		parts = append(parts, fmt.Sprintf("%s/%s %s", qty(f), qty(t), r))
	}
	return strings.Join(parts, ", ")
}

func qty(q resource.Quantity) string {
	if q.IsZero() {
		return "0"
	}
	return q.String()
}
