/*
Copyright 2026 The fleetq Authors.

Licensed under the Apache License, Version 2.0.
*/

package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CapacityReportStatus is what a worker cluster can take right now, per ResourceFlavor and per node,
// as its agent computes it from the cluster's nodes and pods.
//
// Amounts are resource lists; a resource missing from a list is zero (zero entries are left out to
// keep a 1,000-node report small). Requests are counted the way kube-scheduler counts them.
type CapacityReportStatus struct {
	// clusterName is the worker's name on the manager (its MultiKueueCluster or Cluster API Cluster).
	// +kubebuilder:validation:MaxLength=253
	// +required
	ClusterName string `json:"clusterName"`

	// revision grows by one every time the report's content changes, so a reader can tell a new
	// report from a periodic refresh.
	// +kubebuilder:validation:Minimum=0
	// +required
	Revision int64 `json:"revision"`

	// updateTime is when the agent computed the report, by the agent's clock. It is the same clock
	// that stamps the agent's Admitted conditions: a report whose updateTime is later than a copy's
	// Admitted lastTransitionTime (in whole seconds) already deducts that copy.
	// +required
	UpdateTime metav1.Time `json:"updateTime"`

	// fenced is true while the agent has stopped admitting because the manager's lease was not
	// renewed in time; copies it admitted were suspended.
	// +optional
	Fenced bool `json:"fenced,omitempty"`

	// kinds are the kinds of jobs the agent runs here, by integration name (batch/job,
	// kubeflow.org/pytorchjob, ray.io/rayjob): those its configuration lists whose CRD the
	// cluster serves. The manager places no other kind here.
	// +listType=set
	// +optional
	Kinds []string `json:"kinds,omitempty"`

	// fencingPolicy is what the agent does with running copies while fenced: Suspend, or
	// KeepRunning (then the manager never places this worker's jobs elsewhere while it is
	// unreachable, since they run on). Empty means Suspend.
	// +kubebuilder:validation:Enum=Suspend;KeepRunning
	// +optional
	FencingPolicy string `json:"fencingPolicy,omitempty"`

	// flavorCount is the number of entries of flavors, for printing.
	// +optional
	FlavorCount int32 `json:"flavorCount,omitempty"`

	// summary is a one-line reading of free over allocatable accelerators (extended resources such
	// as nvidia.com/gpu) per flavor, or CPUs when a flavor has none, for printing.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Summary string `json:"summary,omitempty"`

	// flavors has one entry per ResourceFlavor synced from the manager (origin label), by name.
	// +listType=map
	// +listMapKey=name
	// +optional
	Flavors []FlavorCapacity `json:"flavors,omitempty"`

	// nodes has one entry per node that matches at least one flavor, by name.
	// +listType=map
	// +listMapKey=name
	// +optional
	Nodes []NodeCapacity `json:"nodes,omitempty"`

	// unmatchedNodes counts nodes that match no flavor; they are not listed in nodes.
	// +kubebuilder:validation:Minimum=0
	// +optional
	UnmatchedNodes int32 `json:"unmatchedNodes,omitempty"`
}

// FlavorCapacity sums the nodes that match one flavor.
type FlavorCapacity struct {
	// name of the ResourceFlavor.
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`

	// nodes counts the nodes that match the flavor, schedulable or not.
	// +kubebuilder:validation:Minimum=0
	// +required
	Nodes int32 `json:"nodes"`

	// allocatable sums the status.allocatable of the flavor's nodes.
	// +optional
	Allocatable corev1.ResourceList `json:"allocatable,omitempty"`

	// used sums the requests of the non-terminal pods bound to the flavor's nodes.
	// +optional
	Used corev1.ResourceList `json:"used,omitempty"`

	// reserved sums the requests of pods the agent has admitted but that are not bound to a node
	// yet; they are already deducted from free.
	// +optional
	Reserved corev1.ResourceList `json:"reserved,omitempty"`

	// free sums what is left on the flavor's schedulable nodes: allocatable - used - reserved, per
	// node, never below zero. Unschedulable nodes add nothing, so free can be less than
	// allocatable - used - reserved.
	// +optional
	Free corev1.ResourceList `json:"free,omitempty"`

	// largestNodeFree is, per resource, the most any one schedulable node of the flavor has free:
	// no pod asking for more fits anywhere. Each resource is maximised on its own.
	// +optional
	LargestNodeFree corev1.ResourceList `json:"largestNodeFree,omitempty"`
}

// NodeCapacity is one node as placement needs it: which flavors it serves and what it has free.
type NodeCapacity struct {
	// name of the node.
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`

	// flavors are the names of the flavors the node matches: it has all of a flavor's nodeLabels,
	// and the flavor tolerates (or lists in nodeTaints) each of its NoSchedule and NoExecute taints.
	// +listType=atomic
	// +required
	Flavors []string `json:"flavors"`

	// allocatable is the node's status.allocatable.
	// +optional
	Allocatable corev1.ResourceList `json:"allocatable,omitempty"`

	// free is allocatable minus the requests of the node's non-terminal pods and of pods the agent
	// admitted and expects there, never below zero. Zero for an unschedulable node.
	// +optional
	Free corev1.ResourceList `json:"free,omitempty"`

	// unschedulable is true for a cordoned node or one carrying a node.kubernetes.io/ (not-ready,
	// unreachable, pressure...) NoSchedule or NoExecute taint; nothing new is placed there.
	// +optional
	Unschedulable bool `json:"unschedulable,omitempty"`
}

// CapacityReport is published by fleetq-agent in its own cluster, in its namespace, named after the
// cluster: the manager reads it to place workloads on a worker that really has room. The agent owns
// and writes the whole object (there is no status subresource), so one write replaces the report.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName={capreport,capreports},categories={fleetq}
// +kubebuilder:printcolumn:name="Cluster",JSONPath=".status.clusterName",type=string,description="Worker cluster the report describes"
// +kubebuilder:printcolumn:name="Flavors",JSONPath=".status.flavorCount",type=integer,description="Number of flavors"
// +kubebuilder:printcolumn:name="Free",JSONPath=".status.summary",type=string,description="Free over allocatable accelerators per flavor"
// +kubebuilder:printcolumn:name="Unmatched",JSONPath=".status.unmatchedNodes",type=integer,priority=1,description="Nodes matching no flavor"
// +kubebuilder:printcolumn:name="Fenced",JSONPath=".status.fenced",type=boolean,priority=1,description="Whether the agent stopped admitting because the manager's lease expired"
// +kubebuilder:printcolumn:name="Revision",JSONPath=".status.revision",type=integer,priority=1,description="Revision of the report's content"
// +kubebuilder:printcolumn:name="Age",JSONPath=".metadata.creationTimestamp",type=date,description="Time the report was created"
type CapacityReport struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the object's metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// status is the report; the agent writes all of it.
	// +optional
	Status CapacityReportStatus `json:"status,omitempty"`
}

// CapacityReportList is a list of CapacityReports, as returned by list calls.
//
// +kubebuilder:object:root=true
type CapacityReportList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []CapacityReport `json:"items"`
}

func init() {
	SchemeBuilder.Register(&CapacityReport{}, &CapacityReportList{})
}

// The values of status.fencingPolicy, and of the agent configuration's fencingPolicy: an agent
// that suspends its running copies while fenced, or leaves them alone.
const (
	FencingPolicySuspend     = "Suspend"
	FencingPolicyKeepRunning = "KeepRunning"
)
