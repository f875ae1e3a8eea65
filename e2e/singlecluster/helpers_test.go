package singlecluster

import (
	"context"
	"path/filepath"
	"sort"

	. "github.com/onsi/gomega" //nolint:revive // Gomega's DSL reads best unqualified.
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/e2e/bench"
	"github.com/fleetq/fleetq/e2e/manifest"
	"github.com/fleetq/fleetq/internal/workload"
)

// tutorial is the directory of the tutorial's manifests, re-indented and otherwise unchanged.
var tutorial = filepath.Join("..", "testdata", "tutorial")

func tutorialFile(name string) string { return filepath.Join(tutorial, name) }

// createJob creates the tutorial's job.yaml (generateName train-) in a namespace, with optional
// changes, like `kubectl create -f job.yaml` (or the tutorial's sed for the inference namespace).
func createJob(ctx context.Context, namespace string, mutate ...func(*unstructured.Unstructured)) *batchv1.Job {
	setNS := func(u *unstructured.Unstructured) { u.SetNamespace(namespace) }
	objs, err := manifest.Create(ctx, k8s, tutorialFile("job.yaml"), append([]func(*unstructured.Unstructured){setNS}, mutate...)...)
	Expect(err).NotTo(HaveOccurred())
	job := &batchv1.Job{}
	Expect(k8s.Get(ctx, client.ObjectKeyFromObject(objs[0]), job)).To(Succeed())
	return job
}

// jobUpdatesValidated is how many Job updates the API server has sent fleetq's validating job
// webhook so far.
func jobUpdatesValidated(ctx context.Context) float64 {
	cs, err := kubernetes.NewForConfig(env.Management().RESTConfig())
	Expect(err).NotTo(HaveOccurred())
	m, err := bench.ScrapeMetrics(ctx, cs)
	Expect(err).NotTo(HaveOccurred())
	return m.Webhooks["vjob.fleetq.dev UPDATE"].Calls
}

// oneGPU turns the tutorial's job into the GPU section's: queue gpu-queue, one GPU per pod.
func oneGPU(u *unstructured.Unstructured) {
	u.SetLabels(map[string]string{kueue.QueueNameLabel: "gpu-queue"})
	containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
	c := containers[0].(map[string]any)
	c["resources"] = map[string]any{"requests": map[string]any{"cpu": "1", "memory": "512Mi", "nvidia.com/gpu": "1"}, "limits": map[string]any{"nvidia.com/gpu": "1"}}
	Expect(unstructured.SetNestedSlice(u.Object, containers, "spec", "template", "spec", "containers")).To(Succeed())
}

// workloadOf reads the workload fleetq created for a job.
func workloadOf(ctx context.Context, job *batchv1.Job) (*kueue.Workload, error) {
	wl := &kueue.Workload{}
	err := k8s.Get(ctx, types.NamespacedName{Namespace: job.Namespace, Name: workload.NameFor("Job", job.Name, job.UID)}, wl)
	return wl, err
}

// condition returns a workload condition of the job's workload, or nil.
func condition(ctx context.Context, job *batchv1.Job, typ string) *metavCondition {
	wl, err := workloadOf(ctx, job)
	if err != nil {
		return nil
	}
	c := meta.FindStatusCondition(wl.Status.Conditions, typ)
	if c == nil {
		return nil
	}
	return &metavCondition{Status: string(c.Status), Reason: c.Reason, Message: c.Message}
}

// metavCondition is the part of a condition specs compare.
type metavCondition struct{ Status, Reason, Message string }

func admitted(ctx context.Context, job *batchv1.Job) bool {
	wl, err := workloadOf(ctx, job)
	return err == nil && workload.IsAdmitted(wl) && !workload.IsEvicted(wl)
}

func suspended(ctx context.Context, job *batchv1.Job) bool {
	cur := &batchv1.Job{}
	Expect(k8s.Get(ctx, client.ObjectKeyFromObject(job), cur)).To(Succeed())
	return cur.Spec.Suspend != nil && *cur.Spec.Suspend
}

// podsOf lists the pods of a job that are not being deleted.
func podsOf(ctx context.Context, job *batchv1.Job) []corev1.Pod {
	pods := &corev1.PodList{}
	Expect(k8s.List(ctx, pods, client.InNamespace(job.Namespace), client.MatchingLabels{batchv1.JobNameLabel: job.Name})).To(Succeed())
	var out []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

func runningPods(ctx context.Context, job *batchv1.Job) int {
	n := 0
	for _, p := range podsOf(ctx, job) {
		if p.Status.Phase == corev1.PodRunning {
			n++
		}
	}
	return n
}

// jobsBy splits jobs into admitted and not admitted, by name.
func jobsBy(ctx context.Context, jobs []*batchv1.Job) (in, out []string) {
	for _, j := range jobs {
		if admitted(ctx, j) {
			in = append(in, j.Name)
		} else {
			out = append(out, j.Name)
		}
	}
	sort.Strings(in)
	sort.Strings(out)
	return in, out
}

func clusterQueue(ctx context.Context, name string) *kueue.ClusterQueue {
	cq := &kueue.ClusterQueue{}
	Expect(k8s.Get(ctx, types.NamespacedName{Name: name}, cq)).To(Succeed())
	return cq
}

// usage returns a ClusterQueue's flavorsUsage of one resource, total and borrowed, as strings.
func usage(ctx context.Context, cq, flavor string, res corev1.ResourceName) [2]string {
	for _, f := range clusterQueue(ctx, cq).Status.FlavorsUsage {
		if string(f.Name) != flavor {
			continue
		}
		for _, r := range f.Resources {
			if r.Name == res {
				return [2]string{r.Total.String(), r.Borrowed.String()}
			}
		}
	}
	return [2]string{}
}

func resourceQty(s string) resource.Quantity { return resource.MustParse(s) }
