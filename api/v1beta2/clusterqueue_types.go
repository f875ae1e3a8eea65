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

// ClusterQueueReference names a ClusterQueue; it is a DNS subdomain like any object name. It is
// checked by a CEL rule rather than Kueue's equivalent pattern so the error says what a valid name is.
//
// +kubebuilder:validation:MaxLength=253
// +kubebuilder:validation:XValidation:rule="!format.dns1123Subdomain().validate(self).hasValue()",message="must be the name of a ClusterQueue: a lowercase DNS subdomain (letters, digits, '-' and '.', at most 253 characters) such as research-cq"
type ClusterQueueReference string

// CohortReference names a cohort. A cohort needs no Cohort object to exist: the name alone links
// ClusterQueues that may borrow from each other.
//
// +kubebuilder:validation:MaxLength=253
// +kubebuilder:validation:Pattern="^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
type CohortReference string

// ResourceFlavorReference names a ResourceFlavor.
//
// +kubebuilder:validation:MaxLength=253
// +kubebuilder:validation:Pattern="^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
type ResourceFlavorReference string

// ClusterQueue condition types and reasons Kueue publishes; fleetq uses the same strings so tools that
// read Kueue's conditions keep working.
const (
	// ClusterQueueActive is True when the ClusterQueue can admit workloads and lend its quota.
	ClusterQueueActive = "Active"

	// MultiKueueManagerQuotaAutomation is True on a MultiKueue manager queue whose quota is managed
	// automatically.
	MultiKueueManagerQuotaAutomation = "MultiKueueManagerQuotaAutomation"

	// ClusterQueueActiveReasonReady says the ClusterQueue is active.
	ClusterQueueActiveReasonReady = "Ready"
	// ClusterQueueActiveReasonTerminating says the ClusterQueue is being deleted.
	ClusterQueueActiveReasonTerminating = "Terminating"
	// ClusterQueueActiveReasonStopped says spec.stopPolicy holds the ClusterQueue.
	ClusterQueueActiveReasonStopped = "Stopped"
	// ClusterQueueActiveReasonFlavorNotFound says a referenced ResourceFlavor does not exist.
	ClusterQueueActiveReasonFlavorNotFound = "FlavorNotFound"
	// ClusterQueueActiveReasonAdmissionCheckNotFound says a referenced AdmissionCheck does not exist.
	ClusterQueueActiveReasonAdmissionCheckNotFound = "AdmissionCheckNotFound"
	// ClusterQueueActiveReasonAdmissionCheckInactive says a referenced AdmissionCheck is not active.
	ClusterQueueActiveReasonAdmissionCheckInactive = "AdmissionCheckInactive"
	// ClusterQueueActiveReasonMultipleMultiKueueAdmissionChecks says more than one MultiKueue check is used.
	ClusterQueueActiveReasonMultipleMultiKueueAdmissionChecks = "MultipleMultiKueueAdmissionChecks"
	// ClusterQueueActiveReasonMultiKueueAdmissionCheckAppliedPerFlavor says a MultiKueue check is limited to flavors.
	ClusterQueueActiveReasonMultiKueueAdmissionCheckAppliedPerFlavor = "MultiKueueAdmissionCheckAppliedPerFlavor"
	// ClusterQueueActiveReasonTopologyNotFound says a flavor's Topology does not exist.
	ClusterQueueActiveReasonTopologyNotFound = "TopologyNotFound"
	// ClusterQueueActiveReasonUnknown says the state could not be determined.
	ClusterQueueActiveReasonUnknown = "Unknown"
)

