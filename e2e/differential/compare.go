package differential

import (
	"fmt"
	"sort"
	"strings"
)

// StepResult is one system's outcome of one step, once it settled.
type StepResult struct {
	State State `json:"state"`
	// Evictions happened during the step, sorted by Workload.
	Evictions []Eviction `json:"evictions,omitempty"`
}

// Kind groups differences for the summary.
type Kind string

// The kinds of difference, checked in this order (the first that applies names the difference).
const (
	// Victims: the systems evicted different Workloads.
	Victims Kind = "victim choice"
	// Borrowing: different Workloads hold quota, and one of them is over its queue's nominal quota.
	Borrowing Kind = "borrowing"
	// Admission: different Workloads hold quota, each within nominal quota (admission order).
	Admission Kind = "admission order"
	// Flavors: the same Workloads hold quota, on different flavors.
	Flavors Kind = "flavor choice"
	// Reasons: the same victims, evicted for different reasons.
	Reasons Kind = "eviction reason"
)

// Difference is the first step where the systems decided differently.
type Difference struct {
	Step int  `json:"step"`
	Kind Kind `json:"kind"`
	// Workloads are the ones decided differently, sorted.
	Workloads []string `json:"workloads"`
	// Kueue and Fleetq describe each differing Workload's standing in the two systems.
	Kueue  map[string]string `json:"kueue"`
	Fleetq map[string]string `json:"fleetq"`
	// KueueEvictions and FleetqEvictions are the step's evictions in each system.
	KueueEvictions  []Eviction `json:"kueueEvictions,omitempty"`
	FleetqEvictions []Eviction `json:"fleetqEvictions,omitempty"`
}

func (d *Difference) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "step %d: %s:", d.Step, d.Kind)
	for _, w := range d.Workloads {
		fmt.Fprintf(&b, " %s kueue=%q fleetq=%q;", w, d.Kueue[w], d.Fleetq[w])
	}
	if d.Kind == Victims || d.Kind == Reasons {
		fmt.Fprintf(&b, " kueue evicted %s, fleetq evicted %s", evictionList(d.KueueEvictions), evictionList(d.FleetqEvictions))
	}
	return b.String()
}

func evictionList(es []Eviction) string {
	if len(es) == 0 {
		return "none"
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Workload+" ("+e.Reason+")")
	}
	return strings.Join(out, ", ")
}

// Compare finds the first step where the two systems' results differ, or nil when they agree on
// every step both played.
func Compare(s *Scenario, kueueRes, fleetqRes []StepResult) *Difference {
	for i := range min(len(kueueRes), len(fleetqRes)) {
		if d := compareStep(s, i, kueueRes[i], fleetqRes[i]); d != nil {
			return d
		}
	}
	return nil
}

func compareStep(s *Scenario, step int, k, f StepResult) *Difference {
	d := &Difference{Step: step, Kueue: map[string]string{}, Fleetq: map[string]string{}, KueueEvictions: k.Evictions, FleetqEvictions: f.Evictions}
	names := map[string]bool{}
	for n := range k.State {
		names[n] = true
	}
	for n := range f.State {
		names[n] = true
	}
	reservedDiffer, flavorsDiffer := false, false
	for n := range names {
		a, b := k.State[n], f.State[n]
		if a.String() == b.String() {
			continue
		}
		d.Workloads = append(d.Workloads, n)
		d.Kueue[n], d.Fleetq[n] = a.String(), b.String()
		if a.Reserved != b.Reserved || a.Gone != b.Gone {
			reservedDiffer = true
		} else {
			flavorsDiffer = true
		}
	}
	sort.Strings(d.Workloads)
	victimsK, victimsF := victimNames(k.Evictions), victimNames(f.Evictions)
	switch {
	case victimsK != victimsF:
		d.Kind = Victims
	case reservedDiffer:
		d.Kind = Admission
		if queues := s.QueuesAt(step); overNominal(s, queues, k.State, d.Workloads) || overNominal(s, queues, f.State, d.Workloads) {
			d.Kind = Borrowing
		}
	case flavorsDiffer:
		d.Kind = Flavors
	case reasons(k.Evictions) != reasons(f.Evictions):
		d.Kind = Reasons
	default:
		if len(d.Workloads) == 0 {
			return nil
		}
		d.Kind = Admission // evicted a different number of times, same standing now
	}
	return d
}

