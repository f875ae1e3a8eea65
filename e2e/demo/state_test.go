package demo

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/internal/integration/batchjob"
)

func TestPhaseOf(t *testing.T) {
	spec := JobSpec{Team: Research, Name: "train-1", Pods: 1, GPUs: 4, GPU: A100, RunFor: time.Minute}
	now := at(time.Minute)
	cases := map[string]struct {
		setup      func(w *world)
		noWorkload bool
		want       Phase
		wantDetail string
	}{
		"no workload yet": {noWorkload: true, want: PhaseSubmitted, wantDetail: "waiting for its Workload"},
		"workload without conditions": {
			setup: func(*world) {}, want: PhasePending, wantDetail: "waiting for the scheduler",
		},
		"pending for quota": {
			setup:      func(w *world) { w.pending(spec.Key(), "Pending", "insufficient quota") },
			want:       PhasePending,
			wantDetail: "insufficient quota",
		},
		"quota reserved, worker not started it yet": {
			setup: func(w *world) {
				w.running(spec.Key(), "us-east", false)
				wl := w.wls[spec.Key()]
				setConds(wl, cond(kueue.WorkloadAdmitted, metav1.ConditionFalse, "Pending", ""))
				wl.Status.AdmissionChecks = []kueue.AdmissionCheckState{{Name: "dispatch", State: kueue.CheckStatePending, Message: "Dispatching to worker us-east"}}
			},
			want:       PhaseDispatching,
			wantDetail: "Dispatching to worker us-east",
		},
		"admitted, no pod mirrored yet": {
			setup: func(w *world) {
				w.running(spec.Key(), "us-east", false)
				w.jobs[spec.Key()].Status.Active = 0
			},
			want: PhaseAdmitted,
		},
		"running": {
			setup: func(w *world) { w.running(spec.Key(), "us-east", false) },
			want:  PhaseRunning,
		},
		"preempted, pods stopping": {
			setup: func(w *world) {
				w.running(spec.Key(), "us-east", true)
				w.preempt(spec.Key(), "inference/job-serve-1-abcde")
			},
			want:       PhasePreempted,
			wantDetail: "Preempted to accommodate workload inference/job-serve-1-abcde: preempted so clusterqueue inference-gpu-cq can reclaim its nominal quota for workload inference/job-serve-1-abcde (priority 0); clusterqueue research-gpu-cq was borrowing in cohort ai-platform",
		},
		"requeued, in backoff": {
			setup: func(w *world) {
				w.running(spec.Key(), "us-east", true)
				w.preempt(spec.Key(), "inference/job-serve-1-abcde")
				w.requeue(spec.Key(), now.Add(3*time.Second))
			},
			want:       PhaseBackoff,
			wantDetail: "back in the queue in 3s (requeue backoff)",
		},
		"requeued, backoff over": {
			setup: func(w *world) {
				w.running(spec.Key(), "us-east", true)
				w.preempt(spec.Key(), "inference/job-serve-1-abcde")
				w.requeue(spec.Key(), now.Add(-time.Second))
				w.pending(spec.Key(), "Pending", "insufficient quota")
			},
			want:       PhasePending,
			wantDetail: "insufficient quota",
		},
		"evicted for another reason": {
			setup: func(w *world) {
				w.running(spec.Key(), "us-east", false)
				setConds(w.wls[spec.Key()], cond(kueue.WorkloadEvicted, metav1.ConditionTrue, kueue.WorkloadEvictedByAdmissionCheck, "worker us-east lost"))
			},
			want:       PhaseEvicted,
			wantDetail: "worker us-east lost",
		},
		"finished": {
			setup: func(w *world) { w.running(spec.Key(), "us-east", false); w.finish(spec.Key()) },
			want:  PhaseFinished,
		},
		"failed": {
			setup: func(w *world) {
				w.running(spec.Key(), "us-east", false)
				w.jobs[spec.Key()].Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Message: "BackoffLimitExceeded"}}
			},
			want:       PhaseFailed,
			wantDetail: "BackoffLimitExceeded",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := newWorld()
			w.submit(spec)
			var wl *kueue.Workload
			if !tc.noWorkload {
				tc.setup(w)
				wl = w.wls[spec.Key()]
			}
			job := w.jobs[spec.Key()]
			phase, detail := phaseOf(&jobObject{uid: job.UID, status: batchjob.Adapter{}.Status(job)}, wl, now)
			if phase != tc.want || detail != tc.wantDetail {
				t.Errorf("phaseOf = %s %q, want %s %q", phase, detail, tc.want, tc.wantDetail)
			}
		})
	}
}

