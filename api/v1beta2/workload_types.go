/*
Copyright 2026 The fleetq Authors.

Licensed under the Apache License, Version 2.0.
*/

package v1beta2

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Workload condition types Kueue sets; fleetq sets and reads the same strings.
const (
	// WorkloadQuotaReserved is True while the workload holds quota in a ClusterQueue.
	WorkloadQuotaReserved = "QuotaReserved"

	// WorkloadAdmitted is True when quota is reserved and every admission check is Ready.
	WorkloadAdmitted = "Admitted"

	// WorkloadFinished is True once the workload's job has finished, successfully or not.
	WorkloadFinished = "Finished"

	// WorkloadPodsReady is True when at least spec.podSets[*].count pods are ready or succeeded.
	WorkloadPodsReady = "PodsReady"

	// WorkloadEvicted is True when the workload was evicted; its reason says why (the WorkloadEvicted*
	// reasons below).
	WorkloadEvicted = "Evicted"

	// WorkloadPreempted is True when the workload was preempted; its reason is one of the
	// In*Reason constants.
	WorkloadPreempted = "Preempted"

	// WorkloadRequeued says whether an evicted workload is queued again.
	WorkloadRequeued = "Requeued"

	// WorkloadDeactivationTarget marks a workload to be deactivated; removed once it is.
	WorkloadDeactivationTarget = "DeactivationTarget"

	// WorkloadBlockedOnPreemptionGates is True when the workload needs to preempt but a preemption
	// gate is closed.
	WorkloadBlockedOnPreemptionGates = "BlockedOnPreemptionGates"
)

// Reasons of the Preempted condition: where the preemptor came from.
const (
	// InClusterQueueReason: preempted by a higher-priority workload of the same ClusterQueue.
	InClusterQueueReason = "InClusterQueue"

	// InCohortReclamationReason: preempted so another ClusterQueue could reclaim its nominal quota.
	InCohortReclamationReason = "InCohortReclamation"

	// InCohortFairSharingReason: preempted to restore fair sharing in the cohort.
	InCohortFairSharingReason = "InCohortFairSharing"

	// InCohortReclaimWhileBorrowingReason: preempted by a borrowing workload (borrowWithinCohort).
	InCohortReclaimWhileBorrowingReason = "InCohortReclaimWhileBorrowing"
)

// Reasons of the Evicted, Requeued, QuotaReserved, PodsReady and Finished conditions.
const (
	// WorkloadEvictedByPreemption: evicted to free quota for a preemptor.
	WorkloadEvictedByPreemption = "Preempted"

	// WorkloadEvictedByPodsReadyTimeout: pods did not become ready in time.
	WorkloadEvictedByPodsReadyTimeout = "PodsReadyTimeout"

	// WorkloadEvictedByAdmissionCheck: an admission check went to Retry or Rejected.
	WorkloadEvictedByAdmissionCheck = "AdmissionCheck"

	// WorkloadEvictedByClusterQueueStopped: the ClusterQueue's stopPolicy is HoldAndDrain.
	WorkloadEvictedByClusterQueueStopped = "ClusterQueueStopped"

	// WorkloadEvictedByLocalQueueStopped: the LocalQueue's stopPolicy is HoldAndDrain.
	WorkloadEvictedByLocalQueueStopped = "LocalQueueStopped"

	// WorkloadEvictedDueToNodeFailures: nodes running the workload failed beyond recovery.
	WorkloadEvictedDueToNodeFailures = "NodeFailures"

	// WorkloadEvictedByDeactivation: the workload was deactivated (Kueue's reason before v0.13).
	WorkloadEvictedByDeactivation = "InactiveWorkload"

	// WorkloadDeactivated: evicted because spec.active is false.
	WorkloadDeactivated = "Deactivated"

	// WorkloadSliceReplaced: an elastic workload slice was replaced by a new one.
	WorkloadSliceReplaced = "WorkloadSliceReplaced"

	// WorkloadInadmissible: the LocalQueue or ClusterQueue is missing or inactive.
	WorkloadInadmissible = "Inadmissible"

	// WorkloadReactivated: requeued because spec.active went back to true.
	WorkloadReactivated = "Reactivated"

	// WorkloadBackoffFinished: requeued because its requeue backoff expired.
	WorkloadBackoffFinished = "BackoffFinished"

	// WorkloadClusterQueueRestarted: requeued because its stopped ClusterQueue was restarted.
	WorkloadClusterQueueRestarted = "ClusterQueueRestarted"

	// WorkloadLocalQueueRestarted: requeued because its stopped LocalQueue was restarted.
	WorkloadLocalQueueRestarted = "LocalQueueRestarted"

	// WorkloadRequeuingLimitExceeded: deactivated after too many requeues.
	WorkloadRequeuingLimitExceeded = "RequeuingLimitExceeded"

	// WorkloadMaximumExecutionTimeExceeded: deactivated after spec.maximumExecutionTimeSeconds.
	WorkloadMaximumExecutionTimeExceeded = "MaximumExecutionTimeExceeded"

	// WorkloadWaitForStart: PodsReady is False because pods have not been ready since admission.
	WorkloadWaitForStart = "WaitForStart"

	// WorkloadWaitForRecovery: PodsReady is False because a pod failed after the workload started.
	WorkloadWaitForRecovery = "WaitForRecovery"

	// WorkloadStarted: PodsReady is True for the first time.
	WorkloadStarted = "Started"

	// WorkloadRecovered: PodsReady is True again after a pod failure.
	WorkloadRecovered = "Recovered"

	// PreemptionGated: the workload could have preempted but a preemption gate is closed.
	PreemptionGated = "PreemptionGated"

	// WorkloadFinishedReasonSucceeded: the job finished successfully.
	WorkloadFinishedReasonSucceeded = "Succeeded"

	// WorkloadFinishedReasonFailed: the job finished with an error.
	WorkloadFinishedReasonFailed = "Failed"

	// WorkloadFinishedReasonOutOfSync: a prebuilt workload no longer matches its job.
	WorkloadFinishedReasonOutOfSync = "OutOfSync"
)

