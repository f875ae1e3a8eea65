package singlecluster

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2" //nolint:revive // Ginkgo's DSL reads best unqualified.
	. "github.com/onsi/gomega"    //nolint:revive // Gomega's DSL reads best unqualified.
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetq "github.com/fleetq/fleetq/api/fleetq/v1alpha1"
	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/e2e/kinds"
	"github.com/fleetq/fleetq/e2e/lab"
	"github.com/fleetq/fleetq/internal/integration/generic"
	podintegration "github.com/fleetq/fleetq/internal/integration/pod"
	"github.com/fleetq/fleetq/internal/workload"
	"github.com/fleetq/fleetq/manager/jobs"
	"github.com/fleetq/fleetq/manager/setup"
)

// kindsPoolName is the node pool (lab.PoolLabel) of the job-kind specs' A100 nodes.
const kindsPoolName = "kinds-a100"

var _ = Describe("Job kinds on one cluster", Ordered, func() {
	const ns = "kinds"
	gpuToleration := corev1.Toleration{Key: string(lab.GPUResource), Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}

	BeforeAll(func(ctx SpecContext) {
		Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		Expect(k8s.Create(ctx, &kueue.ResourceFlavor{
			ObjectMeta: metav1.ObjectMeta{Name: "kinds-a100"},
			Spec: kueue.ResourceFlavorSpec{
				NodeLabels:  map[string]string{lab.PoolLabel: kindsPoolName},
				Tolerations: []corev1.Toleration{gpuToleration},
			},
		})).To(Succeed())
		Expect(k8s.Create(ctx, &kueue.ClusterQueue{
			ObjectMeta: metav1.ObjectMeta{Name: "kinds-cq"},
			Spec: kueue.ClusterQueueSpec{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
				Preemption:        &kueue.ClusterQueuePreemption{WithinClusterQueue: kueue.PreemptionPolicyLowerPriority},
				ResourceGroups: []kueue.ResourceGroup{{
					CoveredResources: []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, lab.GPUResource},
					Flavors: []kueue.FlavorQuotas{{Name: "kinds-a100", Resources: []kueue.ResourceQuota{
						{Name: corev1.ResourceCPU, NominalQuota: resource.MustParse("32")},
						{Name: corev1.ResourceMemory, NominalQuota: resource.MustParse("256Gi")},
						{Name: lab.GPUResource, NominalQuota: resource.MustParse("4")},
					}}},
				}},
			},
		})).To(Succeed())
		Expect(k8s.Create(ctx, &kueue.LocalQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kinds-queue"}, Spec: kueue.LocalQueueSpec{ClusterQueue: "kinds-cq"}})).To(Succeed())
		Expect(k8s.Create(ctx, &kueue.WorkloadPriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "kinds-urgent"}, Value: 1000})).To(Succeed())
	})

	AfterAll(func(ctx SpecContext) {
		gvks := []schema.GroupVersionKind{kinds.RayJobGVK, kinds.RayClusterGVK}
		for _, t := range kinds.Trainings {
			gvks = append(gvks, t.GVK)
		}
		for _, gvk := range gvks {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(gvk)
			Expect(k8s.DeleteAllOf(ctx, u, client.InNamespace(ns), client.PropagationPolicy("Background"))).To(Succeed())
		}
		Eventually(func(g Gomega) {
			wls := &kueue.WorkloadList{}
			g.Expect(k8s.List(ctx, wls, client.InNamespace(ns))).To(Succeed())
			g.Expect(wls.Items).To(BeEmpty())
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
		Expect(k8s.Delete(ctx, &kueue.LocalQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kinds-queue"}})).To(Succeed())
		Expect(k8s.Delete(ctx, &kueue.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: "kinds-cq"}})).To(Succeed())
		Expect(k8s.Delete(ctx, &kueue.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: "kinds-a100"}})).To(Succeed())
		Expect(k8s.Delete(ctx, &kueue.WorkloadPriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "kinds-urgent"}})).To(Succeed())
	})

	// get reads obj back; it must exist.
	get := func(ctx context.Context, obj client.Object) *unstructured.Unstructured {
		u, err := kinds.Get(ctx, k8s, obj)
		Expect(err).NotTo(HaveOccurred())
		Expect(u).NotTo(BeNil(), "%s %s", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName())
		return u
	}
	workloadOfKind := func(ctx context.Context, obj client.Object) *kueue.Workload {
		wl := &kueue.Workload{}
		key := client.ObjectKey{Namespace: ns, Name: workload.NameFor(obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), obj.GetUID())}
		if err := k8s.Get(ctx, key, wl); err != nil {
			return nil
		}
		return wl
	}
	// running lists the running pods with label=value; every one must run on the flavor's nodes.
	running := func(ctx context.Context, g Gomega, label, value string) []corev1.Pod {
		pods := &corev1.PodList{}
		g.Expect(k8s.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{label: value})).To(Succeed())
		var out []corev1.Pod
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
				continue
			}
			g.Expect(p.Spec.NodeSelector).To(HaveKeyWithValue(lab.PoolLabel, kindsPoolName), "pod %s has the flavor's node selector", p.Name)
			g.Expect(p.Spec.Tolerations).To(ContainElement(gpuToleration), "pod %s has the flavor's toleration", p.Name)
			out = append(out, p)
		}
		return out
	}
	gpusInUse := func(ctx context.Context) int64 {
		cq := &kueue.ClusterQueue{}
		Expect(k8s.Get(ctx, client.ObjectKey{Name: "kinds-cq"}, cq)).To(Succeed())
		for _, f := range cq.Status.FlavorsReservation {
			for _, r := range f.Resources {
				if r.Name == lab.GPUResource {
					return r.Total.Value()
				}
			}
		}
		return 0
	}
	// podSetShapes lists a workload's pod sets as name×count.
	podSetShapes := func(wl *kueue.Workload) []string {
		var out []string
		for _, ps := range wl.Spec.PodSets {
			out = append(out, fmt.Sprintf("%s×%d", ps.Name, ps.Count))
		}
		return out
	}
	suspendedAt := func(u *unstructured.Unstructured, path ...string) bool {
		v, _, _ := unstructured.NestedBool(u.Object, path...)
		return v
	}

	It("queues a PyTorchJob behind another, starts all its pods with the flavor once quota frees, and releases quota when it succeeds", func(ctx SpecContext) {
		// Each asks for 4 GPUs (a master and a worker of 2), all of the queue's quota.
		first := kinds.PyTorchJob(ns, "first", kinds.Options{Queue: "kinds-queue", Workers: 1, GPUs: 2, RunFor: "8s"})
		second := kinds.PyTorchJob(ns, "second", kinds.Options{Queue: "kinds-queue", Workers: 1, GPUs: 2, RunFor: "3s"})
		Expect(k8s.Create(ctx, first)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(running(ctx, g, kinds.PyTorchJobLabel, "first")).To(HaveLen(2), "the master and the worker run")
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
		Expect(k8s.Create(ctx, second)).To(Succeed())

		Eventually(func(g Gomega) {
			wl := workloadOfKind(ctx, second)
			g.Expect(wl).NotTo(BeNil())
			c := meta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadQuotaReserved)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Message).To(ContainSubstring("nvidia.com/gpu"))
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
		Expect(suspendedAt(get(ctx, second), "spec", "runPolicy", "suspend")).To(BeTrue(), "the queued PyTorchJob is suspended")
		Expect(running(ctx, Default, kinds.PyTorchJobLabel, "second")).To(BeEmpty(), "none of its pods start: all or nothing")

		Eventually(func(g Gomega) {
			g.Expect(kinds.Succeeded(get(ctx, first))).To(BeTrue())
			g.Expect(running(ctx, g, kinds.PyTorchJobLabel, "second")).To(HaveLen(2), "the second starts once the first's quota is released")
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(kinds.Succeeded(get(ctx, second))).To(BeTrue())
			wl := workloadOfKind(ctx, second)
			g.Expect(meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadFinished)).To(BeTrue())
			g.Expect(gpusInUse(ctx)).To(BeZero(), "finished jobs hold no quota")
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
	})

	// The other training-operator kinds, each against the real operator: a lead (Chief, Master,
	// Launcher) and one worker, every pod on the flavor, the job's end releasing its quota.
	for _, t := range kinds.Trainings {
		if t == kinds.PyTorch {
			continue
		}
		It(fmt.Sprintf("runs a %s: suspended until admitted, all its pods on the flavor, quota released when it succeeds", t.GVK.Kind), func(ctx SpecContext) {
			o := kinds.Options{Queue: "kinds-queue", Workers: 1, GPUs: 1, RunFor: "3s"}
			job := t.Job(ns, strings.ToLower(t.GVK.Kind), o)
			Expect(k8s.Create(ctx, job)).To(Succeed())
			Expect(suspendedAt(get(ctx, job), "spec", "runPolicy", "suspend")).To(BeTrue(), "the webhook suspends it until it is admitted")
			var uid string
			Eventually(func(g Gomega) {
				wl := workloadOfKind(ctx, job)
				g.Expect(wl).NotTo(BeNil())
				uid = string(wl.UID)
				g.Expect(podSetShapes(wl)).To(Equal([]string{strings.ToLower(t.Lead) + "×1", "worker×1"}), "one pod set per replica type")
				g.Expect(running(ctx, g, fleetq.WorkloadUIDLabel, uid)).To(HaveLen(t.Pods(o)), "the lead and the worker run, on the flavor's nodes")
				g.Expect(gpusInUse(ctx)).To(Equal(t.GPUs(o)))
			}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
			Eventually(func(g Gomega) {
				g.Expect(kinds.Succeeded(get(ctx, job))).To(BeTrue(), "training-operator's status: %v", get(ctx, job).Object["status"])
				wl := workloadOfKind(ctx, job)
				g.Expect(meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadFinished)).To(BeTrue())
				g.Expect(gpusInUse(ctx)).To(BeZero(), "a finished job holds no quota")
			}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
		})
	}

	It("runs a RayCluster through the generic adapter: suspended until admitted, its pods on the flavor, quota released when it is deleted", func(ctx SpecContext) {
		// Holds all of the queue's GPUs until the RayCluster is deleted.
		blocker := kinds.PyTorchJob(ns, "blocker", kinds.Options{Queue: "kinds-queue", Workers: 1, GPUs: 2, RunFor: "10s"})
		Expect(k8s.Create(ctx, blocker)).To(Succeed())
		// Created together, the two would race for the quota; the RayCluster must come second.
		Eventually(func(g Gomega) {
			g.Expect(running(ctx, g, kinds.PyTorchJobLabel, "blocker")).To(HaveLen(2), "the blocker's master and worker run")
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
		rc := kinds.RayCluster(ns, "notebook", kinds.Options{Queue: "kinds-queue", Workers: 2, GPUs: 2})
		Expect(k8s.Create(ctx, rc)).To(Succeed())
		Expect(suspendedAt(get(ctx, rc), "spec", "suspend")).To(BeTrue(), "the webhook suspends the queued RayCluster")
		var uid string
		Eventually(func(g Gomega) {
			wl := workloadOfKind(ctx, rc)
			g.Expect(wl).NotTo(BeNil())
			uid = string(wl.UID)
			g.Expect(podSetShapes(wl)).To(Equal([]string{"head×1", "gpu×2"}), "the pod sets read from the generic description")
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(running(ctx, g, fleetq.WorkloadUIDLabel, uid)).To(BeEmpty(), "no pod while the blocker holds the quota")
		}).WithContext(ctx).WithTimeout(3 * time.Second).WithPolling(poll).Should(Succeed())

		Eventually(func(g Gomega) {
			g.Expect(kinds.Succeeded(get(ctx, blocker))).To(BeTrue())
			g.Expect(running(ctx, g, fleetq.WorkloadUIDLabel, uid)).To(HaveLen(3), "head and two GPU workers, on the flavor's nodes")
			g.Expect(gpusInUse(ctx)).To(Equal(int64(4)))
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())

		Expect(k8s.Delete(ctx, rc, client.PropagationPolicy("Background"))).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(workloadOfKind(ctx, rc)).To(BeNil())
			g.Expect(gpusInUse(ctx)).To(BeZero(), "a deleted RayCluster releases its quota")
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
	})

	It("refuses to start a manager whose generic description names a path RayCluster's schema lacks", func(ctx SpecContext) {
		bad := *mgrCfg
		typo := kinds.RayClusterGeneric
		typo.PodSets = []generic.PodSetSpec{typo.PodSets[0], {List: "spec.workerGroupSpecs", NameField: "groupName", Template: "templat", Count: []string{"replicas"}}}
		bad.Integrations.Generic = []generic.Spec{typo}
		_, err := setup.New(setup.Options{Config: &bad, RestConfig: env.Management().RESTConfig(), Log: GinkgoLogr, SeveralPerProcess: true})
		Expect(err).To(MatchError(ContainSubstring(`integrations.generic[0].podSets[1].template: Invalid value: "templat": templat does not exist in the schema of RayCluster (ray.io/v1), in the items of spec.workerGroupSpecs (no field "templat" there); fix the path`)))
	})

	// plainPod is a Pod a user creates on the queue: gpus GPUs, running for runFor on the fake node.
	plainPod := func(name string, gpus int64, runFor, priorityClass string) *corev1.Pod {
		labels := map[string]string{kueue.QueueNameLabel: "kinds-queue"}
		if priorityClass != "" {
			labels[kueue.PriorityClassLabel] = priorityClass
		}
		q := *resource.NewQuantity(gpus, resource.DecimalSI)
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels, Annotations: map[string]string{lab.RunTimeAnnotation: runFor}},
			Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "main", Image: "registry.example/notebook:v1", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), lab.GPUResource: q},
					Limits:   corev1.ResourceList{lab.GPUResource: q},
				}}},
			},
		}
	}
	podWorkload := func(ctx context.Context, p *corev1.Pod) *kueue.Workload {
		wl := &kueue.Workload{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: workload.NameFor("Pod", p.Name, p.UID)}, wl); err != nil {
			return nil
		}
		return wl
	}
	gated := func(p *corev1.Pod) bool {
		return slices.ContainsFunc(p.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == podintegration.GateName })
	}

	It("holds a plain Pod with a scheduling gate until it is admitted, starts it on the flavor, and releases quota when it succeeds", func(ctx SpecContext) {
		blocker := kinds.PyTorchJob(ns, "pod-blocker", kinds.Options{Queue: "kinds-queue", Workers: 1, GPUs: 2, RunFor: "6s"})
		Expect(k8s.Create(ctx, blocker)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(gpusInUse(ctx)).To(Equal(int64(4)), "the blocker holds all of the quota")
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
		p := plainPod("notebook", 2, "4s", "")
		Expect(k8s.Create(ctx, p)).To(Succeed())
		Expect(gated(p)).To(BeTrue(), "the webhook gates the Pod at creation: %v", p.Spec.SchedulingGates)
		Eventually(func(g Gomega) {
			wl := podWorkload(ctx, p)
			g.Expect(wl).NotTo(BeNil())
			c := meta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadQuotaReserved)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse), "it waits for the blocker's quota")
			cur := &corev1.Pod{}
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(p), cur)).To(Succeed())
			g.Expect(gated(cur)).To(BeTrue())
			g.Expect(cur.Spec.NodeName).To(BeEmpty(), "a held Pod is not scheduled")
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())

		Eventually(func(g Gomega) {
			cur := &corev1.Pod{}
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(p), cur)).To(Succeed())
			g.Expect(gated(cur)).To(BeFalse(), "admitted: the gate is gone")
			g.Expect(cur.Spec.NodeSelector).To(HaveKeyWithValue(lab.PoolLabel, kindsPoolName))
			g.Expect(cur.Spec.Tolerations).To(ContainElement(gpuToleration))
			g.Expect(cur.Status.Phase).To(Equal(corev1.PodSucceeded))
			wl := podWorkload(ctx, p)
			g.Expect(wl).NotTo(BeNil())
			g.Expect(meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadFinished)).To(BeTrue())
			g.Expect(gpusInUse(ctx)).To(BeZero(), "a finished Pod holds no quota")
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
		Expect(k8s.Delete(ctx, p)).To(Succeed())
	})

	// groupMember is a Pod of pod group group, of size pods.
	groupMember := func(name, group string, size int, gpus int64, runFor string) *corev1.Pod {
		p := plainPod(name, gpus, runFor, "")
		p.Labels[kueue.PodGroupNameLabel] = group
		p.Annotations[kueue.PodGroupTotalCountAnnotation] = fmt.Sprint(size)
		return p
	}
	groupWorkload := func(ctx context.Context, group string) *kueue.Workload {
		wl := &kueue.Workload{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: group}, wl); err != nil {
			return nil
		}
		return wl
	}
	// eventsOn lists the messages of the events about a Pod with that reason.
	eventsOn := func(ctx context.Context, g Gomega, p *corev1.Pod, reason string) []string {
		list := &eventsv1.EventList{}
		g.Expect(k8s.List(ctx, list, client.InNamespace(ns))).To(Succeed())
		var out []string
		for _, e := range list.Items {
			if e.Regarding.Kind == "Pod" && e.Regarding.Name == p.Name && e.Reason == reason {
				out = append(out, e.Note)
			}
		}
		return out
	}
	current := func(ctx context.Context, g Gomega, p *corev1.Pod) *corev1.Pod {
		cur := &corev1.Pod{}
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(p), cur)).To(Succeed())
		return cur
	}

	It("queues a pod group once all its Pods exist, starts them together on the flavor, and releases quota when all succeeded", func(ctx SpecContext) {
		members := []*corev1.Pod{groupMember("trainer-0", "trainers", 3, 1, "4s"), groupMember("trainer-1", "trainers", 3, 1, "4s")}
		for _, p := range members {
			Expect(k8s.Create(ctx, p)).To(Succeed())
			Expect(gated(p)).To(BeTrue(), "the webhook gates a member at creation")
		}
		Eventually(func(g Gomega) {
			g.Expect(eventsOn(ctx, g, members[0], jobs.ReasonGroupWaiting)).To(ContainElement(
				"group trainers has 2 of its 3 Pods: it is queued once the 1 missing are created (all of a group's members start together, or none)"))
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(groupWorkload(ctx, "trainers")).To(BeNil(), "no Workload for a group that is not whole")
			for _, p := range members {
				cur := current(ctx, g, p)
				g.Expect(gated(cur)).To(BeTrue())
				g.Expect(cur.Spec.NodeName).To(BeEmpty())
			}
		}).WithContext(ctx).WithTimeout(3 * time.Second).WithPolling(poll).Should(Succeed())

		last := groupMember("trainer-2", "trainers", 3, 1, "4s")
		last.Spec.Containers[0].Image = "registry.example/evaluator:v1" // another role: its own pod set
		Expect(k8s.Create(ctx, last)).To(Succeed())
		members = append(members, last)
		Eventually(func(g Gomega) {
			wl := groupWorkload(ctx, "trainers")
			g.Expect(wl).NotTo(BeNil())
			g.Expect(wl.Spec.PodSets).To(HaveLen(2), "trainers and the evaluator")
			g.Expect(wl.Spec.PodSets[0].Count + wl.Spec.PodSets[1].Count).To(Equal(int32(3)))
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
		Eventually(func(g Gomega) {
			for _, p := range members {
				cur := current(ctx, g, p)
				g.Expect(gated(cur)).To(BeFalse(), "admitted: %s's gate is gone", p.Name)
				g.Expect(cur.Spec.NodeSelector).To(HaveKeyWithValue(lab.PoolLabel, kindsPoolName))
				g.Expect(cur.Spec.Tolerations).To(ContainElement(gpuToleration))
				g.Expect(cur.Status.Phase).To(Equal(corev1.PodSucceeded))
			}
			wl := groupWorkload(ctx, "trainers")
			g.Expect(wl).NotTo(BeNil())
			c := meta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadFinished)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Message).To(Equal("all 3 Pods of group trainers succeeded"))
			g.Expect(gpusInUse(ctx)).To(BeZero(), "a finished group holds no quota")
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())

		for _, p := range members {
			Expect(k8s.Delete(ctx, p)).To(Succeed())
		}
		Eventually(func(g Gomega) {
			g.Expect(groupWorkload(ctx, "trainers")).To(BeNil(), "the group's Workload goes with its last Pod")
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
	})

	It("preempts a running pod group for a higher-priority job by deleting every Pod of it, and its Workload goes with them", func(ctx SpecContext) {
		members := []*corev1.Pod{groupMember("sweep-0", "sweep", 2, 2, "1h"), groupMember("sweep-1", "sweep", 2, 2, "1h")}
		for _, p := range members {
			Expect(k8s.Create(ctx, p)).To(Succeed())
		}
		Eventually(func(g Gomega) {
			for _, p := range members {
				g.Expect(current(ctx, g, p).Status.Phase).To(Equal(corev1.PodRunning))
			}
			g.Expect(gpusInUse(ctx)).To(Equal(int64(4)))
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())

		urgent := kinds.PyTorchJob(ns, "group-urgent", kinds.Options{Queue: "kinds-queue", PriorityClass: "kinds-urgent", Workers: 1, GPUs: 2, RunFor: "5s"})
		Expect(k8s.Create(ctx, urgent)).To(Succeed())
		Eventually(func(g Gomega) {
			for _, p := range members {
				err := k8s.Get(ctx, client.ObjectKeyFromObject(p), &corev1.Pod{})
				g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "preempted member %s is deleted (err %v)", p.Name, err)
			}
			g.Expect(groupWorkload(ctx, "sweep")).To(BeNil(), "its Workload goes with its Pods")
			g.Expect(running(ctx, g, kinds.PyTorchJobLabel, "group-urgent")).To(HaveLen(2), "the urgent job runs")
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(kinds.Succeeded(get(ctx, urgent))).To(BeTrue())
			g.Expect(gpusInUse(ctx)).To(BeZero())
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
	})

	It("ends a running pod group whose Workload is deleted: its Pods are deleted and its quota released", func(ctx SpecContext) {
		p := groupMember("stuck-0", "stuck", 1, 2, "1h")
		Expect(k8s.Create(ctx, p)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(current(ctx, g, p).Status.Phase).To(Equal(corev1.PodRunning))
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
		Expect(k8s.Delete(ctx, groupWorkload(ctx, "stuck"))).To(Succeed())
		Eventually(func(g Gomega) {
			err := k8s.Get(ctx, client.ObjectKeyFromObject(p), &corev1.Pod{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the member is deleted (err %v)", err)
			g.Expect(groupWorkload(ctx, "stuck")).To(BeNil())
			g.Expect(gpusInUse(ctx)).To(BeZero())
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
	})

	It("refuses a member of a pod group that does not say the group's size, naming the annotation", func(ctx SpecContext) {
		p := plainPod("no-size", 1, "1m", "")
		p.Labels[kueue.PodGroupNameLabel] = "trainers"
		err := k8s.Create(ctx, p)
		Expect(err).To(MatchError(ContainSubstring(`metadata.annotations[kueue.x-k8s.io/pod-group-total-count]: Required value: a Pod of pod group "trainers" must say how many Pods the group has, the same number on every member`)))
		Expect(apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(p), &corev1.Pod{}))).To(BeTrue(), "the Pod was not created")
	})

	It("stops a running plain Pod preempted by a higher-priority job by deleting it, and releases its quota", func(ctx SpecContext) {
		p := plainPod("batch-pod", 4, "1h", "")
		Expect(k8s.Create(ctx, p)).To(Succeed())
		Eventually(func(g Gomega) {
			cur := &corev1.Pod{}
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(p), cur)).To(Succeed())
			g.Expect(cur.Status.Phase).To(Equal(corev1.PodRunning))
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())

		urgent := kinds.PyTorchJob(ns, "pod-urgent", kinds.Options{Queue: "kinds-queue", PriorityClass: "kinds-urgent", Workers: 1, GPUs: 2, RunFor: "5s"})
		Expect(k8s.Create(ctx, urgent)).To(Succeed())
		Eventually(func(g Gomega) {
			err := k8s.Get(ctx, client.ObjectKeyFromObject(p), &corev1.Pod{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the preempted Pod is deleted (err %v)", err)
			g.Expect(podWorkload(ctx, p)).To(BeNil(), "its workload goes with it")
			g.Expect(running(ctx, g, kinds.PyTorchJobLabel, "pod-urgent")).To(HaveLen(2), "the urgent job runs")
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(kinds.Succeeded(get(ctx, urgent))).To(BeTrue())
			g.Expect(gpusInUse(ctx)).To(BeZero())
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
	})

	It("preempts a running RayJob for a higher-priority PyTorchJob: suspended, its Ray cluster gone, then started again", func(ctx SpecContext) {
		// Two Ray workers of 2 GPUs: all of the quota, for an hour.
		rj := kinds.RayJob(ns, "tuning", kinds.Options{Queue: "kinds-queue", Workers: 2, GPUs: 2, RunFor: "1h"})
		Expect(k8s.Create(ctx, rj)).To(Succeed())
		var uid string
		Eventually(func(g Gomega) {
			wl := workloadOfKind(ctx, rj)
			g.Expect(wl).NotTo(BeNil())
			uid = string(wl.UID)
			// Head, two workers and the submitter.
			g.Expect(running(ctx, g, fleetq.WorkloadUIDLabel, uid)).To(HaveLen(4))
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())

		urgent := kinds.PyTorchJob(ns, "urgent", kinds.Options{Queue: "kinds-queue", PriorityClass: "kinds-urgent", Workers: 1, GPUs: 2, RunFor: "5s"})
		Expect(k8s.Create(ctx, urgent)).To(Succeed())
		Eventually(func(g Gomega) {
			wl := workloadOfKind(ctx, rj)
			g.Expect(wl).NotTo(BeNil())
			g.Expect(meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadPreempted)).To(BeTrue(), "conditions: %v", wl.Status.Conditions)
			g.Expect(suspendedAt(get(ctx, rj), "spec", "suspend")).To(BeTrue(), "the preempted RayJob is suspended")
			clusters, err := kinds.List(ctx, k8s, kinds.RayClusterGVK, ns)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(clusters).To(BeEmpty(), "ray-operator deletes the suspended RayJob's cluster")
			g.Expect(running(ctx, g, kinds.PyTorchJobLabel, "urgent")).To(HaveLen(2), "the urgent job runs")
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
		Expect(running(ctx, Default, fleetq.WorkloadUIDLabel, uid)).To(BeEmpty(), "no pod of the RayJob runs beside the urgent job")

		Eventually(func(g Gomega) {
			g.Expect(kinds.Succeeded(get(ctx, urgent))).To(BeTrue())
			g.Expect(running(ctx, g, fleetq.WorkloadUIDLabel, uid)).To(HaveLen(4), "the RayJob is admitted again and its cluster comes back")
			g.Expect(suspendedAt(get(ctx, rj), "spec", "suspend")).To(BeFalse())
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())

		Expect(k8s.Delete(ctx, rj, client.PropagationPolicy("Background"))).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(workloadOfKind(ctx, rj)).To(BeNil())
			g.Expect(gpusInUse(ctx)).To(BeZero(), "a deleted RayJob releases its quota")
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
	})
})