func eventKinds(events []Event) []EventKind {
	var out []EventKind
	for _, e := range events {
		out = append(out, e.Kind)
	}
	return out
}

func TestObserveFollowsTheStory(t *testing.T) {
	s := midStory()
	if got := s.PeakBorrowed(Research, "a100-flavor"); got != 8 {
		t.Errorf("PeakBorrowed = %d, want 8", got)
	}
	if got := s.Borrowed(Research, "a100-flavor"); got != 4 {
		t.Errorf("Borrowed now = %d, want 4", got)
	}
	if got := s.Preemptions(); got != 1 {
		t.Errorf("Preemptions = %d, want 1", got)
	}
	if got := s.RanOn("eu-west", L4); got != 1 {
		t.Errorf("RanOn(eu-west, L4) = %d, want 1", got)
	}
	if j := s.Explained(); j == nil || j.Spec.Name != "eval-6xl4" {
		t.Errorf("Explained = %v, want research/eval-6xl4", j)
	}
	j := s.Job("research/train-6")
	if diff := cmp.Diff([]string{"us-east"}, j.Ran); diff != "" {
		t.Errorf("train-6 runs (-want +got):\n%s", diff)
	}
	if j.Phase != PhaseBackoff || j.Preemptions != 1 || j.Borrowing {
		t.Errorf("train-6: phase %s, %d preemptions, borrowing %v; want requeued, 1, false", j.Phase, j.Preemptions, j.Borrowing)
	}
	wantKinds := []EventKind{
		EventRunning, EventRunning, EventRunning, EventRunning, EventRunning, EventRunning, EventExplained, EventMilestone, EventMilestone,
		EventStep,
		EventPreempted, EventRunning, EventRunning, EventRunning, EventMilestone, EventMilestone,
		EventRequeued, EventRunning,
	}
	if diff := cmp.Diff(wantKinds, eventKinds(s.Events)); diff != "" {
		t.Errorf("event kinds (-want +got):\n%s", diff)
	}
	reached := map[string]bool{}
	for _, m := range s.Milestones {
		reached[m.Title] = m.Reached
	}
	if diff := cmp.Diff(map[string]bool{
		"research fills its A100 quota and borrows inference's idle A100s":                             true,
		"a job too big for any node stays pending, explained per cluster":                              true,
		"inference reclaims its share: research jobs are preempted to pay back what research borrowed": true,
		"L4 jobs run in eu-west":                    true,
		"preempted jobs are requeued and run again": false,
		"every job that fits has finished":          false,
	}, reached); diff != "" {
		t.Errorf("milestones (-want +got):\n%s", diff)
	}
	if s.AllDone() {
		t.Error("AllDone with jobs still running")
	}
}

