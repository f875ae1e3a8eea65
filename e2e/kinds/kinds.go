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
	TFJobGVK      = schema.GroupVersionKind{Group: "kubeflow.org", Version: "v1", Kind: "TFJob"}
	XGBoostJobGVK = schema.GroupVersionKind{Group: "kubeflow.org", Version: "v1", Kind: "XGBoostJob"}
	PaddleJobGVK  = schema.GroupVersionKind{Group: "kubeflow.org", Version: "v1", Kind: "PaddleJob"}
	MPIJobGVK     = schema.GroupVersionKind{Group: "kubeflow.org", Version: "v1", Kind: "MPIJob"}
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

// PyTorchJobLabel is the label training-operator puts on its jobs' pods (the job's name), every
// kind alike.
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
	return PyTorch.Job(namespace, name, o)
}

// Training is a training-operator kind as the suites write its jobs: a lead replica of one pod
// (Master, Chief, Launcher) and a Worker replica, in the container the operator expects.
type Training struct {
	GVK schema.GroupVersionKind
	// Specs is the spec field of the replica specs (pytorchReplicaSpecs).
	Specs string
	// Container is the container name the operator looks up for its port (pytorch).
	Container string
	// Lead is the replica type of one pod the kind needs beside its workers.
	Lead string
	// LeadGPUs is whether the lead asks for GPUs like a worker (an MPI launcher does not).
	LeadGPUs bool
}

// The training-operator v1.8.1 kinds the suites run.
var (
	PyTorch = Training{GVK: PyTorchJobGVK, Specs: "pytorchReplicaSpecs", Container: "pytorch", Lead: "Master", LeadGPUs: true}
	TF      = Training{GVK: TFJobGVK, Specs: "tfReplicaSpecs", Container: "tensorflow", Lead: "Chief", LeadGPUs: true}
	XGBoost = Training{GVK: XGBoostJobGVK, Specs: "xgbReplicaSpecs", Container: "xgboost", Lead: "Master", LeadGPUs: true}
	Paddle  = Training{GVK: PaddleJobGVK, Specs: "paddleReplicaSpecs", Container: "paddle", Lead: "Master", LeadGPUs: true}
	MPI     = Training{GVK: MPIJobGVK, Specs: "mpiReplicaSpecs", Container: "mpi", Lead: "Launcher"}
)

// Trainings are every training-operator kind the suites run.
var Trainings = []Training{PyTorch, TF, XGBoost, Paddle, MPI}

// Pods is how many pods a job of o runs: the lead and the workers.
func (t Training) Pods(o Options) int { return 1 + o.withDefaults().Workers }

// GPUs is how many GPUs a job of o asks for.
func (t Training) GPUs(o Options) int64 {
	o = o.withDefaults()
	n := o.Workers * o.GPUs
	if t.LeadGPUs {
		n += o.GPUs
	}
	return int64(n)
}

// Job is a job of the kind: the lead and o.Workers workers of o.GPUs GPUs each, all running for
// o.RunFor.
func (t Training) Job(namespace, name string, o Options) *unstructured.Unstructured {
	o = o.withDefaults()
	replica := func(count int, gpus bool) map[string]any {
		resources := map[string]any{"requests": map[string]any{"cpu": "1"}}
		if gpus {
			resources["limits"] = map[string]any{string(lab.GPUResource): int64(o.GPUs)}
		}
		annotations, selector, tolerations := o.templateParts()
		return map[string]any{
			"replicas":      int64(count),
			"restartPolicy": "Never",
			"template": map[string]any{
				"metadata": map[string]any{"annotations": annotations},
				"spec": map[string]any{
					"nodeSelector": selector,
					"tolerations":  tolerations,
					"containers": []any{map[string]any{
						"name": t.Container, "image": "registry.example/mnist:v1", "resources": resources,
					}},
				},
			},
		}
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{t.Specs: map[string]any{
			t.Lead:   replica(1, t.LeadGPUs),
			"Worker": replica(o.Workers, true),
		}},
	}}
	u.SetGroupVersionKind(t.GVK)
	o.setMeta(u, namespace, name)
	return u
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

func (o Options) withDefaults() Options {
	if o.Workers == 0 {
		o.Workers = 2
	}
	if o.GPUs == 0 {
		o.GPUs = 1
	}
	return o
}

// templateParts are the pod template's annotations, node selector and tolerations, as JSON values.
func (o Options) templateParts() (annotations, selector map[string]any, tolerations []any) {
	annotations, selector = map[string]any{}, map[string]any{}
	if o.RunFor != "" {
		annotations[lab.RunTimeAnnotation] = o.RunFor
	}
	if o.Product != "" {
		selector[lab.GPUProductLabel] = o.Product
	}
	if err := json.Unmarshal([]byte(mustJSON(o.Tolerations)), &tolerations); err != nil {
		panic(fmt.Sprintf("kinds: tolerations: %v", err))
	}
	if tolerations == nil {
		tolerations = []any{}
	}
	return annotations, selector, tolerations
}

func render(doc, namespace, name string, o Options) *unstructured.Unstructured {
	o = o.withDefaults()
	annotations, selector, tolerations := o.templateParts()
	// JSON is YAML's flow style, so the values splice into the manifests.
	text := fmt.Sprintf(doc, mustJSON(annotations), mustJSON(selector), mustJSON(tolerations), o.Workers, o.GPUs)
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(text), &u.Object); err != nil {
		panic(fmt.Sprintf("kinds: manifest does not parse: %v\n%s", err, text))
	}
	o.setMeta(u, namespace, name)
	return u
}

// setMeta names u and labels it with o's queue and priority class.
func (o Options) setMeta(u *unstructured.Unstructured, namespace, name string) {
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

// Succeeded reports whether a training-operator job has its Succeeded condition.
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
