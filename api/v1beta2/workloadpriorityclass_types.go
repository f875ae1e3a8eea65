/*
Copyright 2026 The fleetq Authors.

Licensed under the Apache License, Version 2.0.
*/

package v1beta2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// WorkloadPriorityClass gives workloads a queueing priority independent of their pods' PriorityClass,
// selected with the kueue.x-k8s.io/priority-class label.
//
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:resource:scope=Cluster,shortName={wpc},categories={kueue}
// +kubebuilder:printcolumn:name="Value",JSONPath=".value",type=integer,description="Priority workloads of this class get"
// +kubebuilder:printcolumn:name="Age",JSONPath=".metadata.creationTimestamp",type=date
type WorkloadPriorityClass struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the object's metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// value is the priority workloads of this class get; higher runs first.
	// Changing it does not change workloads already created.
	// +required
	Value int32 `json:"value"`

	// description says when to use this class. Up to 2048 characters.
	// +kubebuilder:validation:MaxLength=2048
	// +optional
	Description string `json:"description,omitempty"`
}

// WorkloadPriorityClassList is a list of WorkloadPriorityClasses, as returned by list calls.
//
// +kubebuilder:object:root=true
type WorkloadPriorityClassList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []WorkloadPriorityClass `json:"items"`
}

func init() {
	SchemeBuilder.Register(&WorkloadPriorityClass{}, &WorkloadPriorityClassList{})
}
