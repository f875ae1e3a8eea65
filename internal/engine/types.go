package engine

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// ResourceFlavor is one kind of hardware: the node labels and taints its nodes carry, and the
// tolerations Kueue injects into pods admitted on it.
type ResourceFlavor struct {
	Name        string
	NodeLabels  map[string]string
	NodeTaints  []corev1.Taint
	Tolerations []corev1.Toleration
}

// QueueingStrategy says whether a ClusterQueue may admit later workloads ahead of a head that
// does not fit; values match Kueue's so the adapter is a cast.
type QueueingStrategy string

const (
	// StrictFIFO blocks the queue behind its head.
	StrictFIFO QueueingStrategy = "StrictFIFO"
	// BestEffortFIFO lets later workloads that fit go ahead and parks the head (the default).
	BestEffortFIFO QueueingStrategy = "BestEffortFIFO"
)

// PreemptionPolicy is Kueue's policy enum for withinClusterQueue and reclaimWithinCohort.
type PreemptionPolicy string

const (
	// PreemptNever disables the kind of preemption it is set on (the default).
	PreemptNever PreemptionPolicy = "Never"
	// PreemptLowerPriority allows preempting workloads of strictly lower priority.
	PreemptLowerPriority PreemptionPolicy = "LowerPriority"
	// PreemptLowerOrNewerEqualPriority also allows equal-priority workloads queued after the preemptor.
	PreemptLowerOrNewerEqualPriority PreemptionPolicy = "LowerOrNewerEqualPriority"
	// PreemptAny allows reclaiming from borrowers of any priority (reclaimWithinCohort only).
	PreemptAny PreemptionPolicy = "Any"
)

// BorrowWithinCohortPolicy says whether a workload that must borrow may preempt in other queues.
type BorrowWithinCohortPolicy string

const (
	// BorrowWithinCohortNever forbids preempting in other queues while borrowing (the default).
	BorrowWithinCohortNever BorrowWithinCohortPolicy = "Never"
	// BorrowWithinCohortLowerPriority allows it against lower-priority borrowers.
	BorrowWithinCohortLowerPriority BorrowWithinCohortPolicy = "LowerPriority"
)

// FungibilityPolicy says whether flavor search stops at a flavor that needs borrowing or preemption.
type FungibilityPolicy string

const (
	// MayStopSearch takes the first flavor that works, even if it borrows or preempts.
	MayStopSearch FungibilityPolicy = "MayStopSearch"
	// TryNextFlavor keeps looking for a flavor that fits outright before settling.
	TryNextFlavor FungibilityPolicy = "TryNextFlavor"
)

// ResourceQuota is the quota of one resource in one flavor. Limits are nil when unset.
type ResourceQuota struct {
	Name           corev1.ResourceName
	Nominal        int64
	BorrowingLimit *int64
	LendingLimit   *int64
}

// FlavorQuotas lists the quotas a queue or cohort holds in one flavor.
type FlavorQuotas struct {
	Name      string
	Resources []ResourceQuota
}

// ResourceGroup is a set of resources that must all be assigned the same flavor, with the flavors
// in the order they are tried.
type ResourceGroup struct {
	CoveredResources []corev1.ResourceName
	Flavors          []FlavorQuotas
}

// BorrowWithinCohort configures preemption in other queues while the preemptor borrows.
type BorrowWithinCohort struct {
	Policy BorrowWithinCohortPolicy
	// MaxPriorityThreshold, when set, protects workloads above this priority.
	MaxPriorityThreshold *int32
}

// Preemption is a ClusterQueue's preemption configuration.
type Preemption struct {
	WithinClusterQueue  PreemptionPolicy
	ReclaimWithinCohort PreemptionPolicy
	BorrowWithinCohort  BorrowWithinCohort
}

// FlavorFungibility decides whether to prefer the next flavor over borrowing or preempting.
// Empty fields take Kueue's defaults: WhenCanBorrow MayStopSearch, WhenCanPreempt TryNextFlavor.
type FlavorFungibility struct {
	WhenCanBorrow  FungibilityPolicy
	WhenCanPreempt FungibilityPolicy
}

// FairSharing carries the weight of a queue or cohort in dominant-resource-share ordering.
type FairSharing struct {
	// Weight divides the share; 0 makes the share infinite (always preempted first).
	Weight float64
}

// ClusterQueue is the quota holder workloads are admitted against.
type ClusterQueue struct {
	Name              string
	Cohort            string
	ResourceGroups    []ResourceGroup
	QueueingStrategy  QueueingStrategy
	Preemption        Preemption
	FlavorFungibility FlavorFungibility
	// FairSharing is nil for the default weight 1.
	FairSharing *FairSharing
	// Stopped is stopPolicy Hold or HoldAndDrain: the queue admits nothing new (the manager evicts
	// what a draining one admitted).
	Stopped bool
}

// Cohort is a node of the cohort tree; its own quota is a pool shared by its subtree.
type Cohort struct {
	Name           string
	Parent         string
	ResourceGroups []ResourceGroup
	FairSharing    *FairSharing
}

// PodSet is a group of identical pods of a workload; Requests are per pod, in canonical units.
type PodSet struct {
	Name                 string
	Count                int32
	Requests             map[corev1.ResourceName]int64
	NodeSelector         map[string]string
	RequiredNodeAffinity *corev1.NodeSelector
	Tolerations          []corev1.Toleration
}

// PodSetAssignment is the flavor chosen for each resource of a pod set and the usage it takes
// (count × per-pod request).
type PodSetAssignment struct {
	Name    string
	Count   int32
	Flavors map[corev1.ResourceName]string
	Usage   map[corev1.ResourceName]int64
}

// FlavorNames lists the flavors the pod set holds quota in, sorted, each once.
func (p *PodSetAssignment) FlavorNames() []string {
	var out []string
	for _, f := range p.Flavors {
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	slices.Sort(out)
	return out
}

// Admission is where a workload's quota is held.
type Admission struct {
	ClusterQueue string
	PodSets      []PodSetAssignment
}

// FlavorNames lists the flavors of every pod set, sorted, each once.
func (a *Admission) FlavorNames() []string {
	var out []string
	for i := range a.PodSets {
		out = append(out, a.PodSets[i].FlavorNames()...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Workload is the unit of admission. Pending workloads have a nil Admission.
type Workload struct {
	// Key is namespace/name, unique; it is the final tie-break in every ordering.
	Key          string
	ClusterQueue string
	Priority     int32
	// Timestamp orders the queue: creation time, or the last eviction or requeue time.
	Timestamp int64
	PodSets   []PodSet

	Admission *Admission
	// AdmittedAt orders preemption candidates: the most recently admitted go first.
	AdmittedAt int64
	// Evicting marks an admitted workload whose eviction is under way: its quota still counts,
	// it is never chosen as a victim again, and its release counts toward a preemptor's fit.
	Evicting bool
}
