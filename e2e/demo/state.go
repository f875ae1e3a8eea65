package demo

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/internal/integration"
	"github.com/fleetq/fleetq/internal/integration/batchjob"
	"github.com/fleetq/fleetq/internal/integration/builtin"
	"github.com/fleetq/fleetq/internal/workload"
)

// GPU is the resource the screen accounts for; cpu and memory quota never limit the story.
const GPU corev1.ResourceName = "nvidia.com/gpu"

// Phase is where a job is, as the screen names it.
type Phase string

// Phases, in the order a job usually goes through them.
const (
	// PhaseSubmitted: the Job exists, its Workload not yet.
	PhaseSubmitted Phase = "submitted"
	// PhasePending: waiting for quota or for a worker with room; Detail says why.
	PhasePending Phase = "pending"
	// PhaseBackoff: evicted and requeued, waiting out its backoff before it queues again.
	PhaseBackoff Phase = "requeued"
	// PhaseDispatching: quota reserved and placed on a worker, whose agent has not started it yet.
	PhaseDispatching Phase = "dispatching"
	// PhaseAdmitted: admitted (the worker's agent admitted and started its copy), no running pod
	// mirrored to the management cluster yet.
	PhaseAdmitted Phase = "admitted"
	PhaseRunning  Phase = "running"
	// PhasePreempted: evicted to free quota for another workload; its pods are being stopped.
	PhasePreempted Phase = "preempted"
	// PhaseEvicted: evicted for another reason (worker lost, admission check retry).
	PhaseEvicted  Phase = "evicted"
	PhaseFinished Phase = "finished"
	PhaseFailed   Phase = "failed"
)

// holdsQuota says whether the phase counts against the ClusterQueue.
func (p Phase) holdsQuota() bool {
	return p == PhaseDispatching || p == PhaseAdmitted || p == PhaseRunning
}

// done says whether the job will not change any more.
func (p Phase) done() bool { return p == PhaseFinished || p == PhaseFailed }

// JobView is what the demo knows about one of its jobs.
type JobView struct {
	Spec  JobSpec
	Phase Phase
	// Detail is why it waits (the Workload's QuotaReserved message) or why it was evicted.
	Detail string
	// NoPlacement says Detail is the dispatcher's per-cluster explanation.
	NoPlacement bool
	// Cluster is the worker the job is placed on now; LastCluster the last one it ran on.
	Cluster     string
	LastCluster string
	// Borrowing says its current admission borrowed quota from the cohort.
	Borrowing bool
	Workload  string
	Submitted time.Time
	// Admitted is the first time it got quota; Ended when it finished.
	Admitted    time.Time
	Ended       time.Time
	Preemptions int
	// Ran lists the worker of each run, in order (a preempted job runs again).
	Ran []string

	running bool
}

// FlavorView is one flavor's GPUs in one ClusterQueue.
type FlavorView struct {
	Flavor string
	// Used counts reserved GPUs, Borrowed the part above Nominal; BorrowingLimit is -1 when unset.
	Used, Borrowed, Nominal, BorrowingLimit int64
}

// QueueView is one ClusterQueue.
type QueueView struct {
	Name              string
	Flavors           []FlavorView
	Pending, Admitted int32
}

// WorkerView is one registered worker (MultiKueueCluster).
type WorkerView struct {
	Name   string
	Active bool
	// Message is the Active condition's message when the worker is not connected.
	Message string
}

// EventKind sorts events for colouring and for tests.
type EventKind string

// Event kinds.
const (
	EventStep      EventKind = "step"
	EventMilestone EventKind = "milestone"
	EventRunning   EventKind = "running"
	EventPreempted EventKind = "preempted"
	EventRequeued  EventKind = "requeued"
	EventFinished  EventKind = "finished"
	EventExplained EventKind = "explained"
	EventWorker    EventKind = "worker"
)

// Event is one line of the story's log.
type Event struct {
	// At is the time since the demo's first submission.
	At   time.Duration
	Kind EventKind
	Job  string
	Text string
}

