package local

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/fleetq/fleetq/e2e/lab"
)

// An API-server-only cluster's nodes carry the not-ready taint the API server's admission gives
// every new node; marking them Ready lifts it and keeps the pool's own taints.
func TestMarkNodesReadyLiftsTheNotReadyTaint(t *testing.T) {
	spec := lab.ClusterSpec{Name: "us-east", Region: "us-east", NodePools: []lab.NodePool{lab.A100Pool()}}
	spec.NodePools[0].Count = 2
	cs := fake.NewClientset()
	ctx := context.Background()
	for _, n := range lab.Nodes(spec) {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule})
		if _, err := cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := markNodesReady(ctx, cs, spec); err != nil {
		t.Fatal(err)
	}
	for _, want := range lab.Nodes(spec) {
		got, err := cs.CoreV1().Nodes().Get(ctx, want.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Status.Conditions) != 1 || got.Status.Conditions[0].Type != corev1.NodeReady || got.Status.Conditions[0].Status != corev1.ConditionTrue {
			t.Errorf("node %s conditions %v, want Ready", got.Name, got.Status.Conditions)
		}
		for _, taint := range got.Spec.Taints {
			if taint.Key == corev1.TaintNodeNotReady {
				t.Errorf("node %s keeps the not-ready taint", got.Name)
			}
		}
		if len(got.Spec.Taints) != len(want.Spec.Taints) {
			t.Errorf("node %s taints %v, want the pool's own %v", got.Name, got.Spec.Taints, want.Spec.Taints)
		}
	}
}
