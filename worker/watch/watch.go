// Package watch holds what keeps fleetq-agent's watches cheap on a large cluster: the cache
// settings (only the agent's own copies and flavors, only bound non-terminal pods, objects stripped
// to the fields the agent reads) and the predicates that drop events that cannot change capacity
// (node heartbeats, pod status updates).
package watch

import (
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	fleetq "github.com/fleetq/fleetq/api/fleetq/v1alpha1"
	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/worker/capacity"
)

// BoundPodsSelector selects the pods that hold room on a node: bound and not finished. A pod that
// finishes leaves the watch, so the cache never holds a cluster's history of completed pods.
var BoundPodsSelector = fields.AndSelectors(
	fields.OneTermNotEqualSelector("spec.nodeName", ""),
	fields.OneTermNotEqualSelector("status.phase", string(corev1.PodSucceeded)),
	fields.OneTermNotEqualSelector("status.phase", string(corev1.PodFailed)),
)

// CacheOptions restricts the agent's cache: Workloads, job copies (of the given kinds, but those
// SeparateCopies names) and ResourceFlavors carrying its origin, bound non-terminal pods, Leases in
// its namespace; pods and nodes are stripped and shared without copying (the agent only reads
// them).
func CacheOptions(origin, namespace string, kinds []client.Object) cache.Options {
	mine := labels.SelectorFromSet(labels.Set{fleetq.OriginLabel: origin})
	byObject := map[client.Object]cache.ByObject{
		&kueue.Workload{}:       {Label: mine},
		&kueue.ResourceFlavor{}: {Label: mine},
		&corev1.Pod{}:           {Field: BoundPodsSelector, Transform: StripPod, UnsafeDisableDeepCopy: ptr.To(true)},
		&corev1.Node{}:          {Transform: StripNode, UnsafeDisableDeepCopy: ptr.To(true)},
		&coordinationv1.Lease{}: {Namespaces: map[string]cache.Config{namespace: {}}},
	}
	for _, k := range kinds {
		if !SeparateCopies(k) {
			byObject[k] = cache.ByObject{Label: mine}
		}
	}
	return cache.Options{DefaultTransform: cache.TransformStripManagedFields(), ByObject: byObject}
}

// SeparateCopies reports whether copies of a kind need a cache of their own: the agent's cache
// holds that type for capacity already, in another shape (Pods: every bound pod, stripped), and
// a cache holds one shape of a type.
func SeparateCopies(kind client.Object) bool {
	_, pod := kind.(*corev1.Pod)
	return pod
}

// CopyCacheOptions restricts a cache of copies of one kind (SeparateCopies) to those carrying
// the agent's origin, whole: the adapter reads their gates, labels and status.
func CopyCacheOptions(origin string, kind client.Object) cache.Options {
	mine := labels.SelectorFromSet(labels.Set{fleetq.OriginLabel: origin})
	return cache.Options{DefaultTransform: cache.TransformStripManagedFields(), ByObject: map[client.Object]cache.ByObject{kind: {Label: mine}}}
}

// StripPod keeps what capacity needs of a pod: its node, phase, requests, deletion and the labels
// naming its workload and pod set.
func StripPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	out := &corev1.Pod{
		TypeMeta: p.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion,
			DeletionTimestamp: p.DeletionTimestamp,
		},
		Spec: corev1.PodSpec{
			NodeName:  p.Spec.NodeName,
			Overhead:  p.Spec.Overhead,
			Resources: p.Spec.Resources,
		},
		Status: corev1.PodStatus{Phase: p.Status.Phase},
	}
	for _, l := range []string{fleetq.WorkloadUIDLabel, fleetq.PodSetLabel} {
		if v, ok := p.Labels[l]; ok {
			if out.Labels == nil {
				out.Labels = map[string]string{}
			}
			out.Labels[l] = v
		}
	}
	for _, c := range p.Spec.Containers {
		out.Spec.Containers = append(out.Spec.Containers, corev1.Container{Name: c.Name, Resources: c.Resources})
	}
	for _, c := range p.Spec.InitContainers {
		out.Spec.InitContainers = append(out.Spec.InitContainers, corev1.Container{Name: c.Name, Resources: c.Resources, RestartPolicy: c.RestartPolicy})
	}
	return out, nil
}

// StripNode keeps what capacity needs of a node: labels, taints, cordon and allocatable (dropping
// images, conditions and addresses, most of a node's size).
func StripNode(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	return &corev1.Node{
		TypeMeta:   n.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, UID: n.UID, ResourceVersion: n.ResourceVersion, Labels: n.Labels},
		Spec:       corev1.NodeSpec{Taints: n.Spec.Taints, Unschedulable: n.Spec.Unschedulable},
		Status:     corev1.NodeStatus{Allocatable: n.Status.Allocatable},
	}, nil
}

// NodeChanged passes node events that change capacity or flavor membership: creation, deletion,
// and changes of labels, taints, cordon or allocatable (not heartbeats).
func NodeChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*corev1.Node)
		n, ok2 := e.ObjectNew.(*corev1.Node)
		if !ok1 || !ok2 {
			return true
		}
		return !equality.Semantic.DeepEqual(o.Labels, n.Labels) ||
			!equality.Semantic.DeepEqual(o.Spec.Taints, n.Spec.Taints) ||
			o.Spec.Unschedulable != n.Spec.Unschedulable ||
			!equality.Semantic.DeepEqual(o.Status.Allocatable, n.Status.Allocatable)
	}}
}

// PodChanged passes pod events that change what a node holds: a pod bound (created in the watch),
// gone or finished (deleted from it), or resized.
func PodChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*corev1.Pod)
		n, ok2 := e.ObjectNew.(*corev1.Pod)
		if !ok1 || !ok2 {
			return true
		}
		return o.Spec.NodeName != n.Spec.NodeName || capacity.Terminal(o) != capacity.Terminal(n) ||
			!equality.Semantic.DeepEqual(capacity.PodRequests(&o.Spec), capacity.PodRequests(&n.Spec))
	}}
}

// Named passes events of one object only.
func Named(namespace, name string) predicate.Predicate {
	return predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetNamespace() == namespace && o.GetName() == name
	})
}
