package conformance

import (
	"time"

	. "github.com/onsi/ginkgo/v2" //nolint:revive // Ginkgo's DSL reads best unqualified.
	. "github.com/onsi/gomega"    //nolint:revive // Gomega's DSL reads best unqualified.
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/fleetq/fleetq/e2e/framework"
	"github.com/fleetq/fleetq/e2e/kinds"
)

// OperatorInput is a cluster running the lab's job operators (lab.Operators).
type OperatorInput struct {
	Cluster framework.ClusterProxy
	// Tolerations let the jobs' pods onto the cluster's nodes.
	Tolerations []corev1.Toleration
}

// OperatorJobsRunToCompletionSpec checks that the lab's training-operator and ray-operator run
// their jobs on the fake nodes: a PyTorchJob's pods all succeed and the job Succeeds; a RayJob's
// cluster comes up, its submitter runs, the RayJob ends Complete with SUCCEEDED, and its
// RayCluster is deleted afterwards (shutdownAfterJobFinishes).
func OperatorJobsRunToCompletionSpec(inputGetter func() OperatorInput) {
	It("runs a PyTorchJob and a RayJob to completion with the pinned operators", func(ctx SpecContext) {
		in := inputGetter()
		cl := in.Cluster.Client()
		ns := createNamespace(ctx, in.Cluster.Clientset(), "lab-operators-")
		opts := kinds.Options{Tolerations: in.Tolerations, RunFor: "3s"}
		pt := kinds.PyTorchJob(ns, "mnist", opts)
		rj := kinds.RayJob(ns, "sample", opts)
		Expect(cl.Create(ctx, pt)).To(Succeed())
		Expect(cl.Create(ctx, rj)).To(Succeed())

		Eventually(func(g Gomega) {
			cur, err := kinds.Get(ctx, cl, pt)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(kinds.Succeeded(cur)).To(BeTrue(), "PyTorchJob status: %v", cur.Object["status"])
		}).WithContext(ctx).WithTimeout(waitLong).WithPolling(poll).Should(Succeed())
		// The job succeeds with its master; the workers, started after it, end a moment later.
		Eventually(func(g Gomega) {
			pods, err := in.Cluster.Clientset().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: kinds.PyTorchJobLabel + "=mnist"})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(pods.Items).To(HaveLen(3), "a master and two workers")
			for _, p := range pods.Items {
				g.Expect(p.Status.Phase).To(Equal(corev1.PodSucceeded), "pod %s", p.Name)
			}
		}).WithContext(ctx).WithTimeout(waitShort).WithPolling(poll).Should(Succeed())

		var clusterName string
		Eventually(func(g Gomega) {
			cur, err := kinds.Get(ctx, cl, rj)
			g.Expect(err).NotTo(HaveOccurred())
			deployment, status := kinds.RayJobState(cur)
			clusterName, _, _ = unstructured.NestedString(cur.Object, "status", "rayClusterName")
			g.Expect([]string{deployment, status}).To(Equal([]string{"Complete", "SUCCEEDED"}), "RayJob status: %v", cur.Object["status"])
		}).WithContext(ctx).WithTimeout(waitLong).WithPolling(poll).Should(Succeed())
		Expect(clusterName).NotTo(BeEmpty())
		Eventually(func(g Gomega) {
			rc := &unstructured.Unstructured{}
			rc.SetGroupVersionKind(kinds.RayClusterGVK)
			rc.SetNamespace(ns)
			rc.SetName(clusterName)
			cur, err := kinds.Get(ctx, cl, rc)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(cur).To(BeNil(), "the finished RayJob's RayCluster %s is deleted", clusterName)
		}).WithContext(ctx).WithTimeout(waitLong).WithPolling(poll).Should(Succeed())
	}, SpecTimeout(2*waitLong+time.Minute))
}
