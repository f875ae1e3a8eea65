package multicluster

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2" //nolint:revive // Ginkgo's DSL reads best unqualified.
	. "github.com/onsi/gomega"    //nolint:revive // Gomega's DSL reads best unqualified.
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetq "github.com/fleetq/fleetq/api/fleetq/v1alpha1"
	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/e2e/kinds"
	"github.com/fleetq/fleetq/e2e/lab"
	"github.com/fleetq/fleetq/internal/workload"
)

// get reads obj from one cluster; nil when it is not there.
func get(ctx context.Context, cluster string, obj client.Object) *unstructured.Unstructured {
	u, err := kinds.Get(ctx, env.Cluster(cluster).Client(), obj)
	Expect(err).NotTo(HaveOccurred(), "in %s", cluster)
	return u
}

// workloadOfKind is the management cluster's Workload of obj, or nil.
func workloadOfKind(ctx context.Context, obj client.Object) *kueue.Workload {
	wl := &kueue.Workload{}
	gvk, err := mgmt.GroupVersionKindFor(obj)
	Expect(err).NotTo(HaveOccurred())
	key := client.ObjectKey{Namespace: obj.GetNamespace(), Name: workload.NameFor(gvk.Kind, obj.GetName(), obj.GetUID())}
	if err := mgmt.Get(ctx, key, wl); err != nil {
		return nil
	}
	return wl
}

// kindCopies lists the workers holding a copy of obj.
func kindCopies(ctx context.Context, obj client.Object) []string {
	var out []string
	for _, w := range workers {
		if get(ctx, w, obj) != nil {
			out = append(out, w)
		}
	}
	return out
}

// podsLabelled lists the pods of a cluster in research with label=value, not being deleted.
func podsLabelled(ctx context.Context, cluster, label, value string) []corev1.Pod {
	pods := &corev1.PodList{}
	Expect(env.Cluster(cluster).Client().List(ctx, pods, client.InNamespace("research"), client.MatchingLabels{label: value})).To(Succeed())
	var out []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

// placementOfKind says where obj's workload is placed and why, for failure messages.
func placementOfKind(ctx context.Context, obj client.Object) string {
	wl := workloadOfKind(ctx, obj)
	if wl == nil {
		return "no workload yet"
	}
	out := ""
	for _, c := range wl.Status.AdmissionChecks {
		out += fmt.Sprintf("%s %s: %s; ", c.Name, c.State, c.Message)
	}
	if c := meta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadQuotaReserved); c != nil {
		out += "QuotaReserved: " + c.Message
	}
	return out
}

// kindGVKs are the kinds the specs submit besides batch Jobs and Pods.
func kindGVKs() []schema.GroupVersionKind {
	gvks := []schema.GroupVersionKind{kinds.RayJobGVK, kinds.RayClusterGVK}
	for _, t := range kinds.Trainings {
		gvks = append(gvks, t.GVK)
	}
	return gvks
}

