// Package ray integrates KubeRay's RayJob and RayCluster (ray.io/v1, ray-operator v1.5): pod
// sets for the head (one pod), each worker group (replicas × numOfHosts pods, named by its
// groupName) and, for a RayJob submitted by a Kubernetes Job (the default submissionMode), the
// submitter; spec.suspend and spec.managedBy (immutable, "ray.io/kuberay-operator" or
// "kueue.x-k8s.io/multikueue"). A RayJob finishes when its jobDeploymentStatus is Complete or
// Failed; a RayCluster runs until it is deleted.
package ray

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/internal/integration"
)

// GroupVersion is KubeRay's API.
var GroupVersion = schema.GroupVersion{Group: "ray.io", Version: "v1"}

// Pod set names of a Ray cluster besides its worker groups.
const (
	HeadPodSet      kueue.PodSetReference = "head"
	SubmitterPodSet kueue.PodSetReference = "submitter"
)

// submitterContainer is the container KubeRay names its default submitter.
const submitterContainer = "ray-job-submitter"

var (
	suspendPath   = integration.Path{"spec", "suspend"}
	managedByPath = integration.Path{"spec", "managedBy"}
)

// Adapter integrates RayJob (job true) or RayCluster.
type Adapter struct {
	job bool
}

// The two kinds.
var (
	RayJob     = Adapter{job: true}
	RayCluster = Adapter{}
)

var _ integration.Adapter = Adapter{}

// Adapters are both Ray kinds.
func Adapters() []integration.Adapter { return []integration.Adapter{RayJob, RayCluster} }

func (a Adapter) kind() string {
	if a.job {
		return "RayJob"
	}
	return "RayCluster"
}

// Framework implements integration.Adapter ("ray.io/rayjob", "ray.io/raycluster").
func (a Adapter) Framework() string {
	if a.job {
		return "ray.io/rayjob"
	}
	return "ray.io/raycluster"
}

// GVK implements integration.Adapter.
func (a Adapter) GVK() schema.GroupVersionKind { return GroupVersion.WithKind(a.kind()) }

// Fields implements integration.Adapter.
func (a Adapter) Fields() integration.Fields {
	return integration.Fields{Suspend: suspendPath.String(), ManagedBy: managedByPath.String()}
}

// New implements integration.Adapter.
func (a Adapter) New() client.Object { return integration.NewUnstructured(a.GVK()) }

// clusterPath is where the Ray cluster's spec is: the RayCluster's spec, a RayJob's
// spec.rayClusterSpec.
func (a Adapter) clusterPath() integration.Path {
	if a.job {
		return integration.Path{"spec", "rayClusterSpec"}
	}
	return integration.Path{"spec"}
}

// podSet is one pod set and where its template lives in the object.
type podSet struct {
	kueue.PodSet
	// holder is the map holding the template under "template" (a group spec), or nil for a
	// RayJob's submitter, whose template is spec.submitterPodTemplate.
	holder map[string]any
	// replicas says a partial admission may lower holder's replicas (one pod per replica).
	replicas bool
}

// podSets reads the object's pod sets and where their templates are, from the object's own maps.
func (a Adapter) podSets(obj client.Object) ([]podSet, error) {
	content := integration.Content(obj)
	cp := a.clusterPath()
	cluster, ok, _ := unstructured.NestedFieldNoCopy(content, cp...)
	spec, isMap := cluster.(map[string]any)
	if !ok || !isMap {
		return nil, fmt.Errorf("%s is missing", cp)
	}
	head, ok := spec["headGroupSpec"].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s is missing", cp.Child("headGroupSpec"))
	}
	ht, err := integration.Template(head, integration.Path{"template"})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cp.Child("headGroupSpec"), err)
	}
	out := []podSet{{PodSet: kueue.PodSet{Name: HeadPodSet, Count: 1, Template: *ht}, holder: head}}
	groups, _ := spec["workerGroupSpecs"].([]any)
	seen := map[kueue.PodSetReference]bool{HeadPodSet: true, SubmitterPodSet: a.job}
	for i, g := range groups {
		gp := cp.Child("workerGroupSpecs", fmt.Sprint(i))
		group, ok := g.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s is not an object", gp)
		}
		name, _ := group["groupName"].(string)
		if name == "" {
			return nil, fmt.Errorf("%s is missing", gp.Child("groupName"))
		}
		if seen[kueue.PodSetReference(name)] {
			return nil, fmt.Errorf("%s %q names a pod set twice (head and submitter are reserved); rename the group", gp.Child("groupName"), name)
		}
		seen[kueue.PodSetReference(name)] = true
		replicas, err := integration.Int32(group, integration.Path{"replicas"}, 0)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", gp, err)
		}
		hosts, err := integration.Int32(group, integration.Path{"numOfHosts"}, 1)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", gp, err)
		}
		if replicas < 0 || hosts < 1 {
			return nil, fmt.Errorf("%s: replicas %d and numOfHosts %d must be at least 0 and 1", gp, replicas, hosts)
		}
		wt, err := integration.Template(group, integration.Path{"template"})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", gp, err)
		}
		out = append(out, podSet{PodSet: kueue.PodSet{Name: kueue.PodSetReference(name), Count: replicas * hosts, Template: *wt}, holder: group, replicas: hosts == 1})
	}
	if a.job && submitterJob(content) {
		st, err := submitterTemplate(content, ht)
		if err != nil {
			return nil, err
		}
		out = append(out, podSet{PodSet: kueue.PodSet{Name: SubmitterPodSet, Count: 1, Template: *st}})
	}
	return out, nil
}