// ClusterQueueSpec is the quota a platform team hands out: resource groups of flavors with nominal
// quotas, the cohort it borrows in, and how it queues and preempts.
//
// fleetq accepts spec.cohort (the v1beta1 name, used by the GPU quota tutorial) as an alias of
// spec.cohortName; EffectiveCohort returns whichever is set.
//
// +kubebuilder:validation:XValidation:rule="!has(self.cohort) || !has(self.cohortName) || self.cohort == self.cohortName",fieldPath=".cohort",messageExpression="'cohort (\"' + self.cohort + '\") and cohortName (\"' + self.cohortName + '\") differ; cohort is an alias of cohortName: set only cohortName, or set both to the same value'"
// +kubebuilder:validation:XValidation:rule="has(self.cohortName) || has(self.cohort) || !has(self.resourceGroups) || self.resourceGroups.all(g, g.flavors.all(f, f.resources.all(r, !has(r.borrowingLimit))))",fieldPath=".resourceGroups",reason="FieldValueForbidden",message="borrowingLimit is set but the ClusterQueue has no cohort to borrow from; set spec.cohortName, or remove borrowingLimit"
// +kubebuilder:validation:XValidation:rule="has(self.cohortName) || has(self.cohort) || !has(self.resourceGroups) || self.resourceGroups.all(g, g.flavors.all(f, f.resources.all(r, !has(r.lendingLimit))))",fieldPath=".resourceGroups",reason="FieldValueForbidden",message="lendingLimit is set but the ClusterQueue has no cohort to lend to; set spec.cohortName, or remove lendingLimit"
// +kubebuilder:validation:XValidation:rule="!has(self.resourceGroups) || self.resourceGroups.all(gi, g, g.coveredResources.all(ri, r, !(r in g.coveredResources.transformList(j, s, j != ri, s)) && self.resourceGroups.all(hi, h, hi == gi || !(r in h.coveredResources))))",fieldPath=".resourceGroups",message="a resource is covered more than once; list each resource once, in the coveredResources of a single resource group"
// +kubebuilder:validation:XValidation:rule="!has(self.resourceGroups) || self.resourceGroups.all(gi, g, self.resourceGroups.all(hi, h, hi <= gi || !sets.intersects(g.flavors.map(f, f.name), h.flavors.map(f, f.name))))",fieldPath=".resourceGroups",message="a flavor appears in more than one resource group; a flavor provides the resources of a single group, so merge the groups or use another flavor"
type ClusterQueueSpec struct {
	// resourceGroups lists groups of resources with the flavors that provide
	// quota for them. A resource and a flavor each belong to one group only.
	// Up to 16 groups.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	// +optional
	ResourceGroups []ResourceGroup `json:"resourceGroups,omitempty"`

	// cohortName is the cohort this ClusterQueue borrows from and lends to.
	// Empty means it neither borrows nor lends.
	// +optional
	CohortName CohortReference `json:"cohortName,omitempty"`

	// cohort is a fleetq alias of cohortName, accepted because Kueue's v1beta1
	// field name still appears in v1beta2 manifests (e.g. the GPU quota
	// tutorial). When both are set they must be equal. New manifests should
	// use cohortName.
	// +optional
	Cohort CohortReference `json:"cohort,omitempty"`

	// queueingStrategy orders pending workloads: StrictFIFO blocks newer
	// workloads behind an older one that does not fit; BestEffortFIFO lets
	// them pass.
	// +kubebuilder:default=BestEffortFIFO
	// +kubebuilder:validation:Enum=StrictFIFO;BestEffortFIFO
	// +optional
	QueueingStrategy QueueingStrategy `json:"queueingStrategy,omitempty"`

	// namespaceSelector picks the namespaces whose LocalQueues may submit
	// here. Null selects no namespace; {} selects all.
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, e.operator in ['In', 'NotIn', 'Exists', 'DoesNotExist'] && ((e.operator in ['In', 'NotIn']) == (has(e.values) && size(e.values) > 0)))",fieldPath=".matchExpressions",message="each expression needs operator In or NotIn with at least one value, or Exists or DoesNotExist with no values; fix the operator or the values"
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`

	// flavorFungibility says whether a workload tries the next flavor before
	// borrowing or preempting in the current one.
	// +kubebuilder:default={}
	// +optional
	FlavorFungibility *FlavorFungibility `json:"flavorFungibility,omitempty"`

	// preemption sets when pending workloads may preempt admitted ones.
	// +kubebuilder:default={}
	// +optional
	Preemption *ClusterQueuePreemption `json:"preemption,omitempty"`

	// admissionChecksStrategy lists the AdmissionChecks workloads must pass,
	// optionally only for some flavors.
	// +optional
	AdmissionChecksStrategy *AdmissionChecksStrategy `json:"admissionChecksStrategy,omitempty"`

	// stopPolicy other than None makes the ClusterQueue inactive: Hold lets
	// admitted workloads finish, HoldAndDrain evicts them.
	// +kubebuilder:validation:Enum=None;Hold;HoldAndDrain
	// +kubebuilder:default="None"
	// +optional
	StopPolicy *StopPolicy `json:"stopPolicy,omitempty"`

	// fairSharing tunes this ClusterQueue's share when fair sharing is enabled.
	// +optional
	FairSharing *FairSharing `json:"fairSharing,omitempty"`

	// admissionScope selects admission fair sharing for this ClusterQueue.
	// +optional
	AdmissionScope *AdmissionScope `json:"admissionScope,omitempty"`

	// concurrentAdmissionPolicy lets a workload pursue several flavors at once
	// and migrate to a preferred one after admission (Kueue feature gate
	// ConcurrentAdmission). Its cross-field limits are enforced by the
	// manager's webhook, not here.
	// +optional
	ConcurrentAdmissionPolicy *ConcurrentAdmissionPolicy `json:"concurrentAdmissionPolicy,omitempty"`
}

// EffectiveCohort returns the cohort the ClusterQueue belongs to, reading cohortName first and the
// fleetq alias cohort second, so no caller has to know about the alias.
func (s *ClusterQueueSpec) EffectiveCohort() string {
	if s.CohortName != "" {
		return string(s.CohortName)
	}
	return string(s.Cohort)
}

// AdmissionChecksStrategy lists the AdmissionChecks a ClusterQueue requires.
type AdmissionChecksStrategy struct {
	// admissionChecks lists the checks and the flavors each applies to.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +required
	AdmissionChecks []AdmissionCheckStrategyRule `json:"admissionChecks,omitempty"`
}

// AdmissionCheckStrategyRule says which flavors one AdmissionCheck runs for.
type AdmissionCheckStrategyRule struct {
	// name of the AdmissionCheck.
	// +required
	Name AdmissionCheckReference `json:"name,omitempty"`

	// onFlavors limits the check to workloads assigned these flavors; empty
	// means every workload of the ClusterQueue.
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +optional
	OnFlavors []ResourceFlavorReference `json:"onFlavors,omitempty"`
}

// QueueingStrategy names how a ClusterQueue orders its pending workloads.
type QueueingStrategy string

const (
	// StrictFIFO orders by priority then creation time; a head that does not fit blocks the rest.
	StrictFIFO QueueingStrategy = "StrictFIFO"

	// BestEffortFIFO orders like StrictFIFO but lets workloads that fit pass a head that does not.
	BestEffortFIFO QueueingStrategy = "BestEffortFIFO"
)

// ConcurrentAdmissionPolicy configures Kueue's concurrent admission (workload variants per flavor).
type ConcurrentAdmissionPolicy struct {
	// migration constrains how an admitted workload moves to a preferred flavor.
	// +required
	Migration ConcurrentAdmissionMigration `json:"migration,omitzero"`
}

// ConcurrentAdmissionMigration constrains migration between flavors after admission.
type ConcurrentAdmissionMigration struct {
	// mode is TryPreferredFlavors (keep trying better flavors while running)
	// or RetainFirstAdmission (stay on the first flavor).
	// +required
	Mode ConcurrentAdmissionMigrationMode `json:"mode,omitempty"`

	// constraints limits the flavors a workload may migrate to.
	// +optional
	Constraints *ConcurrentAdmissionConstraints `json:"constraints,omitempty"`
}

// ConcurrentAdmissionConstraints bounds migration by flavor order.
type ConcurrentAdmissionConstraints struct {
	// lastAcceptableFlavorName is the least preferred flavor a workload may
	// migrate to, in ClusterQueue flavor order. Only with TryPreferredFlavors.
	// +optional
	LastAcceptableFlavorName *ResourceFlavorReference `json:"lastAcceptableFlavorName,omitempty"`
}

// ConcurrentAdmissionMigrationMode names a concurrent admission migration mode.
//
// +kubebuilder:validation:MaxLength=253
// +kubebuilder:validation:Enum=TryPreferredFlavors;RetainFirstAdmission
type ConcurrentAdmissionMigrationMode string

const (
	// ConcurrentAdmissionTryPreferredFlavors keeps trying more preferred flavors after admission.
	ConcurrentAdmissionTryPreferredFlavors ConcurrentAdmissionMigrationMode = "TryPreferredFlavors"

	// ConcurrentAdmissionRetainFirstAdmission keeps the first flavor a workload was admitted to.
	ConcurrentAdmissionRetainFirstAdmission ConcurrentAdmissionMigrationMode = "RetainFirstAdmission"
)

// ResourceGroup is a set of resources that are always assigned together from one flavor, with the
// flavors that can provide them in order of preference.
//
// +kubebuilder:validation:XValidation:rule="self.flavors.all(f, f.resources.map(r, r.name) == self.coveredResources)",fieldPath=".flavors",message="each flavor must list exactly the resources of coveredResources, in the same order; fix the flavor's resources or coveredResources"
type ResourceGroup struct {
	// coveredResources are the resources this group's flavors provide, e.g.
	// cpu, memory, example.com/gpu: 1 to 64 qualified resource names.
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:XValidation:rule="!format.qualifiedName().validate(self).hasValue()",message="must be a qualified resource name such as cpu, memory or example.com/gpu: an optional DNS-subdomain prefix and '/', then up to 63 alphanumerics, '-', '_' or '.'"
	// +required
	CoveredResources []corev1.ResourceName `json:"coveredResources,omitempty"`

	// flavors provide the quota of this group, most preferred first; each
	// lists every covered resource in the same order. 1 to 64 flavors.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +required
	Flavors []FlavorQuotas `json:"flavors,omitempty"`
}

// FlavorQuotas is the quota one flavor provides for each resource of its group.
type FlavorQuotas struct {
	// name of the ResourceFlavor; a missing flavor makes the ClusterQueue inactive.
	// +required
	Name ResourceFlavorReference `json:"name"`

	// resources holds the quota per covered resource, in coveredResources order.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +required
	Resources []ResourceQuota `json:"resources,omitempty"`
}

// ResourceQuota is the quota of one resource in one flavor.
//
// Quantities here are limited to 64 characters (Kueue sets no limit) so that the CEL rules comparing
// them stay within the API server's cost budget; real quantities are far shorter.
//
// +kubebuilder:validation:XValidation:rule="type(self.nominalQuota) == int ? self.nominalQuota >= 0 : !quantity(self.nominalQuota).isLessThan(quantity('0'))",fieldPath=".nominalQuota",message="must not be negative; set 0 or a positive quantity such as 4 or 4Gi"
// +kubebuilder:validation:XValidation:rule="!has(self.borrowingLimit) || (type(self.borrowingLimit) == int ? self.borrowingLimit >= 0 : !quantity(self.borrowingLimit).isLessThan(quantity('0')))",fieldPath=".borrowingLimit",message="must not be negative; set 0 to forbid borrowing, or remove it for no limit"
// +kubebuilder:validation:XValidation:rule="!has(self.lendingLimit) || (type(self.lendingLimit) == int ? self.lendingLimit >= 0 : !quantity(self.lendingLimit).isLessThan(quantity('0')))",fieldPath=".lendingLimit",message="must not be negative; set 0 to lend nothing, or remove it to lend all unused quota"
// +kubebuilder:validation:XValidation:rule="!has(self.lendingLimit) || (type(self.lendingLimit) == int ? quantity('0').add(self.lendingLimit) : quantity(self.lendingLimit)).compareTo(type(self.nominalQuota) == int ? quantity('0').add(self.nominalQuota) : quantity(self.nominalQuota)) <= 0",fieldPath=".lendingLimit",messageExpression="'must be less than or equal to nominalQuota (' + string(self.nominalQuota) + '); lower lendingLimit or raise nominalQuota'"
type ResourceQuota struct {
	// name of the resource; must match coveredResources at the same position.
	// +required
	Name corev1.ResourceName `json:"name,omitempty"`

	// nominalQuota is the amount of the resource this ClusterQueue guarantees
	// to its workloads; non-negative. In a cohort, it is also what the
	// ClusterQueue contributes to the shared pool.
	// +required
	NominalQuota resource.Quantity `json:"nominalQuota,omitempty"`

	// borrowingLimit caps how much above nominalQuota the ClusterQueue may
	// borrow from its cohort. Null means no cap. Only with a cohort.
	// +optional
	BorrowingLimit *resource.Quantity `json:"borrowingLimit,omitempty"`

	// lendingLimit caps how much of the unused nominalQuota other members of
	// the cohort may borrow; nominalQuota - lendingLimit stays reserved. Null
	// means all of it may be lent. At most nominalQuota. Only with a cohort.
	// +optional
	LendingLimit *resource.Quantity `json:"lendingLimit,omitempty"`
}

// ClusterQueueStatus is what the manager observes about a ClusterQueue.
type ClusterQueueStatus struct {
	// conditions hold the latest observations, such as Active. Up to 16.
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	// +kubebuilder:validation:MaxItems=16
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`

	// flavorsReservation is the quota reserved, per flavor, by workloads
	// holding a reservation in this ClusterQueue.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	// +optional
	FlavorsReservation []FlavorUsage `json:"flavorsReservation,omitempty"`

	// flavorsUsage is the quota used, per flavor, by admitted workloads.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	// +optional
	FlavorsUsage []FlavorUsage `json:"flavorsUsage,omitempty"`

	// pendingWorkloads counts workloads waiting for admission.
	// +optional
	PendingWorkloads int32 `json:"pendingWorkloads"`

	// reservingWorkloads counts workloads holding a quota reservation.
	// +optional
	ReservingWorkloads int32 `json:"reservingWorkloads"`

	// admittedWorkloads counts admitted workloads that have not finished.
	// +optional
	AdmittedWorkloads int32 `json:"admittedWorkloads"`

	// fairSharing is this ClusterQueue's current share under fair sharing.
	// +optional
	FairSharing *FairSharingStatus `json:"fairSharing,omitempty"`
}

