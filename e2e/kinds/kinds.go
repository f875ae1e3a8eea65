// Package kinds builds the Kubeflow and Ray jobs the e2e suites submit, as a user writes them
// (a PyTorchJob of a master and workers, a RayJob in K8sJobMode with a head, GPU workers and a
// submitter), and reads them back through any cluster's client.
package kinds

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/config"
	"github.com/fleetq/fleetq/e2e/lab"
	"github.com/fleetq/fleetq/internal/integration/generic"
)

// The kinds' group, version and kind.
var (
	PyTorchJobGVK = schema.GroupVersionKind{Group: "kubeflow.org", Version: "v1", Kind: "PyTorchJob"}
	RayJobGVK     = schema.GroupVersionKind{Group: "ray.io", Version: "v1", Kind: "RayJob"}
	RayClusterGVK = schema.GroupVersionKind{Group: "ray.io", Version: "v1", Kind: "RayCluster"}
)

// RayClusterGeneric describes KubeRay's RayCluster for fleetq's generic adapter
// (integrations.generic), as a user would describe a kind fleetq has no adapter for; suites use
// it in place of the built-in RayCluster adapter to run the generic one against a real operator.
var RayClusterGeneric = generic.Spec{
	Group: "ray.io", Version: "v1", Kind: "RayCluster",
	SuspendPath: "spec.suspend", ManagedByPath: "spec.managedBy",
	PodSets: []generic.PodSetSpec{
		{Name: "head", Template: "spec.headGroupSpec.template"},
		{List: "spec.workerGroupSpecs", NameField: "groupName", Template: "template", Count: []string{"replicas"}},
	},
}

// UseGenericRayCluster integrates RayCluster through RayClusterGeneric instead of the built-in
// adapter in a manager's or agent's integrations.
func UseGenericRayCluster(in *config.Integrations) {
	in.Frameworks = slices.DeleteFunc(slices.Clone(in.Frameworks), func(f string) bool { return f == "ray.io/raycluster" })
	in.Generic = []generic.Spec{RayClusterGeneric}
}

// PyTorchJobLabel is the label training-operator puts on a PyTorchJob's pods (its name).
const PyTorchJobLabel = "training.kubeflow.org/job-name"

// Options shape a job: where it queues, what its pods ask for, how long they run.
type Options struct {
	// Queue is the kueue.x-k8s.io/queue-name label; "" for none.
	Queue string
	// PriorityClass is the kueue.x-k8s.io/priority-class label; "" for none.
	PriorityClass string
	// Workers is the number of GPU workers (PyTorchJob Worker replicas, RayJob worker group
	// replicas); GPUs is what each asks for. Defaults: 2 workers of 1 GPU.
	Workers, GPUs int
	// RunFor is the run time of the pods that end (lab.RunTimeAnnotation): a PyTorchJob's, a
	// RayJob's submitter; "" for the lab's.
	RunFor string
	// Product pins the GPU pods to a GPU product with a node selector; "" for none.
	Product string
	// Tolerations go on every pod template (what fleetq's flavors inject, for clusters without
	// fleetq).
	Tolerations []corev1.Toleration
}

const pyTorchJobYAML = `
apiVersion: kubeflow.org/v1
kind: PyTorchJob
spec:
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      restartPolicy: Never
      template:
        metadata: {annotations: %[1]s}
        spec:
          nodeSelector: %[2]s
          tolerations: %[3]s
          containers: [{name: pytorch, image: registry.example/mnist:v1, resources: {requests: {cpu: "1"}, limits: {nvidia.com/gpu: %[5]d}}}]
    Worker:
      replicas: %[4]d
      restartPolicy: Never
      template:
        metadata: {annotations: %[1]s}
        spec:
          nodeSelector: %[2]s
          tolerations: %[3]s
          containers: [{name: pytorch, image: registry.example/mnist:v1, resources: {requests: {cpu: "1"}, limits: {nvidia.com/gpu: %[5]d}}}]
`

const rayJobYAML = `
apiVersion: ray.io/v1
kind: RayJob
spec:
  entrypoint: python /home/ray/samples/sample_code.py
  shutdownAfterJobFinishes: true
  submitterPodTemplate:
    metadata: {annotations: %[1]s}
    spec:
      restartPolicy: Never
      tolerations: %[3]s
      containers: [{name: ray-job-submitter, image: registry.example/ray:2.41.0, resources: {requests: {cpu: 200m}}}]
`

