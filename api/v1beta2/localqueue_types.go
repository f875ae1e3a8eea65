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

// LocalQueueName names a LocalQueue in the workload's namespace.
//
// +kubebuilder:validation:MaxLength=253
// +kubebuilder:validation:Pattern="^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
type LocalQueueName string

// LocalQueueActive is the condition type that is True when the LocalQueue's ClusterQueue is active and
// the LocalQueue accepts workloads.
const LocalQueueActive = "Active"

// LocalQueueSpec points a namespace's queue at the ClusterQueue that holds its quota.
//
// Kueue's alpha wallTimePolicy (and status.wallTimeFlavorUsage) are not served by fleetq.
type LocalQueueSpec struct {
	// clusterQueue is the ClusterQueue backing this LocalQueue. It cannot be
	// changed: workloads already queued were accounted against it.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="is immutable; delete the LocalQueue and create it again to point it at another ClusterQueue"
	// +optional
	ClusterQueue ClusterQueueReference `json:"clusterQueue,omitempty"`

	// stopPolicy other than None makes the LocalQueue inactive: Hold lets
	// admitted workloads finish, HoldAndDrain evicts them.
	// +kubebuilder:validation:Enum=None;Hold;HoldAndDrain
	// +kubebuilder:default="None"
	// +optional
	StopPolicy *StopPolicy `json:"stopPolicy,omitempty"`

	// fairSharing tunes this LocalQueue's share under admission fair sharing.
	// +optional
	FairSharing *FairSharing `json:"fairSharing,omitempty"`
}

// LocalQueueStatus is what the manager observes about a LocalQueue.
type LocalQueueStatus struct {
	// conditions hold the latest observations, such as Active. Up to 16.
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	// +kubebuilder:validation:MaxItems=16
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`

	// pendingWorkloads counts workloads of this LocalQueue not yet admitted.
	// +optional
	PendingWorkloads int32 `json:"pendingWorkloads"`

	// reservingWorkloads counts workloads of this LocalQueue holding a quota
	// reservation that have not finished.
	// +optional
	ReservingWorkloads int32 `json:"reservingWorkloads"`

	// admittedWorkloads counts admitted workloads of this LocalQueue that
	// have not finished.
	// +optional
	AdmittedWorkloads int32 `json:"admittedWorkloads"`

	// flavorsReservation is the quota reserved, per flavor, by this
	// LocalQueue's workloads.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	// +optional
	FlavorsReservation []LocalQueueFlavorUsage `json:"flavorsReservation,omitempty"`

	// flavorsUsage is the quota used, per flavor, by this LocalQueue's
	// admitted workloads.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	// +optional
	FlavorsUsage []LocalQueueFlavorUsage `json:"flavorsUsage,omitempty"`

	// fairSharing is this LocalQueue's state under admission fair sharing.
	// +optional
	FairSharing *LocalQueueFairSharingStatus `json:"fairSharing,omitempty"`
}

// LocalQueueFairSharingStatus is a LocalQueue's share and usage history under fair sharing.
type LocalQueueFairSharingStatus struct {
	// weightedShare has the meaning of FairSharingStatus.weightedShare.
	// +required
	WeightedShare int64 `json:"weightedShare"`

	// admissionFairSharingStatus holds the decayed usage admission fair
	// sharing orders LocalQueues by.
	// +optional
	AdmissionFairSharingStatus *AdmissionFairSharingStatus `json:"admissionFairSharingStatus,omitempty"`
}

// LocalQueueFlavorUsage is a LocalQueue's usage of one flavor.
type LocalQueueFlavorUsage struct {
	// name of the flavor.
	// +required
	Name ResourceFlavorReference `json:"name"`

	// resources lists the usage per resource.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	// +required
	Resources []LocalQueueResourceUsage `json:"resources,omitempty"`
}

// LocalQueueResourceUsage is a LocalQueue's usage of one resource in one flavor.
type LocalQueueResourceUsage struct {
	// name of the resource.
	// +required
	Name corev1.ResourceName `json:"name,omitempty"`

	// total is the quantity in use.
	// +optional
	Total resource.Quantity `json:"total,omitempty"`
}

// LocalQueue is the namespaced queue users name in the kueue.x-k8s.io/queue-name label.
//
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName={queue,queues,lq},categories={kueue}
// +kubebuilder:printcolumn:name="ClusterQueue",JSONPath=".spec.clusterQueue",type=string,description="Backing ClusterQueue"
// +kubebuilder:printcolumn:name="Pending Workloads",JSONPath=".status.pendingWorkloads",type=integer,description="Workloads waiting for admission"
// +kubebuilder:printcolumn:name="Admitted Workloads",JSONPath=".status.admittedWorkloads",type=integer,description="Admitted workloads that have not finished"
// +kubebuilder:printcolumn:name="Age",JSONPath=".metadata.creationTimestamp",type=date
type LocalQueue struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the object's metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec names the backing ClusterQueue.
	// +optional
	Spec LocalQueueSpec `json:"spec"`

	// status is what the manager observes about the LocalQueue.
	// +optional
	Status LocalQueueStatus `json:"status,omitempty"`
}

// LocalQueueList is a list of LocalQueues, as returned by list calls.
//
// +kubebuilder:object:root=true
type LocalQueueList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []LocalQueue `json:"items"`
}

func init() {
	SchemeBuilder.Register(&LocalQueue{}, &LocalQueueList{})
}
