package engine

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/fleetq/fleetq/internal/engine/affinity"
)

// fitMode ranks how a workload (or one flavor choice) can be admitted; higher is better.
type fitMode int8

const (
	noFit fitMode = iota
	needsPreemption
	fits
)

// groupDemand is what one pod set requests from one resource group of its queue.
type groupDemand struct {
	group int
	res   []int   // indexes into the group's resources
	amt   []int64 // count × per-pod request, parallel to res
}

// podDemand is one pod set's requests resolved against the queue's resource groups.
type podDemand struct {
	ps     *PodSet
	groups []groupDemand
}

// shortfall remembers the first resource that did not fit, so the message (with numbers) is
// only written when a decision needs it.
type shortfall struct {
	prefix string
	flavor string
	fr     int
	total  int64
	hint   string
}

// assignment is the outcome of flavor assignment for a whole workload.
type assignment struct {
	mode    fitMode
	borrows bool
	demand  []podDemand
	// chosen[p][g] is the flavor index picked for demand[p].groups[g].
	chosen [][]int
	// amounts is the workload's total request per flavor-resource under this assignment.
	amounts []frAmount
	// reason and message explain a noFit; short explains the quota behind needsPreemption.
	reason  PendingReason
	message string
	short   *shortfall
}

// resolve groups a workload's non-zero requests by the queue's resource groups; a resource the
// queue does not cover makes the workload inadmissible there.
func resolve(w *Workload, cq *clusterQueue) ([]podDemand, PendingReason, string) {
	out := make([]podDemand, 0, len(w.PodSets))
	for i := range w.PodSets {
		ps := &w.PodSets[i]
		pd := podDemand{ps: ps}
		if ps.Count > 0 {
			names := make([]corev1.ResourceName, 0, len(ps.Requests))
			for r, v := range ps.Requests {
				if v != 0 {
					names = append(names, r)
				}
			}
			// Insertion sort: a pod set requests a handful of resources, and sort.Slice allocates.
			for i := 1; i < len(names); i++ {
				for j := i; j > 0 && names[j] < names[j-1]; j-- {
					names[j], names[j-1] = names[j-1], names[j]
				}
			}
			for _, r := range names {
				gi, ok := cq.groupOf[r]
				if !ok {
					return nil, ResourceNotCovered, fmt.Sprintf("%sresource %s is not covered by clusterqueue %s", podSetPrefix(w, ps), r, cq.spec.Name)
				}
				g := &cq.groups[gi]
				var gd *groupDemand
				for k := range pd.groups {
					if pd.groups[k].group == gi {
						gd = &pd.groups[k]
					}
				}
				if gd == nil {
					pd.groups = append(pd.groups, groupDemand{group: gi})
					gd = &pd.groups[len(pd.groups)-1]
				}
				for ri, name := range g.resources {
					if name == r {
						amt, ok := mulAmount(ps.Count, ps.Requests[r])
						if !ok {
							return nil, RequestTooLarge, fmt.Sprintf("%s%d pods × %s %s is more than any quota can hold; lower the pod count (parallelism) or the per-pod request",
								podSetPrefix(w, ps), ps.Count, FormatAmount(r, ps.Requests[r]), r)
						}
						gd.res = append(gd.res, ri)
						gd.amt = append(gd.amt, amt)
					}
				}
			}
			for i := 1; i < len(pd.groups); i++ {
				for j := i; j > 0 && pd.groups[j].group < pd.groups[j-1].group; j-- {
					pd.groups[j], pd.groups[j-1] = pd.groups[j-1], pd.groups[j]
				}
			}
		}
		out = append(out, pd)
	}
	return out, "", ""
}

func podSetPrefix(w *Workload, ps *PodSet) string {
	if len(w.PodSets) > 1 {
		return fmt.Sprintf("pod set %q: ", ps.Name)
	}
	return ""
}

