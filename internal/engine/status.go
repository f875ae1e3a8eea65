package engine

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
)

// ResourceUsage is one line of flavorsUsage: what is held and how much of it is borrowed.
type ResourceUsage struct {
	Name     corev1.ResourceName
	Total    int64
	Borrowed int64
}

// FlavorUsage groups ResourceUsage by flavor, as Kueue's status does.
type FlavorUsage struct {
	Name      string
	Resources []ResourceUsage
}

// ClusterQueueStatus is what the status controller writes for a queue, computed here so that
// accounting lives in one place.
type ClusterQueueStatus struct {
	Name           string
	Active         bool
	InactiveReason InactiveReason
	Message        string
	// Usage follows the order of the queue's resource groups.
	Usage             []FlavorUsage
	AdmittedWorkloads int
	// WeightedShare is the dominant resource share ×1000 divided by the weight (Kueue's
	// fairSharing.weightedShare); math.MaxInt64 stands for infinite.
	WeightedShare int64
}

// CohortStatus reports a cohort's whole subtree: Total sums every queue below it, Borrowed is
// what the subtree takes from the cohort's parent beyond its own quota.
type CohortStatus struct {
	Name          string
	Usage         []FlavorUsage
	WeightedShare int64
}

// ClusterQueueStatus reads out a queue's status; ok is false for an unknown queue.
func (s *Snapshot) ClusterQueueStatus(name string) (ClusterQueueStatus, bool) {
	cq, ok := s.cqs[name]
	if !ok {
		return ClusterQueueStatus{}, false
	}
	acc := accounting{s: s, usage: s.usage}
	st := ClusterQueueStatus{
		Name:              name,
		Active:            cq.inactive == "",
		InactiveReason:    cq.inactive,
		Message:           cq.message,
		AdmittedWorkloads: len(cq.admitted),
		WeightedShare:     weightedShare(acc.share(cq.node)),
	}
	for _, g := range cq.groups {
		for _, f := range g.flavors {
			fu := FlavorUsage{Name: f.name}
			for i, r := range g.resources {
				fr := f.fr[i]
				total := acc.at(cq.node, fr)
				fu.Resources = append(fu.Resources, ResourceUsage{Name: r, Total: total, Borrowed: max(0, total-cq.node.quota[fr])})
			}
			st.Usage = append(st.Usage, fu)
		}
	}
	return st, true
}

// CohortStatus reads out a cohort's subtree usage; ok is false for an unknown (or cyclic) cohort.
func (s *Snapshot) CohortStatus(name string) (CohortStatus, bool) {
	c, ok := s.cohorts[name]
	if !ok {
		return CohortStatus{}, false
	}
	acc := accounting{s: s, usage: s.usage}
	totals := make([]int64, len(s.frs))
	var walk func(n *node)
	walk = func(n *node) {
		if n.cq != nil {
			for fr := range s.frs {
				totals[fr] += acc.at(n, fr)
			}
		}
		for _, ch := range n.children {
			walk(ch)
		}
	}
	walk(c)
	st := CohortStatus{Name: name, WeightedShare: weightedShare(acc.share(c))}
	byFlavor := map[string]*FlavorUsage{}
	var names []string
	for fr, key := range s.frs {
		if c.quota[fr] == 0 && totals[fr] == 0 {
			continue
		}
		fu, ok := byFlavor[key.flavor]
		if !ok {
			fu = &FlavorUsage{Name: key.flavor}
			byFlavor[key.flavor] = fu
			names = append(names, key.flavor)
		}
		fu.Resources = append(fu.Resources, ResourceUsage{Name: key.resource, Total: totals[fr], Borrowed: max(0, acc.at(c, fr)-c.quota[fr])})
	}
	sort.Strings(names)
	for _, n := range names {
		st.Usage = append(st.Usage, *byFlavor[n])
	}
	return st, true
}

// LimitViolations lists every place where usage exceeds what the tree allows. Admission never
// causes one; a quota lowered under admitted work does, and the status controller can say so.
func (s *Snapshot) LimitViolations() []string {
	acc := accounting{s: s, usage: s.usage}
	return acc.violations()
}

func (a *accounting) violations() []string {
	var out []string
	for _, n := range a.s.nodes {
		for fr, key := range a.s.frs {
			u := a.at(n, fr)
			kind := "cohort"
			if n.cq != nil {
				kind = "clusterqueue"
			}
			if n.parent == nil && u > n.quota[fr] {
				out = append(out, fmt.Sprintf("%s %q: %s in flavor %s: usage %s exceeds quota %s", kind, n.name, key.resource, key.flavor,
					FormatAmount(key.resource, u), FormatAmount(key.resource, n.quota[fr])))
			}
			if bl := n.borrowLimit[fr]; n.parent != nil && bl >= 0 && u > n.quota[fr]+bl {
				out = append(out, fmt.Sprintf("%s %q: %s in flavor %s: usage %s exceeds quota %s plus borrowingLimit %s", kind, n.name, key.resource, key.flavor,
					FormatAmount(key.resource, u), FormatAmount(key.resource, n.quota[fr]), FormatAmount(key.resource, bl)))
			}
		}
	}
	return out
}
