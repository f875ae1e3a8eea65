package bench

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// Record is one job's life as the bench saw it through watches; zero times never happened.
type Record struct {
	Key   string
	Class string
	Queue int
	// Amount is the job's total request of the scenario's main resource (GPUs, else CPUs).
	Amount float64
	// Submitted is when the create call was sent; Created when it returned.
	Submitted, Created time.Time
	// Queued is the first time the management cluster showed the job's Workload.
	Queued time.Time
	// QuotaReserved, Admitted and Finished are the first times the management cluster's Workload
	// showed those conditions True; Dispatched the first time it named a worker (status.clusterName).
	QuotaReserved, Admitted, Dispatched, Finished time.Time
	// Running is the first time a pod of the job ran, in Cluster; Unsuspended the first time the
	// management cluster's Job had spec.suspend false.
	Running, Unsuspended time.Time
	Cluster              string
	// Evictions counts Evicted conditions turning True (preemptions, mostly).
	Evictions int
	// Holds are the intervals during which the workload held quota.
	Holds []Interval

	reserved, evicted bool
	holdStart         time.Time
}

// Interval is a span of time; an open one has a zero End.
type Interval struct{ Start, End time.Time }

// Recorder watches the management cluster's Workloads and Jobs and the pods of the clusters jobs run
// in, and timestamps each transition when its watch event arrives (conditions only carry seconds).
type Recorder struct {
	mu      sync.Mutex
	records map[string]*Record
	now     func() time.Time
}

// NewRecorder returns an empty recorder.
func NewRecorder() *Recorder {
	return &Recorder{records: map[string]*Record{}, now: time.Now}
}

// Expect registers a job the load generator is about to create.
func (r *Recorder) Expect(key, class string, queue int, amount float64) *Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec := &Record{Key: key, Class: class, Queue: queue, Amount: amount}
	r.records[key] = rec
	return rec
}

// Mark sets a time on a record under the recorder's lock.
func (r *Recorder) Mark(key string, set func(*Record)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if rec, ok := r.records[key]; ok {
		set(rec)
	}
}

// Records returns copies of every record, sorted by submission.
func (r *Recorder) Records() []Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Record, 0, len(r.records))
	for _, rec := range r.records {
		c := *rec
		c.Holds = append([]Interval(nil), rec.Holds...)
		if rec.reserved {
			c.Holds = append(c.Holds, Interval{Start: rec.holdStart})
		}
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Submitted.Before(out[j].Submitted) })
	return out
}

// Count returns how many records satisfy pred.
func (r *Recorder) Count(pred func(*Record) bool) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, rec := range r.records {
		if pred(rec) {
			n++
		}
	}
	return n
}

var workloadGVR = schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "workloads"}

// Watch starts the informers: Workloads and Jobs in the management cluster, pods in each cluster
// of runClusters, and, with jobsThere (jobs created where they run, with no Workload), the Jobs of
// those clusters, whose end is then the workload's. It returns once their caches are synced;
// they stop with ctx.
func (r *Recorder) Watch(ctx context.Context, mgmt *rest.Config, runClusters map[string]*rest.Config, jobsThere bool) error {
	dyn, err := dynamic.NewForConfig(mgmt)
	if err != nil {
		return fmt.Errorf("recorder: %w", err)
	}
	df := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	wlInf := df.ForResource(workloadGVR).Informer()
	if _, err := wlInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { r.onWorkload(o, false) },
		UpdateFunc: func(_, o any) { r.onWorkload(o, false) },
		DeleteFunc: func(o any) { r.onWorkload(o, true) },
	}); err != nil {
		return fmt.Errorf("recorder: %w", err)
	}
	cs, err := kubernetes.NewForConfig(mgmt)
	if err != nil {
		return fmt.Errorf("recorder: %w", err)
	}
	mf := informers.NewSharedInformerFactory(cs, 0)
	jobInf := mf.Batch().V1().Jobs().Informer()
	if _, err := jobInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    r.onJob,
		UpdateFunc: func(_, o any) { r.onJob(o) },
	}); err != nil {
		return fmt.Errorf("recorder: %w", err)
	}
	synced := []cache.InformerSynced{jobInf.HasSynced}
	if !jobsThere {
		// With no queue there is no Workload (nor its CRD, whose informer would never sync).
		synced = append(synced, wlInf.HasSynced)
		df.Start(ctx.Done())
	}
	mf.Start(ctx.Done())
	for name, cfg := range runClusters {
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return fmt.Errorf("recorder: %w", err)
		}
		f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = batchv1.JobNameLabel
		}))
		inf := f.Core().V1().Pods().Informer()
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(o any) { r.onPod(name, o) },
			UpdateFunc: func(_, o any) { r.onPod(name, o) },
		}); err != nil {
			return fmt.Errorf("recorder: %w", err)
		}
		synced = append(synced, inf.HasSynced)
		if jobsThere {
			// Jobs do not carry the pods' job-name label: their own factory, unfiltered.
			jf := informers.NewSharedInformerFactory(cs, 0)
			jinf := jf.Batch().V1().Jobs().Informer()
			if _, err := jinf.AddEventHandler(cache.ResourceEventHandlerFuncs{
				AddFunc:    r.onJobThere,
				UpdateFunc: func(_, o any) { r.onJobThere(o) },
			}); err != nil {
				return fmt.Errorf("recorder: %w", err)
			}
			synced = append(synced, jinf.HasSynced)
			jf.Start(ctx.Done())
		}
		f.Start(ctx.Done())
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return fmt.Errorf("recorder: caches did not sync: %w", ctx.Err())
	}
	return nil
}

