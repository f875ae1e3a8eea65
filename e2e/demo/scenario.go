package demo

import (
	"fmt"
	"slices"
	"time"
)

// Names the demo's manifests and jobs use.
const (
	// Research and Inference are the tutorial's two teams: a namespace and a ClusterQueue each.
	Research  = "research"
	Inference = "inference"
	// LocalQueue is the queue-name every job carries, the same in both namespaces.
	LocalQueue = "team-queue"
	// PartOfLabel marks the demo's jobs, so a second run removes the first run's.
	PartOfLabel = "app.kubernetes.io/part-of"
	PartOfValue = "fleetq-demo"
	// A100 and L4 are the GPU models jobs ask for (the flavors' node label values).
	A100 = "NVIDIA-A100-SXM4-80GB"
	L4   = "NVIDIA-L4"
)

// ClusterQueueOf names a team's ClusterQueue.
func ClusterQueueOf(team string) string { return team + "-gpu-cq" }

// Kinds of jobs the story submits besides batch/v1 Jobs.
const (
	// KindJob is a batch/v1 Job (JobSpec.Kind "").
	KindJob = ""
	// KindPyTorchJob is a Kubeflow PyTorchJob: a master and Pods-1 workers, all with GPUs.
	KindPyTorchJob = "PyTorchJob"
	// KindRayJob is a KubeRay RayJob: Pods GPU workers, a CPU head and the submitter, which
	// runs RunFor.
	KindRayJob = "RayJob"
)

// JobSpec is one job a team submits: Pods pods of GPUs GPUs each on one GPU model, running RunFor
// on the fake nodes.
type JobSpec struct {
	Team string
	Name string
	// Kind is KindJob, KindPyTorchJob or KindRayJob.
	Kind string
	Pods int32
	GPUs int64
	// GPU is the model the job pins with a node selector (the tutorial: an 80GB job must not be
	// admitted against L4 quota), which also decides its flavor and so its worker.
	GPU    string
	RunFor time.Duration
	// Stuck marks a job the story expects never to run (too big for any node): the demo ends
	// without waiting for it and leaves it pending for the user to inspect.
	Stuck bool
}

// Key is namespace/name.
func (j JobSpec) Key() string { return j.Team + "/" + j.Name }

// ObjectKind is the kind of the job's object ("Job" for KindJob).
func (j JobSpec) ObjectKind() string {
	if j.Kind == KindJob {
		return "Job"
	}
	return j.Kind
}

// GPUModel is the short name of the job's GPU model, for the screen.
func (j JobSpec) GPUModel() string {
	switch j.GPU {
	case A100:
		return "A100"
	case L4:
		return "L4"
	}
	return j.GPU
}

// Shape is "2×2 A100": pods × GPUs per pod, model; "PyTorchJob 2×4 A100" for other kinds.
func (j JobSpec) Shape() string {
	shape := fmt.Sprintf("%d×%d %s", j.Pods, j.GPUs, j.GPUModel())
	if j.Kind != KindJob {
		shape = j.Kind + " " + shape
	}
	return shape
}

// Step is one burst of submissions: its jobs go in once When holds (at once when nil), after the
// scenario's Hold so a viewer can read what just happened.
type Step struct {
	// Title is the narration line printed when the step's jobs are submitted.
	Title string
	When  func(*State) bool
	Jobs  []JobSpec
}

// Milestone is one beat of the story the screen ticks off when Reached says it happened.
type Milestone struct {
	Title   string
	Reached func(*State) bool
	// Detail, when set, is shown under the reached milestone (the explanation it is about).
	Detail func(*State) string
	// Kinds are the job kinds the milestone is about; it is dropped with them (WithoutKinds).
	Kinds []string
}

// Scenario is the story: bursts of jobs and the beats they must produce.
type Scenario struct {
	Name       string
	Steps      []Step
	Milestones []Milestone
	// Hold pauses between a step's condition and its jobs, so the screen can be read.
	Hold time.Duration
	// Timeout bounds the whole run after the first submission.
	Timeout time.Duration
}

// Timings are the fake run times of the story's jobs.
type Timings struct {
	// Research is how long each research training job runs: long enough to still be borrowing when
	// inference arrives, so inference must preempt to get its share.
	Research time.Duration
	// Inference is how long inference's A100 jobs run; L4 how long its L4 jobs run.
	Inference time.Duration
	L4        time.Duration
	Hold      time.Duration
	Timeout   time.Duration
}

