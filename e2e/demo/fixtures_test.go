package demo

import (
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
)

// t0 is the fixed start of every test state.
var t0 = time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

// world builds snapshots: the Job and Workload of each job by namespace/name.
type world struct {
	jobs map[string]*batchv1.Job
	wls  map[string]*kueue.Workload
	cqs  []kueue.ClusterQueue
	mkcs []kueue.MultiKueueCluster
}

func newWorld() *world {
	return &world{jobs: map[string]*batchv1.Job{}, wls: map[string]*kueue.Workload{}}
}

func (w *world) snapshot() Snapshot {
	var s Snapshot
	for _, j := range w.jobs {
		s.Jobs = append(s.Jobs, *j)
	}
	for _, wl := range w.wls {
		s.Workloads = append(s.Workloads, *wl)
	}
	s.ClusterQueues, s.Clusters = w.cqs, w.mkcs
	return s
}

// submit creates a job and its workload with no condition yet.
func (w *world) submit(spec JobSpec) *kueue.Workload {
	job := NewJob(spec)
	job.UID = types.UID("uid-" + spec.Name)
	w.jobs[spec.Key()] = job
	wl := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{
		Namespace: spec.Team, Name: "job-" + spec.Name + "-abcde",
		OwnerReferences: []metav1.OwnerReference{{Kind: "Job", Name: spec.Name, UID: job.UID, Controller: ptr.To(true)}},
	}}
	w.wls[spec.Key()] = wl
	return wl
}

func cond(typ string, status metav1.ConditionStatus, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg}
}

func setConds(wl *kueue.Workload, cs ...metav1.Condition) {
	for _, c := range cs {
		found := false
		for i := range wl.Status.Conditions {
			if wl.Status.Conditions[i].Type == c.Type {
				wl.Status.Conditions[i], found = c, true
			}
		}
		if !found {
			wl.Status.Conditions = append(wl.Status.Conditions, c)
		}
	}
}

func (w *world) pending(key, reason, msg string) {
	wl := w.wls[key]
	wl.Status.ClusterName = nil
	setConds(wl, cond(kueue.WorkloadQuotaReserved, metav1.ConditionFalse, reason, msg), cond(kueue.WorkloadAdmitted, metav1.ConditionFalse, "Pending", ""))
	w.jobs[key].Status.Active = 0
}

func (w *world) running(key, cluster string, borrowing bool) {
	wl := w.wls[key]
	msg := "Quota reserved in ClusterQueue " + wl.Namespace + "-gpu-cq"
	if borrowing {
		msg += ", borrowing from its cohort"
	}
	wl.Status.ClusterName = ptr.To(cluster)
	setConds(wl, cond(kueue.WorkloadQuotaReserved, metav1.ConditionTrue, "QuotaReserved", msg+", placed on worker "+cluster),
		cond(kueue.WorkloadAdmitted, metav1.ConditionTrue, "Admitted", ""))
	if ev := findCond(wl, kueue.WorkloadEvicted); ev != nil {
		setConds(wl, cond(kueue.WorkloadEvicted, metav1.ConditionFalse, "QuotaReserved", ""))
	}
	w.jobs[key].Status.Active = *w.jobs[key].Spec.Parallelism
}

func (w *world) preempt(key, by string) {
	wl := w.wls[key]
	msg := "Preempted to accommodate workload " + by + ": preempted so clusterqueue inference-gpu-cq can reclaim its nominal quota for workload " + by + " (priority 0); clusterqueue research-gpu-cq was borrowing in cohort ai-platform"
	setConds(wl, cond(kueue.WorkloadEvicted, metav1.ConditionTrue, kueue.WorkloadEvictedByPreemption, msg),
		cond(kueue.WorkloadPreempted, metav1.ConditionTrue, kueue.InCohortReclamationReason, msg))
}

func (w *world) requeue(key string, until time.Time) {
	wl := w.wls[key]
	// Requeue releases the reservation; Evicted stays True until the next admission.
	w.pending(key, "Pending", "Quota released: "+findCond(wl, kueue.WorkloadEvicted).Message)
	wl.Status.RequeueState = &kueue.RequeueState{Count: ptr.To[int32](1), RequeueAt: ptr.To(metav1.NewTime(until))}
}

func (w *world) finish(key string) {
	job := w.jobs[key]
	job.Status.Active = 0
	job.Status.Succeeded = *job.Spec.Completions
	job.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
	setConds(w.wls[key], cond(kueue.WorkloadFinished, metav1.ConditionTrue, "Succeeded", ""))
}

func findCond(wl *kueue.Workload, typ string) *metav1.Condition {
	for i := range wl.Status.Conditions {
		if wl.Status.Conditions[i].Type == typ {
			return &wl.Status.Conditions[i]
		}
	}
	return nil
}

