package singlecluster

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2" //nolint:revive // Ginkgo's DSL reads best unqualified.
	. "github.com/onsi/gomega"    //nolint:revive // Gomega's DSL reads best unqualified.
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/e2e/components"
	"github.com/fleetq/fleetq/manager/setup"
)

var _ = Describe("Two managers", Ordered, func() {
	const ns = "ha"
	var jobs []*batchv1.Job

	BeforeAll(func(ctx SpecContext) {
		Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		Expect(k8s.Create(ctx, &kueue.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: "ha-flavor"}})).To(Succeed())
		Expect(k8s.Create(ctx, &kueue.ClusterQueue{
			ObjectMeta: metav1.ObjectMeta{Name: "ha-cq"},
			Spec: kueue.ClusterQueueSpec{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
				ResourceGroups: []kueue.ResourceGroup{{
					CoveredResources: []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory},
					Flavors: []kueue.FlavorQuotas{{Name: "ha-flavor", Resources: []kueue.ResourceQuota{
						{Name: corev1.ResourceCPU, NominalQuota: resource.MustParse("4")},
						{Name: corev1.ResourceMemory, NominalQuota: resource.MustParse("4Gi")},
					}}},
				}},
			},
		})).To(Succeed())
		Expect(k8s.Create(ctx, &kueue.LocalQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "team-queue"}, Spec: kueue.LocalQueueSpec{ClusterQueue: "ha-cq"}})).To(Succeed())
	})

	It("never admit at once: the standby admits nothing, and takes over when the leader stops", func(ctx SpecContext) {
		// The standby serves webhooks on its own port; the webhook configurations keep pointing at
		// the first manager's, which the API server reaches while it runs.
		standbyCfg := *mgrCfg
		port, err := setup.FreePort()
		Expect(err).NotTo(HaveOccurred())
		standbyCfg.Webhook.Port = ptr.To(int32(port))
		standby, err := components.StartManager(ctx, env, "management", &standbyCfg)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) { Expect(standby.Stop(ctx)).To(Succeed()) })

		// Two 2-CPU jobs fill the queue; the third waits. With two managers running, a double
		// admission would show up as three admitted jobs.
		for i := range 3 {
			jobs = append(jobs, createJob(ctx, ns, func(u *unstructured.Unstructured) { u.SetName(fmt.Sprintf("ha-%d", i)); u.SetGenerateName("") }))
		}
		Eventually(func(g Gomega) {
			in, out := jobsBy(ctx, jobs)
			g.Expect(in).To(HaveLen(2))
			g.Expect(out).To(HaveLen(1))
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
		Consistently(func() int { in, _ := jobsBy(ctx, jobs); return len(in) }).WithContext(ctx).WithTimeout(3 * time.Second).Should(Equal(2))
		Expect(standby.Running()).To(BeTrue(), "standby manager exited: %v", standby.Err())
		lease := &coordinationv1.Lease{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: mgrCfg.Namespace, Name: mgrCfg.LeaderElection.LeaseName}, lease)).To(Succeed())
		Expect(ptr.Deref(lease.Spec.HolderIdentity, "")).NotTo(BeEmpty(), "one of them leads")

		// The first manager stops; the standby, now the only one, takes the lease and admits the
		// waiting job when quota frees.
		Expect(manager.Stop(ctx)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) {
			Expect(manager.Restart(ctx)).To(Succeed())
			Expect(components.WaitForWebhooks(ctx, k8s, time.Minute)).To(Succeed())
		})
		var running *batchv1.Job
		for _, j := range jobs {
			if admitted(ctx, j) {
				running = j
				break
			}
		}
		Expect(k8s.Delete(ctx, running, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(standby.Running()).To(BeTrue(), "standby manager exited: %v", standby.Err())
			in, _ := jobsBy(ctx, jobs)
			g.Expect(in).To(HaveLen(2))
			g.Expect(in).NotTo(ContainElement(running.Name))
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
	})
})
