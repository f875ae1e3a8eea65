package engine

import (
	"container/heap"
	"fmt"
	"iter"
	"math"
	"sort"
)

// Preemption: finding the smallest set of admitted workloads whose eviction lets a preemptor fit.
//
// Candidates are the workloads of the preemptor's cohort tree, neither being evicted nor
// shielded (Options.Shielded), that hold some of the flavor-resources it needs and that the
// policies expose: in its own queue per withinClusterQueue,
// in other queues per reclaimWithinCohort (and borrowWithinCohort while borrowing), and in other
// queues only while that queue still borrows. The search runs on the cycle's future accounting,
// where workloads already being evicted are gone: if that is enough, the preemptor waits
// instead of preempting more.
//
// Victims are taken greedily in candidate order (other queues first, then lowest priority, then
// most recently admitted) until the preemptor fits; then, walking back, every victim whose
// return still leaves the preemptor fitting is spared. Usage only grows as workloads return, so
// each remaining victim is necessary: the set is minimal.

// preemptionPossible is the gate used during flavor assignment.
func (c *cycle) preemptionPossible(w *Workload, cq *clusterQueue, amounts []frAmount) bool {
	if !c.preemptionEnabled(cq) && !c.hasEvicting(cq) {
		return false
	}
	_, _, ok := c.findVictims(w, cq, amounts, true)
	return ok
}

// preemptionMayHelp is Kueue's gate before any preemption search (v0.17, flavor assignment): on
// a flavor-resource where the workload does not fit now, preemption is considered only if the
// workload's own request is within the queue's nominal quota, or the queue may preempt while
// borrowing (borrowWithinCohort, or fair sharing with reclaimWithinCohort), or a cohort below the
// root could hold it (hierarchical reclaim). Without it, a workload larger than its queue's
// nominal quota would evict its queue's own workloads in order to borrow.
func (c *cycle) preemptionMayHelp(cq *clusterQueue, amounts []frAmount) bool {
	p := cq.spec.Preemption
	if p.BorrowWithinCohort.Policy == BorrowWithinCohortLowerPriority ||
		(c.opts.FairSharing != nil && enabled(p.ReclaimWithinCohort)) {
		return true
	}
	for _, u := range amounts {
		if u.amt <= c.acc.available(cq.node, u.fr) || u.amt <= cq.node.nominal[u.fr] {
			continue
		}
		if !c.fitsBelowRoot(cq.node, u.fr, u.amt) {
			return false
		}
	}
	return true
}