const rayClusterYAML = `
apiVersion: ray.io/v1
kind: RayCluster
metadata: {annotations: %[1]s}
spec:
  headGroupSpec:
    rayStartParams: {}
    template:
      spec:
        tolerations: %[3]s
        containers: [{name: ray-head, image: registry.example/ray:2.41.0, resources: {requests: {cpu: "1"}}}]
  workerGroupSpecs:
  - groupName: gpu
    replicas: %[4]d
    rayStartParams: {}
    template:
      spec:
        nodeSelector: %[2]s
        tolerations: %[3]s
        containers: [{name: ray-worker, image: registry.example/ray:2.41.0, resources: {requests: {cpu: "1"}, limits: {nvidia.com/gpu: %[5]d}}}]
`

// RayCluster is a RayCluster of a CPU head and o.Workers GPU workers of o.GPUs GPUs; its pods run
// until it is deleted (o.RunFor does not apply).
func RayCluster(namespace, name string, o Options) *unstructured.Unstructured {
	o.RunFor = ""
	return render(rayClusterYAML, namespace, name, o)
}

// PyTorchJob is a PyTorchJob of one master and o.Workers workers, each with o.GPUs GPUs.
func PyTorchJob(namespace, name string, o Options) *unstructured.Unstructured {
	return render(pyTorchJobYAML, namespace, name, o)
}

// RayJob is a RayJob whose Ray cluster is RayCluster's; its submitter runs for o.RunFor, and the
// cluster is deleted when the job ends.
func RayJob(namespace, name string, o Options) *unstructured.Unstructured {
	u := render(rayJobYAML, namespace, name, o)
	cluster := RayCluster(namespace, name, o)
	if err := unstructured.SetNestedField(u.Object, cluster.Object["spec"], "spec", "rayClusterSpec"); err != nil {
		panic(fmt.Sprintf("kinds: %v", err))
	}
	return u
}

func render(doc, namespace, name string, o Options) *unstructured.Unstructured {
	if o.Workers == 0 {
		o.Workers = 2
	}
	if o.GPUs == 0 {
		o.GPUs = 1
	}
	annotations, selector := map[string]string{}, map[string]string{}
	if o.RunFor != "" {
		annotations[lab.RunTimeAnnotation] = o.RunFor
	}
	if o.Product != "" {
		selector[lab.GPUProductLabel] = o.Product
	}
	tolerations := o.Tolerations
	if tolerations == nil {
		tolerations = []corev1.Toleration{}
	}
	// JSON is YAML's flow style, so the values splice into the manifests.
	text := fmt.Sprintf(doc, mustJSON(annotations), mustJSON(selector), mustJSON(tolerations), o.Workers, o.GPUs)
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(text), &u.Object); err != nil {
		panic(fmt.Sprintf("kinds: manifest does not parse: %v\n%s", err, text))
	}
	u.SetNamespace(namespace)
	u.SetName(name)
	labels := map[string]string{}
	if o.Queue != "" {
		labels[kueue.QueueNameLabel] = o.Queue
	}
	if o.PriorityClass != "" {
		labels[kueue.PriorityClassLabel] = o.PriorityClass
	}
	if len(labels) > 0 {
		u.SetLabels(labels)
	}
	return u
}

func mustJSON(v any) string {
	data, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(data)
}

// Get reads obj's kind, namespace and name through cl; nil when it is not there, or cl's cluster
// does not serve the kind.
func Get(ctx context.Context, cl client.Client, obj client.Object) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(obj.GetObjectKind().GroupVersionKind())
	if err := cl.Get(ctx, client.ObjectKeyFromObject(obj), u); err != nil {
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading %s %s/%s: %w", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetNamespace(), obj.GetName(), err)
	}
	return u, nil
}

// List lists a kind in a namespace through cl; none when cl's cluster does not serve it.
func List(ctx context.Context, cl client.Client, gvk schema.GroupVersionKind, namespace string) ([]unstructured.Unstructured, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := cl.List(ctx, list, client.InNamespace(namespace)); err != nil {
		if meta.IsNoMatchError(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("listing %s in %s: %w", gvk.Kind, namespace, err)
	}
	return list.Items, nil
}

// Succeeded reports whether a PyTorchJob has its Succeeded condition.
func Succeeded(pt *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(pt.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == "Succeeded" && m["status"] == "True" {
			return true
		}
	}
	return false
}

// RayJobState is a RayJob's jobDeploymentStatus and jobStatus ("Complete", "SUCCEEDED").
func RayJobState(rj *unstructured.Unstructured) (deployment, job string) {
	deployment, _, _ = unstructured.NestedString(rj.Object, "status", "jobDeploymentStatus")
	job, _, _ = unstructured.NestedString(rj.Object, "status", "jobStatus")
	return deployment, job
}