func (r *Recorder) onJob(o any) {
	j, ok := o.(*batchv1.Job)
	if !ok || j.Spec.Suspend == nil || *j.Spec.Suspend {
		return
	}
	now := r.now()
	r.Mark(j.Namespace+"/"+j.Name, func(rec *Record) {
		if rec.Unsuspended.IsZero() {
			rec.Unsuspended = now
		}
	})
}

// onJobThere records the end of a job created where it runs: its Complete or Failed condition.
func (r *Recorder) onJobThere(o any) {
	j, ok := o.(*batchv1.Job)
	if !ok {
		return
	}
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			now := r.now()
			r.Mark(j.Namespace+"/"+j.Name, func(rec *Record) {
				if rec.Finished.IsZero() {
					rec.Finished = now
				}
			})
			return
		}
	}
}

func (r *Recorder) onPod(cluster string, o any) {
	p, ok := o.(*corev1.Pod)
	if !ok || p.Status.Phase != corev1.PodRunning {
		return
	}
	job := p.Labels[batchv1.JobNameLabel]
	now := r.now()
	r.Mark(p.Namespace+"/"+job, func(rec *Record) {
		if rec.Running.IsZero() {
			rec.Running, rec.Cluster = now, cluster
		}
	})
}

func (r *Recorder) onWorkload(o any, deleted bool) {
	if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o = d.Obj
	}
	u, ok := o.(*unstructured.Unstructured)
	if !ok {
		return
	}
	owner := ""
	for _, ref := range u.GetOwnerReferences() {
		if ref.Kind == "Job" {
			owner = ref.Name
		}
	}
	if owner == "" {
		return
	}
	now := r.now()
	conds := conditions(u)
	cluster, _, _ := unstructured.NestedString(u.Object, "status", "clusterName")
	r.Mark(u.GetNamespace()+"/"+owner, func(rec *Record) {
		reserved := conds["QuotaReserved"] && !conds["Finished"] && !deleted
		if rec.Queued.IsZero() {
			rec.Queued = now
		}
		if conds["QuotaReserved"] && rec.QuotaReserved.IsZero() {
			rec.QuotaReserved = now
		}
		if conds["Admitted"] && rec.Admitted.IsZero() {
			rec.Admitted = now
		}
		if conds["Finished"] && rec.Finished.IsZero() {
			rec.Finished = now
		}
		if cluster != "" && rec.Dispatched.IsZero() {
			rec.Dispatched = now
		}
		if conds["Evicted"] && !rec.evicted {
			rec.Evictions++
		}
		rec.evicted = conds["Evicted"]
		switch {
		case reserved && !rec.reserved:
			rec.holdStart = now
		case !reserved && rec.reserved:
			rec.Holds = append(rec.Holds, Interval{Start: rec.holdStart, End: now})
		}
		rec.reserved = reserved
	})
}

// conditions maps a Workload's condition types to whether they are True.
func conditions(u *unstructured.Unstructured) map[string]bool {
	out := map[string]bool{}
	list, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range list {
		m, ok := c.(map[string]any)
		if !ok {
			continue
		}
		t, _ := m["type"].(string)
		s, _ := m["status"].(string)
		out[t] = s == "True"
	}
	return out
}