// assign chooses flavors pod set by pod set, resource group by resource group, accumulating
// what earlier pod sets took so that later ones see it (they may share a flavor). Flavors in
// noRoom are passed over: the placement hook found no worker with room in them this cycle.
func (c *cycle) assign(w *Workload, cq *clusterQueue, demand []podDemand, noRoom map[string]bool) assignment {
	out := assignment{mode: fits, demand: demand, chosen: make([][]int, len(demand))}
	for p := range demand {
		pd := &demand[p]
		out.chosen[p] = make([]int, len(pd.groups))
		for g := range pd.groups {
			gd := &pd.groups[g]
			fi, mode, borrows, short, reason, msg := c.chooseFlavor(w, cq, pd.ps, gd, out.amounts, noRoom)
			if fi < 0 {
				return assignment{mode: noFit, reason: reason, message: podSetPrefix(w, pd.ps) + msg}
			}
			if mode == needsPreemption {
				out.mode = needsPreemption
				if out.short == nil {
					short.prefix = podSetPrefix(w, pd.ps)
					out.short = short
				}
			}
			out.borrows = out.borrows || borrows
			out.chosen[p][g] = fi
			f := &cq.groups[gd.group].flavors[fi]
			for i, ri := range gd.res {
				out.amounts = mergeAmount(out.amounts, f.fr[ri], gd.amt[i])
			}
		}
	}
	return out
}

// admission writes the chosen flavors out as the API's pod set assignments.
func (a *assignment) admission(cq *clusterQueue) *Admission {
	adm := &Admission{ClusterQueue: cq.spec.Name}
	for p, pd := range a.demand {
		psa := PodSetAssignment{Name: pd.ps.Name, Count: pd.ps.Count,
			Flavors: map[corev1.ResourceName]string{}, Usage: map[corev1.ResourceName]int64{}}
		for g, gd := range pd.groups {
			grp := &cq.groups[gd.group]
			for i, ri := range gd.res {
				psa.Flavors[grp.resources[ri]] = grp.flavors[a.chosen[p][g]].name
				psa.Usage[grp.resources[ri]] = gd.amt[i]
			}
		}
		adm.PodSets = append(adm.PodSets, psa)
	}
	return adm
}

// chooseFlavor walks a group's flavors in order and applies flavor fungibility: a flavor that
// fits without borrowing always wins; one that borrows or needs preemption wins at once under
// MayStopSearch, and is otherwise kept as a fallback while later flavors are tried. It returns
// the flavor index, or -1 with the reason.
func (c *cycle) chooseFlavor(w *Workload, cq *clusterQueue, ps *PodSet, gd *groupDemand, prior []frAmount, noRoom map[string]bool) (int, fitMode, bool, *shortfall, PendingReason, string) {
	g := &cq.groups[gd.group]
	best, bestMode, bestBorrows := -1, noFit, false
	var bestShort *shortfall
	var failed []string
	compatible := 0
	fung := cq.spec.FlavorFungibility
	cur := make([]frAmount, len(gd.res))
	for fi := range g.flavors {
		f := &g.flavors[fi]
		if why := incompatibility(f, ps); why != "" {
			failed = append(failed, why)
			continue
		}
		compatible++
		if noRoom[f.name] {
			continue // only placeInOtherFlavors passes noRoom; it keeps the placement's reasons
		}
		mode := fits
		var short *shortfall
		for i, ri := range gd.res {
			fr := f.fr[ri]
			total := addAmount(gd.amt[i], amountOf(prior, fr))
			cur[i] = frAmount{fr, total}
			if mode == fits && total > c.acc.available(cq.node, fr) {
				mode = noFit
				short = &shortfall{flavor: f.name, fr: fr, total: total}
			}
		}
		borrows := c.acc.borrows(cq.node, cur)
		if mode == noFit {
			switch {
			case cq.node.parent != nil && c.preemptionEnabled(cq) && !c.preemptionMayHelp(cq, cur):
				short.hint = "; it needs more than the queue's nominal quota, and preempting while borrowing needs borrowWithinCohort"
			case c.preemptionPossible(w, cq, withAmounts(prior, cur)):
				mode = needsPreemption
			case c.preemptionEnabled(cq):
				short.hint = "; preemption the policies allow cannot free enough quota" + c.shieldedHint(cq)
			case cq.node.parent != nil && c.withinNominalAfter(cq, cur):
				short.hint = "; reclaimWithinCohort is Never, so it waits for borrowers to finish"
			}
		}
		switch {
		case mode == fits && !borrows:
			return fi, fits, false, nil, "", ""
		case mode == fits:
			if fung.WhenCanBorrow != TryNextFlavor { // MayStopSearch, its v1beta1 alias Borrow, or unset
				return fi, fits, true, nil, "", ""
			}
			if best < 0 || bestMode < fits {
				best, bestMode, bestBorrows, bestShort = fi, fits, true, nil
			}
		case mode == needsPreemption:
			if fung.WhenCanPreempt == MayStopSearch || fung.WhenCanPreempt == "Preempt" { // v1beta1 alias
				return fi, needsPreemption, borrows, short, "", ""
			}
			if best < 0 {
				best, bestMode, bestBorrows, bestShort = fi, needsPreemption, borrows, short
			}
		default:
			failed = append(failed, c.acc.shortMessage(cq, short))
		}
	}
	if best >= 0 {
		return best, bestMode, bestBorrows, bestShort, "", ""
	}
	if compatible == 0 {
		return -1, noFit, false, nil, NoCompatibleFlavor, strings.Join(failed, "; ")
	}
	return -1, noFit, false, nil, InsufficientQuota, strings.Join(failed, "; ")
}

