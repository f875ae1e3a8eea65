package integration

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2" //nolint:revive // Ginkgo's DSL reads best unqualified.
	. "github.com/onsi/gomega"    //nolint:revive // Gomega's DSL reads best unqualified.
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	fleetq "github.com/fleetq/fleetq/api/fleetq/v1alpha1"
	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/config"
	"github.com/fleetq/fleetq/e2e/framework"
	"github.com/fleetq/fleetq/e2e/lab"
)

const (
	a100Flavor = "a100-flavor"
	l4Flavor   = "l4-flavor"
	teamNS     = "team-a"
)

var _ = Describe("fleetq-agent", Ordered, func() {
	BeforeAll(func(ctx SpecContext) {
		Expect(k8s.Create(ctx, syncedFlavor(a100Flavor, lab.A100, gpuToleration))).To(Succeed())
		Expect(k8s.Create(ctx, syncedFlavor(l4Flavor, lab.L4))).To(Succeed())
		// A flavor the manager did not sync (no origin label) is not the agent's business.
		users := syncedFlavor("users-own-flavor", lab.L4)
		users.Labels = nil
		Expect(k8s.Create(ctx, users)).To(Succeed())
	})

	It("publishes a capacity report that matches the fake nodes", func(ctx SpecContext) {
		Eventually(func(g Gomega) {
			r := getReport(ctx, g)
			st := r.Status
			g.Expect(st.ClusterName).To(Equal(worker))
			// The cluster serves no CRD of the other built-in kinds: the agent runs batch Jobs, and
			// plain Pods because the suite enables them.
			g.Expect(st.Kinds).To(ConsistOf("batch/job", "pod"))
			g.Expect(st.FlavorCount).To(BeEquivalentTo(2))
			g.Expect(st.UnmatchedNodes).To(BeZero())
			g.Expect(st.Nodes).To(HaveLen(4))
			g.Expect(st.Summary).To(Equal("a100-flavor: 16/16 nvidia.com/gpu, l4-flavor: 8/8 nvidia.com/gpu"))
			a100 := flavorOf(g, r, a100Flavor)
			g.Expect(a100.Nodes).To(BeEquivalentTo(2))
			g.Expect(quantity(a100.Allocatable, lab.GPUResource)).To(BeEquivalentTo(16))
			g.Expect(quantity(a100.Allocatable, corev1.ResourceCPU)).To(BeEquivalentTo(192))
			g.Expect(quantity(a100.Free, lab.GPUResource)).To(BeEquivalentTo(16))
			g.Expect(quantity(a100.LargestNodeFree, lab.GPUResource)).To(BeEquivalentTo(8))
			g.Expect(quantity(a100.Used, lab.GPUResource)).To(BeZero())
			l4 := flavorOf(g, r, l4Flavor)
			g.Expect(l4.Nodes).To(BeEquivalentTo(2))
			g.Expect(quantity(l4.Allocatable, lab.GPUResource)).To(BeEquivalentTo(8))
			g.Expect(quantity(l4.LargestNodeFree, lab.GPUResource)).To(BeEquivalentTo(4))
			for _, n := range st.Nodes {
				want := a100Flavor
				if quantity(n.Allocatable, lab.GPUResource) == 4 {
					want = l4Flavor
				}
				g.Expect(n.Flavors).To(Equal([]string{want}), "node %s", n.Name)
				g.Expect(n.Unschedulable).To(BeFalse())
			}
		}).WithContext(ctx).WithTimeout(waitLong).WithPolling(poll).Should(Succeed())
	}, SpecTimeout(waitLong+time.Minute))

	It("moves the report when a pod runs and when it is gone", func(ctx SpecContext) {
		var before int64
		Eventually(func(g Gomega) { before = getReport(ctx, g).Status.Revision }).WithContext(ctx).Should(Succeed())
		ensureNamespace(ctx, "users")
		gpus := *resource.NewQuantity(3, resource.DecimalSI)
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "users", Name: "notebook"},
			Spec: corev1.PodSpec{
				NodeSelector: map[string]string{lab.GPUProductLabel: lab.A100},
				Tolerations:  []corev1.Toleration{gpuToleration},
				Containers: []corev1.Container{{Name: "nb", Image: "registry.example/notebook:v1", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), lab.GPUResource: gpus},
					Limits:   corev1.ResourceList{lab.GPUResource: gpus},
				}}},
			},
		}
		Expect(k8s.Create(ctx, pod)).To(Succeed())
		Eventually(func(g Gomega) {
			r := getReport(ctx, g)
			a100 := flavorOf(g, r, a100Flavor)
			g.Expect(quantity(a100.Used, lab.GPUResource)).To(BeEquivalentTo(3))
			g.Expect(quantity(a100.Used, corev1.ResourceCPU)).To(BeEquivalentTo(2))
			g.Expect(quantity(a100.Free, lab.GPUResource)).To(BeEquivalentTo(13))
			g.Expect(quantity(a100.LargestNodeFree, lab.GPUResource)).To(BeEquivalentTo(8))
			g.Expect(r.Status.Revision).To(BeNumerically(">", before))
		}).WithContext(ctx).WithTimeout(waitLong).WithPolling(poll).Should(Succeed())

		Expect(k8s.Delete(ctx, pod)).To(Succeed())
		Eventually(func(g Gomega) {
			a100 := flavorOf(g, getReport(ctx, g), a100Flavor)
			g.Expect(quantity(a100.Used, lab.GPUResource)).To(BeZero())
			g.Expect(quantity(a100.Free, lab.GPUResource)).To(BeEquivalentTo(16))
		}).WithContext(ctx).WithTimeout(waitLong).WithPolling(poll).Should(Succeed())
	}, SpecTimeout(2*waitLong+time.Minute))

	It("admits a copy that fits, and its pods run on the flavor's nodes", func(ctx SpecContext) {
		job, _ := copySpec{ns: teamNS, name: "fits", count: 2, gpus: 4}.create(ctx)
		Eventually(func(g Gomega) {
			wl := getWorkload(ctx, g, teamNS, "fits")
			c := conditionIs(g, wl, kueue.WorkloadQuotaReserved, metav1.ConditionTrue, fleetq.AdmittedReason)
			g.Expect(c.Message).To(MatchRegexp(`^Admitted by fleetq-agent in cluster us-east on \[\S+×2\]$`))
			conditionIs(g, wl, kueue.WorkloadAdmitted, metav1.ConditionTrue, fleetq.AdmittedReason)
			a := wl.Status.Admission
			g.Expect(a).NotTo(BeNil())
			g.Expect(a.ClusterQueue).To(BeEquivalentTo("research-gpu-cq"))
			g.Expect(a.PodSetAssignments).To(HaveLen(1))
			psa := a.PodSetAssignments[0]
			g.Expect(psa.Name).To(BeEquivalentTo("main"))
			g.Expect(psa.Count).To(Equal(ptr.To[int32](2)))
			g.Expect(psa.Flavors).To(HaveKeyWithValue(lab.GPUResource, kueue.ResourceFlavorReference(a100Flavor)))
			g.Expect(quantity(psa.ResourceUsage, lab.GPUResource)).To(BeEquivalentTo(8))
			g.Expect(quantity(psa.ResourceUsage, corev1.ResourceCPU)).To(BeEquivalentTo(2))
		}).WithContext(ctx).WithTimeout(waitLong).WithPolling(poll).Should(Succeed())

		// This suite's manager writes no lease: the copy runs with nothing to fence it, and the
		// agent says so on the copy's Workload.
		Eventually(func(g Gomega) {
			evs := &eventsv1.EventList{}
			g.Expect(k8s.List(ctx, evs, client.InNamespace(teamNS))).To(Succeed())
			var notes []string
			for _, e := range evs.Items {
				if e.Regarding.Name == "fits" && e.Reason == "NoManagerLease" {
					notes = append(notes, e.Note)
				}
			}
			g.Expect(notes).To(ContainElement(And(ContainSubstring("no lease "+leaseName+" in namespace "+agentNS), ContainSubstring("multiCluster.agentNamespace"))))
		}).WithContext(ctx).WithTimeout(waitLong).WithPolling(poll).Should(Succeed())

		Eventually(func(g Gomega) {
			g.Expect(getJob(ctx, g, teamNS, "fits").Spec.Suspend).To(Equal(ptr.To(false)))
			pods := jobPods(ctx, g, job)
			g.Expect(pods).To(HaveLen(2))
			for _, p := range pods {
				g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning), "pod %s", p.Name)
				node := &corev1.Node{}
				g.Expect(k8s.Get(ctx, client.ObjectKey{Name: p.Spec.NodeName}, node)).To(Succeed())
				g.Expect(node.Labels).To(HaveKeyWithValue(lab.GPUProductLabel, lab.A100), "pod %s on node %s", p.Name, node.Name)
			}
			a100 := flavorOf(g, getReport(ctx, g), a100Flavor)
			g.Expect(quantity(a100.Used, lab.GPUResource)).To(BeEquivalentTo(8))
			g.Expect(quantity(a100.Free, lab.GPUResource)).To(BeEquivalentTo(8))
		}).WithContext(ctx).WithTimeout(waitLong).WithPolling(poll).Should(Succeed())
	}, SpecTimeout(2*waitLong+time.Minute))

	It("keeps copies that do not fit suspended with the numbers, and admits one when room appears", func(ctx SpecContext) {
		// "fits" holds 8 of the 16 A100 GPUs: two pods of 8 do not fit, one pod of 12 never does.
		copySpec{ns: teamNS, name: "waits", count: 2, gpus: 8}.create(ctx)
		copySpec{ns: teamNS, name: "too-big", count: 1, gpus: 12}.create(ctx)
		for _, name := range []string{"waits", "too-big"} {
			Eventually(func(g Gomega) {
				wl := getWorkload(ctx, g, teamNS, name)
				c := conditionIs(g, wl, kueue.WorkloadQuotaReserved, metav1.ConditionFalse, fleetq.PendingReason)
				g.Expect(c.Message).To(HavePrefix(`no node has room: `))
				g.Expect(wl.Status.Admission).To(BeNil())
				g.Expect(getJob(ctx, g, teamNS, name).Spec.Suspend).To(Equal(ptr.To(true)))
			}).WithContext(ctx).WithTimeout(waitLong).WithPolling(poll).Should(Succeed())
		}
		Eventually(func(g Gomega) {
			c := condition(getWorkload(ctx, g, teamNS, "too-big"), kueue.WorkloadQuotaReserved)
			g.Expect(c.Message).To(MatchRegexp(`largest node fit \d+ of 12 nvidia.com/gpu$`))
		}).WithContext(ctx).Should(Succeed())

		deleteCopy(ctx, teamNS, "fits")
		Eventually(func(g Gomega) {
			wl := getWorkload(ctx, g, teamNS, "waits")
			conditionIs(g, wl, kueue.WorkloadAdmitted, metav1.ConditionTrue, fleetq.AdmittedReason)
			pods := jobPods(ctx, g, getJob(ctx, g, teamNS, "waits"))
			g.Expect(pods).To(HaveLen(2))
			g.Expect(pods[0].Spec.NodeName).NotTo(Equal(pods[1].Spec.NodeName))
		}).WithContext(ctx).WithTimeout(waitLong).WithPolling(poll).Should(Succeed())
		Eventually(func(g Gomega) {
			wl := getWorkload(ctx, g, teamNS, "too-big")
			c := conditionIs(g, wl, kueue.WorkloadQuotaReserved, metav1.ConditionFalse, fleetq.PendingReason)
			g.Expect(c.Message).To(Equal(`no node has room: largest node fit 0 of 12 nvidia.com/gpu`))
		}).WithContext(ctx).WithTimeout(waitLong).WithPolling(poll).Should(Succeed())
		deleteCopy(ctx, teamNS, "waits")
		deleteCopy(ctx, teamNS, "too-big")
	}, SpecTimeout(5*waitLong))

	It("preempts exactly the lower-priority copy a higher-priority copy needs, and never in vain", func(ctx SpecContext) {
		copySpec{ns: teamNS, name: "low", count: 1, gpus: 8, priority: 1}.create(ctx)
		copySpec{ns: teamNS, name: "mid", count: 1, gpus: 8, priority: 2}.create(ctx)
		var lowNode string
		Eventually(func(g Gomega) {
			for _, name := range []string{"low", "mid"} {
				if pod := runsOnePod(ctx, g, name); name == "low" {
					lowNode = pod.Spec.NodeName
				}
			}
		}).WithContext(ctx).WithTimeout(waitLong).WithPolling(poll).Should(Succeed())

		copySpec{ns: teamNS, name: "high", count: 1, gpus: 8, priority: 10, policy: fleetq.LocalPreemptionLowerPriority}.create(ctx)
		Eventually(func(g Gomega) {
			wl := getWorkload(ctx, g, teamNS, "low")
			ev := conditionIs(g, wl, kueue.WorkloadEvicted, metav1.ConditionTrue, kueue.WorkloadEvictedByPreemption)
			g.Expect(ev.Message).To(ContainSubstring("by team-a/high (priority 10)"))
			pr := conditionIs(g, wl, kueue.WorkloadPreempted, metav1.ConditionTrue, kueue.InClusterQueueReason)
			g.Expect(pr.Message).To(ContainSubstring("team-a/high"))
			g.Expect(getJob(ctx, g, teamNS, "low").Spec.Suspend).To(Equal(ptr.To(true)))
		}).WithContext(ctx).WithTimeout(waitLong).WithPolling(poll).Should(Succeed())

		Eventually(func(g Gomega) {
			g.Expect(runsOnePod(ctx, g, "high").Spec.NodeName).To(Equal(lowNode))
			// The victim's reservation is released once its pods are gone.
			low := getWorkload(ctx, g, teamNS, "low")
			g.Expect(low.Status.Admission).To(BeNil())
			conditionIs(g, low, kueue.WorkloadQuotaReserved, metav1.ConditionFalse, fleetq.PendingReason)
			conditionIs(g, low, kueue.WorkloadAdmitted, metav1.ConditionFalse, fleetq.NoReservationReason)
		}).WithContext(ctx).WithTimeout(waitLong).WithPolling(poll).Should(Succeed())

		// A copy that could not fit even after preempting everything below it preempts nothing.
		copySpec{ns: teamNS, name: "huge", count: 1, gpus: 12, priority: 20, policy: fleetq.LocalPreemptionLowerPriority}.create(ctx)
		Eventually(func(g Gomega) {
			c := conditionIs(g, getWorkload(ctx, g, teamNS, "huge"), kueue.WorkloadQuotaReserved, metav1.ConditionFalse, fleetq.PendingReason)
			g.Expect(c.Message).To(Equal(`no node has room: largest node fit 0 of 12 nvidia.com/gpu`))
		}).WithContext(ctx).WithTimeout(waitLong).WithPolling(poll).Should(Succeed())
		for _, name := range []string{"mid", "high"} {
			wl := getWorkload(ctx, Default, teamNS, name)
			Expect(condition(wl, kueue.WorkloadEvicted)).To(BeNil(), "%s was evicted", name)
			Expect(condition(wl, kueue.WorkloadAdmitted).Status).To(Equal(metav1.ConditionTrue))
			Expect(getJob(ctx, Default, teamNS, name).Spec.Suspend).To(Equal(ptr.To(false)))
		}
		// The victim stays evicted: the manager requeues its workload and deletes the copy.
		Expect(getJob(ctx, Default, teamNS, "low").Spec.Suspend).To(Equal(ptr.To(true)))
		for _, name := range []string{"low", "mid", "high", "huge"} {
			deleteCopy(ctx, teamNS, name)
		}
	}, SpecTimeout(6*waitLong))

	It("stops a started Pod copy it preempts by deleting it (a Pod cannot be gated again), and releases its admission", func(ctx SpecContext) {
		low, _ := copySpec{ns: teamNS, name: "pod-low", count: 1, gpus: 8, priority: 1}.createPod(ctx)
		copySpec{ns: teamNS, name: "pod-mid", count: 1, gpus: 8, priority: 2}.create(ctx)
		var lowNode string
		Eventually(func(g Gomega) {
			conditionIs(g, getWorkload(ctx, g, teamNS, "pod-low"), kueue.WorkloadAdmitted, metav1.ConditionTrue, fleetq.AdmittedReason)
			p := &corev1.Pod{}
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(low), p)).To(Succeed())
			g.Expect(p.Spec.SchedulingGates).To(BeEmpty(), "the agent lifts the admission gate")
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
			lowNode = p.Spec.NodeName
			runsOnePod(ctx, g, "pod-mid")
		}).WithContext(ctx).WithTimeout(waitLong).WithPolling(poll).Should(Succeed())

		copySpec{ns: teamNS, name: "pod-high", count: 1, gpus: 8, priority: 10, policy: fleetq.LocalPreemptionLowerPriority}.create(ctx)
		Eventually(func(g Gomega) {
			wl := getWorkload(ctx, g, teamNS, "pod-low")
			conditionIs(g, wl, kueue.WorkloadEvicted, metav1.ConditionTrue, kueue.WorkloadEvictedByPreemption)
			err := k8s.Get(ctx, client.ObjectKeyFromObject(low), &corev1.Pod{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the started Pod copy is deleted, not gated again: %v", err)
			g.Expect(wl.Status.Admission).To(BeNil(), "its admission is released once the Pod is gone")
			conditionIs(g, wl, kueue.WorkloadQuotaReserved, metav1.ConditionFalse, fleetq.PendingReason)
		}).WithContext(ctx).WithTimeout(waitLong).WithPolling(poll).Should(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(runsOnePod(ctx, g, "pod-high").Spec.NodeName).To(Equal(lowNode))
		}).WithContext(ctx).WithTimeout(waitLong).WithPolling(poll).Should(Succeed())
		for _, name := range []string{"pod-low", "pod-mid", "pod-high"} {
			deleteCopy(ctx, teamNS, name)
		}
	}, SpecTimeout(4*waitLong))

	It("mirrors a finished Job into the copy's Finished condition", func(ctx SpecContext) {
		copySpec{ns: teamNS, name: "short", count: 2, gpus: 1, l4: true, runTime: time.Second}.create(ctx)
		Eventually(func(g Gomega) {
			wl := getWorkload(ctx, g, teamNS, "short")
			conditionIs(g, wl, kueue.WorkloadFinished, metav1.ConditionTrue, kueue.WorkloadFinishedReasonSucceeded)
			g.Expect(condition(wl, kueue.WorkloadAdmitted).Status).To(Equal(metav1.ConditionTrue))
		}).WithContext(ctx).WithTimeout(waitLong).WithPolling(poll).Should(Succeed())
		deleteCopy(ctx, teamNS, "short")
	}, SpecTimeout(2*waitLong))

	It("never touches users' own Jobs and Workloads, nor another manager's copies", func(ctx SpecContext) {
		// A user's suspended Job and a Workload for it, made without any origin label.
		copySpec{ns: "users", name: "users-job", count: 1, gpus: 1, l4: true, userOwned: true}.create(ctx)
		// A copy of another manager (another origin).
		copySpec{ns: teamNS, name: "not-mine", count: 1, gpus: 1, l4: true, origin: "someone-else"}.create(ctx)

		// A copy of ours, admitted after the agent has seen all of the above.
		copySpec{ns: teamNS, name: "canary", count: 1, gpus: 1, l4: true}.create(ctx)
		Eventually(func(g Gomega) {
			conditionIs(g, getWorkload(ctx, g, teamNS, "canary"), kueue.WorkloadAdmitted, metav1.ConditionTrue, fleetq.AdmittedReason)
		}).WithContext(ctx).WithTimeout(waitLong).WithPolling(poll).Should(Succeed())

		for _, key := range []client.ObjectKey{{Namespace: "users", Name: "users-job"}, {Namespace: teamNS, Name: "not-mine"}} {
			wl := getWorkload(ctx, Default, key.Namespace, key.Name)
			Expect(wl.Status.Conditions).To(BeEmpty(), "workload %s", key)
			Expect(wl.Status.Admission).To(BeNil(), "workload %s", key)
			Expect(getJob(ctx, Default, key.Namespace, key.Name).Spec.Suspend).To(Equal(ptr.To(true)), "job %s", key)
		}
		deleteCopy(ctx, teamNS, "canary")
		deleteCopy(ctx, teamNS, "not-mine")
		deleteCopy(ctx, "users", "users-job")
	}, SpecTimeout(3*waitLong))

	It("fences: suspends admitted copies when the manager's lease is not renewed, and admits nothing meanwhile", func(ctx SpecContext) {
		lease, stopRenewing := renewedLease(ctx, agentNS, leaseName)
		copySpec{ns: teamNS, name: "guarded", count: 1, gpus: 2, l4: true}.create(ctx)
		Eventually(func(g Gomega) {
			runsOnePod(ctx, g, "guarded")
			g.Expect(getReport(ctx, g).Status.Fenced).To(BeFalse())
		}).WithContext(ctx).WithTimeout(waitLong).WithPolling(poll).Should(Succeed())

		By("the manager stops renewing its lease")
		stopRenewing()
		Eventually(func(g Gomega) {
			wl := getWorkload(ctx, g, teamNS, "guarded")
			c := conditionIs(g, wl, kueue.WorkloadEvicted, metav1.ConditionTrue, fleetq.EvictedByFencing)
			g.Expect(c.Message).To(ContainSubstring("lease " + leaseName))
			g.Expect(getJob(ctx, g, teamNS, "guarded").Spec.Suspend).To(Equal(ptr.To(true)))
			g.Expect(getReport(ctx, g).Status.Fenced).To(BeTrue())
		}).WithContext(ctx).WithTimeout(waitLong).WithPolling(poll).Should(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(jobPods(ctx, g, getJob(ctx, g, teamNS, "guarded"))).To(BeEmpty())
		}).WithContext(ctx).WithTimeout(waitLong).WithPolling(poll).Should(Succeed())

		copySpec{ns: teamNS, name: "while-fenced", count: 1, gpus: 1, l4: true}.create(ctx)
		Eventually(func(g Gomega) {
			c := conditionIs(g, getWorkload(ctx, g, teamNS, "while-fenced"), kueue.WorkloadQuotaReserved, metav1.ConditionFalse, fleetq.PendingReason)
			g.Expect(c.Message).To(HavePrefix("not admitted while cluster us-east is fenced: "))
			g.Expect(getJob(ctx, g, teamNS, "while-fenced").Spec.Suspend).To(Equal(ptr.To(true)))
		}).WithContext(ctx).WithTimeout(waitLong).WithPolling(poll).Should(Succeed())

		By("the manager removes the lease (this worker is no longer fenced against anything)")
		Expect(k8s.Delete(ctx, lease)).To(Succeed())
		Eventually(func(g Gomega) {
			conditionIs(g, getWorkload(ctx, g, teamNS, "while-fenced"), kueue.WorkloadAdmitted, metav1.ConditionTrue, fleetq.AdmittedReason)
			g.Expect(getReport(ctx, g).Status.Fenced).To(BeFalse())
			// A fenced copy is never admitted again: the manager dispatched its job elsewhere.
			guarded := getWorkload(ctx, g, teamNS, "guarded")
			conditionIs(g, guarded, kueue.WorkloadEvicted, metav1.ConditionTrue, fleetq.EvictedByFencing)
			g.Expect(getJob(ctx, g, teamNS, "guarded").Spec.Suspend).To(Equal(ptr.To(true)))
		}).WithContext(ctx).WithTimeout(waitLong).WithPolling(poll).Should(Succeed())
		deleteCopy(ctx, teamNS, "guarded")
		deleteCopy(ctx, teamNS, "while-fenced")
	}, SpecTimeout(5*waitLong))

	It("with fencingPolicy KeepRunning, leaves admitted copies running while fenced, admits nothing new, and says so in its report", func(ctx SpecContext) {
		const (
			keepOrigin  = "keep-running"
			keepNS      = "fleetq-keep"
			keepCluster = "us-east-keep"
		)
		// A second agent in this process would clash with the first's controller names: it runs
		// as the binary, as in production.
		comp := startAgentBinary(ctx, "fleetq-agent-keep-running", keepCluster, fmt.Sprintf(`namespace: %s
origin: %s
fencingPolicy: %s
metrics: {bindAddress: "0"}
health: {bindAddress: "0"}
`, keepNS, keepOrigin, config.FenceKeepRunning))
		report := func(g Gomega) fleetq.CapacityReportStatus {
			g.Expect(comp.Running()).To(BeTrue(), "agent exited: %v", comp.Err())
			r := &fleetq.CapacityReport{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: keepNS, Name: keepCluster}, r)).To(Succeed())
			return r.Status
		}

		_, stopRenewing := renewedLease(ctx, keepNS, fleetq.ManagerLeaseName(keepOrigin))
		flavor := syncedFlavor("l4-keep-running", lab.L4)
		flavor.Labels[fleetq.OriginLabel] = keepOrigin
		Expect(k8s.Create(ctx, flavor)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(k8s.Delete(ctx, flavor))).To(Succeed()) })

		copySpec{ns: teamNS, name: "rides-out", count: 1, gpus: 1, l4: true, origin: keepOrigin}.create(ctx)
		running := func(g Gomega) {
			g.Expect(getJob(ctx, g, teamNS, "rides-out").Spec.Suspend).To(Equal(ptr.To(false)))
			runsOnePod(ctx, g, "rides-out")
		}
		Eventually(func(g Gomega) {
			running(g)
			st := report(g)
			g.Expect(st.FencingPolicy).To(Equal(config.FenceKeepRunning), "the manager reads the policy from the report")
			g.Expect(st.Fenced).To(BeFalse())
		}).WithContext(ctx).WithTimeout(waitLong).WithPolling(poll).Should(Succeed())

		By("the manager stops renewing its lease: fenced, and the copy runs on")
		stopRenewing()
		Eventually(func(g Gomega) { g.Expect(report(g).Fenced).To(BeTrue()) }).WithContext(ctx).WithTimeout(waitLong).WithPolling(poll).Should(Succeed())
		Consistently(func(g Gomega) {
			running(g)
			wl := getWorkload(ctx, g, teamNS, "rides-out")
			g.Expect(meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadEvicted)).To(BeFalse(), "not evicted while fenced")
		}).WithContext(ctx).WithTimeout(3 * time.Second).WithPolling(poll).Should(Succeed())

		copySpec{ns: teamNS, name: "waits-out", count: 1, gpus: 1, l4: true, origin: keepOrigin}.create(ctx)
		Eventually(func(g Gomega) {
			c := conditionIs(g, getWorkload(ctx, g, teamNS, "waits-out"), kueue.WorkloadQuotaReserved, metav1.ConditionFalse, fleetq.PendingReason)
			g.Expect(c.Message).To(HavePrefix("not admitted while cluster " + keepCluster + " is fenced: "))
		}).WithContext(ctx).WithTimeout(waitLong).WithPolling(poll).Should(Succeed())
		deleteCopy(ctx, teamNS, "rides-out")
		deleteCopy(ctx, teamNS, "waits-out")
	}, SpecTimeout(3*waitLong+3*time.Minute))

	It("runs as the fleetq-agent binary, serving another origin beside the first agent", func(ctx SpecContext) {
		const (
			binOrigin  = "binary-test"
			binNS      = "fleetq-binary"
			binCluster = "us-east-bin"
		)
		metricsPort, err := freePort()
		Expect(err).NotTo(HaveOccurred())
		probePort, err := freePort()
		Expect(err).NotTo(HaveOccurred())
		comp := startAgentBinary(ctx, "fleetq-agent-binary", binCluster, fmt.Sprintf(`namespace: %s
origin: %s
metrics: {bindAddress: "127.0.0.1:%d"}
health: {bindAddress: "127.0.0.1:%d"}
`, binNS, binOrigin, metricsPort, probePort))

		By("its report names its cluster and, with no flavor of its origin yet, matches no node")
		Eventually(func(g Gomega) {
			g.Expect(comp.Running()).To(BeTrue(), "binary exited: %v; log %s", comp.Err(), comp.LogPath())
			r := &fleetq.CapacityReport{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: binNS, Name: binCluster}, r)).To(Succeed())
			g.Expect(r.Status.ClusterName).To(Equal(binCluster))
			g.Expect(r.Status.Flavors).To(BeEmpty())
			g.Expect(r.Status.UnmatchedNodes).To(BeEquivalentTo(4))
		}).WithContext(ctx).WithTimeout(waitLong).WithPolling(poll).Should(Succeed())

		By("a copy of its origin is admitted by it, not by the first agent")
		flavor := syncedFlavor("l4-binary", lab.L4)
		flavor.Labels[fleetq.OriginLabel] = binOrigin
		Expect(k8s.Create(ctx, flavor)).To(Succeed())
		copySpec{ns: teamNS, name: "by-binary", count: 1, gpus: 1, l4: true, origin: binOrigin}.create(ctx)
		Eventually(func(g Gomega) {
			c := conditionIs(g, getWorkload(ctx, g, teamNS, "by-binary"), kueue.WorkloadAdmitted, metav1.ConditionTrue, fleetq.AdmittedReason)
			g.Expect(c.Message).To(HavePrefix("Admitted by fleetq-agent in cluster " + binCluster + " on ["))
			r := &fleetq.CapacityReport{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: binNS, Name: binCluster}, r)).To(Succeed())
			g.Expect(r.Status.Flavors).To(HaveLen(1))
			g.Expect(r.Status.UnmatchedNodes).To(BeEquivalentTo(2))
		}).WithContext(ctx).WithTimeout(waitLong).WithPolling(poll).Should(Succeed())

		By("its metrics count the admission")
		Eventually(func(g Gomega) {
			body := httpGet(ctx, g, fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort))
			g.Expect(body).To(MatchRegexp(`(?m)^fleetq_agent_admissions_total 1$`))
			g.Expect(body).To(MatchRegexp(`(?m)^fleetq_agent_capacity_report_writes_total [1-9]`))
		}).WithContext(ctx).WithTimeout(waitLong).WithPolling(poll).Should(Succeed())
		deleteCopy(ctx, teamNS, "by-binary")
		Expect(k8s.Delete(ctx, flavor)).To(Succeed())
	}, SpecTimeout(2*waitLong+3*time.Minute))

	It("serves health and readiness probes", func(ctx SpecContext) {
		for _, path := range []string{"/healthz", "/readyz"} {
			Eventually(func(g Gomega) {
				g.Expect(httpGet(ctx, g, fmt.Sprintf("http://127.0.0.1:%d%s", healthPort, path))).To(Equal("ok"))
			}).WithContext(ctx).WithTimeout(waitLong).WithPolling(poll).Should(Succeed())
		}
	}, SpecTimeout(waitLong+time.Minute))
})