func TestObserveCountsAPreemptionItMissed(t *testing.T) {
	spec := JobSpec{Team: Research, Name: "train-1", Pods: 1, GPUs: 4, GPU: A100}
	s := NewState(Scenario{Steps: []Step{{Jobs: []JobSpec{spec}}}}, t0)
	w := newWorld()
	w.submit(spec)
	s.Track(spec, t0)
	w.running(spec.Key(), "us-east", true)
	s.Observe(w.snapshot(), at(time.Second))
	// Evicted, stopped and requeued between two looks: never seen in the preempted phase.
	w.preempt(spec.Key(), "inference/job-serve-1-abcde")
	w.requeue(spec.Key(), at(time.Hour))
	events := s.Observe(w.snapshot(), at(2*time.Second))
	if diff := cmp.Diff([]EventKind{EventPreempted, EventRequeued}, eventKinds(events)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if got := s.Job(spec.Key()).Preemptions; got != 1 {
		t.Errorf("Preemptions = %d, want 1", got)
	}
	// Admitted again: a second run, and the same preemption is not counted twice.
	w.running(spec.Key(), "us-east", false)
	s.Observe(w.snapshot(), at(3*time.Second))
	w.finish(spec.Key())
	s.Observe(w.snapshot(), at(4*time.Second))
	j := s.Job(spec.Key())
	if j.Preemptions != 1 || len(j.Ran) != 2 || j.Phase != PhaseFinished {
		t.Errorf("after the re-run: %d preemptions, runs %v, phase %s; want 1, two runs, finished", j.Preemptions, j.Ran, j.Phase)
	}
	if !s.AllDone() || s.RequeuedAndFinished() != 1 {
		t.Errorf("AllDone %v, RequeuedAndFinished %d; want true, 1", s.AllDone(), s.RequeuedAndFinished())
	}
}

func TestObserveIgnoresAnEarlierRunsWorkload(t *testing.T) {
	spec := JobSpec{Team: Research, Name: "train-1", Pods: 1, GPUs: 4, GPU: A100}
	s := NewState(Scenario{Steps: []Step{{Jobs: []JobSpec{spec}}}}, t0)
	w := newWorld()
	w.submit(spec)
	w.running(spec.Key(), "us-east", false)
	w.finish(spec.Key())
	// The Job was deleted and created again: same name, new UID; the old workload lingers.
	w.jobs[spec.Key()] = NewJob(spec)
	w.jobs[spec.Key()].UID = "uid-new"
	s.Track(spec, t0)
	s.Observe(w.snapshot(), at(time.Second))
	if got := s.Job(spec.Key()).Phase; got != PhaseSubmitted {
		t.Errorf("phase = %s, want %s: the finished workload belongs to the earlier Job", got, PhaseSubmitted)
	}
}

func TestObserveWorkers(t *testing.T) {
	s := NewState(Scenario{}, t0)
	w := newWorld()
	w.mkcs = []kueue.MultiKueueCluster{worker("us-east", true, ""), worker("eu-west", true, "")}
	s.Observe(w.snapshot(), at(time.Second))
	w.mkcs[0] = worker("us-east", false, "connection refused")
	events := s.Observe(w.snapshot(), at(2*time.Second))
	want := []Event{{At: 2 * time.Second, Kind: EventWorker, Text: "worker us-east disconnected: connection refused"}}
	if diff := cmp.Diff(want, events); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]WorkerView{{Name: "eu-west", Active: true}, {Name: "us-east", Message: "connection refused"}}, s.Workers); diff != "" {
		t.Errorf("workers (-want +got):\n%s", diff)
	}
}

func TestSummarize(t *testing.T) {
	s := midStory()
	// Play the rest: every job ends, train-6 after a second run; the ClusterQueues drain.
	w := newWorld()
	for _, j := range s.Jobs {
		w.submit(j.Spec)
	}
	w.mkcs = []kueue.MultiKueueCluster{worker("us-east", true, ""), worker("eu-west", true, "")}
	w.cqs = []kueue.ClusterQueue{queue(Research, 0, 0, 0, 1, 0), queue(Inference, 0, 0, 0, 0, 0)}
	for _, j := range s.Jobs {
		if j.Spec.Stuck {
			w.pending(j.Spec.Key(), "NoPlacement", tooBigMessage)
			continue
		}
		cluster := "us-east"
		if j.Spec.GPU == L4 {
			cluster = "eu-west"
		}
		w.running(j.Spec.Key(), cluster, false)
		if j.Spec.Name == "train-6" {
			w.wls[j.Spec.Key()].Status.RequeueState = &kueue.RequeueState{Count: ptr.To[int32](1)}
		}
	}
	s.Observe(w.snapshot(), at(40*time.Second))
	for _, j := range s.Jobs {
		if !j.Spec.Stuck {
			w.finish(j.Spec.Key())
		}
	}
	s.Observe(w.snapshot(), at(90*time.Second))
	if !s.AllDone() || !s.QueuesSettled() {
		t.Fatalf("AllDone %v, QueuesSettled %v; want both", s.AllDone(), s.QueuesSettled())
	}
	sum := Summarize(s)
	if sum.Total != 13 || sum.Finished != 13 || sum.Preemptions != 1 || len(sum.Stuck) != 1 || sum.Elapsed != 90*time.Second {
		t.Errorf("summary: %d/%d finished, %d preemptions, %d stuck, elapsed %s", sum.Finished, sum.Total, sum.Preemptions, len(sum.Stuck), sum.Elapsed)
	}
	golden(t, "summary.golden", joinLines(sum.Lines()))
}