// submitterJob reports whether a RayJob is submitted by a Kubernetes Job (a pod of its own).
func submitterJob(content map[string]any) bool {
	mode, _, _ := unstructured.NestedString(content, "spec", "submissionMode")
	return mode == "" || mode == "K8sJobMode"
}

// submitterTemplate is spec.submitterPodTemplate, or KubeRay's default: one container with the
// head's image asking for 500m CPU and 200Mi of memory.
func submitterTemplate(content map[string]any, head *corev1.PodTemplateSpec) (*corev1.PodTemplateSpec, error) {
	if _, ok, _ := unstructured.NestedMap(content, "spec", "submitterPodTemplate"); ok {
		t, err := integration.Template(content, integration.Path{"spec", "submitterPodTemplate"})
		if err != nil {
			return nil, err
		}
		if len(t.Spec.Containers) > 0 {
			return t, nil
		}
	}
	image := ""
	if len(head.Spec.Containers) > 0 {
		image = head.Spec.Containers[0].Image
	}
	return &corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever,
		Containers: []corev1.Container{{
			Name: submitterContainer, Image: image,
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("200Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")},
			},
		}},
	}}, nil
}

// podSetOf is a listed pod set's workload pod set, for the integration helpers.
func podSetOf(ps podSet) *kueue.PodSet { return &ps.PodSet }

// PodSets implements integration.Adapter.
func (a Adapter) PodSets(obj client.Object) ([]kueue.PodSet, error) {
	sets, err := a.podSets(obj)
	if err != nil {
		return nil, err
	}
	return integration.PodSetsOf(sets, podSetOf), nil
}

// Suspended implements integration.Adapter.
func (a Adapter) Suspended(obj client.Object) bool { return integration.Bool(obj, suspendPath) }

// SetSuspended implements integration.Adapter.
func (a Adapter) SetSuspended(obj client.Object, suspended bool) {
	integration.SetBool(obj, suspendPath, suspended)
}

// setTemplate writes a pod set's template back where it came from; a RayJob's default submitter
// becomes an explicit spec.submitterPodTemplate, so the placement reaches its pod.
func (a Adapter) setTemplate(obj client.Object, ps podSet, t *corev1.PodTemplateSpec) error {
	if ps.holder == nil {
		return integration.SetTemplate(integration.Content(obj), integration.Path{"spec", "submitterPodTemplate"}, t)
	}
	return integration.SetTemplate(ps.holder, integration.Path{"template"}, t)
}

// ApplyPlacements injects each pod set's placement; a partial admission lowers a worker group's
// replicas (groups of multi-host replicas are admitted whole).
func (a Adapter) ApplyPlacements(obj client.Object, placements []integration.PodSetPlacement) error {
	sets, err := a.podSets(obj)
	if err != nil {
		return err
	}
	return integration.ApplyTemplates(a, obj, placements, sets, podSetOf,
		func(ps podSet, t *corev1.PodTemplateSpec, p integration.PodSetPlacement) error {
			if p.Count != nil && ps.replicas && *p.Count < ps.Count {
				ps.holder["replicas"] = int64(*p.Count)
			}
			return a.setTemplate(obj, ps, t)
		})
}

// RestorePodSets implements integration.Adapter.
func (a Adapter) RestorePodSets(obj client.Object, original []kueue.PodSet) bool {
	sets, err := a.podSets(obj)
	if err != nil {
		return false
	}
	return integration.RestoreTemplates(original, sets, podSetOf,
		func(ps podSet, t *corev1.PodTemplateSpec) error { return a.setTemplate(obj, ps, t) })
}

// Status reads a RayJob's jobDeploymentStatus (Complete or Failed ends it; Suspended and New
// have no pods) or a RayCluster's suspension.
func (a Adapter) Status(obj client.Object) integration.Status {
	content := integration.Content(obj)
	if !a.job {
		_, suspended := integration.ConditionTrue(integration.Conditions(obj), "RayClusterSuspended")
		state, _, _ := unstructured.NestedString(content, "status", "state")
		_, hasStatus := content["status"]
		return integration.Status{Active: hasStatus && !suspended && state != "suspended"}
	}
	deployment, _, _ := unstructured.NestedString(content, "status", "jobDeploymentStatus")
	jobStatus, _, _ := unstructured.NestedString(content, "status", "jobStatus")
	msg, _, _ := unstructured.NestedString(content, "status", "message")
	reason, _, _ := unstructured.NestedString(content, "status", "reason")
	switch deployment {
	case "Complete", "Failed":
		failed := deployment == "Failed" || jobStatus != "SUCCEEDED"
		if msg == "" {
			msg = fmt.Sprintf("RayJob %s: job %s", deployment, jobStatus)
			if reason != "" {
				msg += " (" + reason + ")"
			}
		}
		return integration.Status{Finished: true, Failed: failed, Message: msg}
	case "", "Suspended", "ValidationFailed":
		return integration.Status{}
	}
	return integration.Status{Active: true}
}

// ManagedBy implements integration.Adapter.
func (a Adapter) ManagedBy(obj client.Object) string { return integration.String(obj, managedByPath) }

// SetManagedBy implements integration.Adapter.
func (a Adapter) SetManagedBy(obj client.Object, controller string) {
	integration.SetString(obj, managedByPath, controller)
}

// Copy implements integration.Adapter.
func (a Adapter) Copy(obj client.Object) client.Object { return integration.CopyUnstructured(obj) }

// MirrorStatus implements integration.Adapter.
func (a Adapter) MirrorStatus(local, remote client.Object) bool {
	return integration.MirrorUnstructuredStatus(local, remote)
}
