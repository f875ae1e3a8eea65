package integration

import (
	"cmp"
	"context"
	"maps"
	"time"

	. "github.com/onsi/gomega" //nolint:revive // Gomega's DSL reads best unqualified.
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetq "github.com/fleetq/fleetq/api/fleetq/v1alpha1"
	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/e2e/lab"
	"github.com/fleetq/fleetq/internal/integration/pod"
)

var gpuToleration = corev1.Toleration{Key: string(lab.GPUResource), Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}

// syncedFlavor is a ResourceFlavor as the manager syncs it into a worker.
func syncedFlavor(name, product string, tolerations ...corev1.Toleration) *kueue.ResourceFlavor {
	return &kueue.ResourceFlavor{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{fleetq.OriginLabel: origin}},
		Spec:       kueue.ResourceFlavorSpec{NodeLabels: map[string]string{lab.GPUProductLabel: product}, Tolerations: tolerations},
	}
}

// copySpec describes a dispatched workload: count pods of gpus GPUs each, on the A100 flavor unless
// l4 is set.
type copySpec struct {
	ns, name string
	count    int32
	gpus     int64
	priority int32
	policy   fleetq.LocalPreemptionPolicy
	l4       bool
	// runTime is how long each pod runs on its fake node; default one hour (until deleted).
	runTime time.Duration
	// origin overrides the suite's origin (another manager's copy).
	origin string
	// userOwned makes the Job and Workload without any origin label or annotation, as a user would.
	userOwned bool
}

func (c copySpec) template() corev1.PodTemplateSpec {
	run := c.runTime
	if run == 0 {
		run = time.Hour
	}
	product, tolerations := lab.A100, []corev1.Toleration{gpuToleration}
	if c.l4 {
		product, tolerations = lab.L4, nil
	}
	gpus := *resource.NewQuantity(c.gpus, resource.DecimalSI)
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{lab.RunTimeAnnotation: run.String()}},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			// Injected by the manager from the flavor the workload was admitted with.
			NodeSelector: map[string]string{lab.GPUProductLabel: product},
			Tolerations:  tolerations,
			Containers: []corev1.Container{{
				Name: "train", Image: "registry.example/trainer:v1",
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), lab.GPUResource: gpus},
					Limits:   corev1.ResourceList{lab.GPUResource: gpus},
				},
			}},
		},
	}
}

// create makes the remote Job (suspended) and the Workload copy owned by it, as dispatch does.
func (c copySpec) create(ctx context.Context) (*batchv1.Job, *kueue.Workload) {
	labels, annotations := c.identity()
	ensureNamespace(ctx, c.ns)
	tmpl := c.startedTemplate()
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: c.ns, Name: c.name, Labels: labels, Annotations: annotations},
		Spec: batchv1.JobSpec{
			Suspend:      ptr.To(true),
			Parallelism:  ptr.To(c.count),
			Completions:  ptr.To(c.count),
			BackoffLimit: ptr.To[int32](0),
			Template:     tmpl,
		},
	}
	Expect(k8s.Create(ctx, job)).To(Succeed())
	return job, c.createWorkload(ctx, metav1.OwnerReference{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID, Controller: ptr.To(true)}, tmpl)
}

// identity is the origin label and annotation a copy carries (none for a user's own objects); the
// maps are fresh and never nil, so a caller may add to them.
func (c copySpec) identity() (labels, annotations map[string]string) {
	if c.userOwned {
		return map[string]string{}, map[string]string{}
	}
	return map[string]string{fleetq.OriginLabel: cmp.Or(c.origin, origin)}, map[string]string{fleetq.OriginUIDAnnotation: "uid-of-" + c.name}
}

// createPod makes a plain Pod copy, held by the admission gate, and its Workload copy, as dispatch
// does for a Pod (integrations.frameworks: pod).
func (c copySpec) createPod(ctx context.Context) (*corev1.Pod, *kueue.Workload) {
	ensureNamespace(ctx, c.ns)
	tmpl := c.startedTemplate()
	labels, annotations := c.identity()
	maps.Copy(labels, tmpl.Labels)
	maps.Copy(annotations, tmpl.Annotations)
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: c.ns, Name: c.name, Labels: labels, Annotations: annotations},
		Spec:       *tmpl.Spec.DeepCopy(),
	}
	p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: pod.GateName}}
	Expect(k8s.Create(ctx, p)).To(Succeed())
	return p, c.createWorkload(ctx, metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: p.Name, UID: p.UID, Controller: ptr.To(true)}, tmpl)
}

// startedTemplate is the copy's pod template as the manager starts it: labelled with the workload's
// identity and pod set, unless the objects are a user's own.
func (c copySpec) startedTemplate() corev1.PodTemplateSpec {
	tmpl := c.template()
	if !c.userOwned {
		tmpl.Labels = map[string]string{fleetq.WorkloadUIDLabel: "uid-of-" + c.name, fleetq.PodSetLabel: "main"}
	}
	return tmpl
}

