package conformance

import (
	"encoding/json"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2" //nolint:revive // Ginkgo's DSL reads best unqualified.
	. "github.com/onsi/gomega"    //nolint:revive // Gomega's DSL reads best unqualified.
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/fleetq/fleetq/e2e/framework"
)

// OperatorInput is a cluster running the lab's job operators (lab.Operators).
type OperatorInput struct {
	Cluster framework.ClusterProxy
	// Tolerations let the jobs' pods onto the cluster's nodes.
	Tolerations []corev1.Toleration
}

// The manifests a user would write, with the tolerations spliced in: a PyTorchJob of one master
// and two workers, and a RayJob (K8sJobMode) with a head, one worker and its submitter.
const (
	pyTorchJobYAML = `
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: mnist}
spec:
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      restartPolicy: Never
      template:
        spec:
          tolerations: %[1]s
          containers: [{name: pytorch, image: registry.example/mnist:v1, resources: {limits: {nvidia.com/gpu: 1}}}]
    Worker:
      replicas: 2
      restartPolicy: Never
      template:
        spec:
          tolerations: %[1]s
          containers: [{name: pytorch, image: registry.example/mnist:v1, resources: {limits: {nvidia.com/gpu: 1}}}]
`
	rayJobYAML = `
apiVersion: ray.io/v1
kind: RayJob
metadata: {name: sample}
spec:
  entrypoint: python /home/ray/samples/sample_code.py
  shutdownAfterJobFinishes: true
  submitterPodTemplate:
    spec:
      restartPolicy: Never
      tolerations: %[1]s
      containers: [{name: ray-job-submitter, image: registry.example/ray:2.41.0, resources: {requests: {cpu: 200m}}}]
  rayClusterSpec:
    headGroupSpec:
      rayStartParams: {}
      template:
        spec:
          tolerations: %[1]s
          containers: [{name: ray-head, image: registry.example/ray:2.41.0, resources: {requests: {cpu: "1"}}}]
    workerGroupSpecs:
    - groupName: gpu
      replicas: 1
      rayStartParams: {}
      template:
        spec:
          tolerations: %[1]s
          containers: [{name: ray-worker, image: registry.example/ray:2.41.0, resources: {limits: {nvidia.com/gpu: 1}}}]
`
)

// OperatorJobsRunToCompletionSpec checks that the lab's training-operator and ray-operator run
// their jobs on the fake nodes: a PyTorchJob's pods all succeed and the job Succeeds; a RayJob's
// cluster comes up, its submitter runs, the RayJob ends Complete with SUCCEEDED, and its
// RayCluster is deleted afterwards (shutdownAfterJobFinishes).
func OperatorJobsRunToCompletionSpec(inputGetter func() OperatorInput) {
	It("runs a PyTorchJob and a RayJob to completion with the pinned operators", func(ctx SpecContext) {
		in := inputGetter()
		cl := in.Cluster.Client()
		ns := createNamespace(ctx, in.Cluster.Clientset(), "lab-operators-")
		// JSON is YAML's flow style, so the tolerations splice into the manifests.
		tolerations, err := json.Marshal(in.Tolerations)
		Expect(err).NotTo(HaveOccurred())
		flow := string(tolerations)

		pt := manifest(fmt.Sprintf(pyTorchJobYAML, flow), ns)
		rj := manifest(fmt.Sprintf(rayJobYAML, flow), ns)
		Expect(cl.Create(ctx, pt)).To(Succeed())
		Expect(cl.Create(ctx, rj)).To(Succeed())

		Eventually(func(g Gomega) {
			g.Expect(cl.Get(ctx, client.ObjectKeyFromObject(pt), pt)).To(Succeed())
			conds, _, _ := unstructured.NestedSlice(pt.Object, "status", "conditions")
			g.Expect(conds).To(ContainElement(And(HaveKeyWithValue("type", "Succeeded"), HaveKeyWithValue("status", "True"))),
				"PyTorchJob status: %v", pt.Object["status"])
		}).WithContext(ctx).WithTimeout(waitLong).WithPolling(poll).Should(Succeed())
		// The job succeeds with its master; the workers, started after it, end a moment later.
		Eventually(func(g Gomega) {
			pods, err := in.Cluster.Clientset().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "training.kubeflow.org/job-name=mnist"})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(pods.Items).To(HaveLen(3), "a master and two workers")
			for _, p := range pods.Items {
				g.Expect(p.Status.Phase).To(Equal(corev1.PodSucceeded), "pod %s", p.Name)
			}
		}).WithContext(ctx).WithTimeout(waitShort).WithPolling(poll).Should(Succeed())

		var clusterName string
		Eventually(func(g Gomega) {
			g.Expect(cl.Get(ctx, client.ObjectKeyFromObject(rj), rj)).To(Succeed())
			deployment, _, _ := unstructured.NestedString(rj.Object, "status", "jobDeploymentStatus")
			status, _, _ := unstructured.NestedString(rj.Object, "status", "jobStatus")
			clusterName, _, _ = unstructured.NestedString(rj.Object, "status", "rayClusterName")
			g.Expect([]string{deployment, status}).To(Equal([]string{"Complete", "SUCCEEDED"}), "RayJob status: %v", rj.Object["status"])
		}).WithContext(ctx).WithTimeout(waitLong).WithPolling(poll).Should(Succeed())
		Expect(clusterName).NotTo(BeEmpty())
		Eventually(func() bool {
			rc := &unstructured.Unstructured{}
			rc.SetGroupVersionKind(schema.GroupVersionKind{Group: "ray.io", Version: "v1", Kind: "RayCluster"})
			return apierrors.IsNotFound(cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: clusterName}, rc))
		}).WithContext(ctx).WithTimeout(waitLong).WithPolling(poll).Should(BeTrue(), "the finished RayJob's RayCluster %s is deleted", clusterName)
	}, SpecTimeout(2*waitLong+time.Minute))
}

// manifest reads one object and puts it in ns.
func manifest(doc, ns string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	Expect(yaml.Unmarshal([]byte(doc), &u.Object)).To(Succeed(), doc)
	u.SetNamespace(ns)
	return u
}
