/*
Copyright 2026 The fleetq Authors.

Licensed under the Apache License, Version 2.0.
*/

package v1beta2

// Labels, annotations and finalizers that Kueue-integrated jobs and controllers already use; fleetq
// reads and writes the same keys so a job labelled for Kueue needs no change.
const (
	// QueueNameLabel is how a job names the LocalQueue it is submitted to.
	QueueNameLabel = "kueue.x-k8s.io/queue-name"

	// PriorityClassLabel is how a job names the WorkloadPriorityClass that sets its priority.
	PriorityClassLabel = "kueue.x-k8s.io/priority-class"

	// ResourceInUseFinalizerName keeps a ClusterQueue, ResourceFlavor or AdmissionCheck alive while
	// workloads still reference it.
	ResourceInUseFinalizerName = "kueue.x-k8s.io/resource-in-use"

	// PodGroupNameLabel makes a Pod a member of a pod group: the Pods of one group run as one
	// Workload, named after the group, all of them or none.
	PodGroupNameLabel = "kueue.x-k8s.io/pod-group-name"

	// PodGroupTotalCountAnnotation says how many Pods a pod group has; every member carries the
	// same number, and the group is queued once that many exist.
	PodGroupTotalCountAnnotation = "kueue.x-k8s.io/pod-group-total-count"

	// RetriableInGroupAnnotation set to "false" on a member ends a pod group that did not succeed:
	// its Workload finishes as failed once none of its Pods runs.
	RetriableInGroupAnnotation = "kueue.x-k8s.io/retriable-in-group"

	// DefaultPodSetName is the pod set name Kueue defaults when a pod set has none.
	DefaultPodSetName PodSetReference = "main"
)

// StopPolicy says whether a queue admits new workloads and what happens to the ones it admitted.
type StopPolicy string

const (
	// None keeps the queue active: workloads are admitted as usual.
	None StopPolicy = "None"

	// Hold stops new reservations but lets admitted workloads run to completion.
	Hold StopPolicy = "Hold"

	// HoldAndDrain stops new reservations and evicts admitted workloads.
	HoldAndDrain StopPolicy = "HoldAndDrain"
)