// WorkloadSpec is the unit of admission: sets of identical pods with their resource needs, the queue
// they are submitted to and their priority.
//
// +kubebuilder:validation:XValidation:rule="!has(self.priorityClassRef) || has(self.priority)",fieldPath=".priority",reason="FieldValueRequired",message="must be set when priorityClassRef is set; set priority to the value of the referenced priority class"
// +kubebuilder:validation:XValidation:rule="self.podSets.filter(ps, has(ps.minCount)).size() <= 1",fieldPath=".podSets",message="at most one pod set may set minCount (partial admission); remove minCount from the others"
type WorkloadSpec struct {
	// podSets are the sets of identical pods of the workload, 1 to 18, with
	// unique names. They cannot change while quota is reserved.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=18
	// +optional
	PodSets []PodSet `json:"podSets"`

	// queueName is the LocalQueue, in the workload's namespace, the workload
	// is submitted to. It cannot change while quota is reserved.
	// +optional
	QueueName LocalQueueName `json:"queueName,omitempty"`

	// priorityClassRef names the WorkloadPriorityClass or PriorityClass the
	// priority comes from.
	// +optional
	PriorityClassRef *PriorityClassRef `json:"priorityClassRef,omitempty"`

	// priority orders workloads in their ClusterQueue, higher first; filled
	// from priorityClassRef, so it must be set when priorityClassRef is.
	// +optional
	Priority *int32 `json:"priority,omitempty"`

	// active false keeps the workload from being admitted and evicts it if it
	// was; true (default) lets it queue.
	// +kubebuilder:default=true
	// +optional
	Active *bool `json:"active,omitempty"`

	// maximumExecutionTimeSeconds, if set, deactivates the workload after it
	// has been admitted for that long.
	// +kubebuilder:validation:Minimum=1
	// +optional
	MaximumExecutionTimeSeconds *int32 `json:"maximumExecutionTimeSeconds,omitempty"`

	// preemptionGates block the workload from preempting others while any is
	// closed (MultiKueue orchestrated preemption). Up to 8.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=8
	// +optional
	PreemptionGates []PreemptionGate `json:"preemptionGates,omitempty"`
}

// PriorityClassGroup is the API group of the object a workload's priority comes from.
//
// +kubebuilder:validation:Enum=kueue.x-k8s.io;scheduling.k8s.io
type PriorityClassGroup string

const (
	// WorkloadPriorityClassGroup is the group of WorkloadPriorityClass.
	WorkloadPriorityClassGroup PriorityClassGroup = "kueue.x-k8s.io"

	// PodPriorityClassGroup is the group of the core PriorityClass.
	PodPriorityClassGroup PriorityClassGroup = "scheduling.k8s.io"
)

