// Package overlap watches the pods of every cluster during a test and records, per job (of any
// kind fleetq runs), when it had running pods in which cluster, so a spec can prove that no job
// ever ran in two clusters at once. A pod counts as running from the first time it is seen Running until it is seen
// finished or gone: a Terminating pod still runs (its containers have their grace period to
// stop), and a cluster that stops answering keeps its pods "running" until it answers again and
// shows otherwise — the conservative view.
package overlap

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
)

// Recorder records running intervals of job pods across clusters.
type Recorder struct {
	mu sync.Mutex
	// running maps cluster/namespace/pod to the run of a pod seen running and not yet ended.
	running map[string]run
	// intervals per job per cluster.
	intervals map[string]map[string][]interval
	// excused maps cluster/job to the moment Unobservable was called for them.
	excused map[string]time.Time
	// alias maps namespace/uid:<uid> to the job it is (see jobLabels).
	alias map[string]string
	// succeeded maps a job to the clusters where its pods succeeded, to those pods' names.
	succeeded map[string]map[string]map[string]bool
	// terminating holds the keys of pods seen with a deletion timestamp.
	terminating map[string]bool
}

// interval is one pod's running window; created is the pod's creation time, which tells
// whether Unobservable excuses it.
type interval struct{ from, to, created time.Time }

// run is a pod seen running: since when, which job, and when the pod was created.
type run struct {
	from, created time.Time
	job           string
}

// New returns an empty recorder.
func New() *Recorder {
	return &Recorder{running: map[string]run{}, intervals: map[string]map[string][]interval{}, excused: map[string]time.Time{}, alias: map[string]string{}, succeeded: map[string]map[string]map[string]bool{}, terminating: map[string]bool{}}
}

// Watch records the pods of one cluster until ctx ends. It returns once the first list is
// read; then it watches from the last resource version seen, so no change is missed while the
// connection breaks and heals (a frozen or partitioned API server replays what happened). When
// that version is gone (the API server restarted, its watch cache begins anew) it lists again
// at once, without the informers' backoff of up to 30 s: a job's pods may only be created, run
// and vanish in the moment between a restarted API server answering and the relist.
func (r *Recorder) Watch(ctx context.Context, cluster string, cs kubernetes.Interface) error {
	w := &podWatch{r: r, cluster: cluster, pods: cs.CoreV1().Pods(""), known: map[string]*corev1.Pod{}}
	rv, err := w.list(ctx)
	if err != nil {
		return fmt.Errorf("cluster %s: listing pods: %w", cluster, err)
	}
	go func() {
		for ctx.Err() == nil {
			next, err := w.watch(ctx, rv)
			rv = next
			// A watch that ended, or failed, goes on from rv: nothing is missed meanwhile. Only
			// an expired version needs a list, and at once.
			if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
				if next, err = w.list(ctx); err == nil {
					rv = next
					continue
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(retryEvery):
			}
		}
	}()
	return nil
}

// retryEvery is how soon a broken pod watch is tried again.
const retryEvery = 200 * time.Millisecond

// podWatch follows the pods of one cluster for a Recorder.
type podWatch struct {
	r       *Recorder
	cluster string
	pods    typedcorev1.PodInterface
	// known are the pods seen and not yet gone, by namespace/name.
	known map[string]*corev1.Pod
}

// list reads every pod, records each, records the known ones that are gone as deleted, and
// returns the list's resource version.
func (w *podWatch) list(ctx context.Context) (string, error) {
	list, err := w.pods.List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", err
	}
	seen := make(map[string]bool, len(list.Items))
	for i := range list.Items {
		p := &list.Items[i]
		key := p.Namespace + "/" + p.Name
		seen[key] = true
		w.known[key] = p
		w.r.observe(w.cluster, p, false)
	}
	for key, p := range w.known {
		if !seen[key] {
			delete(w.known, key)
			w.r.observe(w.cluster, p, true)
		}
	}
	return list.ResourceVersion, nil
}

