package engine

// Quota accounting over the cohort tree.
//
// Every node (ClusterQueue or cohort) has, per flavor and resource:
//   - quota: its own nominal quota plus what its children lend it (a subtree quota);
//   - guaranteed: the part of quota that lendingLimit keeps away from the parent
//     (quota - lendingLimit, or 0 when lending is unlimited);
//   - usage: for a ClusterQueue, what its admitted workloads hold; for a cohort, what its children
//     draw from it, i.e. the sum over children of max(0, usage - guaranteed).
//
// A node can use its unused guaranteed amount plus what its parent makes available, capped by
// borrowingLimit; the root can use its quota minus its usage. Because a child's usage beyond its
// guaranteed part is charged to the parent, one addition at a queue updates the whole path in
// O(depth), and "does it fit" is one walk up the path per flavor-resource.

// accounting is usage over a snapshot's tree; the cycle works on a private copy.
type accounting struct {
	s     *Snapshot
	usage []int64
	// scratch avoids allocating in the fair-sharing hot path.
	scratch []int64
}

func (a *accounting) at(n *node, fr int) int64 { return a.usage[n.id*len(a.s.frs)+fr] }

// add charges delta at node n and propagates the part above each node's guaranteed amount.
func (a *accounting) add(n *node, fr int, delta int64) {
	stride := len(a.s.frs)
	for n != nil && delta != 0 {
		i := n.id*stride + fr
		old := a.usage[i]
		a.usage[i] = old + delta
		g := n.guaranteed[fr]
		delta = max(0, old+delta-g) - max(0, old-g)
		n = n.parent
	}
}

func (a *accounting) addAll(n *node, amounts []frAmount, sign int64) {
	for _, u := range amounts {
		a.add(n, u.fr, sign*u.amt)
	}
}

// available is how much more node n can use of fr.
func (a *accounting) available(n *node, fr int) int64 {
	u := a.at(n, fr)
	if n.parent == nil {
		return n.quota[fr] - u
	}
	g := n.guaranteed[fr]
	local := max(0, g-u)
	fromParent := max(0, a.available(n.parent, fr))
	if bl := n.borrowLimit[fr]; bl >= 0 {
		fromParent = min(fromParent, a.borrowRoom(n, fr))
	}
	return local + max(0, fromParent)
}

// borrowRoom is what borrowingLimit still lets node n draw from its parent.
func (a *accounting) borrowRoom(n *node, fr int) int64 {
	u, g := a.at(n, fr), n.guaranteed[fr]
	return n.quota[fr] - g - max(0, u-g) + n.borrowLimit[fr]
}

// borrowing reports whether node n uses more than its own quota of fr.
func (a *accounting) borrowing(n *node, fr int) bool { return a.at(n, fr) > n.quota[fr] }

// fits reports whether amounts (already including earlier pod sets) fit in queue node n; with
// withinNominal the queue must also stay within its own quota.
func (a *accounting) fits(n *node, amounts []frAmount, withinNominal bool) bool {
	for _, u := range amounts {
		if u.amt > a.available(n, u.fr) {
			return false
		}
		if withinNominal && a.at(n, u.fr)+u.amt > n.quota[u.fr] {
			return false
		}
	}
	return true
}

// borrows reports whether admitting amounts would take queue node n above its own quota.
func (a *accounting) borrows(n *node, amounts []frAmount) bool {
	for _, u := range amounts {
		if a.at(n, u.fr)+u.amt > n.quota[u.fr] {
			return true
		}
	}
	return false
}
