package engine

import (
	"fmt"
	"sort"
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

// assignment is the outcome of flavor assignment for a whole workload.
type assignment struct {
	mode    fitMode
	borrows bool
	podSets []PodSetAssignment
	// amounts is the workload's total request per flavor-resource under this assignment.
	amounts []frAmount
	// reason and message explain a noFit (or the quota shortfall behind needsPreemption).
	reason  PendingReason
	message string
}

// flavorChoice is one flavor evaluated for one pod set and resource group.
type flavorChoice struct {
	mode    fitMode
	borrows bool
	flavor  *groupFlavor
	amounts []frAmount // this group's resources, cumulative with earlier pod sets
}

// assign chooses flavors pod set by pod set, resource group by resource group, accumulating
// what earlier pod sets took so that later ones see it (they may share a flavor).
func (c *cycle) assign(w *Workload, cq *clusterQueue) assignment {
	var out assignment
	out.mode = fits
	multi := len(w.PodSets) > 1
	for _, ps := range w.PodSets {
		prefix := ""
		if multi {
			prefix = fmt.Sprintf("pod set %q: ", ps.Name)
		}
		psa := PodSetAssignment{Name: ps.Name, Count: ps.Count, Flavors: map[corev1.ResourceName]string{}, Usage: map[corev1.ResourceName]int64{}}
		names := requestedResources(ps)
		byGroup := map[int][]corev1.ResourceName{}
		var groups []int
		for _, r := range names {
			gi, ok := cq.groupOf[r]
			if !ok {
				return assignment{mode: noFit, reason: ResourceNotCovered,
					message: fmt.Sprintf("%sresource %s is not covered by clusterqueue %s", prefix, r, cq.spec.Name)}
			}
			if _, seen := byGroup[gi]; !seen {
				groups = append(groups, gi)
			}
			byGroup[gi] = append(byGroup[gi], r)
		}
		sort.Ints(groups)
		for _, gi := range groups {
			choice, reason, msg := c.chooseFlavor(w, cq, &ps, &cq.groups[gi], out.amounts)
			if choice == nil {
				return assignment{mode: noFit, reason: reason, message: prefix + msg}
			}
			if choice.mode == needsPreemption {
				out.mode = needsPreemption
				if out.message == "" {
					out.message = prefix + msg
				}
			}
			out.borrows = out.borrows || choice.borrows
			g := &cq.groups[gi]
			for i, r := range g.resources {
				req, ok := ps.Requests[r]
				if !ok || req == 0 {
					continue
				}
				amt := int64(ps.Count) * req
				psa.Flavors[r] = choice.flavor.name
				psa.Usage[r] = amt
				out.amounts = mergeAmount(out.amounts, choice.flavor.fr[i], amt)
			}
		}
		out.podSets = append(out.podSets, psa)
	}
	if out.mode == fits {
		out.message = ""
	}
	return out
}

// requestedResources lists a pod set's non-zero requests, sorted for determinism.
func requestedResources(ps PodSet) []corev1.ResourceName {
	names := make([]corev1.ResourceName, 0, len(ps.Requests))
	for r, v := range ps.Requests {
		if v != 0 && ps.Count > 0 {
			names = append(names, r)
		}
	}
	sort.Slice(names, func(i, j int) bool { return names[i] < names[j] })
	return names
}

// chooseFlavor walks a group's flavors in order and applies flavor fungibility: a flavor that
// fits without borrowing always wins; one that borrows or needs preemption wins at once under
// MayStopSearch, and is otherwise kept as a fallback while later flavors are tried.
func (c *cycle) chooseFlavor(w *Workload, cq *clusterQueue, ps *PodSet, g *flavorGroup, prior []frAmount) (*flavorChoice, PendingReason, string) {
	var best *flavorChoice
	var bestMsg string
	var msgs []string
	compatible := 0
	fung := cq.spec.FlavorFungibility
	for fi := range g.flavors {
		f := &g.flavors[fi]
		if why := incompatibility(f, ps); why != "" {
			msgs = append(msgs, why)
			continue
		}
		compatible++
		ch := &flavorChoice{mode: fits, flavor: f}
		var shortMsg string
		for i, r := range g.resources {
			req, ok := ps.Requests[r]
			if !ok || req == 0 {
				continue
			}
			fr := f.fr[i]
			total := int64(ps.Count)*req + amountOf(prior, fr)
			ch.amounts = append(ch.amounts, frAmount{fr, total})
			if total > c.acc.available(cq.node, fr) {
				if ch.mode == fits {
					shortMsg = c.acc.quotaMessage(cq, fr, total)
				}
				ch.mode = noFit
			}
		}
		ch.borrows = c.acc.borrows(cq.node, ch.amounts)
		if ch.mode == noFit {
			if c.preemptionPossible(w, cq, withAmounts(prior, ch.amounts)) {
				ch.mode = needsPreemption
			} else if c.preemptionEnabled(cq) {
				shortMsg += "; preemption the policies allow cannot free enough quota"
			} else if cq.node.parent != nil && c.withinNominalAfter(cq, ch.amounts) {
				shortMsg += "; reclaimWithinCohort is Never, so it waits for borrowers to finish"
			}
		}
		switch {
		case ch.mode == fits && !ch.borrows:
			return ch, "", ""
		case ch.mode == fits:
			if fung.WhenCanBorrow != TryNextFlavor {
				return ch, "", ""
			}
			if best == nil || best.mode < fits {
				best = ch
			}
		case ch.mode == needsPreemption:
			if fung.WhenCanPreempt == MayStopSearch {
				return ch, "", shortMsg
			}
			if best == nil {
				best, bestMsg = ch, shortMsg
			}
		default:
			msgs = append(msgs, shortMsg)
		}
	}
	if best != nil {
		return best, "", bestMsg
	}
	if compatible == 0 {
		return nil, NoCompatibleFlavor, strings.Join(msgs, "; ")
	}
	return nil, InsufficientQuota, strings.Join(msgs, "; ")
}

// incompatibility explains why pods of ps can never run on flavor f, or returns "".
func incompatibility(f *groupFlavor, ps *PodSet) string {
	if f.flavor == nil {
		return fmt.Sprintf("flavor %s not found", f.name)
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
	out := append([]frAmount(nil), prior...)
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

// quotaMessage explains, with numbers, why request does not fit fr in queue cq.
func (a *accounting) quotaMessage(cq *clusterQueue, fr int, request int64) string {
	key := a.s.frs[fr]
	n := cq.node
	r := key.resource
	avail := max(0, a.available(n, fr))
	used := a.at(n, fr)
	nominal := n.quota[fr]
	var b strings.Builder
	fmt.Fprintf(&b, "insufficient quota for %s in flavor %s: requests %s, available %s (nominal %s, used %s",
		r, key.flavor, FormatAmount(r, request), FormatAmount(r, avail), FormatAmount(r, nominal), FormatAmount(r, used))
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
				fmt.Fprintf(&b, ", borrowingLimit %s allows %s more", FormatAmount(r, bl), FormatAmount(r, more))
			} else {
				fmt.Fprintf(&b, ", borrowingLimit %s reached", FormatAmount(r, bl))
			}
		case avail >= localFree:
			fmt.Fprintf(&b, ", cohort %s lends %s", n.parent.name, FormatAmount(r, avail-localFree))
		default:
			fmt.Fprintf(&b, ", %s of it in use by other queues in cohort %s", FormatAmount(r, localFree-avail), n.parent.name)
		}
	}
	b.WriteString(")")
	return b.String()
}
