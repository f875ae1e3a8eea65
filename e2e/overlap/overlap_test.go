package overlap

import (
	"context"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
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
	// A terminating pod still runs: job e, started in west while its east pod terminates, overlaps.
	r.observe("east", pod("e-1", "e", corev1.PodRunning), false)
	term := pod("e-1", "e", corev1.PodRunning)
	term.DeletionTimestamp = &metav1.Time{}
	r.observe("east", term, false)
	r.observe("west", pod("e-2", "e", corev1.PodRunning), false)
	// Job f waits until its terminating east pod is gone: no overlap.
	r.observe("east", pod("f-1", "f", corev1.PodRunning), false)
	termF := pod("f-1", "f", corev1.PodRunning)
	termF.DeletionTimestamp = &metav1.Time{}
	r.observe("east", termF, false)
	r.observe("east", termF, true)
	r.observe("west", pod("f-2", "f", corev1.PodRunning), false)
	r.observe("west", pod("f-2", "f", corev1.PodSucceeded), false)

	got := r.Overlaps()
	if len(got) != 2 || !strings.HasPrefix(got[0], "job ns/b ran in east") || !strings.HasPrefix(got[1], "job ns/e ran in east") {
		t.Fatalf("Overlaps() = %q, want exactly jobs ns/b and ns/e", got)
	}
	if n := r.Terminations(); n != 2 {
		t.Errorf("Terminations() = %d, want 2 (e-1 and f-1)", n)
	}
	if c := r.Succeeded("ns/f"); len(c) != 1 || c["west"] != 1 {
		t.Errorf("Succeeded(ns/f) = %v, want one pod in west", c)
	}
	r.observe("east", pod("b-1", "b", corev1.PodSucceeded), false) // seen again: still one pod
	if c := r.Succeeded("ns/b"); len(c) != 1 || c["east"] != 1 {
		t.Errorf("Succeeded(ns/b) = %v, want one pod in east", c)
	}
	if c := r.Clusters("ns/a"); len(c) != 2 {
		t.Errorf("Clusters(ns/a) = %v, want east and west", c)
	}
	if c := r.Clusters("ns/c"); len(c) != 1 || c[0] != "west" {
		t.Errorf("Clusters(ns/c) = %v, want [west]", c)
	}
}

func TestOverlapsOfOtherKinds(t *testing.T) {
	labelled := func(name string, labels map[string]string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: labels},
			Status:     corev1.PodStatus{Phase: corev1.PodRunning},
		}
	}
	r := New()
	// A PyTorchJob's master in the management cluster while its copy's worker runs in east.
	r.observe("management", labelled("mnist-master-0", map[string]string{"training.kubeflow.org/job-name": "mnist"}), false)
	r.observe("east", labelled("mnist-worker-0", map[string]string{"training.kubeflow.org/job-name": "mnist"}), false)
	// A RayJob's Ray pods in east (fleetq's identity only) and its submitter in west (a batch
	// Job of the RayJob's name, with the same identity).
	r.observe("east", labelled("sample-head-x", map[string]string{uidLabel: "u1", "ray.io/cluster": "sample-abc"}), false)
	r.observe("west", labelled("sample-xyz", map[string]string{uidLabel: "u1", batchv1.JobNameLabel: "sample"}), false)
	// Another job's Ray pods in one cluster only.
	r.observe("east", labelled("other-head-x", map[string]string{uidLabel: "u2"}), false)
	got := strings.Join(r.Overlaps(), "\n")
	for _, want := range []string{"job ns/mnist ran in east", "job ns/sample ran in east"} {
		if !strings.Contains(got, want) {
			t.Errorf("overlaps %q do not say %q", got, want)
		}
	}
	if strings.Contains(got, "u2") || strings.Count(got, "\n") != 1 {
		t.Errorf("overlaps %q: want exactly mnist and sample", got)
	}
	if c := r.Clusters("ns/sample"); strings.Join(c, ",") != "east,west" {
		t.Errorf("Clusters(ns/sample) = %v", c)
	}
	r.Unobservable("east", "ns/sample")
	if got := strings.Join(r.Overlaps(), "\n"); strings.Contains(got, "sample") {
		t.Errorf("after Unobservable(east, ns/sample): %q", got)
	}
}

func TestUnobservableExcusesTheStalePodsNotLaterOnes(t *testing.T) {
	r := New()
	created := func(p *corev1.Pod, at time.Time) *corev1.Pod {
		p.CreationTimestamp = metav1.NewTime(at)
		return p
	}
	before := time.Now().Add(-time.Hour)
	r.observe("west", pod("g-2", "g", corev1.PodRunning), false)
	r.observe("east", created(pod("g-1", "g", corev1.PodRunning), before), false)
	r.Unobservable("east", "ns/g")
	// Seen again after the call (Terminating, or replayed once east is back): still excused.
	stale := created(pod("g-1", "g", corev1.PodRunning), before)
	stale.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	r.observe("east", stale, false)
	r.observe("east", stale, true)
	r.observe("east", created(pod("g-0", "g", corev1.PodRunning), before), false)
	r.observe("east", created(pod("g-0", "g", corev1.PodRunning), before), true)
	if got := r.Overlaps(); len(got) != 0 {
		t.Fatalf("Overlaps() = %q, want none: east's stale pods are excused", got)
	}
	if c := r.Clusters("ns/g"); strings.Join(c, ",") != "west" {
		t.Errorf("Clusters(ns/g) = %v, want [west]", c)
	}
	// A pod created in east after the call is a copy placed there again: it counts.
	r.observe("east", created(pod("g-3", "g", corev1.PodRunning), time.Now().Add(2*time.Second)), false)
	if got := r.Overlaps(); len(got) != 1 || !strings.HasPrefix(got[0], "job ns/g ran in east") {
		t.Fatalf("Overlaps() = %q, want job ns/g in east and west", got)
	}
}

func TestWatchListsAgainWhenItsVersionExpired(t *testing.T) {
	cs := fake.NewClientset(pod("a-1", "a", corev1.PodRunning))
	first := watch.NewFake()
	calls := 0
	cs.PrependWatchReactor("pods", func(k8stesting.Action) (bool, watch.Interface, error) {
		calls++
		return calls == 1, first, nil // later watches go to the fake's tracker
	})
	r := New()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := r.Watch(ctx, "east", cs); err != nil {
		t.Fatal(err)
	}
	// While the watch is down (an API server restarting), a-1 goes and a-2 starts; then the
	// watch's version has expired.
	if err := cs.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("pods"), "ns", "a-1"); err != nil {
		t.Fatal(err)
	}
	if err := cs.Tracker().Add(pod("a-2", "a", corev1.PodRunning)); err != nil {
		t.Fatal(err)
	}
	first.Error(&apierrors.NewResourceExpired("too old resource version").ErrStatus)

	deadline := time.Now().Add(30 * time.Second)
	for {
		r.mu.Lock()
		_, a1 := r.running["east/ns/a-1"]
		_, a2 := r.running["east/ns/a-2"]
		closed := len(r.intervals["ns/a"]["east"])
		r.mu.Unlock()
		if !a1 && a2 && closed == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the expired watch: a-1 running %v (want false, its interval closed: %d), a-2 running %v (want true)", a1, closed, a2)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
