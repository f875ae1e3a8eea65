/*
Copyright 2026 The fleetq Authors.

Licensed under the Apache License, Version 2.0.
*/

package crd_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
)

// TestTutorialManifestsAreAccepted applies every ResourceFlavor, ClusterQueue and LocalQueue of the
// Kueue GPU quota tutorial (e2e/testdata/tutorial, re-indented, text otherwise unchanged) with server-side
// apply, like `kubectl apply --server-side`, then the tutorial's merge patch of inference-cq.
func TestTutorialManifestsAreAccepted(t *testing.T) {
	for _, ns := range []string{"research", "inference"} {
		if err := k8sClient.Create(ctx(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatalf("create namespace %q: %v", ns, err)
		}
	}
	for _, file := range []string{"flavor.yaml", "queues.yaml", "localqueues.yaml", "gpu.yaml"} {
		raw, err := os.ReadFile(filepath.Join("..", "..", "e2e", "testdata", "tutorial", file))
		if err != nil {
			t.Fatal(err)
		}
		for _, obj := range decodeManifests(t, raw) {
			if err := k8sClient.Patch(ctx(t), obj, client.Apply, client.FieldOwner("tutorial"), client.ForceOwnership, strict); err != nil {
				t.Errorf("%s: apply %s %q: %v", file, obj.GetKind(), obj.GetName(), err)
			}
		}
	}

	patch, err := os.ReadFile(filepath.Join("..", "..", "e2e", "testdata", "tutorial", "inference-preemption-patch.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cq := decodeManifests(t, []byte("apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata:\n  name: inference-cq\n"))[0]
	if err := k8sClient.Patch(ctx(t), cq, client.RawPatch(types.MergePatchType, yamlToJSON(t, patch)), strict); err != nil {
		t.Errorf("kubectl patch clusterqueue inference-cq --type=merge: %v", err)
	}

	// Read the queues back through the Go types: the alias gives the cohort, defaults are applied.
	type queue struct {
		Cohort   string
		Strategy kueue.QueueingStrategy
		Reclaim  kueue.PreemptionPolicy
		Within   kueue.PreemptionPolicy
		Borrow   kueue.BorrowWithinCohortPolicy
	}
	got := map[string]queue{}
	for _, name := range []string{"research-cq", "inference-cq", "research-gpu-cq"} {
		var cq kueue.ClusterQueue
		if err := k8sClient.Get(ctx(t), client.ObjectKey{Name: name}, &cq); err != nil {
			t.Fatalf("get clusterqueue %q: %v", name, err)
		}
		got[name] = queue{
			Cohort:   cq.Spec.EffectiveCohort(),
			Strategy: cq.Spec.QueueingStrategy,
			Reclaim:  cq.Spec.Preemption.ReclaimWithinCohort,
			Within:   cq.Spec.Preemption.WithinClusterQueue,
			Borrow:   cq.Spec.Preemption.BorrowWithinCohort.Policy,
		}
	}
	want := map[string]queue{
		"research-cq":     {Cohort: "ai-platform", Strategy: kueue.BestEffortFIFO, Reclaim: kueue.PreemptionPolicyNever, Within: kueue.PreemptionPolicyNever, Borrow: kueue.BorrowWithinCohortPolicyNever},
		"inference-cq":    {Cohort: "ai-platform", Strategy: kueue.BestEffortFIFO, Reclaim: kueue.PreemptionPolicyAny, Within: kueue.PreemptionPolicyLowerPriority, Borrow: kueue.BorrowWithinCohortPolicyNever},
		"research-gpu-cq": {Cohort: "ai-platform", Strategy: kueue.BestEffortFIFO, Reclaim: kueue.PreemptionPolicyNever, Within: kueue.PreemptionPolicyNever, Borrow: kueue.BorrowWithinCohortPolicyNever},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stored tutorial ClusterQueues (-want +got):\n%s", diff)
	}
}
