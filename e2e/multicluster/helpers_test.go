package multicluster

import (
	"context"
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2" //nolint:revive // Ginkgo's DSL reads best unqualified.
	. "github.com/onsi/gomega"    //nolint:revive // Gomega's DSL reads best unqualified.
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/e2e/lab"
	"github.com/fleetq/fleetq/internal/workload"
)

// gpuJob describes a job a spec submits: pods × GPUs per pod, optionally pinned to a GPU product
// with a node selector, running for runFor on the fake nodes.
type gpuJob struct {
	namespace, queue string
	pods             int32
	gpus             int64
	product          string
	runFor           string
	priorityClass    string
}

func (j gpuJob) create(ctx context.Context, name string) *batchv1.Job {
	if j.namespace == "" {
		j.namespace = "research"
	}
	if j.queue == "" {
		j.queue = "team-queue"
	}
	labels := map[string]string{kueue.QueueNameLabel: j.queue}
	if j.priorityClass != "" {
		labels[kueue.PriorityClassLabel] = j.priorityClass
	}
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: j.namespace, Name: name, Labels: labels},
		Spec:       batchv1.JobSpec{Parallelism: ptr.To(j.pods), Completions: ptr.To(j.pods), Template: j.template()},
	}
	Expect(mgmt.Create(ctx, job)).To(Succeed())
	return job
}

// template is the job's pod template as a user writes it.
func (j gpuJob) template() corev1.PodTemplateSpec {
	tmpl := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{}},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name: "trainer", Image: "registry.k8s.io/e2e-test-images/agnhost:2.53",
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), lab.GPUResource: *resource.NewQuantity(j.gpus, resource.DecimalSI)},
					Limits:   corev1.ResourceList{lab.GPUResource: *resource.NewQuantity(j.gpus, resource.DecimalSI)},
				},
			}},
		},
	}
	if j.runFor != "" {
		tmpl.Annotations[lab.RunTimeAnnotation] = j.runFor
	}
	if j.product != "" {
		tmpl.Spec.NodeSelector = map[string]string{lab.GPUProductLabel: j.product}
	}
	return tmpl
}

func workloadOf(ctx context.Context, job *batchv1.Job) *kueue.Workload {
	wl := &kueue.Workload{}
	if err := mgmt.Get(ctx, types.NamespacedName{Namespace: job.Namespace, Name: workload.NameFor("Job", job.Name, job.UID)}, wl); err != nil {
		return nil
	}
	return wl
}

// placementOf says where the job's workload is placed and why, for failure messages.
func placementOf(ctx context.Context, job *batchv1.Job) string {
	wl := workloadOf(ctx, job)
	if wl == nil {
		return "no workload yet"
	}
	var out []string
	for _, c := range wl.Status.AdmissionChecks {
		out = append(out, fmt.Sprintf("%s %s: %s", c.Name, c.State, c.Message))
	}
	return strings.Join(out, "; ")
}

// copiesOf lists the workers holding a Job copy of job.
func copiesOf(ctx context.Context, job *batchv1.Job) []string {
	var out []string
	for _, w := range workers {
		j := &batchv1.Job{}
		if err := env.Cluster(w).Client().Get(ctx, client.ObjectKeyFromObject(job), j); err == nil {
			out = append(out, w)
		}
	}
	return out
}

// podsIn lists the pods of a job in one cluster that are not being deleted.
func podsIn(ctx context.Context, cluster string, job *batchv1.Job) []corev1.Pod {
	pods := &corev1.PodList{}
	Expect(env.Cluster(cluster).Client().List(ctx, pods, client.InNamespace(job.Namespace), client.MatchingLabels{batchv1.JobNameLabel: job.Name})).To(Succeed())
	var out []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

func runningIn(ctx context.Context, cluster string, job *batchv1.Job) int {
	n := 0
	for _, p := range podsIn(ctx, cluster, job) {
		if p.Status.Phase == corev1.PodRunning {
			n++
		}
	}
	return n
}

// phases lists pods as name=phase@node, for failure messages.
func phases(pods []corev1.Pod) string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name+"="+string(p.Status.Phase)+"@"+p.Spec.NodeName)
	}
	return "[" + strings.Join(out, " ") + "]"
}

