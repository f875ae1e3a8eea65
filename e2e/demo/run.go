package demo

import (
	"context"
	"fmt"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/e2e/kinds"
	"github.com/fleetq/fleetq/e2e/lab"
)

// Runner plays a scenario on a management cluster and shows it on a screen.
type Runner struct {
	Management *Cluster
	Scenario   Scenario
	Screen     *Screen
	// Check, when set, is called every few seconds; an error (a component died) ends the run.
	Check func() error
	// Refresh is how often the screen is redrawn when nothing changes (the clock column moves).
	Refresh time.Duration
}

// Run submits the scenario's jobs step by step, follows them until every job that can run has
// ended, and returns the final state. Objects are read from a watch cache, so each change is seen
// when it happens.
func (r *Runner) Run(ctx context.Context) (*State, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	reader, changed, err := r.watch(ctx)
	if err != nil {
		return nil, err
	}
	refresh := r.Refresh
	if refresh == 0 {
		refresh = 250 * time.Millisecond
	}
	tick := time.NewTicker(refresh)
	defer tick.Stop()

	sc := r.Scenario
	s := NewState(sc, time.Now())
	next := 0
	var due, settle time.Time
	lastCheck := time.Now()
	for {
		now := time.Now()
		snap, err := r.snapshot(ctx, reader)
		if err != nil {
			return s, err
		}
		s.Observe(snap, now)
		if next < len(sc.Steps) {
			st := sc.Steps[next]
			if due.IsZero() && (st.When == nil || st.When(s)) {
				due = now
				if next > 0 {
					due = now.Add(sc.Hold)
				}
			}
			if !due.IsZero() && !now.Before(due) {
				s.Narrate(EventStep, "▶ "+st.Title)
				if err := r.submit(ctx, s, st.Jobs); err != nil {
					return s, err
				}
				next, due = next+1, time.Time{}
				continue
			}
		}
		r.Screen.Update(s)
		if next == len(sc.Steps) && s.AllDone() {
			// The ClusterQueues' status trails the workloads by a moment; end on settled numbers.
			if settle.IsZero() {
				settle = now.Add(5 * time.Second)
			}
			if s.QueuesSettled() || now.After(settle) {
				r.Screen.Final(s)
				return s, nil
			}
		}
		if sc.Timeout > 0 && now.Sub(s.Start) > sc.Timeout {
			r.Screen.Final(s)
			return s, fmt.Errorf("the story did not end within %s; still waiting for:\n  %s", sc.Timeout, strings.Join(s.Waiting(), "\n  "))
		}
		if r.Check != nil && now.Sub(lastCheck) > 2*time.Second {
			lastCheck = now
			if err := r.Check(); err != nil {
				r.Screen.Final(s)
				return s, err
			}
		}
		select {
		case <-ctx.Done():
			return s, ctx.Err()
		case <-changed:
		case <-tick.C:
		}
	}
}

// watch starts a cache of the demo's jobs, the teams' workloads, the ClusterQueues and the
// workers, and a channel that receives a value whenever any of them changes.
func (r *Runner) watch(ctx context.Context) (client.Reader, <-chan struct{}, error) {
	demoJobs := cache.ByObject{Label: labels.SelectorFromSet(labels.Set{PartOfLabel: PartOfValue})}
	watched := []client.Object{&batchv1.Job{}, &kueue.Workload{}, &kueue.ClusterQueue{}, &kueue.MultiKueueCluster{}}
	byObject := map[client.Object]cache.ByObject{&batchv1.Job{}: demoJobs}
	for _, kind := range r.Scenario.Kinds() {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(KindGVKs[kind])
		byObject[u] = demoJobs
		watched = append(watched, u)
	}
	c, err := cache.New(r.Management.Config, cache.Options{
		Scheme:            Scheme,
		DefaultNamespaces: map[string]cache.Config{Research: {}, Inference: {}},
		ByObject:          byObject,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("cluster %q: watch cache: %w", r.Management.Name, err)
	}
	changed := make(chan struct{}, 1)
	notify := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	handler := toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { notify() },
		UpdateFunc: func(any, any) { notify() },
		DeleteFunc: func(any) { notify() },
	}
	for _, obj := range watched {
		inf, err := c.GetInformer(ctx, obj)
		if err != nil {
			return nil, nil, fmt.Errorf("cluster %q: watch %T: %w", r.Management.Name, obj, err)
		}
		if _, err := inf.AddEventHandler(handler); err != nil {
			return nil, nil, fmt.Errorf("cluster %q: watch %T: %w", r.Management.Name, obj, err)
		}
	}
	go func() { _ = c.Start(ctx) }()
	syncCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if !c.WaitForCacheSync(syncCtx) {
		return nil, nil, fmt.Errorf("cluster %q: the watch cache did not sync within a minute", r.Management.Name)
	}
	return c, changed, nil
}

