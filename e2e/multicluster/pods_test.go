package multicluster

import (
	"context"
	"fmt"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2" //nolint:revive // Ginkgo's DSL reads best unqualified.
	. "github.com/onsi/gomega"    //nolint:revive // Gomega's DSL reads best unqualified.
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/e2e/lab"
	podintegration "github.com/fleetq/fleetq/internal/integration/pod"
)

// plainPod is a Pod a user creates on the multi-cluster team-queue: gpus GPUs for runFor.
func plainPod(name string, gpus int64, runFor string) *corev1.Pod {
	q := *resource.NewQuantity(gpus, resource.DecimalSI)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "research", Name: name,
			Labels:      map[string]string{kueue.QueueNameLabel: "team-queue"},
			Annotations: map[string]string{lab.RunTimeAnnotation: runFor},
		},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "main", Image: "registry.example/notebook:v1", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), lab.GPUResource: q},
				Limits:   corev1.ResourceList{lab.GPUResource: q},
			}}},
		},
	}
}

// podIn reads a Pod of that name from a cluster; nil when it is not there.
func podIn(ctx context.Context, g Gomega, cluster string, p *corev1.Pod) *corev1.Pod {
	cur := &corev1.Pod{}
	err := env.Cluster(cluster).Client().Get(ctx, client.ObjectKeyFromObject(p), cur)
	if apierrors.IsNotFound(err) {
		return nil
	}
	g.Expect(err).NotTo(HaveOccurred(), "in %s", cluster)
	return cur
}

// podCopies lists the workers holding a copy of the management cluster's Pod p.
func podCopies(ctx context.Context, g Gomega, p *corev1.Pod) []string {
	var out []string
	for _, w := range workers {
		if c := podIn(ctx, g, w, p); c != nil && c.DeletionTimestamp == nil {
			out = append(out, w)
		}
	}
	return out
}

// runningCopy waits until p's one copy runs in a worker and returns that worker; check looks
// further at the copy and the management cluster's Pod meanwhile.
func runningCopy(ctx context.Context, p *corev1.Pod, check func(g Gomega, worker string, copy *corev1.Pod)) string {
	var worker string
	Eventually(func(g Gomega) {
		copies := podCopies(ctx, g, p)
		g.Expect(copies).To(HaveLen(1), "one copy")
		worker = copies[0]
		c := podIn(ctx, g, worker, p)
		g.Expect(c.Status.Phase).To(Equal(corev1.PodRunning))
		if check != nil {
			check(g, worker, c)
		}
	}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
	return worker
}

func gated(p *corev1.Pod) bool {
	return slices.ContainsFunc(p.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == podintegration.GateName })
}

// groupMember is a Pod of pod group group, of size Pods, on the multi-cluster team-queue.
func groupMember(name, group string, size int, gpus int64, runFor string) *corev1.Pod {
	p := plainPod(name, gpus, runFor)
	p.Labels[kueue.PodGroupNameLabel] = group
	p.Annotations[kueue.PodGroupTotalCountAnnotation] = fmt.Sprint(size)
	return p
}

// groupWorkload reads a pod group's Workload in the management cluster; nil when there is none.
func groupWorkload(ctx context.Context, g Gomega, group string) *kueue.Workload {
	wl := &kueue.Workload{}
	err := mgmt.Get(ctx, client.ObjectKey{Namespace: "research", Name: group}, wl)
	if apierrors.IsNotFound(err) {
		return nil
	}
	g.Expect(err).NotTo(HaveOccurred())
	return wl
}

// groupCopies maps each worker to the members of which it holds a copy.
func groupCopies(ctx context.Context, g Gomega, members []*corev1.Pod) map[string][]string {
	out := map[string][]string{}
	for _, m := range members {
		for _, w := range podCopies(ctx, g, m) {
			out[w] = append(out[w], m.Name)
		}
	}
	return out
}

