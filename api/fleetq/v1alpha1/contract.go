/*
Copyright 2026 The fleetq Authors.

Licensed under the Apache License, Version 2.0.
*/

package v1alpha1

import (
	kueue "github.com/fleetq/fleetq/api/v1beta2"
)

// The contract between the manager and a worker's agent. The manager creates, in the worker:
//
//   - every ResourceFlavor (same name and spec), labelled OriginLabel=<origin>;
//   - per dispatched workload: its Namespace if missing; a batch/v1 Job with the manager's Job's name
//     and namespace, spec.suspend true, OriginLabel and OriginUIDAnnotation (the manager Workload's
//     UID), the flavor's nodeSelector and tolerations injected, no queue-name label and no managedBy;
//     and a kueue Workload copy with the manager Workload's name, namespace, spec, OriginLabel and
//     OriginUIDAnnotation, an ownerReference to that Job, OriginClusterQueueAnnotation and
//     LocalPreemptionAnnotation;
//   - a coordination.k8s.io Lease ManagerLeaseName(origin) in the agent's namespace, renewed every
//     lease-renew interval, with spec.leaseDurationSeconds set to the manager's fenceTimeout.
//
// The agent, for copies carrying its own origin only: admits a copy when all its pods fit on the
// nodes now (status.admission, QuotaReserved and Admitted True with reason AdmittedReason) and then
// unsuspends its Job; otherwise sets QuotaReserved False with reason PendingReason and a message with
// numbers. It evicts lower-priority copies for a LocalPreemptionLowerPriority copy that fits no
// other way (Evicted True reason kueue.WorkloadEvictedByPreemption, Preempted True reason
// kueue.InClusterQueueReason), and every admitted copy when the lease was not renewed for its
// duration (Evicted True reason EvictedByFencing). An evicted copy is never admitted again: the
// manager requeues its workload and deletes the copy. When a copy's Job finishes the agent sets
// Finished True (reason Succeeded or Failed). It publishes a CapacityReport named after its cluster.
// The agent owns spec.suspend of copied Jobs; to stop a copy, the manager deletes it.
//
// The Lease is timed by the agent's own clock: it fences leaseDurationSeconds after it last saw
// spec.renewTime (or the holder) change. No Lease means nothing to fence against: the agent admits
// and never fences, and deleting the Lease lifts a fence. On start (or leader change) the agent
// counts its first sight of the Lease as a renewal, so a restart during a partition can keep copies
// running for up to one more leaseDurationSeconds: keep workerLostTimeout above twice fenceTimeout
// plus the renew interval for the one-copy guarantee to survive an agent restart.
const (
	// OriginLabel marks every object the manager creates in a worker, with the manager's origin
	// name; the agent touches nothing without it (users' own Jobs are never admitted or suspended).
	OriginLabel = kueue.MultiKueueOriginLabel

	// OriginUIDAnnotation records, on a remote Job and Workload, the manager Workload's UID.
	OriginUIDAnnotation = kueue.MultiKueueOriginUIDAnnotation

	// OriginClusterQueueAnnotation on a remote Workload names the manager ClusterQueue that admitted
	// it; the agent writes it as status.admission.clusterQueue.
	OriginClusterQueueAnnotation = "fleetq.dev/origin-cluster-queue"

	// LocalPreemptionAnnotation on a remote Workload says whether the agent may evict lower-priority
	// copies to make room for it (a LocalPreemptionPolicy). Missing means Never.
	LocalPreemptionAnnotation = "fleetq.dev/local-preemption"

	// ManagerLeasePrefix starts the name of the Lease the manager renews in each worker.
	ManagerLeasePrefix = "fleetq-manager-"

	// AgentName is the agent's field manager, user agent and event source, and the name of its
	// leader-election Lease by default.
	AgentName = "fleetq-agent"
)

// LocalPreemptionPolicy is the value of LocalPreemptionAnnotation.
type LocalPreemptionPolicy string

const (
	// LocalPreemptionNever never evicts other copies; the copy waits until it fits.
	LocalPreemptionNever LocalPreemptionPolicy = "Never"

	// LocalPreemptionLowerPriority evicts the fewest lower-priority copies that make the copy fit.
	// The manager sets it when the origin ClusterQueue allows any preemption.
	LocalPreemptionLowerPriority LocalPreemptionPolicy = "LowerPriority"
)

// Condition reasons the agent writes on remote Workloads, besides Kueue's own (Preempted,
// InClusterQueue, Succeeded, Failed).
const (
	// AdmittedReason is the reason of QuotaReserved and Admitted True: all pods fit on the nodes.
	AdmittedReason = "Admitted"

	// PendingReason is the reason of QuotaReserved False: the copy does not fit now (the message
	// says why, with numbers), the agent is fenced, or the copy's Job is missing.
	PendingReason = "Pending"

	// NoReservationReason is the reason of Admitted False once an evicted copy's pods are gone and
	// its admission is cleared.
	NoReservationReason = "NoReservation"

	// EvictedByFencing is the reason of Evicted True on copies the agent suspended because the
	// manager's lease was not renewed within its duration.
	EvictedByFencing = "Fenced"
)

// MultiKueueClusterFencingLease is fleetq's condition on a MultiKueueCluster, beside Kueue's
// Active: True while the manager renews its fencing Lease in that worker; False (reasons
// HeldByAnotherManager, RenewFailed) says why the worker's agent will fence, or, when the
// Lease could never be created, admits with nothing to fence against.
const MultiKueueClusterFencingLease = "FencingLease"

// ManagerLeaseName is the Lease the manager with this origin renews in every worker, in the agent's
// namespace.
func ManagerLeaseName(origin string) string { return ManagerLeasePrefix + origin }

// CapacityReportName is the name of the report an agent publishes: its cluster's name.
func CapacityReportName(clusterName string) string { return clusterName }

// Identity of pods and the flavors a copy was admitted with: the manager writes these, the agent
// reads them, for every kind of job alike.
const (
	// WorkloadUIDLabel on every pod template the manager starts (locally or as a worker's copy)
	// holds the management cluster Workload's UID, so the pods of a workload are found by label.
	WorkloadUIDLabel = "fleetq.dev/workload-uid"

	// PodSetLabel on the same pod templates names the pod set (Kueue's label).
	PodSetLabel = "kueue.x-k8s.io/podset"

	// JobManagedByAnnotation on a management cluster Workload holds its job's managedBy ("" when
	// unset): whether the job may run here, or only as a worker's copy, is decided against it
	// when the workload is queued, not only when the job was created.
	JobManagedByAnnotation = "fleetq.dev/job-managed-by"

	// CopiesFinalizer on a management cluster Workload is held while copies of it may exist in a
	// worker: a deleted workload keeps its quota and goes only once its copies, and their pods,
	// are confirmed gone (or its worker is lost, as multiCluster.lostWorkerPolicy allows).
	CopiesFinalizer = "fleetq.dev/worker-copies"

	// PodSetFlavorsAnnotation on a remote Workload holds, as JSON, the flavor the manager admitted
	// each pod set's resources with ({"main":{"nvidia.com/gpu":"a100-flavor"}}); the copy's pod
	// set templates carry that flavor's node selector and tolerations already.
	PodSetFlavorsAnnotation = "fleetq.dev/pod-set-flavors"
)