// DefaultTimings give the full demo: ~2 minutes from the first job to the summary.
var DefaultTimings = Timings{Research: 40 * time.Second, Inference: 25 * time.Second, L4: 20 * time.Second, Hold: 4 * time.Second, Timeout: 6 * time.Minute}

// SmokeTimings keep the test short; research still outlives the reclaim.
var SmokeTimings = Timings{Research: 20 * time.Second, Inference: 4 * time.Second, L4: 4 * time.Second, Timeout: 5 * time.Minute}

// Default is the full story on the default lab (32 A100s in us-east, 16 L4s in eu-west; each team has
// 16 A100s and 8 L4s of nominal quota and may borrow 8 A100s / 4 L4s):
//
//  1. research submits seven 4-GPU training jobs and a 6-GPU evaluation on L4: six run (16 of its
//     own A100s + 8 borrowed from idle inference), the seventh waits at the borrowing limit, and
//     the evaluation fits quota but no L4 node (4 GPUs each), so it stays pending with an
//     explanation per cluster;
//  2. inference submits its 16 A100s and two L4 jobs: 8 A100s are free, and it reclaims the other
//     8 by preempting research's borrowers, which requeue; the L4 jobs go to eu-west;
//  3. as jobs finish, the waiting and preempted research jobs run; the evaluation stays pending.
func Default(t Timings) Scenario {
	// Every A100 pod asks for 4 GPUs: on 8-GPU nodes free room then always comes in whole halves
	// of a node, so kube-scheduler's spreading never strands GPUs that a later job cannot use.
	var research []JobSpec
	for i := 1; i <= 7; i++ {
		research = append(research, JobSpec{Team: Research, Name: fmt.Sprintf("train-%d", i), Pods: 1, GPUs: 4, GPU: A100, RunFor: t.Research})
	}
	research = append(research, tooBig())
	var inference []JobSpec
	for i := 1; i <= 4; i++ {
		inference = append(inference, JobSpec{Team: Inference, Name: fmt.Sprintf("serve-%d", i), Pods: 1, GPUs: 4, GPU: A100, RunFor: t.Inference})
	}
	for i := 1; i <= 2; i++ {
		inference = append(inference, JobSpec{Team: Inference, Name: fmt.Sprintf("embed-%d", i), Pods: 2, GPUs: 1, GPU: L4, RunFor: t.L4})
	}
	return story("default", t, research, inference, operatorJobs(4, t.Research/2))
}

// operatorJobs are research's jobs for the real operators: a PyTorchJob of a master and a worker
// and a RayJob of two GPU workers, gpus A100s per GPU pod.
func operatorJobs(gpus int64, runFor time.Duration) []JobSpec {
	return []JobSpec{
		{Team: Research, Name: "finetune", Kind: KindPyTorchJob, Pods: 2, GPUs: gpus, GPU: A100, RunFor: runFor},
		{Team: Research, Name: "sweep", Kind: KindRayJob, Pods: 2, GPUs: gpus, GPU: A100, RunFor: runFor},
	}
}

// Smoke is the same story with fewer, shorter jobs, for the test on the lab: three 8-GPU research
// jobs (one borrowing), two 8-GPU inference jobs (one reclaiming), one L4 job, the too-big job.
func Smoke(t Timings) Scenario {
	var research []JobSpec
	for i := 1; i <= 3; i++ {
		research = append(research, JobSpec{Team: Research, Name: fmt.Sprintf("train-%d", i), Pods: 1, GPUs: 8, GPU: A100, RunFor: t.Research})
	}
	research = append(research, tooBig())
	inference := []JobSpec{
		{Team: Inference, Name: "serve-1", Pods: 1, GPUs: 8, GPU: A100, RunFor: t.Inference},
		{Team: Inference, Name: "serve-2", Pods: 1, GPUs: 8, GPU: A100, RunFor: t.Inference},
		{Team: Inference, Name: "embed-1", Pods: 2, GPUs: 1, GPU: L4, RunFor: t.L4},
	}
	return story("smoke", t, research, inference, operatorJobs(4, t.Inference))
}