// FlavorUsage is the usage of one flavor's resources.
type FlavorUsage struct {
	// name of the flavor.
	// +required
	Name ResourceFlavorReference `json:"name,omitempty"`

	// resources lists the usage per resource.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	// +required
	Resources []ResourceUsage `json:"resources,omitempty"`
}

// ResourceUsage is the usage of one resource in one flavor.
type ResourceUsage struct {
	// name of the resource.
	// +required
	Name corev1.ResourceName `json:"name,omitempty"`

	// total is the quantity in use, borrowed quota included.
	// +optional
	Total resource.Quantity `json:"total,omitempty"`

	// borrowed is the part of total above nominalQuota, taken from the cohort.
	// +optional
	Borrowed resource.Quantity `json:"borrowed,omitempty"`
}

// PreemptionPolicy names which workloads a pending workload may preempt.
type PreemptionPolicy string

const (
	// PreemptionPolicyNever forbids preemption.
	PreemptionPolicyNever PreemptionPolicy = "Never"
	// PreemptionPolicyAny allows preempting any candidate, whatever its priority.
	PreemptionPolicyAny PreemptionPolicy = "Any"
	// PreemptionPolicyLowerPriority allows preempting only lower-priority workloads.
	PreemptionPolicyLowerPriority PreemptionPolicy = "LowerPriority"
	// PreemptionPolicyLowerOrNewerEqualPriority also allows preempting newer equal-priority workloads.
	PreemptionPolicyLowerOrNewerEqualPriority PreemptionPolicy = "LowerOrNewerEqualPriority"
)