// PriorityClassKind is the kind of the object a workload's priority comes from.
//
// +kubebuilder:validation:Enum=WorkloadPriorityClass;PriorityClass
type PriorityClassKind string

const (
	// WorkloadPriorityClassKind is Kueue's WorkloadPriorityClass.
	WorkloadPriorityClassKind PriorityClassKind = "WorkloadPriorityClass"

	// PodPriorityClassKind is the core PriorityClass.
	PodPriorityClassKind PriorityClassKind = "PriorityClass"
)

// PriorityClassRef names the priority class of a workload by group, kind and name.
//
// +kubebuilder:validation:XValidation:rule="self.group != 'scheduling.k8s.io' || self.kind == 'PriorityClass'",fieldPath=".kind",message="must be PriorityClass when group is scheduling.k8s.io"
// +kubebuilder:validation:XValidation:rule="self.group != 'kueue.x-k8s.io' || self.kind == 'WorkloadPriorityClass'",fieldPath=".kind",message="must be WorkloadPriorityClass when group is kueue.x-k8s.io"
type PriorityClassRef struct {
	// group is kueue.x-k8s.io (WorkloadPriorityClass) or scheduling.k8s.io
	// (PriorityClass).
	// +required
	Group PriorityClassGroup `json:"group,omitempty"`

	// kind is WorkloadPriorityClass or PriorityClass, matching group.
	// +required
	Kind PriorityClassKind `json:"kind,omitempty"`

	// name of the priority class.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern="^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
	// +required
	Name string `json:"name,omitempty"`
}

// PreemptionGate names a gate that must be open before the workload may preempt.
type PreemptionGate struct {
	// name of the gate, e.g. kueue.x-k8s.io/multikueue.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=316
	// +required
	Name string `json:"name"`
}

// PreemptionGatePosition says whether a preemption gate lets the workload preempt.
type PreemptionGatePosition string

const (
	// PreemptionGatePositionOpen lets the workload preempt.
	PreemptionGatePositionOpen PreemptionGatePosition = "Open"

	// PreemptionGatePositionClosed keeps the workload from preempting.
	PreemptionGatePositionClosed PreemptionGatePosition = "Closed"
)

// PreemptionGateState is the observed position of one preemption gate.
type PreemptionGateState struct {
	// name of the gate, matching spec.preemptionGates.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=316
	// +required
	Name string `json:"name"`

	// position is Open or Closed; a gate without a state counts as Closed.
	// +kubebuilder:validation:Enum=Open;Closed
	// +required
	Position PreemptionGatePosition `json:"position"`

	// lastTransitionTime is when the position last changed.
	// +required
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty,omitzero"`
}

// PodSetReference names a pod set; a DNS label.
//
// +kubebuilder:validation:MaxLength=63
// +kubebuilder:validation:Pattern="^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
type PodSetReference string

