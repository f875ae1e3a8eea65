package jobs

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

// TestPodEnded: only a pod's deletion or its end wakes the jobs waiting for their pods.
func TestPodEnded(t *testing.T) {
	pod := func(phase corev1.PodPhase) *corev1.Pod { return &corev1.Pod{Status: corev1.PodStatus{Phase: phase}} }
	cases := map[string]struct {
		got, want bool
	}{
		"created":          {podEnded.Create(event.CreateEvent{Object: pod(corev1.PodPending)}), false},
		"deleted":          {podEnded.Delete(event.DeleteEvent{Object: pod(corev1.PodRunning)}), true},
		"started":          {podEnded.Update(event.UpdateEvent{ObjectOld: pod(corev1.PodPending), ObjectNew: pod(corev1.PodRunning)}), false},
		"succeeded":        {podEnded.Update(event.UpdateEvent{ObjectOld: pod(corev1.PodRunning), ObjectNew: pod(corev1.PodSucceeded)}), true},
		"failed":           {podEnded.Update(event.UpdateEvent{ObjectOld: pod(corev1.PodRunning), ObjectNew: pod(corev1.PodFailed)}), true},
		"updated, ended":   {podEnded.Update(event.UpdateEvent{ObjectOld: pod(corev1.PodSucceeded), ObjectNew: pod(corev1.PodSucceeded)}), false},
		"updated, running": {podEnded.Update(event.UpdateEvent{ObjectOld: pod(corev1.PodRunning), ObjectNew: pod(corev1.PodRunning)}), false},
	}
	for name, tc := range cases {
		if tc.got != tc.want {
			t.Errorf("%s: passes %v, want %v", name, tc.got, tc.want)
		}
	}
}