// FlavorFungibilityPolicy says whether flavor search stops at the current flavor.
type FlavorFungibilityPolicy string

const (
	// MayStopSearch stops at the current flavor when the workload fits there, even by borrowing or preempting.
	MayStopSearch FlavorFungibilityPolicy = "MayStopSearch"
	// TryNextFlavor moves to the next flavor before borrowing or preempting in the current one.
	TryNextFlavor FlavorFungibilityPolicy = "TryNextFlavor"
)

// FlavorFungibilityPreference picks between borrowing and preemption when every flavor needs one.
type FlavorFungibilityPreference string

const (
	// BorrowingOverPreemption prefers a flavor where the workload borrows.
	BorrowingOverPreemption FlavorFungibilityPreference = "BorrowingOverPreemption"
	// PreemptionOverBorrowing prefers a flavor where the workload preempts.
	PreemptionOverBorrowing FlavorFungibilityPreference = "PreemptionOverBorrowing"
)

// FlavorFungibility says whether a workload tries the next flavor before borrowing or preempting.
//
// +kubebuilder:validation:XValidation:rule="!has(self.preference) || (self.whenCanBorrow == 'TryNextFlavor' && self.whenCanPreempt == 'TryNextFlavor')",fieldPath=".preference",message="may only be set when both whenCanBorrow and whenCanPreempt are TryNextFlavor; set both to TryNextFlavor or remove preference"
type FlavorFungibility struct {
	// whenCanBorrow: MayStopSearch (default) keeps a flavor where the workload
	// fits by borrowing; TryNextFlavor tries the next flavor first.
	// +kubebuilder:validation:Enum={MayStopSearch,TryNextFlavor}
	// +kubebuilder:default="MayStopSearch"
	// +optional
	WhenCanBorrow FlavorFungibilityPolicy `json:"whenCanBorrow,omitempty"`

	// whenCanPreempt: TryNextFlavor (default) tries the next flavor before
	// preempting; MayStopSearch keeps a flavor where the workload fits by
	// preempting.
	// +kubebuilder:validation:Enum={MayStopSearch,TryNextFlavor}
	// +kubebuilder:default="TryNextFlavor"
	// +optional
	WhenCanPreempt FlavorFungibilityPolicy `json:"whenCanPreempt,omitempty"`

	// preference picks between borrowing (BorrowingOverPreemption, default)
	// and preemption (PreemptionOverBorrowing) when every flavor needs one.
	// Only when both policies are TryNextFlavor.
	// +kubebuilder:validation:Enum={BorrowingOverPreemption,PreemptionOverBorrowing}
	// +optional
	Preference *FlavorFungibilityPreference `json:"preference,omitempty"`
}