// startAgentBinary builds fleetq-agent and runs it on the worker, until the spec ends, with an
// AgentConfiguration of these fields (its namespace is created first).
func startAgentBinary(ctx SpecContext, name, cluster, fields string) *framework.Component {
	GinkgoHelper()
	dir := GinkgoT().TempDir()
	bin, err := framework.BuildBinary(ctx, "./cmd/fleetq-agent", dir)
	Expect(err).NotTo(HaveOccurred())
	cfg := &config.AgentConfiguration{}
	Expect(yaml.Unmarshal([]byte(fields), cfg)).To(Succeed())
	ensureNamespace(ctx, cfg.Namespace)
	cfgFile := filepath.Join(dir, "agent.yaml")
	Expect(os.WriteFile(cfgFile, []byte("apiVersion: config.fleetq.dev/v1alpha1\nkind: AgentConfiguration\n"+fields), 0o600)).To(Succeed())
	comp, err := env.Start(ctx, framework.ComponentSpec{
		Name: name, Cluster: worker, Binary: bin,
		Args: []string{"--config", cfgFile, "--cluster-name", cluster, "-v", "1"},
	})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func(ctx SpecContext) { Expect(comp.Stop(ctx)).To(Succeed()) })
	return comp
}

// httpGet returns the body of a 200 response.
func httpGet(ctx context.Context, g Gomega, url string) string {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	g.Expect(err).NotTo(HaveOccurred())
	resp, err := http.DefaultClient.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK), "GET %s: %s", url, body)
	return string(body)
}

