package multicluster

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2" //nolint:revive // Ginkgo's DSL reads best unqualified.
	. "github.com/onsi/gomega"    //nolint:revive // Gomega's DSL reads best unqualified.
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
)

// The management cluster runs its own job controller here, so a Job fleetq failed to mark as
// dispatched would get pods in the management cluster as well as its copy in a worker.
var _ = Describe("managedBy", func() {
	AfterEach(func(ctx SpecContext) {
		cleanup(ctx)
		Expect(watcher.Overlaps()).To(BeEmpty(), "no job may run in two clusters at once")
	})

	// waitsNamingManagedBy checks that a job on a multi-cluster queue is neither copied nor run
	// in the management cluster, and that its workload says why and what to do.
	waitsNamingManagedBy := func(ctx context.Context, job *batchv1.Job) {
		Eventually(func(g Gomega) {
			wl := workloadOf(ctx, job)
			g.Expect(wl).NotTo(BeNil())
			c := meta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadQuotaReserved)
			g.Expect(c).NotTo(BeNil(), "conditions: %v", wl.Status.Conditions)
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Message).To(And(ContainSubstring("spec.managedBy"), ContainSubstring("delete the Job and create it again")))
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(copiesOf(ctx, job)).To(BeEmpty(), "copies in workers")
			g.Expect(podsIn(ctx, "management", job)).To(BeEmpty(), "pods in the management cluster")
			g.Expect(workloadOf(ctx, job).Status.Admission).To(BeNil(), "it holds no quota")
		}).WithContext(ctx).WithTimeout(5 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
	}

	It("never runs a Job that names its own managedBy on a multi-cluster queue, and says which field to fix", func(ctx SpecContext) {
		job := &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Namespace: "research", Name: "own-controller", Labels: map[string]string{kueue.QueueNameLabel: "team-queue"}},
			Spec: batchv1.JobSpec{
				ManagedBy: ptr.To(batchv1.JobControllerName),
				Template:  gpuTemplate(1),
			},
		}
		Expect(mgmt.Create(ctx, job)).To(Succeed())
		waitsNamingManagedBy(ctx, job)
	})

	It("never runs a Job created before its LocalQueue twice", func(ctx SpecContext) {
		job := &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Namespace: "research", Name: "before-its-queue", Labels: map[string]string{kueue.QueueNameLabel: "late-queue"}},
			Spec:       batchv1.JobSpec{Template: gpuTemplate(1)},
		}
		Expect(mgmt.Create(ctx, job)).To(Succeed())
		Eventually(func(g Gomega) {
			wl := workloadOf(ctx, job)
			g.Expect(wl).NotTo(BeNil())
			g.Expect(meta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadQuotaReserved)).NotTo(BeNil())
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())

		lq := &kueue.LocalQueue{ObjectMeta: metav1.ObjectMeta{Namespace: "research", Name: "late-queue"}, Spec: kueue.LocalQueueSpec{ClusterQueue: "research-gpu-cq"}}
		Expect(mgmt.Create(ctx, lq)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(mgmt.Delete(ctx, lq))).To(Succeed()) })
		waitsNamingManagedBy(ctx, job)
	})
})

// gpuTemplate is a pod template asking for gpus A100 GPUs, running until deleted.
func gpuTemplate(gpus int64) corev1.PodTemplateSpec {
	return gpuJob{gpus: gpus}.template()
}
