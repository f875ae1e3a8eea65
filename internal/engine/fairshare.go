package engine

import "math"

// Dominant resource share (fair sharing).
//
// A node's share of resource r is what it borrows of r (usage above its own quota, summed over
// flavors) divided by what its parent could lend of r (the parent's subtree quota, summed over
// flavors); the dominant share is the largest of these, divided by the node's weight. Weight 0
// makes any borrowing infinitely expensive, so such a queue is always preempted first.

// share is node n's weighted dominant resource share with its current usage.
func (a *accounting) share(n *node) float64 {
	if n.parent == nil {
		return 0
	}
	k := len(a.s.resNames)
	if cap(a.scratch) < 2*k {
		a.scratch = make([]int64, 2*k)
	}
	borrowed, lendable := a.scratch[:k], a.scratch[k:2*k]
	clear(borrowed)
	clear(lendable)
	for fr := range a.s.frs {
		r := a.s.frRes[fr]
		borrowed[r] += max(0, a.at(n, fr)-n.quota[fr])
		lendable[r] += n.parent.quota[fr]
	}
	drs := 0.0
	for r := range borrowed {
		if borrowed[r] == 0 {
			continue
		}
		if lendable[r] == 0 {
			drs = math.Inf(1)
			break
		}
		drs = max(drs, float64(borrowed[r])/float64(lendable[r]))
	}
	if drs == 0 {
		return 0
	}
	if n.weight <= 0 {
		return math.Inf(1)
	}
	return drs / n.weight
}

// shareWith is node n's share as if amounts were charged at queue node q (n on q's path).
func (a *accounting) shareWith(n, q *node, amounts []frAmount, sign int64) float64 {
	a.addAll(q, amounts, sign)
	v := a.share(n)
	a.addAll(q, amounts, -sign)
	return v
}

func weightedShare(v float64) int64 {
	if math.IsInf(v, 1) || v*1000 >= math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(v * 1000)
}
