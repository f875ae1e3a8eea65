package engine

// DecisionKind says what the manager (or agent) must do with a workload.
type DecisionKind string

const (
	// Admit: reserve quota with the given admission.
	Admit DecisionKind = "Admit"
	// Preempt: evict the victims; the preemptor stays queued and is admitted once they are gone.
	Preempt DecisionKind = "Preempt"
	// Pending: leave the workload queued and show the reason.
	Pending DecisionKind = "Pending"
)

// PendingReason classifies why a workload is not admitted; Message has the numbers.
type PendingReason string

const (
	// InsufficientQuota: no flavor has room, even with the preemption the policies allow.
	InsufficientQuota PendingReason = "InsufficientQuota"
	// ResourceNotCovered: the workload requests a resource its ClusterQueue does not cover.
	ResourceNotCovered PendingReason = "ResourceNotCovered"
	// RequestTooLarge: a pod set's count × per-pod request is beyond any quota (it would
	// overflow the engine's arithmetic), so the workload can never be admitted as it is.
	RequestTooLarge PendingReason = "RequestTooLarge"
	// NoCompatibleFlavor: no flavor's node labels and taints suit the pods.
	NoCompatibleFlavor PendingReason = "NoCompatibleFlavor"
	// ClusterQueueInactive: the queue is stopped or misconfigured (see its status).
	ClusterQueueInactive PendingReason = "ClusterQueueInactive"
	// ClusterQueueNotFound: the workload names a queue the snapshot does not have.
	ClusterQueueNotFound PendingReason = "ClusterQueueNotFound"
	// WaitingForEvictions: evictions already under way will free enough quota; nothing more
	// is preempted meanwhile.
	WaitingForEvictions PendingReason = "WaitingForEvictions"
	// NoPlacement: quota fits but Options.Place found nowhere to run the workload.
	NoPlacement PendingReason = "NoPlacement"
)

// PreemptionReason is why a victim is preempted; the values are Kueue's condition reasons.
type PreemptionReason string

const (
	// InClusterQueue: a higher-priority workload of the same queue needs the quota.
	InClusterQueue PreemptionReason = "InClusterQueue"
	// InCohortReclamation: another queue reclaims nominal quota this borrower holds.
	InCohortReclamation PreemptionReason = "InCohortReclamation"
	// InCohortReclaimWhileBorrowing: a higher-priority borrower preempts under borrowWithinCohort.
	InCohortReclaimWhileBorrowing PreemptionReason = "InCohortReclaimWhileBorrowing"
	// InCohortFairSharing: the victim's queue has a larger share than the preemptor's.
	InCohortFairSharing PreemptionReason = "InCohortFairSharing"
)

// Victim is one workload to evict and why.
type Victim struct {
	Key          string
	ClusterQueue string
	Reason       PreemptionReason
	Message      string
}

// Decision is the cycle's verdict on one workload it examined. Workloads a cycle did not reach
// (behind a blocked StrictFIFO head) get none and stay queued.
type Decision struct {
	Kind         DecisionKind
	Workload     string
	ClusterQueue string
	// Admission is the assignment to apply (Admit), or the one the workload is expected to get
	// once victims or evictions under way are gone (Preempt, Pending WaitingForEvictions).
	Admission *Admission
	// Borrows is true when the admission takes the queue above its nominal quota.
	Borrows bool
	Victims []Victim
	Reason  PendingReason
	Message string
	// Parked is true when the workload left the active queue until a requeue trigger fires.
	Parked bool
}