func victimNames(es []Eviction) string {
	var out []string
	for _, e := range es {
		out = append(out, e.Workload)
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

func reasons(es []Eviction) string {
	var out []string
	for _, e := range es {
		out = append(out, e.Workload+"="+e.Reason)
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

// overNominal reports whether any of the given Workloads holds quota in st on a flavor where its
// queue's reservations exceed the queue's nominal quota: the Workload borrows.
func overNominal(s *Scenario, queues []Queue, st State, names []string) bool {
	wls := s.workloads()
	for _, n := range names {
		d := st[n]
		w, ok := wls[n]
		if !d.Reserved || !ok {
			continue
		}
		used := queueUsage(wls, st, w.Queue)
		for key, v := range used {
			if v > nominal(queues, w.Queue, key) && usesKey(d, key) {
				return true
			}
		}
	}
	return false
}

// usageKey is a flavor and a resource.
type usageKey struct{ flavor, resource string }

// queueUsage sums what a queue's reserved Workloads use, per flavor and resource.
func queueUsage(wls map[string]Workload, st State, queue string) map[usageKey]int64 {
	out := map[usageKey]int64{}
	for name, w := range wls {
		d := st[name]
		if w.Queue != queue || !d.Reserved {
			continue
		}
		for _, a := range d.Flavors {
			ps, res, flavor := splitAssignment(a)
			for _, p := range w.PodSets {
				if p.Name == ps {
					out[usageKey{flavor, res}] += int64(p.Count) * p.Requests[res]
				}
			}
		}
	}
	return out
}

func usesKey(d Decision, key usageKey) bool {
	for _, a := range d.Flavors {
		if _, res, flavor := splitAssignment(a); res == key.resource && flavor == key.flavor {
			return true
		}
	}
	return false
}

// splitAssignment splits "podset/resource=flavor".
func splitAssignment(a string) (podSet, res, flavor string) {
	left, flavor, _ := strings.Cut(a, "=")
	podSet, res, _ = strings.Cut(left, "/")
	return podSet, res, flavor
}

// nominal is a queue's nominal quota of a flavor and resource.
func nominal(queues []Queue, queue string, key usageKey) int64 {
	for _, q := range queues {
		if q.Name != queue {
			continue
		}
		for _, quota := range q.Quotas {
			if quota.Flavor == key.flavor {
				return quota.Nominal[key.resource]
			}
		}
	}
	return 0
}

// QueuesAt are the scenario's queues as the steps up to and including step left them: EditQuota
// steps applied.
func (s *Scenario) QueuesAt(step int) []Queue {
	out := make([]Queue, len(s.Queues))
	for i, q := range s.Queues {
		q.Quotas = append([]Quota(nil), q.Quotas...)
		out[i] = q
	}
	for _, st := range s.Steps[:min(step+1, len(s.Steps))] {
		if st.Kind != EditQuota {
			continue
		}
		for i := range out {
			if out[i].Name != st.Queue {
				continue
			}
			for j := range out[i].Quotas {
				if out[i].Quotas[j].Flavor == st.Flavor {
					out[i].Quotas[j].Nominal = st.Nominal
				}
			}
		}
	}
	return out
}

// workloads are the scenario's Workloads by name.
func (s *Scenario) workloads() map[string]Workload {
	out := map[string]Workload{}
	for _, st := range s.Steps {
		for _, w := range st.Workloads {
			out[w.Name] = w
		}
	}
	return out
}
