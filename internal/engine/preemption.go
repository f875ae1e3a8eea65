package engine

import (
	"fmt"
	"math"
	"sort"
)

// Preemption: finding the smallest set of admitted workloads whose eviction lets a preemptor fit.
//
// Candidates are the non-evicting workloads of the preemptor's cohort tree that hold some of the
// flavor-resources it needs and that the policies expose: in its own queue per withinClusterQueue,
// in other queues per reclaimWithinCohort (and borrowWithinCohort while borrowing), and in other
// queues only while that queue still borrows. Workloads already being evicted are counted as gone
// first: if that is enough, the preemptor waits instead of preempting more.
//
// Victims are taken greedily in candidate order (other queues first, then lowest priority, then
// most recently admitted) until the preemptor fits; then, walking back, every victim whose
// return still leaves the preemptor fitting is spared. Usage only grows as workloads return, so
// each remaining victim is necessary: the set is minimal.

// preemptionPossible is the cheap gate used during flavor assignment.
func (c *cycle) preemptionPossible(w *Workload, cq *clusterQueue, amounts []frAmount) bool {
	if !c.preemptionEnabled(cq) && !c.hasEvicting(cq) {
		return false
	}
	_, _, ok := c.findVictims(w, cq, amounts, true)
	return ok
}

func (c *cycle) preemptionEnabled(cq *clusterQueue) bool {
	p := cq.spec.Preemption
	return enabled(p.WithinClusterQueue) || (enabled(p.ReclaimWithinCohort) && cq.node.parent != nil)
}

func enabled(p PreemptionPolicy) bool { return p != "" && p != PreemptNever }

func (c *cycle) hasEvicting(cq *clusterQueue) bool {
	return len(c.evictingIn[cq.node.path[0].id]) > 0
}

// victimSet is the working list of one search attempt.
type victimSet struct {
	list    []*admittedWorkload
	reasons []PreemptionReason
}

// findVictims returns the victims that make w fit in cq, or waitFor > 0 when evictions under way
// already suffice. ok is false when nothing the policies allow makes it fit. The cycle's
// accounting is left as it was found.
func (c *cycle) findVictims(w *Workload, cq *clusterQueue, amounts []frAmount, probe bool) (victims []Victim, waitFor int, ok bool) {
	root := cq.node.path[0].id
	var released []*admittedWorkload
	for _, a := range c.evictingIn[root] {
		if usesAny(a, amounts) {
			released = append(released, a)
			c.acc.addAll(a.cq.node, a.usage, -1)
		}
	}
	defer func() {
		for _, a := range released {
			c.acc.addAll(a.cq.node, a.usage, 1)
		}
	}()
	if c.acc.fits(cq.node, amounts, false) {
		return nil, len(released), true
	}
	own, others := c.candidates(w, cq, amounts)
	if !c.couldFree(cq, amounts, own, others) {
		return nil, 0, false
	}
	var set *victimSet
	if c.opts.FairSharing != nil {
		set = c.fairSearch(w, cq, amounts, own, others)
	} else {
		set = c.classicSearch(w, cq, amounts, own, others)
	}
	if set == nil {
		return nil, 0, false
	}
	if probe {
		return nil, 0, true
	}
	for i, a := range set.list {
		victims = append(victims, Victim{Key: a.wl.Key, ClusterQueue: a.cq.spec.Name, Reason: set.reasons[i],
			Message: victimMessage(set.reasons[i], w, cq, a)})
	}
	return victims, 0, true
}

// couldFree is a cheap necessary condition: removing usage u anywhere in the tree raises what a
// queue can use by at most u, so the candidates together must hold at least the shortfall of
// every flavor-resource, or no victim set exists.
func (c *cycle) couldFree(cq *clusterQueue, amounts []frAmount, own, others []*admittedWorkload) bool {
	for _, u := range amounts {
		need := u.amt - c.acc.available(cq.node, u.fr)
		if need <= 0 {
			continue
		}
		for _, list := range [][]*admittedWorkload{own, others} {
			for _, a := range list {
				need -= amountOf(a.usage, u.fr)
				if need <= 0 {
					break
				}
			}
			if need <= 0 {
				break
			}
		}
		if need > 0 {
			return false
		}
	}
	return true
}