func managerJob(ctx context.Context, job *batchv1.Job) *batchv1.Job {
	cur := &batchv1.Job{}
	Expect(mgmt.Get(ctx, client.ObjectKeyFromObject(job), cur)).To(Succeed())
	return cur
}

func clusterOf(ctx context.Context, job *batchv1.Job) string {
	wl := workloadOf(ctx, job)
	if wl == nil {
		return ""
	}
	return workload.ClusterName(wl)
}

func admissionMessage(ctx context.Context, job *batchv1.Job) string {
	wl := workloadOf(ctx, job)
	if wl == nil {
		return ""
	}
	for _, c := range wl.Status.Conditions {
		if c.Type == kueue.WorkloadQuotaReserved {
			return fmt.Sprintf("%s/%s: %s", c.Status, c.Reason, c.Message)
		}
	}
	return ""
}

func deleteJob(ctx context.Context, job *batchv1.Job) {
	Expect(client.IgnoreNotFound(mgmt.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground)))).To(Succeed())
}

// checkMessage is the message of the workload's MultiKueue admission check.
func checkMessage(ctx context.Context, job *batchv1.Job) string {
	wl := workloadOf(ctx, job)
	if wl == nil || len(wl.Status.AdmissionChecks) == 0 {
		return ""
	}
	return wl.Status.AdmissionChecks[0].Message
}

// eventNotes lists the notes of the manager's events with the given reason about the job's
// workload, oldest first.
func eventNotes(ctx context.Context, job *batchv1.Job, reason string) []string {
	wl := workloadOf(ctx, job)
	if wl == nil {
		return nil
	}
	list := &eventsv1.EventList{}
	Expect(mgmt.List(ctx, list, client.InNamespace(job.Namespace))).To(Succeed())
	var out []string
	for _, e := range list.Items {
		if e.Regarding.UID == wl.UID && e.Reason == reason {
			out = append(out, e.Note)
		}
	}
	return out
}

// squat takes every GPU of a worker's A100 nodes with pods fleetq does not manage, bound to the
// nodes directly (as a team running outside the queues would), and returns them.
func squat(ctx context.Context, cluster string) []*corev1.Pod {
	c := env.Cluster(cluster).Client()
	nodes := &corev1.NodeList{}
	Expect(c.List(ctx, nodes, client.MatchingLabels{lab.GPUProductLabel: lab.A100})).To(Succeed())
	Expect(nodes.Items).NotTo(BeEmpty())
	var pods []*corev1.Pod
	for _, n := range nodes.Items {
		gpus := n.Status.Allocatable[lab.GPUResource]
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "squat-" + n.Name},
			Spec: corev1.PodSpec{
				NodeName:    n.Name,
				Tolerations: []corev1.Toleration{{Key: string(lab.GPUResource), Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
				Containers: []corev1.Container{{
					Name: "squat", Image: "registry.k8s.io/e2e-test-images/agnhost:2.53",
					Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{lab.GPUResource: gpus},
						Limits:   corev1.ResourceList{lab.GPUResource: gpus},
					},
				}},
			},
		}
		Expect(c.Create(ctx, p)).To(Succeed())
		pods = append(pods, p)
	}
	return pods
}

// expectRunningOn waits until the job is placed on cluster, its pod runs there, and its only copy
// is there.
func expectRunningOn(ctx context.Context, job *batchv1.Job, cluster string, timeout time.Duration) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		g.Expect(clusterOf(ctx, job)).To(Equal(cluster))
		g.Expect(runningIn(ctx, cluster, job)).To(Equal(1))
		g.Expect(copiesOf(ctx, job)).To(Equal([]string{cluster}), "its only copy is in %s", cluster)
	}).WithContext(ctx).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
}