// cleanupKinds deletes the specs' training jobs, RayJobs and RayClusters and waits until no copy
// is left anywhere, then runs the suite's cleanup.
func cleanupKinds(ctx context.Context) {
	for _, gvk := range kindGVKs() {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		Expect(mgmt.DeleteAllOf(ctx, u, client.InNamespace("research"), client.PropagationPolicy("Background"))).To(Succeed())
	}
	Eventually(func(g Gomega) {
		for _, c := range append([]string{"management"}, workers...) {
			for _, gvk := range kindGVKs() {
				items, err := kinds.List(ctx, env.Cluster(c).Client(), gvk, "research")
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(items).To(BeEmpty(), "%s left in %s", gvk.Kind, c)
			}
		}
	}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
	cleanup(ctx)
}

var _ = Describe("Job kinds", func() {
	AfterEach(func(ctx SpecContext) {
		cleanupKinds(ctx)
		Expect(watcher.Overlaps()).To(BeEmpty(), "no job may run in two clusters at once")
	})

	It("dispatches a PyTorchJob to one A100 worker, mirrors its status, and removes the copy once it succeeds", func(ctx SpecContext) {
		pt := kinds.PyTorchJob("research", "mnist", kinds.Options{Queue: "team-queue", RunFor: "10s", GPUs: 2})
		Expect(mgmt.Create(ctx, pt)).To(Succeed())

		Eventually(func(g Gomega) {
			copies := kindCopies(ctx, pt)
			g.Expect(copies).To(HaveLen(1), "placement: %s", placementOfKind(ctx, pt))
			worker := copies[0]
			g.Expect(worker).To(BeElementOf("us-east", "us-west"), "the A100 flavor is in us-east and us-west")
			pods := podsLabelled(ctx, worker, kinds.PyTorchJobLabel, "mnist")
			g.Expect(pods).To(HaveLen(3), "a master and two workers in %s", worker)
			for _, p := range pods {
				g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning), "pod %s", p.Name)
				g.Expect(p.Spec.NodeSelector).To(HaveKeyWithValue(lab.GPUProductLabel, lab.A100), "the admitted flavor's selector is injected")
			}
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())

		// The management cluster's PyTorchJob stays suspended (training-operator v1.8.1 has no
		// managedBy): its own training-operator starts no pod.
		suspended, _, _ := unstructured.NestedBool(get(ctx, "management", pt).Object, "spec", "runPolicy", "suspend")
		Expect(suspended).To(BeTrue(), "the management cluster's PyTorchJob is suspended")
		Expect(podsLabelled(ctx, "management", kinds.PyTorchJobLabel, "mnist")).To(BeEmpty())

		Eventually(func(g Gomega) {
			local := get(ctx, "management", pt)
			g.Expect(kinds.Succeeded(local)).To(BeTrue(), "the worker's status is mirrored: %v", local.Object["status"])
			wl := workloadOfKind(ctx, pt)
			g.Expect(wl).NotTo(BeNil())
			g.Expect(meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadFinished)).To(BeTrue(), "conditions: %v", wl.Status.Conditions)
			g.Expect(kindCopies(ctx, pt)).To(BeEmpty(), "the finished copy is removed")
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
		Expect(podsLabelled(ctx, "management", kinds.PyTorchJobLabel, "mnist")).To(BeEmpty())
	})

	It("dispatches a TFJob, an XGBoostJob, a PaddleJob and an MPIJob each to one A100 worker, mirrors their success, and removes the copies", func(ctx SpecContext) {
		o := kinds.Options{Queue: "team-queue", RunFor: "5s", Workers: 1, GPUs: 1}
		trainings := slices.DeleteFunc(slices.Clone(kinds.Trainings), func(t kinds.Training) bool { return t == kinds.PyTorch })
		jobs := make([]*unstructured.Unstructured, len(trainings))
		for i, t := range trainings {
			jobs[i] = t.Job("research", strings.ToLower(t.GVK.Kind), o)
			Expect(mgmt.Create(ctx, jobs[i])).To(Succeed())
		}
		for i, j := range jobs {
			t := trainings[i]
			Eventually(func(g Gomega) {
				copies := kindCopies(ctx, j)
				g.Expect(copies).To(HaveLen(1), "%s placement: %s", t.GVK.Kind, placementOfKind(ctx, j))
				worker := copies[0]
				g.Expect(worker).To(BeElementOf("us-east", "us-west"), "the A100 flavor is in us-east and us-west")
				pods := podsLabelled(ctx, worker, kinds.PyTorchJobLabel, j.GetName())
				g.Expect(pods).To(HaveLen(t.Pods(o)), "the %s's lead and worker in %s", t.GVK.Kind, worker)
				for _, p := range pods {
					g.Expect(p.Spec.NodeSelector).To(HaveKeyWithValue(lab.GPUProductLabel, lab.A100), "pod %s has the admitted flavor's selector", p.Name)
				}
			}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
			suspended, _, _ := unstructured.NestedBool(get(ctx, "management", j).Object, "spec", "runPolicy", "suspend")
			Expect(suspended).To(BeTrue(), "the management cluster's %s stays suspended", t.GVK.Kind)
			Expect(podsLabelled(ctx, "management", kinds.PyTorchJobLabel, j.GetName())).To(BeEmpty())
		}
		for _, j := range jobs {
			Eventually(func(g Gomega) {
				local := get(ctx, "management", j)
				g.Expect(kinds.Succeeded(local)).To(BeTrue(), "%s: the worker's status is mirrored: %v", j.GetKind(), local.Object["status"])
				wl := workloadOfKind(ctx, j)
				g.Expect(wl).NotTo(BeNil())
				g.Expect(meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadFinished)).To(BeTrue(), "conditions: %v", wl.Status.Conditions)
				g.Expect(kindCopies(ctx, j)).To(BeEmpty(), "the finished %s copy is removed", j.GetKind())
			}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
		}
	})

	It("dispatches a RayJob to one A100 worker, where ray-operator runs its cluster and submitter, and cleans up once it completes", func(ctx SpecContext) {
		rj := kinds.RayJob("research", "sample", kinds.Options{Queue: "team-queue", RunFor: "10s"})
		Expect(mgmt.Create(ctx, rj)).To(Succeed())
		managedBy, _, _ := unstructured.NestedString(get(ctx, "management", rj).Object, "spec", "managedBy")
		Expect(managedBy).To(Equal(kueue.MultiKueueControllerName), "fleetq marks the RayJob as dispatched, so the management cluster's ray-operator leaves it alone")

		var worker, uid string
		Eventually(func(g Gomega) {
			copies := kindCopies(ctx, rj)
			g.Expect(copies).To(HaveLen(1), "placement: %s", placementOfKind(ctx, rj))
			worker = copies[0]
			g.Expect(worker).To(BeElementOf("us-east", "us-west"))
			wl := workloadOfKind(ctx, rj)
			g.Expect(wl).NotTo(BeNil())
			uid = string(wl.UID)
			gpuPods := 0
			// The Ray cluster's pods carry no name of the RayJob; fleetq's identity label finds them.
			for _, p := range podsLabelled(ctx, worker, fleetq.WorkloadUIDLabel, uid) {
				if p.Labels["ray.io/node-type"] == "worker" {
					gpuPods++
					g.Expect(p.Spec.NodeSelector).To(HaveKeyWithValue(lab.GPUProductLabel, lab.A100), "pod %s", p.Name)
				}
			}
			g.Expect(gpuPods).To(Equal(2), "the two GPU workers of the Ray cluster in %s", worker)
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
		clusters, err := kinds.List(ctx, mgmt, kinds.RayClusterGVK, "research")
		Expect(err).NotTo(HaveOccurred())
		Expect(clusters).To(BeEmpty(), "no RayCluster in the management cluster")

		Eventually(func(g Gomega) {
			local := get(ctx, "management", rj)
			deployment, status := kinds.RayJobState(local)
			g.Expect([]string{deployment, status}).To(Equal([]string{"Complete", "SUCCEEDED"}), "the worker's status is mirrored: %v", local.Object["status"])
			wl := workloadOfKind(ctx, rj)
			g.Expect(wl).NotTo(BeNil())
			g.Expect(meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadFinished)).To(BeTrue(), "conditions: %v", wl.Status.Conditions)
			g.Expect(kindCopies(ctx, rj)).To(BeEmpty(), "the finished copy is removed")
			g.Expect(podsLabelled(ctx, worker, fleetq.WorkloadUIDLabel, uid)).To(BeEmpty(), "the Ray cluster's pods are gone")
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
	})

	It("dispatches a RayCluster described in integrations.generic to one A100 worker, mirrors its state, and removes the copy when it is deleted", func(ctx SpecContext) {
		rc := kinds.RayCluster("research", "notebook", kinds.Options{Queue: "team-queue", Workers: 2, GPUs: 2})
		Expect(mgmt.Create(ctx, rc)).To(Succeed())
		managedBy, _, _ := unstructured.NestedString(get(ctx, "management", rc).Object, "spec", "managedBy")
		Expect(managedBy).To(Equal(kueue.MultiKueueControllerName), "the generic adapter marks it dispatched through its managedByPath")

		var worker, uid string
		Eventually(func(g Gomega) {
			copies := kindCopies(ctx, rc)
			g.Expect(copies).To(HaveLen(1), "placement: %s", placementOfKind(ctx, rc))
			worker = copies[0]
			g.Expect(worker).To(BeElementOf("us-east", "us-west"))
			wl := workloadOfKind(ctx, rc)
			g.Expect(wl).NotTo(BeNil())
			uid = string(wl.UID)
			pods := podsLabelled(ctx, worker, fleetq.WorkloadUIDLabel, uid)
			g.Expect(pods).To(HaveLen(3), "head and two GPU workers in %s", worker)
			for _, p := range pods {
				g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning), "pod %s", p.Name)
				if p.Labels["ray.io/node-type"] == "worker" {
					g.Expect(p.Spec.NodeSelector).To(HaveKeyWithValue(lab.GPUProductLabel, lab.A100), "pod %s", p.Name)
				}
			}
			state, _, _ := unstructured.NestedString(get(ctx, "management", rc).Object, "status", "state")
			g.Expect(state).To(Equal("ready"), "the worker's status is mirrored")
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
		Expect(podsLabelled(ctx, "management", fleetq.WorkloadUIDLabel, uid)).To(BeEmpty(), "no pod in the management cluster")

		Expect(mgmt.Delete(ctx, rc, client.PropagationPolicy("Background"))).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(kindCopies(ctx, rc)).To(BeEmpty(), "the copy is removed")
			g.Expect(podsLabelled(ctx, worker, fleetq.WorkloadUIDLabel, uid)).To(BeEmpty(), "its pods are gone")
			g.Expect(workloadOfKind(ctx, rc)).To(BeNil())
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
	})

	It("does not place a PyTorchJob on a worker without training-operator, and says so", func(ctx SpecContext) {
		// Pinned to L4s, which only eu-west has, and eu-west runs no training-operator.
		pt := kinds.PyTorchJob("research", "mnist-l4", kinds.Options{Queue: "team-queue", Product: lab.L4})
		Expect(mgmt.Create(ctx, pt)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(placementOfKind(ctx, pt)).To(ContainSubstring("eu-west: does not run kubeflow.org/pytorchjob"))
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(kindCopies(ctx, pt)).To(BeEmpty())
			g.Expect(podsLabelled(ctx, "management", kinds.PyTorchJobLabel, "mnist-l4")).To(BeEmpty())
		}).WithContext(ctx).WithTimeout(5 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
	})
})