// MilestoneView is a milestone and when it was reached.
type MilestoneView struct {
	Title   string
	Reached bool
	At      time.Duration
	// Detail is the milestone's Detail as of the latest observation.
	Detail string
}

// Snapshot is what the demo reads from the management cluster each time something changes.
type Snapshot struct {
	Jobs []batchv1.Job
	// Kinds are the demo's jobs of other kinds (PyTorchJobs, RayJobs).
	Kinds         []unstructured.Unstructured
	Workloads     []kueue.Workload
	ClusterQueues []kueue.ClusterQueue
	Clusters      []kueue.MultiKueueCluster
}

// State is everything the screen shows, built from snapshots by Observe. It is a pure model: no
// client and no clock of its own, so a frame renders the same from the same state.
type State struct {
	Scenario string
	// Start is the first submission; Now the latest observation.
	Start, Now time.Time
	Jobs       []*JobView
	Queues     []QueueView
	Workers    []WorkerView
	Events     []Event
	Milestones []MilestoneView

	milestones   []Milestone
	expected     int
	byKey        map[string]*JobView
	peakBorrowed map[string]int64
}

// NewState starts an empty state for sc, with its first submission at start.
func NewState(sc Scenario, start time.Time) *State {
	s := &State{Scenario: sc.Name, Start: start, Now: start, milestones: sc.Milestones, byKey: map[string]*JobView{}, peakBorrowed: map[string]int64{}}
	for _, st := range sc.Steps {
		s.expected += len(st.Jobs)
	}
	for _, m := range sc.Milestones {
		s.Milestones = append(s.Milestones, MilestoneView{Title: m.Title})
	}
	return s
}

// Track adds a job the demo just submitted.
func (s *State) Track(spec JobSpec, at time.Time) *JobView {
	j := &JobView{Spec: spec, Phase: PhaseSubmitted, Submitted: at}
	s.Jobs = append(s.Jobs, j)
	s.byKey[spec.Key()] = j
	return j
}

// Job returns a tracked job by namespace/name.
func (s *State) Job(key string) *JobView { return s.byKey[key] }

// Narrate adds a free-form event (a step starting).
func (s *State) Narrate(kind EventKind, text string) {
	s.Events = append(s.Events, Event{At: s.Now.Sub(s.Start), Kind: kind, Text: text})
}

// Observe folds a snapshot taken at now into the state and returns the events it caused.
func (s *State) Observe(snap Snapshot, now time.Time) []Event {
	s.Now = now
	first := len(s.Events)
	s.observeWorkers(snap.Clusters)
	s.observeQueues(snap.ClusterQueues)
	jobs := map[string]*jobObject{}
	for i := range snap.Jobs {
		j := &snap.Jobs[i]
		jobs[kindKey("Job", j.Namespace, j.Name)] = &jobObject{uid: j.UID, status: batchjob.Adapter{}.Status(j)}
	}
	for i := range snap.Kinds {
		u := &snap.Kinds[i]
		if a, ok := integrations.ForGVK(u.GroupVersionKind()); ok {
			jobs[kindKey(u.GetKind(), u.GetNamespace(), u.GetName())] = &jobObject{uid: u.GetUID(), status: a.Status(u)}
		}
	}
	// A job's workload is the one its job controls, matched by UID so a leftover from an earlier
	// run of the same name is never taken for it.
	wls := map[string]*kueue.Workload{}
	byWorkload := map[string]string{}
	for i := range snap.Workloads {
		wl := &snap.Workloads[i]
		for _, o := range wl.OwnerReferences {
			key := kindKey(o.Kind, wl.Namespace, o.Name)
			if j, ok := jobs[key]; ok && j.uid == o.UID {
				wls[key] = wl
				byWorkload[wl.Namespace+"/"+wl.Name] = wl.Namespace + "/" + o.Name
			}
		}
	}
	for _, j := range s.Jobs {
		key := kindKey(j.Spec.ObjectKind(), j.Spec.Team, j.Spec.Name)
		s.observeJob(j, jobs[key], wls[key], byWorkload)
	}
	for i, m := range s.milestones {
		if !s.Milestones[i].Reached && m.Reached(s) {
			s.Milestones[i].Reached, s.Milestones[i].At = true, s.Now.Sub(s.Start)
			s.add(EventMilestone, "", "✓ "+m.Title)
		}
		if s.Milestones[i].Reached && m.Detail != nil {
			s.Milestones[i].Detail = m.Detail(s)
		}
	}
	return s.Events[first:]
}

