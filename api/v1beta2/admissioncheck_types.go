/*
Copyright 2026 The fleetq Authors.

Licensed under the Apache License, Version 2.0.
*/

package v1beta2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AdmissionCheckReference names an AdmissionCheck.
//
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=316
type AdmissionCheckReference string

// CheckState is the verdict of one admission check on one workload.
type CheckState string

const (
	// CheckStatePending means the check has not decided yet; the workload waits.
	CheckStatePending CheckState = "Pending"

	// CheckStateReady means the check passed; with quota reserved and all checks Ready the
	// workload is admitted.
	CheckStateReady CheckState = "Ready"

	// CheckStateRetry means the check cannot pass now: the workload releases its quota (evicted if
	// admitted) and is retried later.
	CheckStateRetry CheckState = "Retry"

	// CheckStateRejected means the check will not pass: the workload is evicted and deactivated.
	CheckStateRejected CheckState = "Rejected"
)

// AdmissionCheckActive is the condition type that is True when the check's controller is ready to
// evaluate workloads.
const AdmissionCheckActive = "Active"

// AdmissionCheckSpec names the controller that runs a check and its parameters.
type AdmissionCheckSpec struct {
	// controllerName identifies the controller that evaluates this check,
	// e.g. kueue.x-k8s.io/multikueue. Required and immutable.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="is immutable; create a new AdmissionCheck for another controller"
	// +kubebuilder:validation:MinLength=1
	// +required
	ControllerName string `json:"controllerName"`

	// parameters points at a controller-specific configuration object, such
	// as a MultiKueueConfig.
	// +optional
	Parameters *AdmissionCheckParametersReference `json:"parameters,omitempty"`
}

// AdmissionCheckParametersReference points at the object configuring an AdmissionCheck.
type AdmissionCheckParametersReference struct {
	// apiGroup of the referenced object, e.g. kueue.x-k8s.io.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern="^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
	// +required
	APIGroup string `json:"apiGroup"`

	// kind of the referenced object, e.g. MultiKueueConfig.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern="^(?i)[a-z]([-a-z0-9]*[a-z0-9])?$"
	// +required
	Kind string `json:"kind"`

	// name of the referenced object.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern="^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
	// +required
	Name string `json:"name"`
}

// AdmissionCheckStatus is what the check's controller reports about it.
type AdmissionCheckStatus struct {
	// conditions hold the latest observations, such as Active. Up to 16.
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	// +kubebuilder:validation:MaxItems=16
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
}

// AdmissionCheck is a cluster-scoped gate, run by a controller, that a workload must pass besides quota
// (MultiKueue dispatch is one).
//
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName={ac},categories={kueue}
type AdmissionCheck struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the object's metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec names the check's controller.
	// +optional
	Spec AdmissionCheckSpec `json:"spec,omitempty"`

	// status is what the controller reports.
	// +optional
	Status AdmissionCheckStatus `json:"status,omitempty"`
}

// AdmissionCheckList is a list of AdmissionChecks, as returned by list calls.
//
// +kubebuilder:object:root=true
type AdmissionCheckList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []AdmissionCheck `json:"items"`
}

func init() {
	SchemeBuilder.Register(&AdmissionCheck{}, &AdmissionCheckList{})
}