// createWorkload makes the Workload copy of a job copy, owned by it.
func (c copySpec) createWorkload(ctx context.Context, owner metav1.OwnerReference, tmpl corev1.PodTemplateSpec) *kueue.Workload {
	labels, annotations := c.identity()
	flavor := a100Flavor
	if c.l4 {
		flavor = l4Flavor
	}
	policy := cmp.Or(c.policy, fleetq.LocalPreemptionNever)
	wl := &kueue.Workload{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: c.ns, Name: c.name, Labels: labels,
			Annotations: map[string]string{
				fleetq.OriginClusterQueueAnnotation: "research-gpu-cq",
				fleetq.LocalPreemptionAnnotation:    string(policy),
				fleetq.PodSetFlavorsAnnotation:      `{"main":{"cpu":"` + flavor + `","nvidia.com/gpu":"` + flavor + `"}}`,
			},
			OwnerReferences: []metav1.OwnerReference{owner},
		},
		Spec: kueue.WorkloadSpec{
			QueueName: "research",
			Priority:  ptr.To(c.priority),
			// The copy's pod sets carry the placement the manager injected.
			PodSets: []kueue.PodSet{{Name: "main", Count: c.count, Template: tmpl}},
		},
	}
	maps.Copy(wl.Annotations, annotations)
	Expect(k8s.Create(ctx, wl)).To(Succeed())
	return wl
}

func ensureNamespace(ctx context.Context, ns string) {
	err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	if !apierrors.IsAlreadyExists(err) {
		Expect(err).NotTo(HaveOccurred())
	}
}

func getWorkload(ctx context.Context, g Gomega, ns, name string) *kueue.Workload {
	wl := &kueue.Workload{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, wl)).To(Succeed())
	return wl
}

func getJob(ctx context.Context, g Gomega, ns, name string) *batchv1.Job {
	job := &batchv1.Job{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, job)).To(Succeed())
	return job
}

func getReport(ctx context.Context, g Gomega) *fleetq.CapacityReport {
	g.Expect(agent.Running()).To(BeTrue(), "fleetq-agent exited: %v", agent.Err())
	r := &fleetq.CapacityReport{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: agentNS, Name: worker}, r)).To(Succeed())
	return r
}

func condition(wl *kueue.Workload, typ string) *metav1.Condition {
	return meta.FindStatusCondition(wl.Status.Conditions, typ)
}

// conditionIs matches a condition's status and reason.
func conditionIs(g Gomega, wl *kueue.Workload, typ string, status metav1.ConditionStatus, reason string) *metav1.Condition {
	c := condition(wl, typ)
	g.Expect(c).NotTo(BeNil(), "workload %s/%s has no %s condition: %+v", wl.Namespace, wl.Name, typ, wl.Status.Conditions)
	g.Expect(c.Status).To(Equal(status), "%s: %+v", typ, c)
	g.Expect(c.Reason).To(Equal(reason), "%s: %+v", typ, c)
	return c
}

// runningPods lists a Job's non-terminal pods with the node each is bound to.
func jobPods(ctx context.Context, g Gomega, job *batchv1.Job) []corev1.Pod {
	var pods corev1.PodList
	g.Expect(k8s.List(ctx, &pods, client.InNamespace(job.Namespace), client.MatchingLabels{batchv1.JobNameLabel: job.Name})).To(Succeed())
	var out []corev1.Pod
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			out = append(out, p)
		}
	}
	return out
}

// runsOnePod checks that the Job copy name is admitted and runs its one pod, and returns that pod,
// so that a spec can say where it runs.
func runsOnePod(ctx context.Context, g Gomega, name string) corev1.Pod {
	conditionIs(g, getWorkload(ctx, g, teamNS, name), kueue.WorkloadAdmitted, metav1.ConditionTrue, fleetq.AdmittedReason)
	pods := jobPods(ctx, g, getJob(ctx, g, teamNS, name))
	g.Expect(pods).To(HaveLen(1))
	g.Expect(pods[0].Status.Phase).To(Equal(corev1.PodRunning))
	return pods[0]
}

// deleteCopy removes a copy's Job (its pods in the foreground) and Workload and waits until their pods
// are gone, so the next spec starts on empty nodes.
func deleteCopy(ctx context.Context, ns, name string) {
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	Expect(client.IgnoreNotFound(k8s.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground)))).To(Succeed())
	wl := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	Expect(client.IgnoreNotFound(k8s.Delete(ctx, wl))).To(Succeed())
	Eventually(func(g Gomega) {
		var pods corev1.PodList
		g.Expect(k8s.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{batchv1.JobNameLabel: name})).To(Succeed())
		g.Expect(pods.Items).To(BeEmpty())
	}).WithContext(ctx).WithTimeout(waitLong).WithPolling(poll).Should(Succeed())
}

// quantity reads one resource of a resource list as an integer (0 when missing).
func quantity(rl corev1.ResourceList, r corev1.ResourceName) int64 {
	q, ok := rl[r]
	if !ok {
		return 0
	}
	return q.Value()
}

func flavorOf(g Gomega, r *fleetq.CapacityReport, name string) fleetq.FlavorCapacity {
	for _, f := range r.Status.Flavors {
		if f.Name == name {
			return f
		}
	}
	g.Expect(r.Status.Flavors).To(ContainElement(HaveField("Name", name)), "report revision %d", r.Status.Revision)
	return fleetq.FlavorCapacity{}
}