func (s *State) add(kind EventKind, job, text string) {
	s.Events = append(s.Events, Event{At: s.Now.Sub(s.Start), Kind: kind, Job: job, Text: text})
}

func (s *State) observeWorkers(clusters []kueue.MultiKueueCluster) {
	was := map[string]bool{}
	for _, w := range s.Workers {
		was[w.Name] = w.Active
	}
	s.Workers = s.Workers[:0]
	for _, c := range clusters {
		w := WorkerView{Name: c.Name}
		if cond := meta.FindStatusCondition(c.Status.Conditions, kueue.MultiKueueClusterActive); cond != nil {
			w.Active = cond.Status == metav1.ConditionTrue
			if !w.Active {
				w.Message = cond.Message
			}
		}
		if active, ok := was[w.Name]; ok && active && !w.Active {
			s.add(EventWorker, "", fmt.Sprintf("worker %s disconnected: %s", w.Name, w.Message))
		}
		s.Workers = append(s.Workers, w)
	}
	sort.Slice(s.Workers, func(i, j int) bool { return s.Workers[i].Name < s.Workers[j].Name })
}

func (s *State) observeQueues(cqs []kueue.ClusterQueue) {
	s.Queues = s.Queues[:0]
	for _, cq := range cqs {
		q := QueueView{Name: cq.Name, Pending: cq.Status.PendingWorkloads, Admitted: cq.Status.ReservingWorkloads}
		for _, rg := range cq.Spec.ResourceGroups {
			for _, f := range rg.Flavors {
				fv := FlavorView{Flavor: string(f.Name), BorrowingLimit: -1}
				found := false
				for _, r := range f.Resources {
					if r.Name == GPU {
						found = true
						fv.Nominal = r.NominalQuota.Value()
						if r.BorrowingLimit != nil {
							fv.BorrowingLimit = r.BorrowingLimit.Value()
						}
					}
				}
				if !found {
					continue
				}
				for _, u := range cq.Status.FlavorsReservation {
					if u.Name != f.Name {
						continue
					}
					for _, r := range u.Resources {
						if r.Name == GPU {
							fv.Used, fv.Borrowed = r.Total.Value(), r.Borrowed.Value()
						}
					}
				}
				key := cq.Name + "/" + fv.Flavor
				s.peakBorrowed[key] = max(s.peakBorrowed[key], fv.Borrowed)
				q.Flavors = append(q.Flavors, fv)
			}
		}
		s.Queues = append(s.Queues, q)
	}
	sort.Slice(s.Queues, func(i, j int) bool { return queueOrder(s.Queues[i].Name) < queueOrder(s.Queues[j].Name) })
}

// queueOrder puts research before inference, as the story tells them, then others by name.
func queueOrder(name string) string {
	switch name {
	case ClusterQueueOf(Research):
		return "0"
	case ClusterQueueOf(Inference):
		return "1"
	}
	return "2" + name
}