// watch records pod events from resource version rv until the watch ends, and returns the last
// version seen; an error event (such as an expired version) is returned as the error.
func (w *podWatch) watch(ctx context.Context, rv string) (string, error) {
	wi, err := w.pods.Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
	if err != nil {
		return rv, err
	}
	defer wi.Stop()
	for ev := range wi.ResultChan() {
		if ev.Type == watch.Error {
			return rv, apierrors.FromObject(ev.Object)
		}
		p, ok := ev.Object.(*corev1.Pod)
		if !ok {
			continue
		}
		rv = p.ResourceVersion
		key := p.Namespace + "/" + p.Name
		switch ev.Type {
		case watch.Added, watch.Modified:
			w.known[key] = p
			w.r.observe(w.cluster, p, false)
		case watch.Deleted:
			delete(w.known, key)
			w.r.observe(w.cluster, p, true)
		}
	}
	return rv, nil
}

func (r *Recorder) observe(cluster string, pod *corev1.Pod, deleted bool) {
	key := cluster + "/" + pod.Namespace + "/" + pod.Name
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	job := r.jobOf(pod)
	if job == "" {
		return
	}
	started, isRunning := r.running[key]
	// A pod being deleted still runs until it is gone or has finished.
	nowRunning := !deleted && pod.Status.Phase == corev1.PodRunning
	if pod.DeletionTimestamp != nil {
		r.terminating[key] = true
	}
	if pod.Status.Phase == corev1.PodSucceeded {
		if r.succeeded[job] == nil {
			r.succeeded[job] = map[string]map[string]bool{}
		}
		if r.succeeded[job][cluster] == nil {
			r.succeeded[job][cluster] = map[string]bool{}
		}
		r.succeeded[job][cluster][pod.Name] = true
	}
	switch {
	case nowRunning && !isRunning:
		r.running[key] = run{from: now, created: pod.CreationTimestamp.Time, job: job}
	case !nowRunning && isRunning:
		delete(r.running, key)
		r.add(started.job, cluster, interval{from: started.from, to: now, created: started.created})
	}
}

// jobLabels name the job a pod belongs to, by kind: a batch Job (also a RayJob's submitter) or a
// training-operator job. A copy keeps its job's name in every cluster, so the same job has the
// same key wherever its pods run. A Ray cluster's pods carry no name of their RayJob, only
// fleetq's workload identity (uidLabel); a pod with both (the submitter) tells which job that
// identity is, and Overlaps reads identities as those jobs.
var jobLabels = []string{batchv1.JobNameLabel, "training.kubeflow.org/job-name"}

// uidLabel is fleetq's label of the management cluster's Workload UID on the pods it starts.
const uidLabel = "fleetq.dev/workload-uid"

// jobOf names a pod's job: namespace/name, or namespace/uid:<uid> when only fleetq's identity is
// known; it records the alias when the pod has both.
func (r *Recorder) jobOf(pod *corev1.Pod) string {
	uid := pod.Labels[uidLabel]
	for _, l := range jobLabels {
		if v := pod.Labels[l]; v != "" {
			job := pod.Namespace + "/" + v
			if uid != "" {
				r.alias[pod.Namespace+"/uid:"+uid] = job
			}
			return job
		}
	}
	if uid != "" {
		return pod.Namespace + "/uid:" + uid
	}
	return ""
}

// canonical is the job a key stands for, through the aliases.
func (r *Recorder) canonical(job string) string {
	if a, ok := r.alias[job]; ok {
		return a
	}
	return job
}

func (r *Recorder) add(job, cluster string, iv interval) {
	if r.intervals[job] == nil {
		r.intervals[job] = map[string][]interval{}
	}
	r.intervals[job][cluster] = append(r.intervals[job][cluster], iv)
}

// Unobservable excuses what a job's pods that exist now run in one cluster. It is for a cluster
// whose API server was dead: nothing can be known, or enforced, about its pods then (its
// kubelets would keep running them; no control-plane component can stop them), so its stale
// copy's interval says nothing about fleetq. The spec that calls it asserts the stale copy is
// removed instead. The excuse is kept by the pods' creation time rather than by dropping what
// was recorded: the watch may see a stale pod (Terminating, or replayed after the outage) only
// after the call, while a pod created later (a copy placed there again) still counts. Creation
// times have a resolution of a second, so a pod created within the second of the call is
// excused too.
func (r *Recorder) Unobservable(cluster, job string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.excused[cluster+"/"+job] = time.Now()
}