func usesAny(a *admittedWorkload, amounts []frAmount) bool {
	for _, u := range a.usage {
		for _, v := range amounts {
			if u.fr == v.fr {
				return true
			}
		}
	}
	return false
}

// candidates lists what the policies let w preempt, each list in preemption order. The lists
// are scratch buffers of the cycle, valid until the next call.
func (c *cycle) candidates(w *Workload, cq *clusterQueue, amounts []frAmount) (own, others []*admittedWorkload) {
	within := cq.spec.Preemption.WithinClusterQueue
	reclaim := cq.spec.Preemption.ReclaimWithinCohort
	if !enabled(within) && !enabled(reclaim) {
		return nil, nil
	}
	// Candidates come lowest priority first, so the scan stops above the highest priority any
	// policy could expose.
	limit := w.Priority - 1
	if within == PreemptLowerOrNewerEqualPriority {
		limit = w.Priority
	}
	anyPriority := reclaim == PreemptAny && cq.node.parent != nil
	own, others = c.ownBuf[:0], c.othersBuf[:0]
	for _, a := range c.treeAdmitted(cq.node.path[0].id) {
		if a.wl.Priority > limit && !anyPriority {
			break
		}
		if !usesAny(a, amounts) {
			continue
		}
		if a.cq == cq {
			if allowedWithin(within, w, &a.wl) {
				own = append(own, a)
			}
		} else if enabled(reclaim) && (reclaim == PreemptAny || a.wl.Priority < w.Priority) {
			others = append(others, a)
		}
	}
	c.ownBuf, c.othersBuf = own, others
	return own, others
}

// treeAdmitted lists a tree's admitted workloads that are not being evicted, in candidate order.
// It is sorted once per cycle: the cycle admits nothing into the snapshot, and the victims it
// picks leave the list (forget).
func (c *cycle) treeAdmitted(root int) []*admittedWorkload {
	if list, ok := c.sortedAdmitted[root]; ok {
		return list
	}
	var list []*admittedWorkload
	for _, q := range c.s.trees[root] {
		for _, a := range q.admitted {
			if !a.evicting {
				list = append(list, a)
			}
		}
	}
	sort.Slice(list, func(i, j int) bool { return candidateBefore(list[i], list[j]) })
	c.sortedAdmitted[root] = list
	return list
}

// forget drops a workload the cycle chose as a victim from its tree's candidate list.
func (c *cycle) forget(a *admittedWorkload) {
	root := a.cq.node.path[0].id
	list, ok := c.sortedAdmitted[root]
	if !ok {
		return
	}
	for i, x := range list {
		if x == a {
			c.sortedAdmitted[root] = append(list[:i:i], list[i+1:]...)
			return
		}
	}
}

func allowedWithin(p PreemptionPolicy, w, v *Workload) bool {
	switch p {
	case PreemptLowerPriority:
		return v.Priority < w.Priority
	case PreemptLowerOrNewerEqualPriority:
		return v.Priority < w.Priority || v.Priority == w.Priority && workloadBefore(w, v)
	}
	return false
}

// candidateBefore: lowest priority first, then most recently admitted, then key.
func candidateBefore(a, b *admittedWorkload) bool {
	if a.wl.Priority != b.wl.Priority {
		return a.wl.Priority < b.wl.Priority
	}
	if a.wl.AdmittedAt != b.wl.AdmittedAt {
		return a.wl.AdmittedAt > b.wl.AdmittedAt
	}
	return a.wl.Key < b.wl.Key
}