// PodSet is a group of identical pods: one pod template and a count.
//
// +kubebuilder:validation:XValidation:rule="!has(self.minCount) || self.minCount <= self.count",fieldPath=".minCount",message="must be less than or equal to count; lower minCount or raise count"
type PodSet struct {
	// name of the pod set, unique in the workload; defaults to main.
	// +kubebuilder:default=main
	// +optional
	Name PodSetReference `json:"name,omitempty"`

	// template is the pod template. Container and pod-level requests must not
	// be negative and must not use the resource name pods. Lists and maps in
	// the template are bounded (64 containers, 64 init containers, 64
	// resources per requests or limits; see config/crd) so these rules stay
	// within the API server's CEL cost budget.
	//
	// +kubebuilder:validation:XValidation:rule="!has(self.spec) || !has(self.spec.containers) || !self.spec.containers.exists(c, (has(c.resources) && ((has(c.resources.requests) && c.resources.requests.exists(k, (type(c.resources.requests[k]) == int ? c.resources.requests[k] < 0 : c.resources.requests[k].startsWith('-')))) || (has(c.resources.limits) && c.resources.limits.exists(k, (type(c.resources.limits[k]) == int ? c.resources.limits[k] < 0 : c.resources.limits[k].startsWith('-')))))))",fieldPath=".spec.containers",message="a container requests or limits a negative quantity; set every request and limit of containers to 0 or more"
	// +kubebuilder:validation:XValidation:rule="!has(self.spec) || !has(self.spec.containers) || !self.spec.containers.exists(c, (has(c.resources) && ((has(c.resources.requests) && 'pods' in c.resources.requests) || (has(c.resources.limits) && 'pods' in c.resources.limits))))",fieldPath=".spec.containers",message="a container uses the resource name pods, which is reserved for Kueue internal accounting; remove it from the requests and limits of containers"
	// +kubebuilder:validation:XValidation:rule="!has(self.spec) || !has(self.spec.initContainers) || !self.spec.initContainers.exists(c, (has(c.resources) && ((has(c.resources.requests) && c.resources.requests.exists(k, (type(c.resources.requests[k]) == int ? c.resources.requests[k] < 0 : c.resources.requests[k].startsWith('-')))) || (has(c.resources.limits) && c.resources.limits.exists(k, (type(c.resources.limits[k]) == int ? c.resources.limits[k] < 0 : c.resources.limits[k].startsWith('-')))))))",fieldPath=".spec.initContainers",message="a container requests or limits a negative quantity; set every request and limit of initContainers to 0 or more"
	// +kubebuilder:validation:XValidation:rule="!has(self.spec) || !has(self.spec.initContainers) || !self.spec.initContainers.exists(c, (has(c.resources) && ((has(c.resources.requests) && 'pods' in c.resources.requests) || (has(c.resources.limits) && 'pods' in c.resources.limits))))",fieldPath=".spec.initContainers",message="a container uses the resource name pods, which is reserved for Kueue internal accounting; remove it from the requests and limits of initContainers"
	// +kubebuilder:validation:XValidation:rule="!has(self.spec) || !has(self.spec.resources) || ((!has(self.spec.resources.requests) || self.spec.resources.requests.all(k, !(type(self.spec.resources.requests[k]) == int ? self.spec.resources.requests[k] < 0 : self.spec.resources.requests[k].startsWith('-')))) && (!has(self.spec.resources.limits) || self.spec.resources.limits.all(k, !(type(self.spec.resources.limits[k]) == int ? self.spec.resources.limits[k] < 0 : self.spec.resources.limits[k].startsWith('-')))))",fieldPath=".spec.resources",message="pod-level resource requests and limits must not be negative; set them to 0 or a positive quantity"
	// +kubebuilder:validation:XValidation:rule="!has(self.spec) || !has(self.spec.resources) || ((!has(self.spec.resources.requests) || !('pods' in self.spec.resources.requests)) && (!has(self.spec.resources.limits) || !('pods' in self.spec.resources.limits)))",fieldPath=".spec.resources",message="the resource name pods is reserved for Kueue internal accounting; remove it from pod-level requests and limits"
	// +required
	Template corev1.PodTemplateSpec `json:"template,omitempty"`

	// count is the number of pods; defaults to 1.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +optional
	Count int32 `json:"count"`

	// minCount, if set, allows partial admission with at least this many
	// pods (Kueue feature gate PartialAdmission). Only one pod set may set it.
	// +kubebuilder:validation:Minimum=1
	// +optional
	MinCount *int32 `json:"minCount,omitempty"`

	// topologyRequest asks for topology-aware placement of the pods.
	// +optional
	TopologyRequest *PodSetTopologyRequest `json:"topologyRequest,omitempty"`
}

// PodSetTopologyRequest is a pod set's topology-aware scheduling request (Kueue TAS), carried so a
// dispatched workload keeps it; fleetq's engine does not place by topology.
type PodSetTopologyRequest struct {
	// required is the topology level the pods must share.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Required *string `json:"required,omitempty"`

	// preferred is the topology level the pods should share if possible.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Preferred *string `json:"preferred,omitempty"`

	// unconstrained lets the pods go anywhere in the flavor's capacity.
	// +kubebuilder:validation:Type=boolean
	// +optional
	Unconstrained *bool `json:"unconstrained,omitempty"`

	// podIndexLabel is the label that holds each pod's index.
	// +kubebuilder:validation:MaxLength=317
	// +optional
	PodIndexLabel *string `json:"podIndexLabel,omitempty"`

	// subGroupIndexLabel is the label that holds the index of a replicated job.
	// +kubebuilder:validation:MaxLength=317
	// +optional
	SubGroupIndexLabel *string `json:"subGroupIndexLabel,omitempty"`

	// subGroupCount is the number of replicated jobs in the pod set.
	// +optional
	SubGroupCount *int32 `json:"subGroupCount,omitempty"`

	// podSetGroupName groups pod sets that must get the same flavor.
	// +kubebuilder:validation:MaxLength=256
	// +optional
	PodSetGroupName *string `json:"podSetGroupName,omitempty"`

	// podSetSliceRequiredTopology is the level each slice of pods must share.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	PodSetSliceRequiredTopology *string `json:"podSetSliceRequiredTopology,omitempty"`

	// podSetSliceSize is the number of pods in a slice.
	// +optional
	PodSetSliceSize *int32 `json:"podSetSliceSize,omitempty"`
}