// ClusterQueuePreemption sets when a pending workload may preempt admitted ones: inside its own
// ClusterQueue, to reclaim its nominal quota from the cohort, or while borrowing.
//
// +kubebuilder:validation:XValidation:rule="!((has(self.reclaimWithinCohort) ? self.reclaimWithinCohort : 'Never') == 'Never' && has(self.borrowWithinCohort) && has(self.borrowWithinCohort.policy) && self.borrowWithinCohort.policy != 'Never')",fieldPath=".borrowWithinCohort.policy",message="must be Never when reclaimWithinCohort is Never; set reclaimWithinCohort to LowerPriority or Any, or set borrowWithinCohort.policy to Never"
type ClusterQueuePreemption struct {
	// reclaimWithinCohort: Never (default), LowerPriority or Any. Lets a
	// workload that fits in its nominal quota preempt cohort members that
	// borrow it.
	// +kubebuilder:default=Never
	// +kubebuilder:validation:Enum=Never;LowerPriority;Any
	// +optional
	ReclaimWithinCohort PreemptionPolicy `json:"reclaimWithinCohort,omitempty"`

	// borrowWithinCohort lets a workload that needs to borrow preempt
	// lower-priority workloads in the cohort (classical preemption only).
	// +kubebuilder:default={}
	// +optional
	BorrowWithinCohort *BorrowWithinCohort `json:"borrowWithinCohort,omitempty"`

	// withinClusterQueue: Never (default), LowerPriority or
	// LowerOrNewerEqualPriority. Lets a workload that does not fit preempt
	// workloads of its own ClusterQueue.
	// +kubebuilder:default=Never
	// +kubebuilder:validation:Enum=Never;LowerPriority;LowerOrNewerEqualPriority
	// +optional
	WithinClusterQueue PreemptionPolicy `json:"withinClusterQueue,omitempty"`
}

