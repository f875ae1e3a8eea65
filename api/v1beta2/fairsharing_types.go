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

// FairSharing tunes how a ClusterQueue, Cohort or LocalQueue competes for unused quota when fair
// sharing is enabled.
//
// +kubebuilder:validation:XValidation:rule="!has(self.weight) || (type(self.weight) == int ? self.weight >= 0 : !quantity(self.weight).isLessThan(quantity('0')))",fieldPath=".weight",message="must not be negative; use 0 to always yield unused quota, or a positive weight such as 1"
// +kubebuilder:validation:XValidation:rule="!has(self.weight) || type(self.weight) == int || !quantity(self.weight).isGreaterThan(quantity('0')) || quantity(self.weight).isGreaterThan(quantity('1n'))",fieldPath=".weight",message="when not 0, must be greater than 10^-9 (1n): smaller weights collapse to 0 in share computations; use 0 or a larger weight"
type FairSharing struct {
	// weight scales this node's share of the cohort's unused quota: the dominant
	// resource usage above nominal quota is divided by it, so a larger weight
	// borrows more and is preempted later. 0 means an infinite share (always
	// last). When not 0 it must be greater than 10^-9.
	// +kubebuilder:default=1
	// +optional
	Weight *resource.Quantity `json:"weight,omitempty"`
}

// FairSharingStatus reports the share a ClusterQueue or Cohort holds when fair sharing is enabled.
type FairSharingStatus struct {
	// weightedShare is the largest, over the resources this node provides, of
	// usage above nominal quota divided by the cohort's lendable quota, divided
	// by the weight. 0 means usage is within nominal quota;
	// 9223372036854775807 means a zero-weight node that borrows.
	WeightedShare int64 `json:"weightedShare"`

	// admissionFairSharingStatus holds the decayed usage used by admission fair sharing.
	// +optional
	AdmissionFairSharingStatus *AdmissionFairSharingStatus `json:"admissionFairSharingStatus,omitempty"`
}

// AdmissionFairSharingStatus is the usage history admission fair sharing orders workloads by.
type AdmissionFairSharingStatus struct {
	// consumedResources is the usage accumulated over time with decay applied.
	// +required
	ConsumedResources corev1.ResourceList `json:"consumedResources"`

	// lastUpdate is when consumedResources was last recomputed.
	// +required
	LastUpdate metav1.Time `json:"lastUpdate"`
}

// AdmissionScope selects how a ClusterQueue orders workloads coming from its LocalQueues.
type AdmissionScope struct {
	// admissionMode is UsageBasedAdmissionFairSharing or NoAdmissionFairSharing.
	// +kubebuilder:validation:Enum=UsageBasedAdmissionFairSharing;NoAdmissionFairSharing
	// +required
	AdmissionMode AdmissionMode `json:"admissionMode"`
}

// AdmissionMode names an admission fair sharing mode.
type AdmissionMode string

const (
	// UsageBasedAdmissionFairSharing orders LocalQueues by their decayed past usage.
	UsageBasedAdmissionFairSharing AdmissionMode = "UsageBasedAdmissionFairSharing"

	// NoAdmissionFairSharing keeps plain queueing-strategy order.
	NoAdmissionFairSharing AdmissionMode = "NoAdmissionFairSharing"
)