func (s *State) observeJob(j *JobView, job *jobObject, wl *kueue.Workload, byWorkload map[string]string) {
	prev := j.Phase
	phase, detail := phaseOf(job, wl, s.Now)
	j.Detail = detail
	if ev := preemption(wl); ev != nil && phase == PhasePreempted {
		j.Detail = "stopping: preempted" + preemptor(ev, byWorkload)
	}
	j.NoPlacement = false
	if wl != nil {
		j.Workload = wl.Name
		j.Cluster = workload.ClusterName(wl)
		if qr := meta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadQuotaReserved); qr != nil {
			j.NoPlacement = qr.Status == metav1.ConditionFalse && qr.Reason == "NoPlacement"
			if qr.Status == metav1.ConditionTrue {
				j.Borrowing = strings.Contains(qr.Message, "borrowing")
			}
		}
	}
	if phase == PhasePending {
		j.Detail = ShortReason(detail)
	}
	if !phase.holdsQuota() {
		j.Borrowing = false
		// The next time it runs is another run, maybe elsewhere.
		j.running = false
	}
	if phase == prev && !(phase == PhasePending && j.NoPlacement && !s.explainedBefore(j)) {
		return
	}
	j.Phase = phase
	key := j.Spec.Key()
	// A preemption shows as the preempted phase, or (when the eviction completed between two
	// looks) as a job that held quota and no longer does while its workload says Preempted.
	if ev := preemption(wl); ev != nil && (phase == PhasePreempted || prev.holdsQuota() && !phase.holdsQuota()) {
		j.Preemptions++
		s.add(EventPreempted, key, fmt.Sprintf("%s preempted%s", key, preemptor(ev, byWorkload)))
	}
	if phase.holdsQuota() && j.Admitted.IsZero() {
		j.Admitted = s.Now
	}
	// Admitted means the worker's agent admitted the copy and started it; a Job status mirrored
	// from the worker then shows its pods. Either starts a run.
	if (phase == PhaseAdmitted || phase == PhaseRunning) && !j.running {
		j.running = true
		j.Ran = append(j.Ran, j.Cluster)
		j.LastCluster = j.Cluster
		how := ""
		if j.Borrowing {
			how = ", on borrowed quota"
		}
		s.add(EventRunning, key, fmt.Sprintf("%s started on %s (%s%s)", key, j.Cluster, j.Spec.Shape(), how))
	}
	switch phase {
	case PhaseBackoff, PhasePending:
		if prev == PhasePreempted || prev == PhaseEvicted || prev.holdsQuota() {
			s.add(EventRequeued, key, fmt.Sprintf("%s requeued: it waits for quota again", key))
		}
		if phase == PhasePending && j.NoPlacement && !s.explainedBefore(j) {
			if j.Spec.Stuck {
				s.add(EventExplained, key, fmt.Sprintf("%s (%s) fits quota but no node can hold it: %s", key, j.Spec.Shape(), j.Detail))
			} else {
				s.add(EventExplained, key, fmt.Sprintf("%s has quota, waits for room: %s", key, j.Detail))
			}
		}
	case PhaseFinished, PhaseFailed:
		j.Ended = s.Now
		where := j.LastCluster
		if where == "" {
			where = j.Cluster
		}
		s.add(EventFinished, key, fmt.Sprintf("%s %s on %s", key, phase, where))
	}
}

// explainedBefore says whether the job's placement explanation is already in the log.
func (s *State) explainedBefore(j *JobView) bool {
	for _, e := range s.Events {
		if e.Kind == EventExplained && e.Job == j.Spec.Key() {
			return true
		}
	}
	return false
}

// quotaShortfall matches the engine's "insufficient quota for nvidia.com/gpu in flavor a100-flavor: ".
var quotaShortfall = regexp.MustCompile(`insufficient quota for nvidia\.com/gpu in flavor ([a-z0-9-]+): `)

// ShortReason trims why a job waits for the screen, keeping the numbers: the pod set is named only
// when a job has several, and the quota or worker is named by its GPU model.
//
//	"no worker has room: us-east: pod set "main": no node matches flavor labels; eu-west: ..."
//	→ "us-east: no such GPUs; eu-west: ..."
//	"insufficient quota for nvidia.com/gpu in flavor a100-flavor: requests 4, available 0 (...)"
//	→ "A100 quota: requests 4, available 0 (...)"
func ShortReason(msg string) string {
	msg = strings.TrimPrefix(msg, "no worker has room: ")
	msg = strings.ReplaceAll(msg, `pod set "main": `, "")
	msg = strings.ReplaceAll(msg, "no node matches flavor labels", "no such GPUs")
	return quotaShortfall.ReplaceAllStringFunc(msg, func(m string) string {
		return flavorModel(quotaShortfall.FindStringSubmatch(m)[1]) + " quota: "
	})
}