// classicSearch tries, in order: reclaiming so the preemptor ends within its nominal quota;
// borrowWithinCohort against lower-priority borrowers; preempting only in its own queue.
func (c *cycle) classicSearch(w *Workload, cq *clusterQueue, amounts []frAmount, own, others []*admittedWorkload) *victimSet {
	p := cq.spec.Preemption
	if len(own)+len(others) > 0 {
		cands := append(append([]*admittedWorkload(nil), others...), own...)
		if set := c.minimalSet(cq, amounts, cands, true, InCohortReclamation); set != nil {
			return set
		}
	}
	if p.BorrowWithinCohort.Policy == BorrowWithinCohortLowerPriority && len(others) > 0 {
		var cands []*admittedWorkload
		for _, a := range others {
			if a.wl.Priority < w.Priority && (p.BorrowWithinCohort.MaxPriorityThreshold == nil || a.wl.Priority <= *p.BorrowWithinCohort.MaxPriorityThreshold) {
				cands = append(cands, a)
			}
		}
		cands = append(cands, own...)
		if set := c.minimalSet(cq, amounts, cands, false, InCohortReclaimWhileBorrowing); set != nil {
			return set
		}
	}
	if len(own) > 0 {
		return c.minimalSet(cq, amounts, own, false, "")
	}
	return nil
}

// minimalSet removes candidates in order until the preemptor fits, then spares every victim it
// can. Candidates of other queues are skipped once that queue no longer borrows what is needed.
func (c *cycle) minimalSet(cq *clusterQueue, amounts []frAmount, cands []*admittedWorkload, withinNominal bool, cohortReason PreemptionReason) *victimSet {
	set := &victimSet{}
	fit := false
	for _, a := range cands {
		if a.cq != cq && !c.borrowingAny(a.cq, amounts) {
			continue
		}
		c.remove(set, a, reasonFor(a, cq, cohortReason))
		if c.acc.fits(cq.node, amounts, withinNominal) {
			fit = true
			break
		}
	}
	if !fit {
		c.restore(set)
		return nil
	}
	c.spare(set, func() bool { return c.acc.fits(cq.node, amounts, withinNominal) })
	c.restore(set)
	return set
}

func reasonFor(a *admittedWorkload, cq *clusterQueue, cohortReason PreemptionReason) PreemptionReason {
	if a.cq == cq {
		return InClusterQueue
	}
	return cohortReason
}

func (c *cycle) borrowingAny(q *clusterQueue, amounts []frAmount) bool {
	for _, u := range amounts {
		if c.acc.borrowing(q.node, u.fr) {
			return true
		}
	}
	return false
}

func (c *cycle) remove(set *victimSet, a *admittedWorkload, r PreemptionReason) {
	c.acc.addAll(a.cq.node, a.usage, -1)
	set.list = append(set.list, a)
	set.reasons = append(set.reasons, r)
}

// spare walks back over the victims (the last one is needed by construction) and returns to
// the accounting every one without which the preemptor still fits.
func (c *cycle) spare(set *victimSet, fitsNow func() bool) {
	keep := make([]bool, len(set.list))
	keep[len(keep)-1] = true
	for i := len(set.list) - 2; i >= 0; i-- {
		a := set.list[i]
		c.acc.addAll(a.cq.node, a.usage, 1)
		if fitsNow() {
			continue
		}
		c.acc.addAll(a.cq.node, a.usage, -1)
		keep[i] = true
	}
	list, reasons := set.list[:0], set.reasons[:0]
	for i, a := range set.list {
		if keep[i] {
			list = append(list, a)
			reasons = append(reasons, set.reasons[i])
		}
	}
	set.list, set.reasons = list, reasons
}

// restore returns the victims' usage to the accounting.
func (c *cycle) restore(set *victimSet) {
	for _, a := range set.list {
		c.acc.addAll(a.cq.node, a.usage, 1)
	}
}

// fairSearch picks victims from the queue with the largest share first. Taking from a queue
// that borrows is reclamation when the preemptor's queue ends within its nominal quota; otherwise
// the strategy must agree that the target's share justifies it.
func (c *cycle) fairSearch(w *Workload, cq *clusterQueue, amounts []frAmount, own, others []*admittedWorkload) *victimSet {
	strategies := c.opts.FairSharing.Strategies
	if len(strategies) == 0 {
		strategies = []FairSharingStrategy{LessThanOrEqualToFinalShare, LessThanInitialShare}
	}
	for _, strategy := range strategies {
		if set := c.fairAttempt(cq, amounts, own, others, strategy); set != nil {
			return set
		}
	}
	return nil
}