// Admission is the decision that reserved quota for a workload: the ClusterQueue and, per pod set,
// the flavors and usage.
type Admission struct {
	// clusterQueue is the ClusterQueue that reserved the quota.
	// +optional
	ClusterQueue ClusterQueueReference `json:"clusterQueue"`

	// podSetAssignments has one entry per spec.podSets entry.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=18
	// +optional
	PodSetAssignments []PodSetAssignment `json:"podSetAssignments"`
}

// PodSetAssignment is the admission of one pod set.
type PodSetAssignment struct {
	// name of the pod set.
	// +kubebuilder:default=main
	// +optional
	Name PodSetReference `json:"name"`

	// flavors is the flavor assigned for each resource.
	// +optional
	Flavors map[corev1.ResourceName]ResourceFlavorReference `json:"flavors,omitempty"`

	// resourceUsage is the total quota the pod set's pods use, including
	// LimitRange defaults and RuntimeClass overhead at admission time.
	// +optional
	ResourceUsage corev1.ResourceList `json:"resourceUsage,omitempty"`

	// count is the number of pods admitted (less than spec count under
	// partial admission).
	// +kubebuilder:validation:Minimum=0
	// +optional
	Count *int32 `json:"count,omitempty"`

	// topologyAssignment places the pods in topology domains (Kueue TAS).
	// +optional
	TopologyAssignment *TopologyAssignment `json:"topologyAssignment,omitempty"`

	// delayedTopologyRequest is Pending while topology assignment waits for
	// an admission check such as a ProvisioningRequest, Ready after.
	// +optional
	DelayedTopologyRequest *DelayedTopologyRequestState `json:"delayedTopologyRequest,omitempty"`
}

// DelayedTopologyRequestState says whether a delayed topology assignment is done.
//
// +kubebuilder:validation:Enum=Pending;Ready
// +kubebuilder:validation:MaxLength=7
type DelayedTopologyRequestState string

const (
	// DelayedTopologyRequestStatePending: the topology assignment is still to be computed.
	DelayedTopologyRequestStatePending DelayedTopologyRequestState = "Pending"

	// DelayedTopologyRequestStateReady: the topology assignment was computed.
	DelayedTopologyRequestStateReady DelayedTopologyRequestState = "Ready"
)

// TopologyAssignment places a pod set's pods in the lowest-level topology domains, compressed into
// slices (Kueue TAS).
//
// +kubebuilder:validation:XValidation:rule="self.slices.all(x, size(x.valuesPerLevel) == size(self.levels))",fieldPath=".slices",message="each slice needs one valuesPerLevel entry per level"
type TopologyAssignment struct {
	// levels are the node label keys of the topology levels, highest first.
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=317
	// +required
	Levels []string `json:"levels,omitempty"`

	// slices together give the whole assignment.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=1000
	// +required
	Slices []TopologyAssignmentSlice `json:"slices,omitempty"`
}