// tooBig asks for 6 L4s in one pod: within research's L4 quota, but L4 nodes have 4 GPUs.
func tooBig() JobSpec {
	return JobSpec{Team: Research, Name: "eval-6xl4", Pods: 1, GPUs: 6, GPU: L4, RunFor: time.Minute, Stuck: true}
}

// story plays research's burst, inference's reclaim, then (when operators is not empty)
// research's Kubeflow and Ray jobs once the reclaim happened.
func story(name string, t Timings, research, inference, operators []JobSpec) Scenario {
	sc := Scenario{
		Name: name,
		Hold: t.Hold, Timeout: t.Timeout,
		Steps: []Step{
			{Title: "research submits a burst of training jobs (A100) and one evaluation that needs 6 L4s in one pod", Jobs: research},
			{
				Title: "inference submits its guaranteed 16 A100s and two L4 jobs",
				// Once research borrows and its borrowers run, so inference must reclaim them.
				When: func(s *State) bool {
					return s.Borrowed(Research, "a100-flavor") > 0 && s.RunningBorrowers(Research) > 0
				},
				Jobs: inference,
			},
		},
		Milestones: []Milestone{
			{Title: "research fills its A100 quota and borrows inference's idle A100s", Reached: func(s *State) bool { return s.PeakBorrowed(Research, "a100-flavor") > 0 }},
			{
				Title:   "a job too big for any node stays pending, explained per cluster",
				Reached: func(s *State) bool { return s.Explained() != nil },
				Detail: func(s *State) string {
					if j := s.Explained(); j != nil {
						return j.Spec.Key() + ": " + j.Detail
					}
					return ""
				},
			},
			{Title: "inference reclaims its share: research jobs are preempted to pay back what research borrowed", Reached: func(s *State) bool { return s.Preemptions() > 0 }},
			{Title: "L4 jobs run in eu-west", Reached: func(s *State) bool { return s.RanOn("eu-west", L4) > 0 }},
			{Title: "preempted jobs are requeued and run again", Reached: func(s *State) bool { return s.RequeuedAndFinished() > 0 }},
			{Title: "every job that fits has finished", Reached: func(s *State) bool { return s.AllDone() }},
		},
	}
	if len(operators) == 0 {
		return sc
	}
	sc.Steps = append(sc.Steps, Step{
		Title: "research submits a PyTorchJob and a RayJob (A100): they queue for quota like Jobs and run on training-operator and ray-operator in a worker",
		When:  func(s *State) bool { return s.Preemptions() > 0 },
		Jobs:  operators,
	})
	done := sc.Milestones[len(sc.Milestones)-1]
	sc.Milestones = append(sc.Milestones[:len(sc.Milestones)-1], Milestone{
		Title:   "a PyTorchJob and a RayJob ran to completion on their operators in a worker",
		Reached: func(s *State) bool { return s.FinishedKind(KindPyTorchJob) > 0 && s.FinishedKind(KindRayJob) > 0 },
		Kinds:   []string{KindPyTorchJob, KindRayJob},
	}, done)
	return sc
}

// Kinds lists the kinds other than batch/v1 Job the scenario submits, sorted.
func (sc Scenario) Kinds() []string {
	var out []string
	for _, st := range sc.Steps {
		for _, j := range st.Jobs {
			if j.Kind != KindJob && !slices.Contains(out, j.Kind) {
				out = append(out, j.Kind)
			}
		}
	}
	slices.Sort(out)
	return out
}

// WithoutKinds drops the jobs of kinds the clusters cannot run (their CRDs or operators are
// missing) and the milestone about them; it returns the kinds it dropped.
func (sc Scenario) WithoutKinds(missing map[string]bool) (Scenario, []string) {
	var dropped []string
	var steps []Step
	for _, st := range sc.Steps {
		var jobs []JobSpec
		for _, j := range st.Jobs {
			if missing[j.Kind] {
				if !slices.Contains(dropped, j.Kind) {
					dropped = append(dropped, j.Kind)
				}
				continue
			}
			jobs = append(jobs, j)
		}
		if len(jobs) > 0 {
			st.Jobs = jobs
			steps = append(steps, st)
		}
	}
	if len(dropped) == 0 {
		return sc, nil
	}
	sc.Steps = steps
	sc.Milestones = slices.DeleteFunc(slices.Clone(sc.Milestones), func(m Milestone) bool {
		return slices.ContainsFunc(m.Kinds, func(k string) bool { return missing[k] })
	})
	return sc, dropped
}