// BorrowWithinCohortPolicy names whether a borrowing workload may preempt in the cohort.
type BorrowWithinCohortPolicy string

const (
	// BorrowWithinCohortPolicyNever forbids preemption while borrowing.
	BorrowWithinCohortPolicyNever BorrowWithinCohortPolicy = "Never"
	// BorrowWithinCohortPolicyLowerPriority allows preempting lower-priority workloads while borrowing.
	BorrowWithinCohortPolicyLowerPriority BorrowWithinCohortPolicy = "LowerPriority"
)

// BorrowWithinCohort configures preemption in the cohort by a workload that borrows.
type BorrowWithinCohort struct {
	// policy: Never (default) or LowerPriority.
	// +kubebuilder:default=Never
	// +kubebuilder:validation:Enum=Never;LowerPriority
	// +optional
	Policy BorrowWithinCohortPolicy `json:"policy,omitempty"`

	// maxPriorityThreshold limits preemption to workloads with priority at
	// or below it; unset means any workload the policy allows.
	// +optional
	MaxPriorityThreshold *int32 `json:"maxPriorityThreshold,omitempty"`
}

// ClusterQueue is a cluster-scoped pool of quota that LocalQueues submit workloads to.
//
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:resource:scope=Cluster,shortName={cq},categories={kueue}
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Cohort",JSONPath=".spec['cohortName','cohort']",type=string,description="Cohort the ClusterQueue borrows in (cohortName, or its alias cohort)"
// +kubebuilder:printcolumn:name="Strategy",JSONPath=".spec.queueingStrategy",type=string,description="Queueing strategy"
// +kubebuilder:printcolumn:name="Pending Workloads",JSONPath=".status.pendingWorkloads",type=integer,description="Workloads waiting for admission"
// +kubebuilder:printcolumn:name="Admitted Workloads",JSONPath=".status.admittedWorkloads",type=integer,description="Admitted workloads that have not finished"
// +kubebuilder:printcolumn:name="Age",JSONPath=".metadata.creationTimestamp",type=date
type ClusterQueue struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the object's metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the quota and policy of the ClusterQueue.
	// +optional
	Spec ClusterQueueSpec `json:"spec,omitempty"`

	// status is what the manager observes about the ClusterQueue.
	// +optional
	Status ClusterQueueStatus `json:"status,omitempty"`
}

// ClusterQueueList is a list of ClusterQueues, as returned by list calls.
//
// +kubebuilder:object:root=true
type ClusterQueueList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterQueue `json:"items"`
}

func init() {
	SchemeBuilder.Register(&ClusterQueue{}, &ClusterQueueList{})
}