// TopologyAssignmentSlice is part of a topology assignment: domainCount domains with their pod counts.
//
// +kubebuilder:validation:XValidation:rule="!has(self.podCounts) || size(self.podCounts) == self.domainCount",fieldPath=".podCounts",message="must have domainCount entries"
// +kubebuilder:validation:XValidation:rule="has(self.podCounts) != has(self.universalPodCount)",message="set exactly one of podCounts or universalPodCount"
// +kubebuilder:validation:XValidation:rule="self.valuesPerLevel.all(x, !has(x.roots) || size(x.roots) == self.domainCount)",fieldPath=".valuesPerLevel",message="roots, when set, must have domainCount entries"
type TopologyAssignmentSlice struct {
	// domainCount is the number of domains in this slice.
	// +kubebuilder:validation:Minimum=1
	// +required
	DomainCount int32 `json:"domainCount"`

	// valuesPerLevel has one entry per level, giving the domains' label values.
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +required
	ValuesPerLevel []TopologyAssignmentSliceLevelValues `json:"valuesPerLevel"`

	// podCounts is the number of pods per domain; use universalPodCount when
	// they are all equal.
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100000
	// +optional
	PodCounts []int32 `json:"podCounts,omitempty"`

	// universalPodCount is the number of pods in every domain of the slice.
	// +optional
	UniversalPodCount *int32 `json:"universalPodCount,omitempty"`
}

// TopologyAssignmentSliceLevelValues are the label values of one level for the domains of a slice.
//
// +kubebuilder:validation:XValidation:rule="has(self.roots) != has(self.universalValue)",message="set exactly one of roots or universalValue"
// +kubebuilder:validation:XValidation:rule="!(has(self.universalValue) && (has(self.prefix) || has(self.suffix)))",message="universalValue cannot be combined with prefix or suffix"
type TopologyAssignmentSliceLevelValues struct {
	// prefix is common to all values.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Prefix *string `json:"prefix,omitempty"`

	// suffix is common to all values.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Suffix *string `json:"suffix,omitempty"`

	// roots are the values without prefix and suffix, one per domain.
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100000
	// +kubebuilder:validation:items:MaxLength=63
	// +optional
	Roots []string `json:"roots,omitempty"`

	// universalValue is the value of every domain of the slice.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	UniversalValue *string `json:"universalValue,omitempty"`
}

