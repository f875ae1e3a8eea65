package multicluster

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2" //nolint:revive // Ginkgo's DSL reads best unqualified.
	. "github.com/onsi/gomega"    //nolint:revive // Gomega's DSL reads best unqualified.
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetq "github.com/fleetq/fleetq/api/fleetq/v1alpha1"
	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/dispatch/copies"
	"github.com/fleetq/fleetq/dispatch/registry"
	"github.com/fleetq/fleetq/e2e/lab"
	"github.com/fleetq/fleetq/internal/workload"
)

// cleanup deletes every job of the specs and waits until no copy is left in any worker.
func cleanup(ctx context.Context) {
	for _, ns := range []string{"research", "inference"} {
		Expect(mgmt.DeleteAllOf(ctx, &batchv1.Job{}, client.InNamespace(ns), client.PropagationPolicy("Background"))).To(Succeed())
	}
	Eventually(func(g Gomega) {
		for _, w := range workers {
			jobs := &batchv1.JobList{}
			g.Expect(env.Cluster(w).Client().List(ctx, jobs, client.MatchingLabels{kueue.MultiKueueOriginLabel: mgrCfg.MultiCluster.Origin})).To(Succeed())
			g.Expect(jobs.Items).To(BeEmpty(), "copies left in %s", w)
		}
		wls := &kueue.WorkloadList{}
		g.Expect(mgmt.List(ctx, wls)).To(Succeed())
		g.Expect(wls.Items).To(BeEmpty())
		// Every worker reports all its GPUs free again, and no longer fenced (after a partition),
		// so the next spec's placements do not depend on how fast reports catch up.
		for _, w := range workers {
			rep := &fleetq.CapacityReport{}
			g.Expect(env.Cluster(w).Client().Get(ctx, client.ObjectKey{Namespace: mgrCfg.Namespace, Name: w}, rep)).To(Succeed())
			g.Expect(rep.Status.Fenced).To(BeFalse(), "%s's agent still reports itself fenced", w)
			for _, f := range rep.Status.Flavors {
				alloc, free := f.Allocatable[lab.GPUResource], f.Free[lab.GPUResource]
				g.Expect(free.Cmp(alloc)).To(BeZero(), "%s reports %s of %s GPUs free in %s", w, free.String(), alloc.String(), f.Name)
			}
		}
	}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
}

var _ = Describe("Dispatch", func() {
	AfterEach(func(ctx SpecContext) {
		cleanup(ctx)
		Expect(watcher.Overlaps()).To(BeEmpty(), "no job may run in two clusters at once")
	})

	It("runs an A100 job on us-east with the flavor's selector and toleration, and shows its status on the management cluster", func(ctx SpecContext) {
		// Long enough to see it running on a loaded machine, short enough to watch it finish.
		job := gpuJob{pods: 2, gpus: 1, runFor: "30s"}.create(ctx, "a100-train")
		Eventually(func(g Gomega) {
			g.Expect(clusterOf(ctx, job)).To(Equal("us-east"), "placement: %s (%v)", placementOf(ctx, job), eventNotes(ctx, job, "QuotaReserved"))
			g.Expect(runningIn(ctx, "us-east", job)).To(Equal(2), "pods in us-east: %s", phases(podsIn(ctx, "us-east", job)))
			g.Expect(managerJob(ctx, job).Status.Active).To(BeEquivalentTo(2), "the management cluster's job mirrors the worker's")
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
		for _, p := range podsIn(ctx, "us-east", job) {
			Expect(p.Spec.NodeSelector).To(HaveKeyWithValue(lab.GPUProductLabel, lab.A100))
			Expect(p.Spec.Tolerations).To(ContainElement(corev1.Toleration{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}))
		}
		Expect(podsIn(ctx, "management", job)).To(BeEmpty(), "pods exist only in the worker")
		Expect(copiesOf(ctx, job)).To(Equal([]string{"us-east"}))

		wl := workloadOf(ctx, job)
		Expect(wl.Status.AdmissionChecks).To(HaveLen(1))
		Expect(wl.Status.AdmissionChecks[0].State).To(Equal(kueue.CheckStateReady))

		Eventually(func(g Gomega) {
			mj := managerJob(ctx, job)
			g.Expect(mj.Status.Succeeded).To(BeEquivalentTo(2))
			done := false
			for _, c := range mj.Status.Conditions {
				done = done || (c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue)
			}
			g.Expect(done).To(BeTrue(), "the job completes on the management cluster too")
			g.Expect(workload.IsFinished(workloadOf(ctx, job))).To(BeTrue())
			g.Expect(copiesOf(ctx, job)).To(BeEmpty(), "copies are deleted once the job finished")
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
	})

	It("drains a ClusterQueue set to HoldAndDrain: the running copy goes, the job waits suspended here, and runs in one worker again once the policy is None", func(ctx SpecContext) {
		job := gpuJob{pods: 1, gpus: 1, product: lab.A100, runFor: "10m"}.create(ctx, "drained")
		Eventually(func(g Gomega) {
			cluster := clusterOf(ctx, job)
			g.Expect(cluster).NotTo(BeEmpty(), "placement: %s", placementOf(ctx, job))
			g.Expect(runningIn(ctx, cluster, job)).To(Equal(1))
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())

		cq := &kueue.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: "research-gpu-cq"}}
		setStopPolicy := func(ctx context.Context, p kueue.StopPolicy) {
			patch := fmt.Appendf(nil, `{"spec":{"stopPolicy":%q}}`, p)
			Expect(mgmt.Patch(ctx, cq, client.RawPatch(types.MergePatchType, patch))).To(Succeed())
		}
		setStopPolicy(ctx, kueue.HoldAndDrain)
		DeferCleanup(func(ctx SpecContext) { setStopPolicy(ctx, kueue.None) })
		Eventually(func(g Gomega) {
			wl := workloadOf(ctx, job)
			ev := meta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadEvicted)
			g.Expect(ev).NotTo(BeNil())
			g.Expect(ev.Reason).To(Equal(kueue.WorkloadEvictedByClusterQueueStopped))
			g.Expect(workload.HasQuotaReservation(wl)).To(BeFalse(), "its quota is released")
			g.Expect(copiesOf(ctx, job)).To(BeEmpty(), "its copy is removed")
			g.Expect(ptr.Deref(managerJob(ctx, job).Spec.Suspend, false)).To(BeTrue(), "the job here is suspended")
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(copiesOf(ctx, job)).To(BeEmpty(), "a draining queue dispatches nothing")
		}).WithContext(ctx).WithTimeout(3 * time.Second).WithPolling(poll).Should(Succeed())

		setStopPolicy(ctx, kueue.None)
		Eventually(func(g Gomega) {
			cluster := clusterOf(ctx, job)
			g.Expect(cluster).NotTo(BeEmpty(), "placement: %s", placementOf(ctx, job))
			g.Expect(runningIn(ctx, cluster, job)).To(Equal(1))
			g.Expect(copiesOf(ctx, job)).To(HaveLen(1))
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
	})

	It("ignores a capacity report written outside the agent's namespace, whatever its revision", func(ctx SpecContext) {
		// Anyone who may write CapacityReports in some namespace of eu-west forges one that says
		// the worker is fenced, with a revision the real agent would never reach.
		eu := env.Cluster("eu-west").Client()
		status := fleetq.CapacityReportStatus{ClusterName: "eu-west", Revision: 1 << 40, Fenced: true, UpdateTime: metav1.Now()}
		forged := &fleetq.CapacityReport{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "eu-west"}, Status: status}
		Expect(eu.Create(ctx, forged)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(eu.Delete(ctx, forged))).To(Succeed()) })
		Expect(forged.Status.Revision).To(BeEquivalentTo(1<<40), "the report is written whole, status included")

		job := gpuJob{pods: 1, gpus: 1, product: lab.L4, runFor: "1h"}.create(ctx, "despite-forgery")
		Eventually(func(g Gomega) {
			g.Expect(clusterOf(ctx, job)).To(Equal("eu-west"), "placement: %s (%v)", placementOf(ctx, job), eventNotes(ctx, job, "QuotaReserved"))
			g.Expect(runningIn(ctx, "eu-west", job)).To(Equal(1))
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
	})

	It("says on the MultiKueueCluster when another management cluster's manager holds its fencing Lease, and renews once that Lease goes stale", func(ctx SpecContext) {
		eu := env.Cluster("eu-west").Client()
		leaseCondition := func(g Gomega) *metav1.Condition {
			mkc := &kueue.MultiKueueCluster{}
			g.Expect(mgmt.Get(ctx, client.ObjectKey{Name: "eu-west"}, mkc)).To(Succeed())
			cond := meta.FindStatusCondition(mkc.Status.Conditions, fleetq.MultiKueueClusterFencingLease)
			g.Expect(cond).NotTo(BeNil(), "conditions: %v", mkc.Status.Conditions)
			return cond
		}
		Eventually(func(g Gomega) {
			g.Expect(leaseCondition(g).Reason).To(Equal(registry.ReasonLeaseRenewed))
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())

		// A manager of another management cluster, configured with the same origin, takes the
		// Lease over for a few seconds and then goes away.
		key := client.ObjectKey{Namespace: mgrCfg.Namespace, Name: fleetq.ManagerLeaseName(mgrCfg.MultiCluster.Origin)}
		Eventually(func() error {
			l := &coordinationv1.Lease{}
			if err := eu.Get(ctx, key, l); err != nil {
				return err
			}
			l.Spec.HolderIdentity = ptr.To("another-management-cluster/manager-0")
			l.Spec.LeaseDurationSeconds = ptr.To[int32](5)
			l.Spec.RenewTime = ptr.To(metav1.NowMicro())
			return eu.Update(ctx, l)
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
		Eventually(func(g Gomega) {
			cond := leaseCondition(g)
			g.Expect(cond.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(cond.Reason).To(Equal(registry.ReasonLeaseHeldElsewhere))
			g.Expect(cond.Message).To(ContainSubstring("another-management-cluster/manager-0"))
			g.Expect(cond.Message).To(ContainSubstring("give each manager its own multiCluster.origin"))
		}).WithContext(ctx).WithTimeout(wait).WithPolling(100 * time.Millisecond).Should(Succeed())

		Eventually(func(g Gomega) {
			g.Expect(leaseCondition(g).Status).To(Equal(metav1.ConditionTrue), "renewed again once the other manager's Lease is stale")
			l := &coordinationv1.Lease{}
			g.Expect(eu.Get(ctx, key, l)).To(Succeed())
			g.Expect(*l.Spec.HolderIdentity).NotTo(HavePrefix("another-management-cluster/"))
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
	})

	It("runs an L4 job on eu-west", func(ctx SpecContext) {
		job := gpuJob{pods: 2, gpus: 1, product: lab.L4, runFor: "1h"}.create(ctx, "l4-infer")
		Eventually(func(g Gomega) {
			g.Expect(clusterOf(ctx, job)).To(Equal("eu-west"))
			g.Expect(runningIn(ctx, "eu-west", job)).To(Equal(2))
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
		wl := workloadOf(ctx, job)
		Expect(wl.Status.Admission.PodSetAssignments[0].Flavors).To(HaveKeyWithValue(lab.GPUResource, kueue.ResourceFlavorReference("l4-flavor")))
		for _, p := range podsIn(ctx, "eu-west", job) {
			Expect(p.Spec.NodeSelector).To(HaveKeyWithValue(lab.GPUProductLabel, lab.L4))
		}
	})

	It("keeps A100 jobs on the manager, with no copies, while the A100 workers are full, and starts the next when one finishes", func(ctx SpecContext) {
		var full []*batchv1.Job
		for i, ns := range []string{"research", "research", "inference", "inference"} {
			run := "1h"
			if i == 0 {
				run = "20s"
			}
			// One 8-GPU pod per job: each fills a node whatever kube-scheduler's spreading does.
			full = append(full, gpuJob{namespace: ns, pods: 1, gpus: 8, runFor: run}.create(ctx, fmt.Sprintf("big-%d", i)))
		}
		Eventually(func(g Gomega) {
			for _, j := range full {
				g.Expect(clusterOf(ctx, j)).NotTo(BeEmpty())
			}
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
		waiting := gpuJob{namespace: "inference", pods: 1, gpus: 8, runFor: "1h"}.create(ctx, "waiting")
		Consistently(func(g Gomega) {
			g.Expect(copiesOf(ctx, waiting)).To(BeEmpty())
			g.Expect(clusterOf(ctx, waiting)).To(BeEmpty())
		}).WithContext(ctx).WithTimeout(5 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
		Expect(admissionMessage(ctx, waiting)).To(ContainSubstring("False"))
		// big-0 finishes after 20s; the waiting job takes its place.
		Eventually(func(g Gomega) {
			g.Expect(workload.IsFinished(workloadOf(ctx, full[0]))).To(BeTrue(), "big-0 finished: %v", workloadOf(ctx, full[0]).Status.Conditions)
			g.Expect(clusterOf(ctx, waiting)).NotTo(BeEmpty(), "waiting: %s", admissionMessage(ctx, waiting))
			g.Expect(runningIn(ctx, clusterOf(ctx, waiting), waiting)).To(Equal(1))
		}).WithContext(ctx).WithTimeout(2 * wait).WithPolling(poll).Should(Succeed())
	})

	It("keeps a job that fits quota but no node pending, and explains why for each worker", func(ctx SpecContext) {
		job := gpuJob{pods: 1, gpus: 9, runFor: "1h"}.create(ctx, "too-big")
		Eventually(func(g Gomega) {
			msg := admissionMessage(ctx, job)
			g.Expect(msg).To(ContainSubstring("NoPlacement"))
			g.Expect(msg).To(ContainSubstring("us-east: pod set \"main\""))
			g.Expect(msg).To(ContainSubstring("us-west: pod set \"main\""))
			g.Expect(msg).To(ContainSubstring("nvidia.com/gpu"))
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
		Consistently(func() []string { return copiesOf(ctx, job) }).WithContext(ctx).WithTimeout(3 * time.Second).Should(BeEmpty())
	})

	It("registers a Cluster API cluster like a MultiKueueCluster", func(ctx SpecContext) {
		mkc := &kueue.MultiKueueCluster{}
		Expect(mgmt.Get(ctx, client.ObjectKey{Name: "us-west"}, mkc)).To(Succeed())
		Expect(mkc.Annotations).To(HaveKeyWithValue(registry.ClusterAPIAnnotation, mgrCfg.Namespace+"/us-west"))
		Expect(meta.IsStatusConditionTrue(mkc.Status.Conditions, kueue.MultiKueueClusterActive)).To(BeTrue())
		// Fill us-east so the next A100 job goes to us-west.
		fill := gpuJob{pods: 2, gpus: 8, runFor: "1h"}.create(ctx, "fill-east")
		Eventually(func() string { return clusterOf(ctx, fill) }).WithContext(ctx).WithTimeout(wait).Should(Equal("us-east"))
		job := gpuJob{pods: 1, gpus: 2, runFor: "1h"}.create(ctx, "to-west")
		expectRunningOn(ctx, job, "us-west", wait)
	})

	It("dispatches each job exactly once when the manager restarts mid-dispatch", func(ctx SpecContext) {
		var jobs []*batchv1.Job
		for i := range 10 {
			jobs = append(jobs, gpuJob{pods: 1, gpus: 1, runFor: "1h"}.create(ctx, fmt.Sprintf("burst-%d", i)))
		}
		restartManager(ctx)
		Eventually(func(g Gomega) {
			for _, j := range jobs {
				g.Expect(copiesOf(ctx, j)).To(HaveLen(1), "job %s has exactly one copy", j.Name)
				g.Expect(runningIn(ctx, clusterOf(ctx, j), j)).To(Equal(1))
			}
		}).WithContext(ctx).WithTimeout(2 * wait).WithPolling(poll).Should(Succeed())
		wls := &kueue.WorkloadList{}
		Expect(mgmt.List(ctx, wls, client.InNamespace("research"))).To(Succeed())
		Expect(wls.Items).To(HaveLen(10), "one workload per job: none lost, none duplicated")
	})

	It("creates a namespace again in a worker where someone deleted it after the manager had seen it", func(ctx SpecContext) {
		first := gpuJob{pods: 1, gpus: 1, runFor: "1h"}.create(ctx, "before-ns-delete")
		expectRunningOn(ctx, first, "us-east", wait)
		deleteJob(ctx, first)
		cleanup(ctx)
		east := env.Cluster("us-east").Client()
		Expect(east.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "research"}})).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(east.Get(ctx, client.ObjectKey{Name: "research"}, &corev1.Namespace{}))
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(BeTrue(), "us-east's namespace controller removes research")

		// The manager remembers research exists in us-east; the copy's creation tells it otherwise.
		second := gpuJob{pods: 1, gpus: 1, runFor: "1h"}.create(ctx, "after-ns-delete")
		expectRunningOn(ctx, second, "us-east", wait)
		ns := &corev1.Namespace{}
		Expect(east.Get(ctx, client.ObjectKey{Name: "research"}, ns)).To(Succeed())
		Expect(ns.Labels).To(HaveKeyWithValue(copies.CreatedByLabel, "fleetq"))
	})

	It("gives a worker namespace the management namespace's Pod Security labels, so a tenant gets no pod there its own namespace would refuse", func(ctx SpecContext) {
		const enforce = copies.PodSecurityLabelPrefix + "enforce"
		setEnforce := func(ctx context.Context, level string) {
			ns := &corev1.Namespace{}
			Expect(mgmt.Get(ctx, client.ObjectKey{Name: "inference"}, ns)).To(Succeed())
			if level == "" {
				delete(ns.Labels, enforce)
			} else {
				ns.Labels[enforce] = level
			}
			Expect(mgmt.Update(ctx, ns)).To(Succeed())
		}
		setEnforce(ctx, "baseline")
		DeferCleanup(setEnforce, "")

		job := gpuJob{namespace: "inference", pods: 1, gpus: 1, runFor: "1h"}.create(ctx, "under-baseline")
		Eventually(func(g Gomega) {
			g.Expect(clusterOf(ctx, job)).NotTo(BeEmpty())
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
		worker := env.Cluster(clusterOf(ctx, job)).Client()
		Eventually(func(g Gomega) {
			ns := &corev1.Namespace{}
			g.Expect(worker.Get(ctx, client.ObjectKey{Name: "inference"}, ns)).To(Succeed())
			g.Expect(ns.Labels).To(HaveKeyWithValue(enforce, "baseline"), "created, or brought in line if fleetq created it before")
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())

		// The worker's own Pod Security admission now refuses what baseline forbids there.
		priv := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "inference", Name: "privileged-probe"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox",
				SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)}}}},
		}
		err := worker.Create(ctx, priv, client.DryRunAll)
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "a privileged pod is refused in the worker namespace: %v", err)
		Expect(err.Error()).To(ContainSubstring("baseline"))
	})
})