var _ = Describe("Plain Pods", func() {
	AfterEach(func(ctx SpecContext) {
		Expect(mgmt.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace("research"), client.MatchingLabels{kueue.QueueNameLabel: "team-queue"})).To(Succeed())
		Eventually(func(g Gomega) {
			for _, w := range workers {
				pods := &corev1.PodList{}
				g.Expect(env.Cluster(w).Client().List(ctx, pods, client.InNamespace("research"), client.MatchingLabels{kueue.MultiKueueOriginLabel: mgrCfg.MultiCluster.Origin})).To(Succeed())
				g.Expect(pods.Items).To(BeEmpty(), "Pod copies left in %s", w)
			}
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
		cleanup(ctx)
		Expect(watcher.Overlaps()).To(BeEmpty(), "no job may run in two clusters at once")
	})

	It("runs a Pod's copy in one A100 worker while the Pod here stays gated and shows the copy's status", func(ctx SpecContext) {
		p := plainPod("notebook", 2, "10s")
		Expect(mgmt.Create(ctx, p)).To(Succeed())
		runningCopy(ctx, p, func(g Gomega, worker string, c *corev1.Pod) {
			g.Expect(worker).To(BeElementOf("us-east", "us-west"), "the A100 flavor is in us-east and us-west")
			g.Expect(gated(c)).To(BeFalse(), "the agent removed the copy's gate")
			g.Expect(c.Spec.NodeSelector).To(HaveKeyWithValue(lab.GPUProductLabel, lab.A100), "the admitted flavor's selector is injected")
			g.Expect(c.Labels).NotTo(HaveKey(kueue.QueueNameLabel))
			local := podIn(ctx, g, "management", p)
			g.Expect(local.Status.Phase).To(Equal(corev1.PodRunning), "the copy's phase is mirrored")
		})
		local := podIn(ctx, Default, "management", p)
		Expect(gated(local)).To(BeTrue(), "the management cluster's Pod keeps its gate: it must not run here too")
		Expect(local.Spec.NodeName).To(BeEmpty())

		Eventually(func(g Gomega) {
			local := podIn(ctx, g, "management", p)
			g.Expect(local.Status.Phase).To(Equal(corev1.PodSucceeded), "the copy's end is mirrored")
			wl := workloadOfKind(ctx, p)
			g.Expect(wl).NotTo(BeNil())
			g.Expect(meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadFinished)).To(BeTrue(), "conditions: %v", wl.Status.Conditions)
			g.Expect(podCopies(ctx, g, p)).To(BeEmpty(), "the finished copy is removed")
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
	})

	It("removes a running Pod's copy when the Pod is deleted, and frees its GPUs", func(ctx SpecContext) {
		p := plainPod("server", 2, "1h")
		Expect(mgmt.Create(ctx, p)).To(Succeed())
		worker := runningCopy(ctx, p, nil)

		Expect(mgmt.Delete(ctx, p)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(podIn(ctx, g, worker, p)).To(BeNil(), "the copy in %s is gone", worker)
			g.Expect(podIn(ctx, g, "management", p)).To(BeNil())
			g.Expect(workloadOfKind(ctx, p)).To(BeNil(), "the workload goes with its Pod")
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
	})

	It("runs a pod group in one A100 worker: no copy until every member exists, all members' copies start together, the group's end is mirrored", func(ctx SpecContext) {
		members := []*corev1.Pod{groupMember("trainer-0", "trainers", 3, 1, "8s"), groupMember("trainer-1", "trainers", 3, 1, "8s")}
		for _, m := range members {
			Expect(mgmt.Create(ctx, m)).To(Succeed())
		}
		Consistently(func(g Gomega) {
			g.Expect(groupWorkload(ctx, g, "trainers")).To(BeNil(), "no Workload for a group that is not whole")
			g.Expect(groupCopies(ctx, g, members)).To(BeEmpty(), "no copy of a group that is not whole")
		}).WithContext(ctx).WithTimeout(3 * time.Second).WithPolling(poll).Should(Succeed())

		members = append(members, groupMember("trainer-2", "trainers", 3, 1, "8s"))
		Expect(mgmt.Create(ctx, members[2])).To(Succeed())
		var worker string
		Eventually(func(g Gomega) {
			copies := groupCopies(ctx, g, members)
			g.Expect(copies).To(HaveLen(1), "every member's copy is in one worker: %v", copies)
			for w, names := range copies {
				worker = w
				g.Expect(names).To(HaveLen(3), "a copy of every member")
			}
			for _, m := range members {
				c := podIn(ctx, g, worker, m)
				g.Expect(gated(c)).To(BeFalse(), "the agent started %s with the others", m.Name)
				g.Expect(c.Spec.NodeSelector).To(HaveKeyWithValue(lab.GPUProductLabel, lab.A100), "the admitted flavor's selector is injected")
				g.Expect(c.Status.Phase).To(Equal(corev1.PodRunning))
				local := podIn(ctx, g, "management", m)
				g.Expect(gated(local)).To(BeTrue(), "%s here keeps its gate: it must not run here too", m.Name)
				g.Expect(local.Status.Phase).To(Equal(corev1.PodRunning), "the copy's phase is mirrored")
			}
			wl := groupWorkload(ctx, g, "trainers")
			g.Expect(wl).NotTo(BeNil())
			g.Expect(wl.Status.ClusterName).To(HaveValue(Equal(worker)))
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
		Expect(worker).To(BeElementOf("us-east", "us-west"), "the A100 flavor is in us-east and us-west")

		Eventually(func(g Gomega) {
			for _, m := range members {
				g.Expect(podIn(ctx, g, "management", m).Status.Phase).To(Equal(corev1.PodSucceeded), "%s's end is mirrored", m.Name)
			}
			wl := groupWorkload(ctx, g, "trainers")
			g.Expect(wl).NotTo(BeNil())
			c := meta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadFinished)
			g.Expect(c).NotTo(BeNil(), "conditions: %v", wl.Status.Conditions)
			g.Expect(c.Message).To(Equal("all 3 Pods of group trainers succeeded"))
			g.Expect(groupCopies(ctx, g, members)).To(BeEmpty(), "the finished copies are removed")
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
	})

	It("removes every copy of a running pod group, and its Workload, when its Pods are deleted", func(ctx SpecContext) {
		members := []*corev1.Pod{groupMember("sweep-0", "sweep", 2, 2, "1h"), groupMember("sweep-1", "sweep", 2, 2, "1h")}
		for _, m := range members {
			Expect(mgmt.Create(ctx, m)).To(Succeed())
		}
		Eventually(func(g Gomega) {
			copies := groupCopies(ctx, g, members)
			g.Expect(copies).To(HaveLen(1))
			for w := range copies {
				for _, m := range members {
					g.Expect(podIn(ctx, g, w, m).Status.Phase).To(Equal(corev1.PodRunning))
				}
			}
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())

		for _, m := range members {
			Expect(mgmt.Delete(ctx, m)).To(Succeed())
		}
		Eventually(func(g Gomega) {
			g.Expect(groupCopies(ctx, g, members)).To(BeEmpty(), "every copy is removed")
			g.Expect(groupWorkload(ctx, g, "sweep")).To(BeNil(), "the group's Workload goes with its Pods")
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
	})
})