// WorkloadStatus is what Kueue's (and fleetq's) controllers observe and decide about a workload.
//
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.clusterName) || !has(self.clusterName) || oldSelf.clusterName == self.clusterName",fieldPath=".clusterName",message="cannot change once set; clear it (evict the workload) before assigning another cluster"
// +kubebuilder:validation:XValidation:rule="!has(self.clusterName) || !has(self.nominatedClusterNames) || size(self.nominatedClusterNames) == 0",fieldPath=".nominatedClusterNames",message="must be empty when clusterName is set; clear nominatedClusterNames when assigning the cluster"
// +kubebuilder:validation:XValidation:rule="!has(self.conditions) || !self.conditions.exists(c, c.type == 'QuotaReserved' && c.status == 'True') || has(self.admission)",fieldPath=".admission",reason="FieldValueRequired",message="must be set while the QuotaReserved condition is True; set admission together with the condition"
type WorkloadStatus struct {
	// conditions hold the latest observations: QuotaReserved, Admitted,
	// PodsReady, Evicted, Preempted, Requeued, Finished... Up to 16.
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	// +kubebuilder:validation:MaxItems=16
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`

	// admission is the quota reservation: it can be cleared, but its
	// contents do not change once set.
	// +optional
	Admission *Admission `json:"admission,omitempty"`

	// requeueState tracks requeues after evictions such as PodsReadyTimeout.
	// +optional
	RequeueState *RequeueState `json:"requeueState,omitempty"`

	// reclaimablePods counts, per pod set, pods whose quota is no longer needed.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=18
	// +optional
	ReclaimablePods []ReclaimablePod `json:"reclaimablePods,omitempty"`

	// admissionChecks hold the state of every admission check the workload
	// must pass. Up to 8.
	// +listType=map
	// +listMapKey=name
	// +patchStrategy=merge
	// +patchMergeKey=name
	// +kubebuilder:validation:MaxItems=8
	// +optional
	AdmissionChecks []AdmissionCheckState `json:"admissionChecks,omitempty" patchStrategy:"merge" patchMergeKey:"name"`

	// resourceRequests are the total requests per pod set, as computed when
	// a workload without admission was last considered.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=18
	// +optional
	ResourceRequests []PodSetRequest `json:"resourceRequests,omitempty"`

	// accumulatedPastExecutionTimeSeconds is the time spent admitted in
	// earlier admit-evict cycles.
	// +optional
	AccumulatedPastExecutionTimeSeconds *int32 `json:"accumulatedPastExecutionTimeSeconds,omitempty"`

	// schedulingStats counts evictions by reason.
	// +optional
	SchedulingStats *SchedulingStats `json:"schedulingStats,omitempty"`

	// nominatedClusterNames are the worker clusters the workload was sent to
	// while a cluster is being chosen. Up to 20; empty once clusterName is set.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=20
	// +kubebuilder:validation:items:MaxLength=256
	// +optional
	NominatedClusterNames []string `json:"nominatedClusterNames,omitempty"`

	// clusterName is the worker cluster the workload runs on. It cannot change
	// once set; it is cleared when the workload is evicted.
	// +kubebuilder:validation:MaxLength=256
	// +optional
	ClusterName *string `json:"clusterName,omitempty"`

	// unhealthyNodes are failed nodes running pods of the workload, for
	// topology-aware node replacement. Up to 8.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=8
	// +optional
	UnhealthyNodes []UnhealthyNode `json:"unhealthyNodes,omitempty"`

	// preemptionGates hold the position of each gate of spec.preemptionGates.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=8
	// +optional
	PreemptionGates []PreemptionGateState `json:"preemptionGates,omitempty"`
}

// SchedulingStats counts scheduling events of a workload.
type SchedulingStats struct {
	// evictions counts evictions per reason and underlying cause.
	// +listType=map
	// +listMapKey=reason
	// +listMapKey=underlyingCause
	// +patchStrategy=merge
	// +patchMergeKey=reason
	// +kubebuilder:validation:MaxItems=256
	// +optional
	Evictions []WorkloadSchedulingStatsEviction `json:"evictions,omitempty"`
}

// EvictionUnderlyingCause refines an eviction reason; may be empty.
//
// +kubebuilder:validation:MaxLength=316
type EvictionUnderlyingCause string

// WorkloadSchedulingStatsEviction counts evictions for one reason and cause.
type WorkloadSchedulingStatsEviction struct {
	// reason is the eviction reason, e.g. Preempted.
	// +kubebuilder:validation:MaxLength=316
	// +required
	Reason string `json:"reason"`

	// underlyingCause refines reason; may be empty.
	// +required
	UnderlyingCause EvictionUnderlyingCause `json:"underlyingCause"`

	// count is the number of such evictions.
	// +kubebuilder:validation:Minimum=0
	// +required
	Count int32 `json:"count"`
}

// UnhealthyNode names a failed node running pods of the workload.
type UnhealthyNode struct {
	// name of the node.
	// +kubebuilder:validation:MaxLength=63
	// +required
	Name string `json:"name"`
}

// RequeueState tracks how often and when an evicted workload is queued again.
type RequeueState struct {
	// count is the number of requeues; reset when the workload is reactivated.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Count *int32 `json:"count,omitempty"`

	// requeueAt is when the workload will be queued again.
	// +optional
	RequeueAt *metav1.Time `json:"requeueAt,omitempty"`
}

// AdmissionCheckState is one admission check's verdict on a workload.
type AdmissionCheckState struct {
	// name of the AdmissionCheck.
	// +required
	Name AdmissionCheckReference `json:"name,omitempty"`

	// state is Pending, Ready, Retry or Rejected.
	// +kubebuilder:validation:Enum=Pending;Ready;Retry;Rejected
	// +required
	State CheckState `json:"state,omitempty"`

	// lastTransitionTime is when state last changed.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Format=date-time
	// +required
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty,omitzero"`

	// message explains the state to a person; may be empty.
	// +kubebuilder:validation:MaxLength=32768
	// +required
	Message string `json:"message"`

	// requeueAfterSeconds is how long the check asks to wait before retrying.
	// +kubebuilder:validation:Minimum=0
	// +optional
	RequeueAfterSeconds *int32 `json:"requeueAfterSeconds,omitempty"`

	// retryCount is how many times the check has asked for a retry.
	// +kubebuilder:validation:Minimum=0
	// +optional
	RetryCount *int32 `json:"retryCount,omitempty"`

	// podSetUpdates are additive changes the check asks for on the pods,
	// such as node selectors of provisioned nodes.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=18
	// +optional
	PodSetUpdates []PodSetUpdate `json:"podSetUpdates,omitempty"`
}

// PodSetUpdate is an additive change to a pod set asked for by an admission check; changing an
// existing key, or two checks setting the same key, fails admission.
type PodSetUpdate struct {
	// name of the pod set.
	// +required
	Name PodSetReference `json:"name"`

	// labels to add to the pods.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// annotations to add to the pods.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`

	// nodeSelector entries to add to the pods.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// tolerations to add to the pods. Up to 8.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
}