func joinLines(lines []string) string {
	out := ""
	for _, l := range lines {
		out += l + "\n"
	}
	return out
}

func TestShortReason(t *testing.T) {
	cases := map[string]string{
		`no worker has room: us-east: pod set "main": no node matches flavor labels; eu-west: pod set "main": largest node fit 4 of 6 nvidia.com/gpu`: "us-east: no such GPUs; eu-west: largest node fit 4 of 6 nvidia.com/gpu",
		"insufficient quota for nvidia.com/gpu in flavor a100-flavor: requests 4, available 0 (nominal 16, used 24, borrowingLimit 8 reached)":        "A100 quota: requests 4, available 0 (nominal 16, used 24, borrowingLimit 8 reached)",
		"insufficient quota for cpu in flavor a100-flavor: requests 200":                                                                              "insufficient quota for cpu in flavor a100-flavor: requests 200",
		"waiting for the scheduler": "waiting for the scheduler",
	}
	for in, want := range cases {
		if got := ShortReason(in); got != want {
			t.Errorf("ShortReason(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestObserveOtherKinds: a PyTorchJob and a RayJob are followed through their workloads and
// their kinds' status, as Jobs are.
func TestObserveOtherKinds(t *testing.T) {
	sc := Smoke(SmokeTimings)
	ops := sc.Steps[len(sc.Steps)-1].Jobs
	s := NewState(Scenario{Steps: []Step{{Jobs: ops}}, Milestones: sc.Milestones}, t0)
	var snap Snapshot
	for _, spec := range ops {
		s.Track(spec, t0)
		u := NewObject(spec).(*unstructured.Unstructured)
		u.SetUID(types.UID("uid-" + spec.Name))
		snap.Kinds = append(snap.Kinds, *u)
		wl := kueue.Workload{ObjectMeta: metav1.ObjectMeta{
			Namespace: spec.Team, Name: strings.ToLower(spec.Kind) + "-" + spec.Name + "-abcde",
			OwnerReferences: []metav1.OwnerReference{{Kind: spec.Kind, Name: spec.Name, UID: u.GetUID(), Controller: ptr.To(true)}},
		}}
		setConds(&wl, cond(kueue.WorkloadQuotaReserved, metav1.ConditionTrue, "QuotaReserved", "Quota reserved in ClusterQueue research-gpu-cq, placed on worker us-east"),
			cond(kueue.WorkloadAdmitted, metav1.ConditionTrue, "Admitted", ""))
		wl.Status.ClusterName = ptr.To("us-east")
		snap.Workloads = append(snap.Workloads, wl)
	}
	// Both mirrored as running: the PyTorchJob's replicas active, the RayJob Running.
	_ = unstructured.SetNestedField(snap.Kinds[0].Object, map[string]any{"Master": map[string]any{"active": int64(1)}}, "status", "replicaStatuses")
	_ = unstructured.SetNestedField(snap.Kinds[1].Object, "Running", "status", "jobDeploymentStatus")
	s.Observe(snap, at(time.Second))
	for _, j := range s.Jobs {
		if j.Phase != PhaseRunning || j.Cluster != "us-east" {
			t.Errorf("%s: phase %s on %q, want running on us-east", j.Spec.Key(), j.Phase, j.Cluster)
		}
	}
	if s.FinishedKind(KindPyTorchJob) != 0 {
		t.Errorf("a running PyTorchJob counts as finished")
	}
	_ = unstructured.SetNestedSlice(snap.Kinds[0].Object, []any{map[string]any{"type": "Succeeded", "status": "True"}}, "status", "conditions")
	_ = unstructured.SetNestedField(snap.Kinds[1].Object, "Complete", "status", "jobDeploymentStatus")
	_ = unstructured.SetNestedField(snap.Kinds[1].Object, "SUCCEEDED", "status", "jobStatus")
	s.Observe(snap, at(2*time.Second))
	if s.FinishedKind(KindPyTorchJob) != 1 || s.FinishedKind(KindRayJob) != 1 {
		t.Errorf("finished: %d PyTorchJobs, %d RayJobs; want 1 and 1", s.FinishedKind(KindPyTorchJob), s.FinishedKind(KindRayJob))
	}
	reached := false
	for _, m := range s.Milestones {
		if strings.Contains(m.Title, "PyTorchJob and a RayJob") {
			reached = m.Reached
		}
	}
	if !reached {
		t.Errorf("the operators' milestone is not reached: %+v", s.Milestones)
	}
}

func TestWithoutKinds(t *testing.T) {
	sc := Default(DefaultTimings)
	if len(sc.Steps) != 3 {
		t.Fatalf("the default story has %d steps, want 3 (research, inference, the operators' jobs)", len(sc.Steps))
	}
	got, dropped := sc.WithoutKinds(map[string]bool{KindRayJob: true})
	if diff := cmp.Diff([]string{KindRayJob}, dropped); diff != "" {
		t.Errorf("dropped (-want +got):\n%s", diff)
	}
	if last := got.Steps[len(got.Steps)-1].Jobs; len(last) != 1 || last[0].Kind != KindPyTorchJob {
		t.Errorf("the last step keeps %+v, want the PyTorchJob only", last)
	}
	for _, m := range got.Milestones {
		if slices.Contains(m.Kinds, KindRayJob) {
			t.Errorf("milestone %q about RayJobs kept", m.Title)
		}
	}
	all, _ := sc.WithoutKinds(map[string]bool{KindRayJob: true, KindPyTorchJob: true})
	if len(all.Steps) != 2 || len(all.Milestones) != len(sc.Milestones)-1 {
		t.Errorf("without both kinds: %d steps, %d milestones", len(all.Steps), len(all.Milestones))
	}
	if same, dropped := sc.WithoutKinds(map[string]bool{}); len(dropped) != 0 || len(same.Steps) != 3 {
		t.Errorf("nothing missing changed the story")
	}
}

func TestNewObject(t *testing.T) {
	pt := NewObject(JobSpec{Team: Research, Name: "finetune", Kind: KindPyTorchJob, Pods: 3, GPUs: 4, GPU: A100, RunFor: time.Minute}).(*unstructured.Unstructured)
	if pt.GetLabels()[PartOfLabel] != PartOfValue || pt.GetLabels()[kueue.QueueNameLabel] != LocalQueue {
		t.Errorf("labels %v", pt.GetLabels())
	}
	// A count is int64 when built in Go, float64 when read from YAML: compare its text.
	replicas, _, _ := unstructured.NestedFieldNoCopy(pt.Object, "spec", "pytorchReplicaSpecs", "Worker", "replicas")
	workers := fmt.Sprint(replicas)
	sel, _, _ := unstructured.NestedStringMap(pt.Object, "spec", "pytorchReplicaSpecs", "Master", "template", "spec", "nodeSelector")
	if workers != "2" || sel["nvidia.com/gpu.product"] != A100 {
		t.Errorf("PyTorchJob of 3 GPU pods: %v workers (want 2), master selector %v", workers, sel)
	}
	if _, ok := NewObject(JobSpec{Team: Research, Name: "train-1", Pods: 1, GPUs: 4, GPU: A100, RunFor: time.Minute}).(*batchv1.Job); !ok {
		t.Errorf("a spec without a kind is not a batch/v1 Job")
	}
}