// preemption returns the workload's Preempted condition (else its Evicted one) while an eviction by
// preemption is under way or waiting for the next admission.
func preemption(wl *kueue.Workload) *metav1.Condition {
	if wl == nil {
		return nil
	}
	ev := meta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadEvicted)
	if ev == nil || ev.Status != metav1.ConditionTrue || ev.Reason != kueue.WorkloadEvictedByPreemption {
		return nil
	}
	// The Preempted condition says where the preemptor came from (reclaim, priority).
	if p := meta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadPreempted); p != nil && p.Status == metav1.ConditionTrue {
		return p
	}
	return ev
}

// preemptor turns the scheduler's "Preempted to accommodate workload inference/job-serve-3-1a2b3:
// ..." into " by inference/serve-3, reclaiming its team's nominal quota", with the demo's job names
// and the Preempted condition's reason in words.
func preemptor(ev *metav1.Condition, byWorkload map[string]string) string {
	const prefix = "Preempted to accommodate workload "
	rest, ok := strings.CutPrefix(ev.Message, prefix)
	if !ok {
		if ev.Message == "" {
			return ""
		}
		return ": " + ev.Message
	}
	wl, why, _ := strings.Cut(rest, ": ")
	who := wl
	if job, ok := byWorkload[wl]; ok {
		who = job
	}
	switch ev.Reason {
	case kueue.InCohortReclamationReason:
		why = "reclaiming its team's nominal quota from a borrower"
	case kueue.InClusterQueueReason:
		why = "a higher priority job of the same queue"
	}
	if why != "" {
		return fmt.Sprintf(" by %s, %s", who, why)
	}
	return " by " + who
}

// phaseOf reads a job's phase from its Job and Workload on the management cluster.
// jobObject is what the story reads of a job of any kind: its UID and where its kind's status
// says it is (through the kind's fleetq integration).
type jobObject struct {
	uid    types.UID
	status integration.Status
}

// integrations read the status of the story's kinds other than batch/v1 Job: fleetq's own
// adapters, as the manager reads them.
var integrations = func() *integration.Registry {
	r, err := integration.NewRegistry(builtin.Adapters()...)
	if err != nil {
		panic(err) // the built-in adapters register once each (builtin's tests)
	}
	return r
}()

// kindKey identifies a job of a kind.
func kindKey(kind, namespace, name string) string { return kind + "/" + namespace + "/" + name }

func phaseOf(job *jobObject, wl *kueue.Workload, now time.Time) (Phase, string) {
	if job != nil && job.status.Finished {
		if job.status.Failed {
			return PhaseFailed, job.status.Message
		}
		return PhaseFinished, ""
	}
	if wl == nil {
		return PhaseSubmitted, "waiting for its Workload"
	}
	if fin := meta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadFinished); fin != nil && fin.Status == metav1.ConditionTrue {
		if fin.Reason == "Failed" {
			return PhaseFailed, fin.Message
		}
		return PhaseFinished, ""
	}
	qr := meta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadQuotaReserved)
	reserved := qr != nil && qr.Status == metav1.ConditionTrue
	// Evicted stays True until the next admission; while the workload still holds its quota, its
	// pods are being stopped; once released it is requeued and pending again.
	if ev := meta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadEvicted); ev != nil && ev.Status == metav1.ConditionTrue && (reserved || qr == nil) {
		if ev.Reason == kueue.WorkloadEvictedByPreemption {
			return PhasePreempted, ev.Message
		}
		return PhaseEvicted, ev.Message
	}
	if reserved {
		if !meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadAdmitted) {
			return PhaseDispatching, checkMessage(wl)
		}
		if job != nil && job.status.Active {
			return PhaseRunning, ""
		}
		return PhaseAdmitted, ""
	}
	if at := workload.RequeueAt(wl); at.After(now) {
		return PhaseBackoff, fmt.Sprintf("back in the queue in %s (requeue backoff)", at.Sub(now).Round(time.Second))
	}
	if qr == nil {
		return PhasePending, "waiting for the scheduler"
	}
	return PhasePending, qr.Message
}