// ReclaimablePod counts pods of a pod set whose quota can be released (e.g. finished pods of a job).
type ReclaimablePod struct {
	// name of the pod set.
	// +required
	Name PodSetReference `json:"name"`

	// count of pods whose quota is no longer needed.
	// +kubebuilder:validation:Minimum=0
	// +required
	Count int32 `json:"count"`
}

// PodSetRequest is the total request of one pod set.
type PodSetRequest struct {
	// name of the pod set.
	// +required
	Name PodSetReference `json:"name"`

	// resources is the total of all the pod set's pods, after LimitRange
	// defaults, RuntimeClass overhead and resource transformations.
	// +optional
	Resources corev1.ResourceList `json:"resources,omitempty"`
}

// Workload is what Kueue (and fleetq) admit: usually created by Kueue for a job, rarely by hand.
//
// The root-level rules compare old and new objects, spec and status together. With the status
// subresource, an update of the main resource keeps the stored status and an update of /status keeps
// the stored spec, so "podSets did not change while QuotaReserved is True in the old and the new
// object" holds on both endpoints: a spec update is checked against the reserved status it cannot
// change, and a status update cannot change podSets.
//
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName={wl,kwl,kueueworkload},categories={kueue}
// +kubebuilder:printcolumn:name="Queue",JSONPath=".spec.queueName",type=string,description="LocalQueue the workload was submitted to"
// +kubebuilder:printcolumn:name="Reserved in",JSONPath=".status.admission.clusterQueue",type=string,description="ClusterQueue where the workload reserves quota"
// +kubebuilder:printcolumn:name="Admitted",JSONPath=".status.conditions[?(@.type=='Admitted')].status",type=string,description="Admission status"
// +kubebuilder:printcolumn:name="Finished",JSONPath=".status.conditions[?(@.type=='Finished')].status",type=string,description="Whether the workload finished"
// +kubebuilder:printcolumn:name="Age",JSONPath=".metadata.creationTimestamp",type=date,description="Time the workload was created"
// +kubebuilder:validation:XValidation:rule="!(has(oldSelf.status) && has(oldSelf.status.conditions) && oldSelf.status.conditions.exists(c, c.type == 'QuotaReserved' && c.status == 'True')) || !(has(self.status) && has(self.status.conditions) && self.status.conditions.exists(c, c.type == 'QuotaReserved' && c.status == 'True')) || self.spec.podSets == oldSelf.spec.podSets",fieldPath=".spec.podSets",message="cannot change while quota is reserved (condition QuotaReserved is True); deactivate the workload (spec.active: false) and wait for the reservation to be released, or create a new Workload"
// +kubebuilder:validation:XValidation:rule="!(has(oldSelf.status) && has(oldSelf.status.conditions) && oldSelf.status.conditions.exists(c, c.type == 'QuotaReserved' && c.status == 'True')) || !(has(self.status) && has(self.status.conditions) && self.status.conditions.exists(c, c.type == 'QuotaReserved' && c.status == 'True')) || (has(self.spec.queueName) == has(oldSelf.spec.queueName) && (!has(self.spec.queueName) || self.spec.queueName == oldSelf.spec.queueName))",fieldPath=".spec.queueName",message="cannot change while quota is reserved (condition QuotaReserved is True); deactivate the workload (spec.active: false) and wait for the reservation to be released"
// +kubebuilder:validation:XValidation:rule="!has(self.status) || !has(self.status.admission) || !has(self.status.conditions) || !self.status.conditions.exists(c, c.type == 'QuotaReserved' && c.status == 'True') || size(self.spec.podSets) == size(self.status.admission.podSetAssignments)",fieldPath=".status.admission.podSetAssignments",message="must have one entry per spec.podSets entry while quota is reserved"
type Workload struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the object's metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is what the workload needs.
	// +optional
	Spec WorkloadSpec `json:"spec"`

	// status is what the controllers observed and decided.
	// +optional
	Status WorkloadStatus `json:"status,omitempty"`
}

// WorkloadList is a list of Workloads, as returned by list calls.
//
// +kubebuilder:object:root=true
type WorkloadList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Workload `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Workload{}, &WorkloadList{})
}
