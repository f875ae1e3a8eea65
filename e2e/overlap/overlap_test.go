package overlap

import (
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func pod(name, job string, phase corev1.PodPhase) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{batchv1.JobNameLabel: job}},
		Status:     corev1.PodStatus{Phase: phase},
	}
}

func TestOverlaps(t *testing.T) {
	r := New()
	// Job a runs in east, stops, then runs in west: no overlap.
	r.observe("east", pod("a-1", "a", corev1.PodRunning), false)
	r.observe("east", pod("a-1", "a", corev1.PodRunning), true)
	r.observe("west", pod("a-2", "a", corev1.PodRunning), false)
	// Job b runs in east and, before east's pod stops, in west: overlap.
	r.observe("east", pod("b-1", "b", corev1.PodRunning), false)
	r.observe("west", pod("b-2", "b", corev1.PodRunning), false)
	r.observe("east", pod("b-1", "b", corev1.PodSucceeded), false)
	// Pods without a job are ignored; a pending pod never counts.
	r.observe("east", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "x"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}, false)
	r.observe("east", pod("c-1", "c", corev1.PodPending), false)
	r.observe("west", pod("c-2", "c", corev1.PodRunning), false)

	// Job d overlaps too, but its east record is declared unobservable (east's API server died).
	r.observe("east", pod("d-1", "d", corev1.PodRunning), false)
	r.observe("west", pod("d-2", "d", corev1.PodRunning), false)
	r.Unobservable("east", "ns/d")
	// A terminating pod no longer runs: job e moves without overlap.
	r.observe("east", pod("e-1", "e", corev1.PodRunning), false)
	term := pod("e-1", "e", corev1.PodRunning)
	term.DeletionTimestamp = &metav1.Time{}
	r.observe("east", term, false)
	r.observe("west", pod("e-2", "e", corev1.PodRunning), false)

	got := r.Overlaps()
	if len(got) != 1 || !strings.HasPrefix(got[0], "job ns/b ran in east") {
		t.Fatalf("Overlaps() = %q, want exactly job ns/b", got)
	}
	if c := r.Clusters("ns/a"); len(c) != 2 {
		t.Errorf("Clusters(ns/a) = %v, want east and west", c)
	}
	if c := r.Clusters("ns/c"); len(c) != 1 || c[0] != "west" {
		t.Errorf("Clusters(ns/c) = %v, want [west]", c)
	}
}