// counts tells whether a pod of job created at created, running in cluster, counts; the caller
// holds r.mu.
func (r *Recorder) counts(cluster, job string, created time.Time) bool {
	cut, ok := r.excused[cluster+"/"+job]
	return !ok || created.After(cut)
}

// all is every running window recorded so far, by canonical job and cluster, those of still
// running pods up to now, without those Unobservable excused; the caller holds r.mu.
func (r *Recorder) all() map[string]map[string][]interval {
	now := time.Now()
	all := map[string]map[string][]interval{}
	keep := func(job, cluster string, iv interval) {
		if !r.counts(cluster, job, iv.created) {
			return
		}
		if all[job] == nil {
			all[job] = map[string][]interval{}
		}
		all[job][cluster] = append(all[job][cluster], iv)
	}
	for j, byCluster := range r.intervals {
		for c, ivs := range byCluster {
			for _, iv := range ivs {
				keep(r.canonical(j), c, iv)
			}
		}
	}
	for key, run := range r.running {
		keep(r.canonical(run.job), key[:indexSlash(key)], interval{from: run.from, to: now, created: run.created})
	}
	return all
}

// Overlap is one window in which a job had running pods in two clusters.
type Overlap struct {
	Job                string
	Cluster, Other     string
	From, To           time.Time
	OtherFrom, OtherTo time.Time
}

// String names the job, both clusters and both running windows.
func (o Overlap) String() string {
	return fmt.Sprintf("job %s ran in %s (%s–%s) and %s (%s–%s)", o.Job,
		o.Cluster, o.From.Format(time.StampMilli), o.To.Format(time.StampMilli),
		o.Other, o.OtherFrom.Format(time.StampMilli), o.OtherTo.Format(time.StampMilli))
}

// Overlaps lists every job that had running pods in two clusters at the same moment, with
// the clusters and the overlapping window; pods still running count up to now.
func (r *Recorder) Overlaps() []string {
	var out []string
	for _, o := range r.OverlapList() {
		out = append(out, o.String())
	}
	sort.Strings(out)
	return out
}

// OverlapList is Overlaps as values, for a caller that keys or counts them.
func (r *Recorder) OverlapList() []Overlap {
	r.mu.Lock()
	defer r.mu.Unlock()
	all := r.all()
	var out []Overlap
	for job, byCluster := range all {
		clusters := make([]string, 0, len(byCluster))
		for c := range byCluster {
			clusters = append(clusters, c)
		}
		sort.Strings(clusters)
		for i := range clusters {
			for j := i + 1; j < len(clusters); j++ {
				for _, a := range byCluster[clusters[i]] {
					for _, b := range byCluster[clusters[j]] {
						if a.from.Before(b.to) && b.from.Before(a.to) {
							out = append(out, Overlap{Job: job, Cluster: clusters[i], From: a.from, To: a.to, Other: clusters[j], OtherFrom: b.from, OtherTo: b.to})
						}
					}
				}
			}
		}
	}
	return out
}

// Terminations counts the pods seen Terminating so far.
func (r *Recorder) Terminations() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.terminating)
}

// Clusters reports in which clusters a job has had running pods so far.
func (r *Recorder) Clusters(job string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	byCluster := r.all()[job]
	out := make([]string, 0, len(byCluster))
	for c := range byCluster {
		out = append(out, c)
	}
	sort.Strings(out)
	return out
}

// Succeeded counts, per cluster, the pods of a job seen to succeed there: a job that ran to the
// end exactly once has all its completions in one cluster (a copy evicted part-way may leave a
// few in another).
func (r *Recorder) Succeeded(job string) map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int{}
	for j, byCluster := range r.succeeded {
		if r.canonical(j) == job {
			for c, pods := range byCluster {
				out[c] += len(pods)
			}
		}
	}
	return out
}

func indexSlash(s string) int {
	for i := range len(s) {
		if s[i] == '/' {
			return i
		}
	}
	return len(s)
}
