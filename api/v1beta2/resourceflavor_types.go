/*
Copyright 2026 The fleetq Authors.

Licensed under the Apache License, Version 2.0.
*/

package v1beta2

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TopologyReference names a Kueue Topology object (topology-aware scheduling).
//
// +kubebuilder:validation:MaxLength=253
// +kubebuilder:validation:Pattern="^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
type TopologyReference string

// ResourceFlavorSpec describes a kind of node by its labels and taints, so quota can be split by
// hardware (A100 vs L4, spot vs on-demand).
//
// +kubebuilder:validation:XValidation:rule="!has(self.topologyName) || (has(self.nodeLabels) && size(self.nodeLabels) >= 1)",fieldPath=".nodeLabels",reason="FieldValueRequired",message="at least one node label is required when topologyName is set; add the labels that select the topology's nodes"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.topologyName) || self == oldSelf",message="is immutable once topologyName is set; create a new ResourceFlavor instead"
type ResourceFlavorSpec struct {
	// nodeLabels select the nodes of this flavor; admitted pods get them as
	// node selectors. Up to 8.
	// +mapType=atomic
	// +kubebuilder:validation:MaxProperties=8
	// +optional
	NodeLabels map[string]string `json:"nodeLabels,omitempty"`

	// nodeTaints are the taints the flavor's nodes carry; a workload must
	// tolerate them (NoSchedule and NoExecute) to get this flavor, unless
	// spec.tolerations covers them. Unique by key and effect; up to 8.
	// Keys are limited to 317 characters and effects to 16 (see config/crd)
	// so the uniqueness rule stays within the CEL cost budget.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:XValidation:rule="self.effect in ['NoSchedule', 'PreferNoSchedule', 'NoExecute']",fieldPath=".effect",messageExpression="'\"' + self.effect + '\" is not a taint effect; use NoSchedule, PreferNoSchedule or NoExecute'"
	// +kubebuilder:validation:XValidation:rule="self.all(t, self.exists_one(u, u.key == t.key && u.effect == t.effect))",message="each key and effect pair may appear only once; remove the duplicate taint"
	// +optional
	NodeTaints []corev1.Taint `json:"nodeTaints,omitempty"`

	// tolerations are added to the pods admitted with this flavor. Up to 8.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:XValidation:rule="has(self.key) || (has(self.operator) && self.operator == 'Exists')",fieldPath=".operator",message="must be Exists when key is empty (an empty key matches every taint); set a key or use operator Exists"
	// +kubebuilder:validation:items:XValidation:rule="!has(self.operator) || self.operator in ['Equal', 'Exists']",fieldPath=".operator",message="must be Equal (the default) or Exists"
	// +kubebuilder:validation:items:XValidation:rule="!has(self.operator) || self.operator != 'Exists' || !has(self.value) || size(self.value) == 0",fieldPath=".value",message="must be empty when operator is Exists; remove the value or use operator Equal"
	// +kubebuilder:validation:items:XValidation:rule="!has(self.effect) || size(self.effect) == 0 || self.effect in ['NoSchedule', 'PreferNoSchedule', 'NoExecute']",fieldPath=".effect",message="must be NoSchedule, PreferNoSchedule, NoExecute or empty (all effects)"
	// +kubebuilder:validation:items:XValidation:rule="!has(self.tolerationSeconds) || (has(self.effect) && self.effect == 'NoExecute')",fieldPath=".tolerationSeconds",message="is only allowed with effect NoExecute; set effect to NoExecute or remove tolerationSeconds"
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// topologyName names the Topology of this flavor's nodes, enabling
	// topology-aware scheduling. Needs nodeLabels; the spec becomes immutable.
	// +optional
	TopologyName *TopologyReference `json:"topologyName,omitempty"`

	// resourceWeights scale, per resource, how much this flavor's borrowing
	// counts in fair sharing's dominant resource share. Missing means 1.
	// +kubebuilder:validation:MaxProperties=16
	// +optional
	ResourceWeights map[corev1.ResourceName]resource.Quantity `json:"resourceWeights,omitempty"`
}

// ResourceFlavor is a cluster-scoped description of a kind of node that ClusterQueues give quota for.
//
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:resource:scope=Cluster,shortName={flavor,flavors,rf},categories={kueue}
type ResourceFlavor struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the object's metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec describes the flavor's nodes.
	// +optional
	Spec ResourceFlavorSpec `json:"spec,omitempty"`
}

// ResourceFlavorList is a list of ResourceFlavors, as returned by list calls.
//
// +kubebuilder:object:root=true
type ResourceFlavorList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ResourceFlavor `json:"items"`
}

func init() {
	SchemeBuilder.Register(&ResourceFlavor{}, &ResourceFlavorList{})
}
