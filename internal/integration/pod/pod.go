// Package pod integrates plain Pods (Kueue's "pod" framework, opt-in as in Kueue) on
// ClusterQueues that do not dispatch to workers: a Pod
// labelled with a queue is created with the scheduling gate kueue.x-k8s.io/admission, is one
// Workload of one pod set ("main"), and starts when fleetq adds its flavor's node selector and
// tolerations and removes the gate. A started Pod cannot be gated again, so an evicted Pod is
// stopped by deleting it (integration.Deleter): its quota is released once it is gone, and it is
// not requeued (the Pod is gone; its owner or its user makes a new one).
package pod

import (
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/internal/integration"
)

// Framework is the integration's name in integrations.frameworks.
const Framework = "pod"

// GateName is the scheduling gate that holds a Pod until it is admitted (Kueue's).
const GateName = "kueue.x-k8s.io/admission"

// GroupNameLabel makes a Pod part of a pod group in Kueue; fleetq does not run pod groups yet.
const GroupNameLabel = "kueue.x-k8s.io/pod-group-name"

// PodSetName is the one pod set of a Pod's workload.
const PodSetName kueue.PodSetReference = "main"

// Adapter integrates plain Pods.
type Adapter struct{}

var (
	_ integration.Adapter = Adapter{}
	_ integration.Deleter = Adapter{}
)

// Framework implements integration.Adapter.
func (Adapter) Framework() string { return Framework }

// GVK implements integration.Adapter.
func (Adapter) GVK() schema.GroupVersionKind { return corev1.SchemeGroupVersion.WithKind("Pod") }

// Fields implements integration.Adapter: a Pod is held by its scheduling gate, has no
// managedBy, and runs on single-cluster queues only.
func (Adapter) Fields() integration.Fields {
	return integration.Fields{Suspend: "spec.schedulingGates[" + GateName + "]", LocalOnly: true}
}

// New implements integration.Adapter.
func (Adapter) New() client.Object { return &corev1.Pod{} }

func pod(obj client.Object) *corev1.Pod { return obj.(*corev1.Pod) }

// PodSets implements integration.Adapter: one pod set of one pod, the Pod as its user wrote it
// (without fleetq's gate).
func (Adapter) PodSets(obj client.Object) ([]kueue.PodSet, error) {
	p := pod(obj)
	if g := p.Labels[GroupNameLabel]; g != "" {
		// Admitting the group's pods one by one would start part of a group: refused until
		// groups are supported.
		return nil, fmt.Errorf("metadata.labels[%s] is %q, but fleetq does not run pod groups yet (their pods would be admitted one by one, not all or none); run the group as a Job (parallelism and completions = the group's size) or a JobSet, or remove the label to queue each Pod on its own", GroupNameLabel, g)
	}
	spec := p.Spec.DeepCopy()
	spec.SchedulingGates = slices.DeleteFunc(spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == GateName })
	if len(spec.SchedulingGates) == 0 {
		spec.SchedulingGates = nil
	}
	spec.NodeName = ""
	t := corev1.PodTemplateSpec{Spec: *spec}
	t.Labels, t.Annotations = maps.Clone(p.Labels), maps.Clone(p.Annotations)
	return []kueue.PodSet{{Name: PodSetName, Count: 1, Template: t}}, nil
}

// Suspended implements integration.Adapter: the Pod carries the gate.
func (Adapter) Suspended(obj client.Object) bool {
	return slices.ContainsFunc(pod(obj).Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == GateName })
}

// SetSuspended implements integration.Adapter: adds the gate (which the API server accepts only
// when the Pod is created), with integration.ManagedLabel so the manager's pod cache holds it,
// or removes the gate.
func (a Adapter) SetSuspended(obj client.Object, suspended bool) {
	p := pod(obj)
	if suspended {
		if !a.Suspended(obj) {
			p.Spec.SchedulingGates = append(p.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: GateName})
		}
		if p.Labels == nil {
			p.Labels = map[string]string{}
		}
		p.Labels[integration.ManagedLabel] = "true"
		return
	}
	p.Spec.SchedulingGates = slices.DeleteFunc(p.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == GateName })
	if len(p.Spec.SchedulingGates) == 0 {
		p.Spec.SchedulingGates = nil
	}
}

// ApplyPlacements implements integration.Adapter: the flavor's node selector entries and
// tolerations are added to the gated Pod (the API server allows only additions), with fleetq's
// labels.
func (Adapter) ApplyPlacements(obj client.Object, placements []integration.PodSetPlacement) error {
	p := pod(obj)
	for _, pl := range placements {
		if pl.Name != PodSetName {
			return integration.ErrNoPodSet(Adapter{}, obj, pl.Name)
		}
		t := corev1.PodTemplateSpec{Spec: p.Spec}
		t.Labels, t.Annotations = p.Labels, p.Annotations
		integration.Inject(&t, pl.Placement)
		p.Spec.NodeSelector, p.Spec.Tolerations = t.Spec.NodeSelector, t.Spec.Tolerations
		p.Labels, p.Annotations = t.Labels, t.Annotations
	}
	return nil
}

// RestorePodSets implements integration.Adapter: a started Pod's scheduling fields cannot be
// taken back (it is deleted instead), and a gated one never got any.
func (Adapter) RestorePodSets(client.Object, []kueue.PodSet) bool { return false }

// Status implements integration.Adapter: a Pod ends Succeeded or Failed; until then it may run
// once its gate is gone.
func (a Adapter) Status(obj client.Object) integration.Status {
	p := pod(obj)
	switch p.Status.Phase {
	case corev1.PodSucceeded:
		return integration.Status{Finished: true, Message: "Pod succeeded"}
	case corev1.PodFailed:
		msg := p.Status.Message
		if msg == "" {
			msg = "Pod failed: " + p.Status.Reason
		}
		return integration.Status{Finished: true, Failed: true, Message: msg}
	}
	return integration.Status{Active: !a.Suspended(obj) || p.Spec.NodeName != ""}
}

// StopByDeletion implements integration.Deleter.
func (Adapter) StopByDeletion() bool { return true }

// ManagedBy implements integration.Adapter: a Pod has none.
func (Adapter) ManagedBy(client.Object) string { return "" }

// SetManagedBy implements integration.Adapter: a Pod has none.
func (Adapter) SetManagedBy(client.Object, string) {}

// Copy implements integration.Adapter: the Pod, gated, without its node. Pods are LocalOnly, so
// no worker gets one.
func (Adapter) Copy(obj client.Object) client.Object {
	p := pod(obj)
	c := &corev1.Pod{}
	c.Name, c.Namespace = p.Name, p.Namespace
	c.Labels, c.Annotations = maps.Clone(p.Labels), maps.Clone(p.Annotations)
	c.Spec = *p.Spec.DeepCopy()
	c.Spec.NodeName = ""
	return c
}

// MirrorStatus implements integration.Adapter: a Pod's status is its kubelet's (and Pods are
// LocalOnly).
func (Adapter) MirrorStatus(client.Object, client.Object) bool { return false }
