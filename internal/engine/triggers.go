package engine

import "sort"

// EventKind names a change that can make parked workloads admissible.
type EventKind string

const (
	// QuotaFreed: an admitted workload of ClusterQueue Name finished, was deleted, or finished
	// its eviction. Anything in the same cohort tree may now fit.
	QuotaFreed EventKind = "QuotaFreed"
	// ClusterQueueChanged: ClusterQueue Name was created, edited or deleted.
	ClusterQueueChanged EventKind = "ClusterQueueChanged"
	// CohortChanged: Cohort Name was created, edited or deleted.
	CohortChanged EventKind = "CohortChanged"
	// FlavorChanged: ResourceFlavor Name was created, edited or deleted.
	FlavorChanged EventKind = "FlavorChanged"
)

// Event is a requeue trigger.
type Event struct {
	Kind EventKind
	Name string
}

// AffectedQueues names the ClusterQueues whose parked workloads an event can unblock, sorted, so
// the manager wakes exactly those (queue.Manager.Wake). For a change that moves a queue or cohort
// between trees, ask both the snapshot before and the one after the change.
func (s *Snapshot) AffectedQueues(ev Event) []string {
	set := map[string]bool{}
	switch ev.Kind {
	case QuotaFreed, ClusterQueueChanged:
		set[ev.Name] = true
		if cq, ok := s.cqs[ev.Name]; ok {
			for _, other := range s.trees[cq.node.path[0].id] {
				set[other.spec.Name] = true
			}
		}
	case CohortChanged:
		if c, ok := s.cohorts[ev.Name]; ok {
			for _, other := range s.trees[c.path[0].id] {
				set[other.spec.Name] = true
			}
		}
		// Queues of a cohort in a cycle are outside every tree; they name it directly.
		for _, name := range s.cqNames {
			if s.cqs[name].spec.Cohort == ev.Name {
				set[name] = true
			}
		}
	case FlavorChanged:
		for _, name := range s.cqNames {
			for _, g := range s.cqs[name].spec.ResourceGroups {
				for _, f := range g.Flavors {
					if f.Name == ev.Name {
						set[name] = true
					}
				}
			}
		}
	}
	out := make([]string, 0, len(set))
	for name := range set {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}
