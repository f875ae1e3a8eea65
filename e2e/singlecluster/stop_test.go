package singlecluster

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2" //nolint:revive // Ginkgo's DSL reads best unqualified.
	. "github.com/onsi/gomega"    //nolint:revive // Gomega's DSL reads best unqualified.
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/e2e/lab"
)

// Kueue's spec.stopPolicy on ClusterQueues and LocalQueues, set as a user does with kubectl patch.
var _ = Describe("Stopping a queue (spec.stopPolicy)", Ordered, func() {
	const ns = "stops"
	var first, second *batchv1.Job

	BeforeAll(func(ctx SpecContext) {
		Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		// CPU-only jobs on the job-kind specs' node, which has room for them beside those specs.
		Expect(k8s.Create(ctx, &kueue.ResourceFlavor{
			ObjectMeta: metav1.ObjectMeta{Name: "stops-flavor"},
			Spec: kueue.ResourceFlavorSpec{
				NodeLabels:  map[string]string{lab.PoolLabel: kindsPoolName},
				Tolerations: []corev1.Toleration{{Key: string(lab.GPUResource), Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
			},
		})).To(Succeed())
		Expect(k8s.Create(ctx, &kueue.ClusterQueue{
			ObjectMeta: metav1.ObjectMeta{Name: "stops-cq"},
			Spec: kueue.ClusterQueueSpec{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
				ResourceGroups: []kueue.ResourceGroup{{
					CoveredResources: []corev1.ResourceName{corev1.ResourceCPU},
					Flavors: []kueue.FlavorQuotas{{Name: "stops-flavor", Resources: []kueue.ResourceQuota{
						{Name: corev1.ResourceCPU, NominalQuota: resource.MustParse("4")},
					}}},
				}},
			},
		})).To(Succeed())
		Expect(k8s.Create(ctx, &kueue.LocalQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "stops-queue"}, Spec: kueue.LocalQueueSpec{ClusterQueue: "stops-cq"}})).To(Succeed())
	})

	AfterAll(func(ctx SpecContext) {
		Expect(k8s.DeleteAllOf(ctx, &batchv1.Job{}, client.InNamespace(ns), client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
		Eventually(func(g Gomega) {
			wls := &kueue.WorkloadList{}
			g.Expect(k8s.List(ctx, wls, client.InNamespace(ns))).To(Succeed())
			g.Expect(wls.Items).To(BeEmpty())
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
		Expect(k8s.Delete(ctx, &kueue.LocalQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "stops-queue"}})).To(Succeed())
		Expect(k8s.Delete(ctx, &kueue.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: "stops-cq"}})).To(Succeed())
		Expect(k8s.Delete(ctx, &kueue.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: "stops-flavor"}})).To(Succeed())
	})

	newJob := func(ctx context.Context, name string) *batchv1.Job {
		job := &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{kueue.QueueNameLabel: "stops-queue"}},
			Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "main", Image: "registry.example/sleep:v1", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
				}}},
			}}},
		}
		Expect(k8s.Create(ctx, job)).To(Succeed())
		return job
	}
	// setStopPolicy is `kubectl patch <kind> <name> --type merge -p '{"spec":{"stopPolicy":"<p>"}}'`.
	setStopPolicy := func(ctx context.Context, obj client.Object, p kueue.StopPolicy) {
		patch := fmt.Appendf(nil, `{"spec":{"stopPolicy":%q}}`, p)
		Expect(k8s.Patch(ctx, obj, client.RawPatch("application/merge-patch+json", patch))).To(Succeed())
	}
	runs := func(ctx context.Context, g Gomega, job *batchv1.Job) {
		g.Expect(admitted(ctx, job)).To(BeTrue(), "%s admitted", job.Name)
		g.Expect(runningPods(ctx, job)).To(Equal(1), "%s's pod runs", job.Name)
	}
	// drained checks that a job was evicted for reason, is suspended with no pod, and waits.
	drained := func(ctx context.Context, g Gomega, job *batchv1.Job, reason string, waits ...string) {
		ev := condition(ctx, job, kueue.WorkloadEvicted)
		g.Expect(ev).NotTo(BeNil(), "%s evicted", job.Name)
		g.Expect(ev.Reason).To(Equal(reason))
		g.Expect(suspended(ctx, job)).To(BeTrue(), "%s suspended", job.Name)
		g.Expect(podsOf(ctx, job)).To(BeEmpty(), "%s has no pod", job.Name)
		qr := condition(ctx, job, kueue.WorkloadQuotaReserved)
		g.Expect(qr).NotTo(BeNil())
		g.Expect(qr.Status).To(Equal("False"), "%s's quota is released", job.Name)
		for _, w := range waits {
			g.Expect(qr.Message).To(ContainSubstring(w), "why %s waits", job.Name)
		}
	}
	cq := &kueue.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: "stops-cq"}}
	lq := &kueue.LocalQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "stops-queue"}}

	It("Hold on a ClusterQueue: its admitted job runs on, a new one waits saying the queue is stopped, and starts once the policy is None", func(ctx SpecContext) {
		first = newJob(ctx, "first")
		Eventually(func(g Gomega) { runs(ctx, g, first) }).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
		setStopPolicy(ctx, cq, kueue.Hold)
		second = newJob(ctx, "second")
		Eventually(func(g Gomega) {
			qr := condition(ctx, second, kueue.WorkloadQuotaReserved)
			g.Expect(qr).NotTo(BeNil())
			g.Expect(qr.Status).To(Equal("False"))
			g.Expect(qr.Message).To(ContainSubstring(`"stops-cq" is stopped (spec.stopPolicy)`))
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
		Consistently(func(g Gomega) {
			runs(ctx, g, first)
			g.Expect(podsOf(ctx, second)).To(BeEmpty())
		}).WithContext(ctx).WithTimeout(2 * time.Second).WithPolling(poll).Should(Succeed())

		setStopPolicy(ctx, cq, kueue.None)
		Eventually(func(g Gomega) { runs(ctx, g, second) }).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
	})

	It("HoldAndDrain on a ClusterQueue evicts its admitted jobs: suspended, pods gone, quota released; they run again once the policy is None", func(ctx SpecContext) {
		setStopPolicy(ctx, cq, kueue.HoldAndDrain)
		Eventually(func(g Gomega) {
			for _, j := range []*batchv1.Job{first, second} {
				drained(ctx, g, j, kueue.WorkloadEvictedByClusterQueueStopped, "stops-cq", "is stopped (spec.stopPolicy")
			}
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(podsOf(ctx, first)).To(BeEmpty())
			g.Expect(podsOf(ctx, second)).To(BeEmpty())
		}).WithContext(ctx).WithTimeout(2 * time.Second).WithPolling(poll).Should(Succeed())

		setStopPolicy(ctx, cq, kueue.None)
		Eventually(func(g Gomega) {
			runs(ctx, g, first)
			runs(ctx, g, second)
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
	})

	It("HoldAndDrain on a LocalQueue evicts its admitted jobs and holds them, saying the LocalQueue is stopped, until the policy is None", func(ctx SpecContext) {
		setStopPolicy(ctx, lq, kueue.HoldAndDrain)
		Eventually(func(g Gomega) {
			for _, j := range []*batchv1.Job{first, second} {
				drained(ctx, g, j, kueue.WorkloadEvictedByLocalQueueStopped, "LocalQueue stops-queue is stopped (spec.stopPolicy)")
			}
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())

		setStopPolicy(ctx, lq, kueue.None)
		Eventually(func(g Gomega) {
			runs(ctx, g, first)
			runs(ctx, g, second)
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
	})
})
