package capacity

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
)

// BenchmarkReport measures reading 1,000 nodes and 10,000 pods into a report with two flavors, the
// work of one report recomputation on a large worker.
func BenchmarkReport(b *testing.B) {
	var nodes []*corev1.Node
	for i := range 1000 {
		nodes = append(nodes, a100Node(fmt.Sprintf("node-%04d", i)))
	}
	var pods []*corev1.Pod
	for i := range 10000 {
		pods = append(pods, pod(fmt.Sprintf("p%d", i), nodes[i%1000].Name, corev1.PodRunning, "cpu", "1", "memory", "4Gi"))
	}
	flavors := []*kueue.ResourceFlavor{a100Flavor, l4Flavor}
	b.ReportAllocs()
	for b.Loop() {
		Report("us-east", Nodes(nodes, pods), flavors, nil, false)
	}
}
