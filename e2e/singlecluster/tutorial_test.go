package singlecluster

import (
	"fmt"
	"slices"
	"sort"
	"time"

	. "github.com/onsi/ginkgo/v2" //nolint:revive // Ginkgo's DSL reads best unqualified.
	. "github.com/onsi/gomega"    //nolint:revive // Gomega's DSL reads best unqualified.
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/e2e/components"
	"github.com/fleetq/fleetq/e2e/manifest"
	"github.com/fleetq/fleetq/internal/workload"
)

const (
	wait = 30 * time.Second
	poll = 100 * time.Millisecond
)

var _ = Describe("The GPU quota tutorial", Ordered, func() {
	var research []*batchv1.Job

	It("step 2-4: applies the flavor, the two team queues in cohort ai-platform and their LocalQueues", func(ctx SpecContext) {
		Expect(manifest.Apply(ctx, k8s, tutorialFile("flavor.yaml"), tutorialFile("queues.yaml"))).To(Succeed())
		for _, ns := range []string{"research", "inference"} {
			Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		}
		Expect(manifest.Apply(ctx, k8s, tutorialFile("localqueues.yaml"))).To(Succeed())

		for _, name := range []string{"research-cq", "inference-cq"} {
			Eventually(func(g Gomega) {
				cq := clusterQueue(ctx, name)
				g.Expect(cq.Spec.CohortName).To(BeEquivalentTo("ai-platform"), "the webhook copies the tutorial's cohort alias into cohortName")
				g.Expect(meta.IsStatusConditionTrue(cq.Status.Conditions, kueue.ClusterQueueActive)).To(BeTrue())
			}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
		}
		Eventually(func(g Gomega) {
			lq := &kueue.LocalQueue{}
			g.Expect(k8s.Get(ctx, types.NamespacedName{Namespace: "research", Name: "team-queue"}, lq)).To(Succeed())
			g.Expect(meta.IsStatusConditionTrue(lq.Status.Conditions, kueue.LocalQueueActive)).To(BeTrue())
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
	})

	It("step 5: admits a job and starts all of its pods", func(ctx SpecContext) {
		job := createJob(ctx, "research")
		research = append(research, job)
		Eventually(func(g Gomega) {
			g.Expect(admitted(ctx, job)).To(BeTrue())
			g.Expect(suspended(ctx, job)).To(BeFalse())
			g.Expect(runningPods(ctx, job)).To(Equal(2))
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
	})

	It("step 6: with inference idle, three more jobs are admitted, the last two borrowing", func(ctx SpecContext) {
		for range 3 {
			research = append(research, createJob(ctx, "research"))
		}
		Eventually(func(g Gomega) {
			in, _ := jobsBy(ctx, research)
			g.Expect(in).To(HaveLen(4))
			g.Expect(usage(ctx, "research-cq", "default-flavor", corev1.ResourceCPU)).To(Equal([2]string{"8", "4"}), "8 CPU in use, 4 of them borrowed")
			g.Expect(usage(ctx, "research-cq", "default-flavor", corev1.ResourceMemory)).To(Equal([2]string{"4Gi", "0"}))
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
	})

	It("step 6: a fifth job stays pending, says the borrowing limit is reached, and creates no pods", func(ctx SpecContext) {
		fifth := createJob(ctx, "research")
		research = append(research, fifth)
		Eventually(func(g Gomega) {
			c := condition(ctx, fifth, kueue.WorkloadQuotaReserved)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal("False"))
			g.Expect(c.Message).To(ContainSubstring("insufficient quota for cpu in flavor default-flavor: requests 2, available 0"))
			g.Expect(c.Message).To(ContainSubstring("borrowingLimit 4 reached"))
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(suspended(ctx, fifth)).To(BeTrue())
			g.Expect(podsOf(ctx, fifth)).To(BeEmpty())
		}).WithContext(ctx).WithTimeout(3 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
		cq := clusterQueue(ctx, "research-cq")
		Expect(cq.Status.PendingWorkloads).To(BeEquivalentTo(1))
		Expect(cq.Status.AdmittedWorkloads).To(BeEquivalentTo(4))
	})

	It("step 6: a user cannot start the pending job by unsuspending it", func(ctx SpecContext) {
		fifth := research[4]
		cur := &batchv1.Job{}
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(fifth), cur)).To(Succeed())
		patch := client.MergeFrom(cur.DeepCopy())
		cur.Spec.Suspend = ptr.To(false)
		updatesBefore := jobUpdatesValidated(ctx)
		err := k8s.Patch(ctx, cur, patch)
		Expect(err).To(MatchError(ContainSubstring("spec.suspend: Forbidden: the job waits in LocalQueue \"team-queue\" for quota")))
		// The lab's manager runs with the admin's credentials, as the user here does: sharing
		// them, its own updates are validated too, and so is the user's.
		Expect(jobUpdatesValidated(ctx)).To(Equal(updatesBefore+1), "a user's update is validated")
	})

	It("step 6: deleting a running job frees its quota and the pending job starts", func(ctx SpecContext) {
		victim, waiting := research[0], research[4]
		Expect(k8s.Delete(ctx, victim, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
		research = research[1:]
		Eventually(func(g Gomega) {
			g.Expect(admitted(ctx, waiting)).To(BeTrue())
			g.Expect(runningPods(ctx, waiting)).To(Equal(2))
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
		_, err := workloadOf(ctx, victim)
		Expect(err).To(HaveOccurred(), "the deleted job's workload is gone")
	})

	var inferenceJob *batchv1.Job
	It("step 7: an inference job waits while research borrows its quota", func(ctx SpecContext) {
		inferenceJob = createJob(ctx, "inference")
		Eventually(func(g Gomega) {
			c := condition(ctx, inferenceJob, kueue.WorkloadQuotaReserved)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Message).To(ContainSubstring("in use by other queues in cohort ai-platform"))
			g.Expect(c.Message).To(ContainSubstring("reclaimWithinCohort is Never"))
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
		Consistently(func() bool { return admitted(ctx, inferenceJob) }).WithContext(ctx).WithTimeout(2 * time.Second).Should(BeFalse())
	})

	It("step 7: after the reclaimWithinCohort patch, it preempts exactly one research borrower and starts", func(ctx SpecContext) {
		patch, err := manifest.Read(tutorialFile("inference-preemption-patch.yaml"))
		Expect(err).NotTo(HaveOccurred())
		raw, err := patch[0].MarshalJSON()
		Expect(err).NotTo(HaveOccurred())
		cq := &kueue.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: "inference-cq"}}
		Expect(k8s.Patch(ctx, cq, client.RawPatch(types.MergePatchType, raw))).To(Succeed())

		Eventually(func(g Gomega) {
			g.Expect(admitted(ctx, inferenceJob)).To(BeTrue())
			g.Expect(runningPods(ctx, inferenceJob)).To(Equal(2))
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())

		var preempted []*batchv1.Job
		for _, j := range research {
			if c := condition(ctx, j, kueue.WorkloadPreempted); c != nil && c.Status == "True" {
				Expect(c.Reason).To(Equal(kueue.InCohortReclamationReason))
				preempted = append(preempted, j)
			}
		}
		Expect(preempted).To(HaveLen(1), "exactly one research borrower is preempted")
		victim := preempted[0]
		Eventually(func(g Gomega) {
			g.Expect(suspended(ctx, victim)).To(BeTrue())
			g.Expect(podsOf(ctx, victim)).To(BeEmpty())
			ev := condition(ctx, victim, kueue.WorkloadEvicted)
			g.Expect(ev).NotTo(BeNil())
			g.Expect(ev.Reason).To(Equal(kueue.WorkloadEvictedByPreemption))
			rq := condition(ctx, victim, kueue.WorkloadRequeued)
			g.Expect(rq).NotTo(BeNil())
			g.Expect(rq.Status).To(Equal("True"))
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
		Eventually(func() [2]string { return usage(ctx, "inference-cq", "default-flavor", corev1.ResourceCPU) }).
			WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Equal([2]string{"2", "0"}), "status is written at most once a second")
	})

	It("GPU section: an A100 job runs on A100 nodes with the flavor's node selector and toleration", func(ctx SpecContext) {
		Expect(manifest.Apply(ctx, k8s, tutorialFile("gpu.yaml"))).To(Succeed())
		Expect(k8s.Create(ctx, &kueue.LocalQueue{
			ObjectMeta: metav1.ObjectMeta{Namespace: "research", Name: "gpu-queue"},
			Spec:       kueue.LocalQueueSpec{ClusterQueue: "research-gpu-cq"},
		})).To(Succeed())
		job := createJob(ctx, "research", oneGPU)
		Eventually(func(g Gomega) {
			g.Expect(admitted(ctx, job)).To(BeTrue())
			g.Expect(runningPods(ctx, job)).To(Equal(2))
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
		wl, err := workloadOf(ctx, job)
		Expect(err).NotTo(HaveOccurred())
		Expect(wl.Status.Admission.PodSetAssignments[0].Flavors).To(HaveKeyWithValue(corev1.ResourceName("nvidia.com/gpu"), kueue.ResourceFlavorReference("a100-flavor")))
		for _, p := range podsOf(ctx, job) {
			Expect(p.Spec.NodeSelector).To(HaveKeyWithValue("nvidia.com/gpu.product", "NVIDIA-A100-SXM4-80GB"))
			Expect(p.Spec.Tolerations).To(ContainElement(corev1.Toleration{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}))
			node := &corev1.Node{}
			Expect(k8s.Get(ctx, types.NamespacedName{Name: p.Spec.NodeName}, node)).To(Succeed())
			Expect(node.Labels).To(HaveKeyWithValue("nvidia.com/gpu.product", "NVIDIA-A100-SXM4-80GB"))
		}
	})

	It("GPU section: an evicted A100 job stops, gets its template back, and runs again on A100 nodes", func(ctx SpecContext) {
		job := createJob(ctx, "research", oneGPU, func(u *unstructured.Unstructured) { u.SetName("a100-evicted") })
		Eventually(func(g Gomega) {
			g.Expect(runningPods(ctx, job)).To(Equal(2))
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())

		// Deactivating the workload evicts it, the way a preemption does: the Job must stop even
		// though its template carries the flavor's node selector and toleration.
		setActive := func(active bool) {
			wl, err := workloadOf(ctx, job)
			Expect(err).NotTo(HaveOccurred())
			orig := wl.DeepCopy()
			wl.Spec.Active = ptr.To(active)
			Expect(k8s.Patch(ctx, wl, client.MergeFrom(orig))).To(Succeed())
		}
		setActive(false)
		Eventually(func(g Gomega) {
			cur := &batchv1.Job{}
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(job), cur)).To(Succeed())
			g.Expect(ptr.Deref(cur.Spec.Suspend, false)).To(BeTrue())
			g.Expect(podsOf(ctx, job)).To(BeEmpty())
			g.Expect(cur.Spec.Template.Spec.NodeSelector).NotTo(HaveKey("nvidia.com/gpu.product"), "the template is what the user wrote again")
			wl, err := workloadOf(ctx, job)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(workload.HasQuotaReservation(wl)).To(BeFalse(), "its quota is released")
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())

		setActive(true)
		Eventually(func(g Gomega) {
			g.Expect(runningPods(ctx, job)).To(Equal(2))
			for _, p := range podsOf(ctx, job) {
				g.Expect(p.Spec.NodeSelector).To(HaveKeyWithValue("nvidia.com/gpu.product", "NVIDIA-A100-SXM4-80GB"))
			}
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
		Expect(k8s.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
	})

	It("GPU section: a suspended job's template is restored when it is preempted", func(ctx SpecContext) {
		// The preempted research job was started once with default-flavor (no selector); its template
		// is back to what the user wrote.
		for _, j := range research {
			if c := condition(ctx, j, kueue.WorkloadPreempted); c != nil && c.Status == "True" && suspended(ctx, j) {
				cur := &batchv1.Job{}
				Expect(k8s.Get(ctx, client.ObjectKeyFromObject(j), cur)).To(Succeed())
				Expect(cur.Spec.Template.Spec.NodeSelector).To(BeEmpty())
				Expect(cur.Spec.Template.Spec.Tolerations).To(BeEmpty())
			}
		}
	})

	It("troubleshooting: a queue-name that names no LocalQueue says so on the workload, and fixing the label moves it", func(ctx SpecContext) {
		job := createJob(ctx, "research", func(u *unstructured.Unstructured) {
			u.SetLabels(map[string]string{kueue.QueueNameLabel: "no-such-queue"})
		})
		Eventually(func(g Gomega) {
			c := condition(ctx, job, kueue.WorkloadQuotaReserved)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(kueue.WorkloadInadmissible))
			g.Expect(c.Message).To(ContainSubstring("LocalQueue no-such-queue doesn't exist in namespace research"))
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
		Expect(suspended(ctx, job)).To(BeTrue())
		Expect(podsOf(ctx, job)).To(BeEmpty())

		// The fix the message asks for: the workload follows the label while it waits.
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(job), job)).To(Succeed())
		job.Labels[kueue.QueueNameLabel] = "team-queue"
		Expect(k8s.Update(ctx, job)).To(Succeed())
		Eventually(func(g Gomega) {
			wl, err := workloadOf(ctx, job)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(wl.Spec.QueueName).To(BeEquivalentTo("team-queue"))
			c := condition(ctx, job, kueue.WorkloadQuotaReserved)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Message).NotTo(ContainSubstring("no-such-queue"), "the workload is queued in team-queue now")
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
		Expect(k8s.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
	})

	It("troubleshooting: a LocalQueue naming a missing ClusterQueue says so on the workload and the LocalQueue", func(ctx SpecContext) {
		Expect(k8s.Create(ctx, &kueue.LocalQueue{
			ObjectMeta: metav1.ObjectMeta{Namespace: "research", Name: "ghost-queue"},
			Spec:       kueue.LocalQueueSpec{ClusterQueue: "ghost-cq"},
		})).To(Succeed())
		job := createJob(ctx, "research", func(u *unstructured.Unstructured) {
			u.SetLabels(map[string]string{kueue.QueueNameLabel: "ghost-queue"})
		})
		Eventually(func(g Gomega) {
			c := condition(ctx, job, kueue.WorkloadQuotaReserved)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Message).To(ContainSubstring("ClusterQueue ghost-cq doesn't exist"))
			lq := &kueue.LocalQueue{}
			g.Expect(k8s.Get(ctx, types.NamespacedName{Namespace: "research", Name: "ghost-queue"}, lq)).To(Succeed())
			ac := meta.FindStatusCondition(lq.Status.Conditions, kueue.LocalQueueActive)
			g.Expect(ac).NotTo(BeNil())
			g.Expect(ac.Reason).To(Equal("ClusterQueueDoesNotExist"))
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
		Expect(podsOf(ctx, job)).To(BeEmpty())
		Expect(k8s.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
	})

	It("troubleshooting: a job asking for a resource its ClusterQueue does not cover names the resource", func(ctx SpecContext) {
		job := createJob(ctx, "inference", func(u *unstructured.Unstructured) {
			containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
			c := containers[0].(map[string]any)
			c["resources"] = map[string]any{"requests": map[string]any{"cpu": "1", "nvidia.com/gpu": "1"}, "limits": map[string]any{"nvidia.com/gpu": "1"}}
			Expect(unstructured.SetNestedSlice(u.Object, containers, "spec", "template", "spec", "containers")).To(Succeed())
		})
		Eventually(func(g Gomega) {
			c := condition(ctx, job, kueue.WorkloadQuotaReserved)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Message).To(ContainSubstring("nvidia.com/gpu"))
			g.Expect(c.Message).To(ContainSubstring("inference-cq"))
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
		Expect(podsOf(ctx, job)).To(BeEmpty())
		Expect(k8s.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
	})

	It("troubleshooting: a ClusterQueue naming a missing ResourceFlavor is Active False and names it", func(ctx SpecContext) {
		cq := &kueue.ClusterQueue{
			ObjectMeta: metav1.ObjectMeta{Name: "typo-cq"},
			Spec: kueue.ClusterQueueSpec{
				NamespaceSelector: &metav1.LabelSelector{},
				ResourceGroups: []kueue.ResourceGroup{{
					CoveredResources: []corev1.ResourceName{corev1.ResourceCPU},
					Flavors:          []kueue.FlavorQuotas{{Name: "defualt-flavor", Resources: []kueue.ResourceQuota{{Name: corev1.ResourceCPU, NominalQuota: resourceQty("1")}}}},
				}},
			},
		}
		Expect(k8s.Create(ctx, cq)).To(Succeed())
		Eventually(func(g Gomega) {
			c := meta.FindStatusCondition(clusterQueue(ctx, "typo-cq").Status.Conditions, kueue.ClusterQueueActive)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(kueue.ClusterQueueActiveReasonFlavorNotFound))
			g.Expect(c.Message).To(ContainSubstring("defualt-flavor"))
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
		Expect(k8s.Delete(ctx, cq)).To(Succeed())
	})

	It("troubleshooting: a ResourceFlavor deleted while a ClusterQueue names it stays Terminating, and goes with the ClusterQueue", func(ctx SpecContext) {
		rf := &kueue.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: "retired-flavor"}}
		Expect(k8s.Create(ctx, rf)).To(Succeed())
		cq := &kueue.ClusterQueue{
			ObjectMeta: metav1.ObjectMeta{Name: "retired-cq"},
			Spec: kueue.ClusterQueueSpec{
				NamespaceSelector: &metav1.LabelSelector{},
				ResourceGroups: []kueue.ResourceGroup{{
					CoveredResources: []corev1.ResourceName{corev1.ResourceCPU},
					Flavors:          []kueue.FlavorQuotas{{Name: "retired-flavor", Resources: []kueue.ResourceQuota{{Name: corev1.ResourceCPU, NominalQuota: resourceQty("1")}}}},
				}},
			},
		}
		Expect(k8s.Create(ctx, cq)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(rf), rf)).To(Succeed())
			g.Expect(rf.Finalizers).To(ContainElement(kueue.ResourceInUseFinalizerName))
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
		Expect(k8s.Delete(ctx, rf)).To(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(rf), rf)).To(Succeed(), "retired-cq still names it")
			g.Expect(rf.DeletionTimestamp).NotTo(BeNil())
		}).WithContext(ctx).WithTimeout(2 * time.Second).WithPolling(poll).Should(Succeed())
		// `kubectl delete rf` no longer hangs once nothing names the flavor.
		Expect(k8s.Delete(ctx, cq)).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(rf), &kueue.ResourceFlavor{}))
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(BeTrue())
	})

	It("restarting the manager mid-tutorial loses no workload and admits nothing twice", func(ctx SpecContext) {
		before := admittedSet(ctx)
		Expect(manager.Restart(ctx)).To(Succeed())
		// A single replica serves no webhooks while it restarts (jobs are refused, not let through).
		Expect(components.WaitForWebhooks(ctx, k8s, time.Minute)).To(Succeed())
		more := createJob(ctx, "research")
		Consistently(func(g Gomega) {
			g.Expect(admittedSet(ctx)).To(Equal(before), "the restarted manager keeps every admission and adds none beyond quota")
		}).WithContext(ctx).WithTimeout(5 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
		c := condition(ctx, more, kueue.WorkloadQuotaReserved)
		Expect(c).NotTo(BeNil(), "the new job was seen by the restarted manager")
		Expect(c.Status).To(Equal("False"))
		// Deleting one research job lets exactly one waiting research job in.
		var running *batchv1.Job
		for _, j := range research {
			if admitted(ctx, j) {
				running = j
				break
			}
		}
		Expect(running).NotTo(BeNil())
		Expect(k8s.Delete(ctx, running, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
		Eventually(func(g Gomega) {
			after := admittedSet(ctx)
			g.Expect(after).NotTo(ContainElement(running.Namespace + "/" + running.Name))
			g.Expect(after).To(HaveLen(len(before)))
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
		Expect(usageWithinLimits(ctx)).To(Succeed())
	})
})

// admittedSet names every job whose workload is admitted and not evicted.
func admittedSet(ctx SpecContext) []string {
	list := &kueue.WorkloadList{}
	Expect(k8s.List(ctx, list)).To(Succeed())
	var out []string
	for i := range list.Items {
		wl := &list.Items[i]
		if workload.IsAdmitted(wl) && !workload.IsEvicted(wl) && !workload.IsFinished(wl) {
			for _, ref := range wl.OwnerReferences {
				out = append(out, wl.Namespace+"/"+ref.Name)
			}
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// usageWithinLimits checks the cohort invariant on the status the manager reports: research and
// inference together never hold more CPU than their nominal quotas.
func usageWithinLimits(ctx SpecContext) error {
	total := 0.0
	for _, name := range []string{"research-cq", "inference-cq"} {
		u := usage(ctx, name, "default-flavor", corev1.ResourceCPU)
		q := resourceQty(u[0])
		total += q.AsApproximateFloat64()
	}
	if total > 8 {
		return fmt.Errorf("cohort ai-platform holds %v CPU, more than its 8", total)
	}
	return nil
}
