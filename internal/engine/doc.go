// Package engine is fleetq's admission engine: a pure, deterministic function from a snapshot
// (flavors, ClusterQueues, the cohort tree, admitted usage) and the pending queues to decisions
// (admit, preempt, stay pending) with reasons a person can act on. It reads no clock, calls no
// API, starts no goroutine and logs nothing; the manager drives it for quota across all worker
// clusters and the worker agent drives it for local admission against what its cluster has.
//
// One admission cycle (Run), followed for a single workload:
//
//  1. Get heads. For every ClusterQueue with pending work, pop its head (queue order: priority,
//     then timestamp, then key). Heads of inactive or unknown queues are parked with the reason.
//  2. Nominate flavors. For each pod set and resource group, try the queue's flavors in order,
//     skipping flavors whose node labels or taints the pods cannot accept; a flavor fits when
//     every resource fits what the queue can still use (its unused guaranteed quota plus what
//     the cohort tree lends, within borrowingLimit); flavor fungibility decides whether a flavor
//     that borrows or needs preemption ends the search. A head that cannot fit even with the
//     preemption its policies allow is decided at once: BestEffortFIFO parks it and pulls the
//     next workload of the queue; StrictFIFO keeps it and blocks the queue for this cycle.
//  3. Order. Heads of all queues wait in one heap: those that fit without borrowing first (or,
//     with fair sharing, lower dominant resource share first), then priority, timestamp, key.
//  4. Admit with exact re-accounting, or preempt. The best head is taken; if usage in its cohort
//     tree changed since it was nominated, it is nominated again and, if it got worse, goes back
//     into the heap. A head that fits is admitted and its usage charged up the tree at once, so
//     the next head of the same queue or cohort sees it: many workloads per queue and per cohort
//     are admitted in one cycle without ever exceeding a limit. A head that needs preemption gets
//     a minimal victim set (see preemption.go) or, when evictions under way already suffice, waits
//     for them; either way its usage is reserved for the rest of the cycle.
//  5. Requeue or park the rest. Preemptors and blocked StrictFIFO heads go back to their queues;
//     parked workloads stay aside until an Event names their queue (Snapshot.AffectedQueues).
//
// Driving it (manager and worker agent alike; one goroutine owns the snapshot and the queues):
//
//   - Flavor, ClusterQueue or Cohort added, changed or deleted: rebuild with NewSnapshot from the
//     informer caches (all admitted workloads included), then wake the queues AffectedQueues
//     names for the matching Event, asked of the old and of the new snapshot.
//   - Pending workload added or changed: queue.Manager.Add. Deleted, or admitted by someone
//     else: queue.Manager.Delete.
//   - Quota reserved (the manager's own Admit applied, or observed): Snapshot.AddAdmitted.
//     Eviction started: Snapshot.SetEvicting. Workload finished, deleted, or gone after its
//     eviction: Snapshot.Remove, then wake AffectedQueues(Event{QuotaFreed, its queue}).
//   - Then run a cycle (Run) and apply its decisions: Admit writes the admission (and, once it
//     lands, AddAdmitted; if the write fails, queue the workload again); Preempt evicts each
//     victim with its reason and message; Pending writes the message to the workload's status.
//   - With Options.Place (dispatch asks whether some worker has room), a workload refused in
//     its flavors is tried in the queue's other flavors that fit quota outright; one refused in
//     all of them is parked with NoPlacement: wake their queues when a capacity report changes. With
//     Options.PlaceAfter, a preemption is made only when the preemptor would have room once
//     its victims are gone; otherwise it waits with NoPlacement the same way.
//
// The worker agent builds its snapshot from what its cluster has: one ClusterQueue per flavor
// whose nominal quota is the flavor's allocatable capacity, and nodefit to check that the pods of
// an admitted workload really fit on the nodes at once.
//
// The snapshot is maintained incrementally (AddAdmitted, Remove, SetEvicting) and rebuilt with
// NewSnapshot when flavors, queues or cohorts change; Run works on a private copy of its usage.
package engine