// incompatibility explains why pods of ps can never run on flavor f, or returns "".
func incompatibility(f *groupFlavor, ps *PodSet) string {
	if f.flavor == nil {
		return fmt.Sprintf("flavor %s not found", f.name)
	}
	if len(ps.NodeSelector) == 0 && ps.RequiredNodeAffinity == nil && len(f.flavor.NodeTaints) == 0 {
		return ""
	}
	if !affinity.Matches(f.flavor.NodeLabels, ps.NodeSelector, ps.RequiredNodeAffinity, affinity.Flavor) {
		return fmt.Sprintf("flavor %s does not match the pods' node selector or affinity", f.name)
	}
	if t, ok := affinity.UntoleratedTaint(f.flavor.NodeTaints, ps.Tolerations, f.flavor.Tolerations); ok {
		return fmt.Sprintf("flavor %s has taint %s that the pods do not tolerate", f.name, affinity.TaintString(t))
	}
	return ""
}

func amountOf(list []frAmount, fr int) int64 {
	for _, u := range list {
		if u.fr == fr {
			return u.amt
		}
	}
	return 0
}

// withAmounts returns prior with the cumulative amounts in cur replacing or extending it.
func withAmounts(prior, cur []frAmount) []frAmount {
	out := append(make([]frAmount, 0, len(prior)+len(cur)), prior...)
	for _, u := range cur {
		found := false
		for i := range out {
			if out[i].fr == u.fr {
				out[i].amt = u.amt
				found = true
			}
		}
		if !found {
			out = append(out, u)
		}
	}
	return out
}

// shortMessage writes a shortfall out in words, with the current numbers.
func (a *accounting) shortMessage(cq *clusterQueue, s *shortfall) string {
	return s.prefix + a.quotaMessage(cq, s.fr, s.total) + s.hint
}

// quotaMessage explains, with numbers, why request does not fit fr in queue cq.
func (a *accounting) quotaMessage(cq *clusterQueue, fr int, request int64) string {
	key := a.s.frs[fr]
	n := cq.node
	r := key.resource
	avail := max(0, a.available(n, fr))
	used := a.at(n, fr)
	nominal := n.quota[fr]
	var b strings.Builder
	b.Grow(160)
	for _, part := range []string{"insufficient quota for ", string(r), " in flavor ", key.flavor, ": requests ", FormatAmount(r, request),
		", available ", FormatAmount(r, avail), " (nominal ", FormatAmount(r, nominal), ", used ", FormatAmount(r, used)} {
		b.WriteString(part)
	}
	if n.parent != nil {
		bl := n.borrowLimit[fr]
		room := int64(-1)
		if bl >= 0 {
			room = a.borrowRoom(n, fr)
		}
		localFree := max(0, nominal-used)
		switch {
		case bl >= 0 && room <= max(0, a.available(n.parent, fr)):
			// borrowingLimit binds before the cohort runs out.
			if more := max(0, avail-localFree); more > 0 {
				b.WriteString(", borrowingLimit " + FormatAmount(r, bl) + " allows " + FormatAmount(r, more) + " more")
			} else {
				b.WriteString(", borrowingLimit " + FormatAmount(r, bl) + " reached")
			}
		case avail >= localFree:
			b.WriteString(", cohort " + n.parent.name + " lends " + FormatAmount(r, avail-localFree))
		default:
			b.WriteString(", " + FormatAmount(r, localFree-avail) + " of it in use by other queues in cohort " + n.parent.name)
		}
	}
	b.WriteString(")")
	return b.String()
}