func (r *Runner) snapshot(ctx context.Context, c client.Reader) (Snapshot, error) {
	s, err := snapshot(ctx, c)
	if err != nil {
		return s, err
	}
	for _, kind := range r.Scenario.Kinds() {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(KindGVKs[kind].GroupVersion().WithKind(kind + "List"))
		if err := c.List(ctx, list); err != nil {
			return s, fmt.Errorf("reading %ss from the watch cache: %w", kind, err)
		}
		s.Kinds = append(s.Kinds, list.Items...)
	}
	return s, nil
}

func snapshot(ctx context.Context, c client.Reader) (Snapshot, error) {
	var s Snapshot
	jobs := &batchv1.JobList{}
	wls := &kueue.WorkloadList{}
	cqs := &kueue.ClusterQueueList{}
	mkcs := &kueue.MultiKueueClusterList{}
	for _, l := range []client.ObjectList{jobs, wls, cqs, mkcs} {
		if err := c.List(ctx, l); err != nil {
			return s, fmt.Errorf("reading %T from the watch cache: %w", l, err)
		}
	}
	s.Jobs, s.Workloads, s.ClusterQueues, s.Clusters = jobs.Items, wls.Items, cqs.Items, mkcs.Items
	return s, nil
}

func (r *Runner) submit(ctx context.Context, s *State, specs []JobSpec) error {
	for _, spec := range specs {
		at := time.Now()
		if err := r.Management.Client.Create(ctx, NewObject(spec)); err != nil {
			return fmt.Errorf("cluster %q: create job %s: %w", r.Management.Name, spec.Key(), err)
		}
		s.Track(spec, at)
	}
	return nil
}

// NewObject builds the job of a spec in its kind: a batch/v1 Job (NewJob), or a PyTorchJob or
// RayJob as e2e/kinds writes them, with the demo's label, the queue-name label and every GPU pod
// pinned to the spec's GPU model.
func NewObject(spec JobSpec) client.Object {
	opts := kinds.Options{Queue: LocalQueue, Workers: int(spec.Pods), GPUs: int(spec.GPUs), RunFor: spec.RunFor.String(), Product: spec.GPU}
	var u *unstructured.Unstructured
	switch spec.Kind {
	case KindPyTorchJob:
		opts.Workers-- // the master is the first GPU pod
		u = kinds.PyTorchJob(spec.Team, spec.Name, opts)
	case KindRayJob:
		u = kinds.RayJob(spec.Team, spec.Name, opts)
	default:
		return NewJob(spec)
	}
	labels := u.GetLabels()
	labels[PartOfLabel] = PartOfValue
	u.SetLabels(labels)
	return u
}

// KindGVKs are the kinds of the story's jobs other than batch/v1 Job.
var KindGVKs = map[string]schema.GroupVersionKind{KindPyTorchJob: kinds.PyTorchJobGVK, KindRayJob: kinds.RayJobGVK}

// NewJob builds the batch/v1 Job of a spec as a team would write it: the queue-name label, a
// node selector for its GPU model, GPU requests, and the fake nodes' run time on its pods.
func NewJob(spec JobSpec) *batchv1.Job {
	gpus := *resource.NewQuantity(spec.GPUs, resource.DecimalSI)
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: spec.Team, Name: spec.Name,
			Labels: map[string]string{kueue.QueueNameLabel: LocalQueue, PartOfLabel: PartOfValue},
		},
		Spec: batchv1.JobSpec{
			Parallelism: ptr.To(spec.Pods),
			Completions: ptr.To(spec.Pods),
			Suspend:     ptr.To(true),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{lab.RunTimeAnnotation: spec.RunFor.String()}},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					NodeSelector:  map[string]string{"nvidia.com/gpu.product": spec.GPU},
					Containers: []corev1.Container{{
						Name:    "main",
						Image:   "registry.k8s.io/e2e-test-images/agnhost:2.53",
						Command: []string{"sleep"},
						Args:    []string{fmt.Sprint(int(spec.RunFor.Seconds()))},
						Resources: corev1.ResourceRequirements{
							Requests: corev1.ResourceList{
								corev1.ResourceCPU:    resource.MustParse("1"),
								corev1.ResourceMemory: resource.MustParse("4Gi"),
								GPU:                   gpus,
							},
							Limits: corev1.ResourceList{GPU: gpus},
						},
					}},
				},
			},
		},
	}
}