// fitsBelowRoot reports whether amt more of fr would fit within the quota of some cohort on n's
// path other than the root: reclaiming inside that subtree may then make room.
func (c *cycle) fitsBelowRoot(n *node, fr int, amt int64) bool {
	if c.acc.at(n, fr)+amt <= n.quota[fr] {
		return n.parent != nil
	}
	remaining := amt - max(0, n.guaranteed[fr]-c.acc.at(n, fr))
	for p := n.parent; p != nil; p = p.parent {
		if c.acc.at(p, fr)+remaining <= p.quota[fr] {
			return p.parent != nil
		}
		remaining -= max(0, p.guaranteed[fr]-c.acc.at(p, fr))
	}
	return false
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
// already suffice. ok is false when nothing the policies allow makes it fit. It works on the
// future accounting (evictions under way already gone) and leaves it as it found it.
func (c *cycle) findVictims(w *Workload, cq *clusterQueue, amounts []frAmount, probe bool) (victims []Victim, waitFor int, ok bool) {
	if c.fut.fits(cq.node, amounts, false) {
		if probe {
			return nil, 1, true
		}
		for _, a := range c.evictingIn[cq.node.path[0].id] {
			if usesAny(a, amounts) {
				waitFor++
			}
		}
		return nil, waitFor, true
	}
	cs, possible := c.candidates(w, cq, amounts)
	if !possible {
		return nil, 0, false
	}
	var set *victimSet
	if c.opts.FairSharing != nil {
		set = c.fairSearch(w, cq, amounts, cs)
	} else {
		set = c.classicSearch(w, cq, amounts, cs)
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

// queueCandidates is one queue's admitted workloads that are neither being evicted nor shielded,
// in candidate order (lowest priority, then most recently admitted), with prefix sums of their
// usage so that "how much do workloads below priority p hold" is a binary search.
type queueCandidates struct {
	list   []*admittedWorkload
	prefix []int64 // prefix[i*F+fr]: usage of list[:i]; nil until needed
	// shielded counts the workloads left out by Options.Shielded, why says why for the first.
	shielded int
	why      string
}

// queueCands returns (and caches for the cycle) a queue's candidate list.
func (c *cycle) queueCands(q *clusterQueue) *queueCandidates {
	if qc, ok := c.cands[q]; ok {
		return qc
	}
	qc := &queueCandidates{list: make([]*admittedWorkload, 0, len(q.ordered))}
	for _, a := range q.ordered {
		if a.evicting {
			continue
		}
		if c.opts.Shielded != nil {
			if why := c.opts.Shielded(&a.wl); why != "" {
				if qc.shielded++; qc.why == "" {
					qc.why = why
				}
				continue
			}
		}
		qc.list = append(qc.list, a)
	}
	c.cands[q] = qc
	return qc
}

// shieldedHint says how many workloads of cq's tree the searches of this cycle left out as
// shielded, and why for the first, as a clause for a pending message ("" when none).
func (c *cycle) shieldedHint(cq *clusterQueue) string {
	n, why := 0, ""
	for _, q := range c.s.trees[cq.node.path[0].id] {
		if qc, ok := c.cands[q]; ok && qc.shielded > 0 {
			if n += qc.shielded; why == "" {
				why = qc.why
			}
		}
	}
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("; %d admitted workload(s) are not preempted now (%s)", n, why)
}

// below counts the leading candidates of priority below p (or at most p, when inclusive).
func (qc *queueCandidates) below(p int32, inclusive bool) int {
	return sort.Search(len(qc.list), func(i int) bool {
		if inclusive {
			return qc.list[i].wl.Priority > p
		}
		return qc.list[i].wl.Priority >= p
	})
}

// held is what the first n candidates hold of fr.
func (qc *queueCandidates) held(frs, n, fr int) int64 {
	if qc.prefix == nil {
		qc.prefix = make([]int64, (len(qc.list)+1)*frs)
		for i, a := range qc.list {
			copy(qc.prefix[(i+1)*frs:(i+2)*frs], qc.prefix[i*frs:(i+1)*frs])
			for _, u := range a.usage {
				qc.prefix[(i+1)*frs+u.fr] += u.amt
			}
		}
	}
	return qc.prefix[n*frs+fr]
}

// forget drops a workload the cycle chose as a victim from its queue's candidates.
func (c *cycle) forget(a *admittedWorkload) {
	qc, ok := c.cands[a.cq]
	if !ok {
		return
	}
	for i, x := range qc.list {
		if x == a {
			// In place: no search holds a slice of the list between cycle steps.
			copy(qc.list[i:], qc.list[i+1:])
			qc.list[len(qc.list)-1] = nil
			qc.list = qc.list[:len(qc.list)-1]
			qc.prefix = nil
			return
		}
	}
}

// candidateSet is what the policies expose to one preemptor.
type candidateSet struct {
	// own is a prefix of the preemptor's queue list, filtered as it is walked (allowedWithin:
	// LowerOrNewerEqualPriority exposes only the equal-priority workloads queued after it).
	own []*admittedWorkload
	w   *Workload
	// others are prefixes of the candidate lists of the other queues of the tree that borrow
	// what is needed; they are merged lazily, in candidate order, as the search walks them.
	others [][]*admittedWorkload
	// ownHeld is what own holds of each needed flavor-resource (parallel to the amounts).
	ownHeld []int64
}

// candidates gathers what w may preempt and reports whether they could possibly be enough: the
// usage they hold must cover the shortfall of every flavor-resource, since removing u anywhere
// in the tree raises what a queue can use by at most u.
func (c *cycle) candidates(w *Workload, cq *clusterQueue, amounts []frAmount) (*candidateSet, bool) {
	within := cq.spec.Preemption.WithinClusterQueue
	reclaim := cq.spec.Preemption.ReclaimWithinCohort
	// The candidate set and its lists are scratch of the cycle: a search never nests.
	cs := &c.csBuf
	*cs = candidateSet{w: w, others: cs.others[:0], ownHeld: cs.ownHeld[:0]}
	frs := len(c.s.frs)
	var held []int64
	if cap(c.heldBuf) >= len(amounts) {
		held = c.heldBuf[:len(amounts)]
		clear(held)
	} else {
		held = make([]int64, len(amounts))
		c.heldBuf = held
	}
	if enabled(within) {
		qc := c.queueCands(cq)
		n := qc.below(w.Priority, within == PreemptLowerOrNewerEqualPriority)
		cs.own = qc.list[:n]
		for i, u := range amounts {
			h := qc.held(frs, n, u.fr)
			held[i] += h
			cs.ownHeld = append(cs.ownHeld, h)
		}
	}
	if enabled(reclaim) && cq.node.parent != nil {
		for _, other := range c.s.trees[cq.node.path[0].id] {
			if other == cq || len(other.admitted) == 0 || !c.borrowingAny(other, amounts) {
				continue
			}
			if c.opts.FairSharing == nil && !c.reclaimable(other, cq, amounts) {
				continue
			}
			qc := c.queueCands(other)
			n := len(qc.list)
			if reclaim != PreemptAny {
				n = qc.below(w.Priority, false)
			}
			if n == 0 {
				continue
			}
			cs.others = append(cs.others, qc.list[:n])
			for i, u := range amounts {
				held[i] += qc.held(frs, n, u.fr)
			}
		}
	}
	for i, u := range amounts {
		if u.amt-c.fut.available(cq.node, u.fr) > held[i] {
			return cs, false
		}
	}
	return cs, len(cs.own)+len(cs.others) > 0
}

// withinNominalPossible tells whether removing every own candidate could bring the queue's own
// usage low enough to take the preemptor within its nominal quota; otherwise reclaiming is
// pointless and the search goes straight to borrowing attempts.
func (c *cycle) withinNominalPossible(cq *clusterQueue, amounts []frAmount, cs *candidateSet) bool {
	for i, u := range amounts {
		own := int64(0)
		if i < len(cs.ownHeld) {
			own = cs.ownHeld[i]
		}
		if c.fut.at(cq.node, u.fr)-own+u.amt > cq.node.quota[u.fr] {
			return false
		}
	}
	return true
}

// mergeCandidates walks sorted candidate lists of several queues in candidate order; a list is
// dropped as soon as its queue stops borrowing what is needed (it cannot start again while the
// search only removes usage). With cq, classic preemption's hierarchical rule applies too
// (reclaimable); fair sharing passes nil and, as Kueue, only asks that the queue borrow. keep
// filters single candidates.
func (c *cycle) mergeCandidates(cq *clusterQueue, lists [][]*admittedWorkload, amounts []frAmount, keep func(*admittedWorkload) bool) iter.Seq[*admittedWorkload] {
	return func(yield func(*admittedWorkload) bool) {
		h := &c.mergeBuf
		h.lists = h.lists[:0]
		for _, l := range lists {
			if len(l) > 0 {
				h.lists = append(h.lists, l)
			}
		}
		heap.Init(h)
		for h.Len() > 0 {
			a := h.lists[0][0]
			if !c.borrowingAny(a.cq, amounts) || cq != nil && !c.reclaimable(a.cq, cq, amounts) {
				heap.Pop(h)
				continue
			}
			if h.lists[0] = h.lists[0][1:]; len(h.lists[0]) == 0 {
				heap.Pop(h)
			} else {
				heap.Fix(h, 0)
			}
			if !usesAny(a, amounts) || keep != nil && !keep(a) {
				continue
			}
			if !yield(a) {
				return
			}
		}
	}
}

// listHeap orders non-empty candidate lists by their first candidate.
type listHeap struct{ lists [][]*admittedWorkload }

func (h *listHeap) Len() int           { return len(h.lists) }
func (h *listHeap) Less(i, j int) bool { return candidateBefore(h.lists[i][0], h.lists[j][0]) }
func (h *listHeap) Swap(i, j int)      { h.lists[i], h.lists[j] = h.lists[j], h.lists[i] }
func (h *listHeap) Push(x any)         { h.lists = append(h.lists, x.([]*admittedWorkload)) }
func (h *listHeap) Pop() any {
	l := h.lists[len(h.lists)-1]
	h.lists = h.lists[:len(h.lists)-1]
	return l
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
// Candidates of other queues go before those of the preemptor's own queue.
func (c *cycle) classicSearch(w *Workload, cq *clusterQueue, amounts []frAmount, cs *candidateSet) *victimSet {
	p := cq.spec.Preemption
	if c.withinNominalPossible(cq, amounts, cs) {
		if set := c.minimalSet(cq, amounts, cs, c.mergeCandidates(cq, cs.others, amounts, nil), true, InCohortReclamation); set != nil {
			return set
		}
	}
	if p.BorrowWithinCohort.Policy == BorrowWithinCohortLowerPriority && len(cs.others) > 0 {
		th := p.BorrowWithinCohort.MaxPriorityThreshold
		keep := func(a *admittedWorkload) bool {
			return a.wl.Priority < w.Priority && (th == nil || a.wl.Priority <= *th)
		}
		if set := c.minimalSet(cq, amounts, cs, c.mergeCandidates(cq, cs.others, amounts, keep), false, InCohortReclaimWhileBorrowing); set != nil {
			return set
		}
	}
	return c.minimalSet(cq, amounts, cs, nil, false, "")
}

// minimalSet removes candidates in order (others, then the own queue's) until the preemptor
// fits, then spares every victim it can.
func (c *cycle) minimalSet(cq *clusterQueue, amounts []frAmount, cs *candidateSet, others iter.Seq[*admittedWorkload], withinNominal bool, cohortReason PreemptionReason) *victimSet {
	set := &victimSet{}
	fitsNow := func() bool { return c.fut.fits(cq.node, amounts, withinNominal) }
	fit := false
	if others != nil {
		for a := range others {
			// Other queues' workloads only make room in the cohort; once there is room, only
			// the queue's own workloads can help it back within its nominal quota.
			if withinNominal && c.fut.fits(cq.node, amounts, false) {
				break
			}
			c.remove(set, a, cohortReason)
			if fit = fitsNow(); fit {
				break
			}
		}
	}
	if !fit {
		for _, a := range cs.own {
			if !allowedWithin(cq.spec.Preemption.WithinClusterQueue, cs.w, &a.wl) || !usesAny(a, amounts) {
				continue
			}
			c.remove(set, a, InClusterQueue)
			if fit = fitsNow(); fit {
				break
			}
		}
	}
	if !fit {
		c.restore(set)
		return nil
	}
	c.spare(set, fitsNow)
	c.restore(set)
	return set
}

func (c *cycle) borrowingAny(q *clusterQueue, amounts []frAmount) bool {
	return c.nodeBorrowingAny(q.node, amounts)
}

func (c *cycle) nodeBorrowingAny(n *node, amounts []frAmount) bool {
	for _, u := range amounts {
		if c.fut.borrowing(n, u.fr) {
			return true
		}
	}
	return false
}

// reclaimable tells whether cq may reclaim from the workloads of other, a queue that borrows what
// is needed: only while every cohort between other and the cohort the two share borrows too, as
// in Kueue's hierarchical reclaim. Borrowing that a sub-cohort covers from its own quota takes nothing
// from cq's side of the tree.
func (c *cycle) reclaimable(other, cq *clusterQueue, amounts []frAmount) bool {
	p, q := other.node.path, cq.node.path
	shared := 0
	for shared < len(p) && shared < len(q) && p[shared] == q[shared] {
		shared++
	}
	for _, n := range p[shared : len(p)-1] {
		if !c.nodeBorrowingAny(n, amounts) {
			return false
		}
	}
	return true
}

func (c *cycle) remove(set *victimSet, a *admittedWorkload, r PreemptionReason) {
	c.fut.addAll(a.cq.node, a.usage, -1)
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
		c.fut.addAll(a.cq.node, a.usage, 1)
		if fitsNow() {
			continue
		}
		c.fut.addAll(a.cq.node, a.usage, -1)
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
		c.fut.addAll(a.cq.node, a.usage, 1)
	}
}

// fairSearch picks victims from the queue with the largest share first. Taking from a queue
// that borrows is reclamation when the preemptor's queue ends within its nominal quota; otherwise
// the strategy must agree that the target's share justifies it.
func (c *cycle) fairSearch(w *Workload, cq *clusterQueue, amounts []frAmount, cs *candidateSet) *victimSet {
	var own []*admittedWorkload
	for _, a := range cs.own {
		if allowedWithin(cq.spec.Preemption.WithinClusterQueue, w, &a.wl) && usesAny(a, amounts) {
			own = append(own, a)
		}
	}
	var others []*admittedWorkload
	for a := range c.mergeCandidates(nil, cs.others, amounts, nil) {
		others = append(others, a)
	}
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
	fitsNow := func() bool { return c.fut.fits(cq.node, amounts, false) }
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
			preShare := c.fut.shareWith(pre, cq.node, amounts, 1)
			var tgtShare float64
			if strategy == LessThanInitialShare {
				tgtShare = c.fut.share(tgt)
				if !(preShare < tgtShare) {
					continue
				}
			} else {
				tgtShare = c.fut.shareWith(tgt, target.node, a.usage, -1)
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
		s := c.fut.share(q.node)
		if best == nil || s > bestShare || s == bestShare && q.spec.Name < best.spec.Name {
			best, bestShare = q, s
		}
	}
	return best
}

func (c *cycle) withinNominalAfter(cq *clusterQueue, amounts []frAmount) bool {
	for _, u := range amounts {
		if c.fut.at(cq.node, u.fr)+u.amt > cq.node.quota[u.fr] {
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