func checkMessage(wl *kueue.Workload) string {
	for _, c := range wl.Status.AdmissionChecks {
		if c.Message != "" {
			return c.Message
		}
	}
	return ""
}

// Borrowed is the GPUs team's ClusterQueue borrows now in flavor.
func (s *State) Borrowed(team, flavor string) int64 {
	for _, q := range s.Queues {
		if q.Name != ClusterQueueOf(team) {
			continue
		}
		for _, f := range q.Flavors {
			if f.Flavor == flavor {
				return f.Borrowed
			}
		}
	}
	return 0
}

// PeakBorrowed is the most GPUs team's ClusterQueue has borrowed in flavor so far.
func (s *State) PeakBorrowed(team, flavor string) int64 {
	return s.peakBorrowed[ClusterQueueOf(team)+"/"+flavor]
}

// RunningBorrowers counts team's jobs that run on borrowed quota.
func (s *State) RunningBorrowers(team string) int {
	n := 0
	for _, j := range s.Jobs {
		if j.Spec.Team == team && j.Phase == PhaseRunning && j.Borrowing {
			n++
		}
	}
	return n
}

// Explained returns the first job the story expects to stay pending that the dispatcher explained,
// cluster by cluster.
func (s *State) Explained() *JobView {
	for _, e := range s.Events {
		if j := s.byKey[e.Job]; e.Kind == EventExplained && j != nil && j.Spec.Stuck {
			return j
		}
	}
	return nil
}

// Preemptions counts preemptions seen so far.
func (s *State) Preemptions() int {
	n := 0
	for _, j := range s.Jobs {
		n += j.Preemptions
	}
	return n
}

// RanOn counts jobs on GPU model gpu that ran on cluster.
func (s *State) RanOn(cluster, gpu string) int {
	n := 0
	for _, j := range s.Jobs {
		if j.Spec.GPU == gpu && slices.Contains(j.Ran, cluster) {
			n++
		}
	}
	return n
}

// FinishedKind counts the finished jobs of a kind (KindPyTorchJob, ...).
func (s *State) FinishedKind(kind string) int {
	n := 0
	for _, j := range s.Jobs {
		if j.Spec.Kind == kind && j.Phase == PhaseFinished {
			n++
		}
	}
	return n
}

// RequeuedAndFinished counts preempted jobs that ran again to the end.
func (s *State) RequeuedAndFinished() int {
	n := 0
	for _, j := range s.Jobs {
		if j.Preemptions > 0 && j.Phase == PhaseFinished {
			n++
		}
	}
	return n
}

// QueuesSettled says each ClusterQueue's reported GPU usage equals what the jobs holding quota
// in it ask for.
func (s *State) QueuesSettled() bool {
	for _, q := range s.Queues {
		for _, f := range q.Flavors {
			var want int64
			for _, j := range s.Jobs {
				if ClusterQueueOf(j.Spec.Team) == q.Name && j.Spec.GPUModel() == flavorModel(f.Flavor) && j.Phase.holdsQuota() {
					want += int64(j.Spec.Pods) * j.Spec.GPUs
				}
			}
			if f.Used != want {
				return false
			}
		}
	}
	return true
}

// AllDone says every job of the scenario was submitted and every one that can run has ended.
func (s *State) AllDone() bool {
	if len(s.Jobs) < s.expected {
		return false
	}
	for _, j := range s.Jobs {
		if !j.Spec.Stuck && !j.Phase.done() {
			return false
		}
	}
	return true
}

// Waiting lists the jobs AllDone waits for, with their phase and reason, for timeout errors.
func (s *State) Waiting() []string {
	var out []string
	for _, j := range s.Jobs {
		if !j.Spec.Stuck && !j.Phase.done() {
			out = append(out, fmt.Sprintf("%s %s: %s", j.Spec.Key(), j.Phase, j.Detail))
		}
	}
	return out
}