// renewedLease creates a manager's Lease (6 s) and renews it as the manager would, until the
// returned function (or the spec's end) stops that.
func renewedLease(ctx SpecContext, namespace, name string) (*coordinationv1.Lease, func()) {
	GinkgoHelper()
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity: ptr.To("fleetq-manager-test"), LeaseDurationSeconds: ptr.To[int32](6), RenewTime: ptr.To(metav1.NowMicro()),
		},
	}
	Expect(k8s.Create(ctx, lease)).To(Succeed())
	stop, stopped := make(chan struct{}), make(chan struct{})
	go renewLease(ctx, client.ObjectKeyFromObject(lease), stop, stopped)
	var once sync.Once
	stopRenewing := func() { once.Do(func() { close(stop); <-stopped }) }
	DeferCleanup(stopRenewing)
	return lease, stopRenewing
}

// renewLease plays the manager renewing its lease every half second, until stop is closed.
func renewLease(ctx context.Context, key client.ObjectKey, stop <-chan struct{}, stopped chan<- struct{}) {
	defer GinkgoRecover()
	defer close(stopped)
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-tick.C:
			l := &coordinationv1.Lease{}
			if err := k8s.Get(ctx, key, l); err != nil {
				continue
			}
			patch := client.MergeFrom(l.DeepCopy())
			l.Spec.RenewTime = ptr.To(metav1.NowMicro())
			_ = k8s.Patch(ctx, l, patch)
		}
	}
}