// queue is a ClusterQueue with the demo's GPU quotas and the given reserved GPUs per flavor.
func queue(team string, a100Used, a100Borrowed, l4Used int64, pending, reserving int32) kueue.ClusterQueue {
	gpu := func(nominal, limit int64) []kueue.ResourceQuota {
		return []kueue.ResourceQuota{
			{Name: corev1.ResourceCPU, NominalQuota: resource.MustParse("192")},
			{Name: GPU, NominalQuota: *resource.NewQuantity(nominal, resource.DecimalSI), BorrowingLimit: resource.NewQuantity(limit, resource.DecimalSI)},
		}
	}
	usage := func(flavor string, used, borrowed int64) kueue.FlavorUsage {
		return kueue.FlavorUsage{Name: kueue.ResourceFlavorReference(flavor), Resources: []kueue.ResourceUsage{
			{Name: GPU, Total: *resource.NewQuantity(used, resource.DecimalSI), Borrowed: *resource.NewQuantity(borrowed, resource.DecimalSI)},
		}}
	}
	return kueue.ClusterQueue{
		ObjectMeta: metav1.ObjectMeta{Name: ClusterQueueOf(team)},
		Spec: kueue.ClusterQueueSpec{ResourceGroups: []kueue.ResourceGroup{{
			CoveredResources: []corev1.ResourceName{corev1.ResourceCPU, GPU},
			Flavors: []kueue.FlavorQuotas{
				{Name: "a100-flavor", Resources: gpu(16, 8)},
				{Name: "l4-flavor", Resources: gpu(8, 4)},
			},
		}}},
		Status: kueue.ClusterQueueStatus{
			FlavorsReservation: []kueue.FlavorUsage{usage("a100-flavor", a100Used, a100Borrowed), usage("l4-flavor", l4Used, 0)},
			PendingWorkloads:   pending, ReservingWorkloads: reserving,
		},
	}
}

func worker(name string, active bool, msg string) kueue.MultiKueueCluster {
	status := metav1.ConditionTrue
	if !active {
		status = metav1.ConditionFalse
	}
	return kueue.MultiKueueCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status:     kueue.MultiKueueClusterStatus{Conditions: []metav1.Condition{cond(kueue.MultiKueueClusterActive, status, "Active", msg)}},
	}
}

const tooBigMessage = `no worker has room: us-east: pod set "main": no node matches flavor labels; eu-west: pod set "main": largest node fit 4 of 6 nvidia.com/gpu`

// midStory plays the default story (its Jobs only) up to inference's reclaim: research borrows,
// the too-big job is explained, inference arrives and preempts train-6, which is requeued;
// returns the state at +14.5s.
func midStory() *State {
	sc, _ := Default(DefaultTimings).WithoutKinds(map[string]bool{KindPyTorchJob: true, KindRayJob: true})
	s := NewState(sc, t0)
	w := newWorld()
	w.mkcs = []kueue.MultiKueueCluster{worker("us-east", true, ""), worker("eu-west", true, "")}
	for i, spec := range sc.Steps[0].Jobs {
		w.submit(spec)
		s.Track(spec, at(time.Duration(i)*10*time.Millisecond))
	}
	w.cqs = []kueue.ClusterQueue{queue(Research, 0, 0, 0, 8, 0), queue(Inference, 0, 0, 0, 0, 0)}
	s.Observe(w.snapshot(), at(300*time.Millisecond))
	for i := 1; i <= 6; i++ {
		w.running("research/train-"+string(rune('0'+i)), "us-east", i > 4)
	}
	w.pending("research/train-7", "Pending", "insufficient quota for nvidia.com/gpu in flavor a100-flavor: requests 4, available 0 (nominal 16, used 24, borrowingLimit 8 reached)")
	w.pending("research/eval-6xl4", "NoPlacement", tooBigMessage)
	w.cqs = []kueue.ClusterQueue{queue(Research, 24, 8, 0, 2, 6), queue(Inference, 0, 0, 0, 0, 0)}
	s.Observe(w.snapshot(), at(1800*time.Millisecond))

	s.Now = at(6 * time.Second)
	s.Narrate(EventStep, "▶ "+sc.Steps[1].Title)
	for i, spec := range sc.Steps[1].Jobs {
		w.submit(spec)
		s.Track(spec, at(6*time.Second+time.Duration(i)*10*time.Millisecond))
	}
	w.running("inference/serve-1", "us-east", false)
	w.running("inference/serve-2", "us-east", false)
	w.running("inference/embed-1", "eu-west", false)
	w.pending("inference/serve-3", "Pending", "Preempting 1 workload(s) to free quota: research/job-train-6-abcde")
	w.pending("inference/serve-4", "Pending", "insufficient quota for nvidia.com/gpu in flavor a100-flavor: requests 4, available 0 (nominal 16, used 12, cohort ai-platform lends 0)")
	w.pending("inference/embed-2", "Pending", "waiting for the scheduler")
	w.preempt("research/train-6", "inference/job-serve-3-abcde")
	w.cqs = []kueue.ClusterQueue{queue(Research, 24, 8, 0, 2, 6), queue(Inference, 8, 0, 2, 3, 3)}
	s.Observe(w.snapshot(), at(7200*time.Millisecond))

	w.requeue("research/train-6", at(15*time.Second))
	w.running("inference/serve-3", "us-east", false)
	w.cqs = []kueue.ClusterQueue{queue(Research, 20, 4, 0, 3, 5), queue(Inference, 12, 0, 2, 2, 4)}
	s.Observe(w.snapshot(), at(9*time.Second))
	s.Observe(w.snapshot(), at(14500*time.Millisecond))
	return s
}