func (c *cycle) fairAttempt(cq *clusterQueue, amounts []frAmount, own, others []*admittedWorkload, strategy FairSharingStrategy) *victimSet {
	// Group candidates by queue, keeping candidate order within each.
	byQueue := map[*clusterQueue][]*admittedWorkload{}
	var queues []*clusterQueue
	for _, a := range append(append([]*admittedWorkload(nil), others...), own...) {
		if _, ok := byQueue[a.cq]; !ok {
			queues = append(queues, a.cq)
		}
		byQueue[a.cq] = append(byQueue[a.cq], a)
	}
	set := &victimSet{}
	fitsNow := func() bool { return c.acc.fits(cq.node, amounts, false) }
	for {
		target := c.largestShare(queues, byQueue)
		if target == nil {
			c.restore(set)
			return nil
		}
		a := byQueue[target][0]
		byQueue[target] = byQueue[target][1:]
		switch {
		case target == cq:
			c.remove(set, a, InClusterQueue)
		case !c.borrowingAny(target, amounts):
			byQueue[target] = nil
			continue
		case c.withinNominalAfter(cq, amounts):
			c.remove(set, a, InCohortReclamation)
		default:
			pre, tgt := divergence(cq.node, target.node)
			preShare := c.acc.shareWith(pre, cq.node, amounts, 1)
			var tgtShare float64
			if strategy == LessThanInitialShare {
				tgtShare = c.acc.share(tgt)
				if !(preShare < tgtShare) {
					continue
				}
			} else {
				tgtShare = c.acc.shareWith(tgt, target.node, a.usage, -1)
				if !(preShare <= tgtShare) {
					continue
				}
			}
			c.remove(set, a, InCohortFairSharing)
		}
		if fitsNow() {
			c.spare(set, fitsNow)
			c.restore(set)
			return set
		}
	}
}

// largestShare picks the queue with candidates left whose share is largest (name breaks ties).
func (c *cycle) largestShare(queues []*clusterQueue, byQueue map[*clusterQueue][]*admittedWorkload) *clusterQueue {
	var best *clusterQueue
	bestShare := math.Inf(-1)
	for _, q := range queues {
		if len(byQueue[q]) == 0 {
			continue
		}
		s := c.acc.share(q.node)
		if best == nil || s > bestShare || s == bestShare && q.spec.Name < best.spec.Name {
			best, bestShare = q, s
		}
	}
	return best
}

func (c *cycle) withinNominalAfter(cq *clusterQueue, amounts []frAmount) bool {
	for _, u := range amounts {
		if c.acc.at(cq.node, u.fr)+u.amt > cq.node.quota[u.fr] {
			return false
		}
	}
	return true
}

// divergence returns the children of the lowest common ancestor of a and b on each one's path:
// the subtrees whose shares fair sharing compares.
func divergence(a, b *node) (*node, *node) {
	i := 0
	for i < len(a.path) && i < len(b.path) && a.path[i] == b.path[i] {
		i++
	}
	return a.path[min(i, len(a.path)-1)], b.path[min(i, len(b.path)-1)]
}

func victimMessage(r PreemptionReason, w *Workload, cq *clusterQueue, v *admittedWorkload) string {
	cohort := ""
	if cq.node.parent != nil {
		cohort = cq.node.parent.name
	}
	switch r {
	case InClusterQueue:
		return fmt.Sprintf("preempted to admit workload %s (priority %d) in clusterqueue %s", w.Key, w.Priority, cq.spec.Name)
	case InCohortReclamation:
		return fmt.Sprintf("preempted so clusterqueue %s can reclaim its nominal quota for workload %s (priority %d); clusterqueue %s was borrowing in cohort %s",
			cq.spec.Name, w.Key, w.Priority, v.cq.spec.Name, cohort)
	case InCohortReclaimWhileBorrowing:
		return fmt.Sprintf("preempted by workload %s (priority %d) of clusterqueue %s, which borrows in cohort %s (borrowWithinCohort)",
			w.Key, w.Priority, cq.spec.Name, cohort)
	default:
		return fmt.Sprintf("preempted for fair sharing in cohort %s: clusterqueue %s has a larger share than clusterqueue %s needs for workload %s",
			cohort, v.cq.spec.Name, cq.spec.Name, w.Key)
	}
}
