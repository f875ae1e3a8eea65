package differential

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
)

// State is what a system decided, as seen once it settled after a step: per Workload name.
type State map[string]Decision

// Decision is one Workload's standing: the parts both systems must agree on.
type Decision struct {
	// Reserved: the Workload holds quota.
	Reserved bool `json:"reserved,omitempty"`
	// Flavors are "podset/resource=flavor" (without the scenario's prefix), sorted; only when Reserved.
	Flavors []string `json:"flavors,omitempty"`
	// Evictions counts the times the Workload was evicted so far.
	Evictions int `json:"evictions,omitempty"`
	// Gone: finished or deleted.
	Gone bool `json:"gone,omitempty"`
	// Why is the system's QuotaReserved message while pending: shown in reproductions, never compared.
	Why string `json:"why,omitempty"`
}

func (d Decision) String() string {
	switch {
	case d.Gone:
		return "gone"
	case d.Reserved:
		return fmt.Sprintf("reserved on %s (evicted %d×)", strings.Join(d.Flavors, ","), d.Evictions)
	}
	return fmt.Sprintf("pending (evicted %d×)", d.Evictions)
}

// Eviction is a Workload the system evicted during a step, and the reason it gave.
type Eviction struct {
	Workload string `json:"workload"`
	Reason   string `json:"reason"`
	Message  string `json:"message,omitempty"`
}

// observe reads the decisions off the Workloads: evictions counted so far come from the runner.
func observe(n Names, wls []kueue.Workload, evictions map[string]int) State {
	st := State{}
	for i := range wls {
		wl := &wls[i]
		d := Decision{Evictions: evictions[wl.Name]}
		switch {
		case !wl.DeletionTimestamp.IsZero() || meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadFinished):
			d.Gone = true
		case meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadQuotaReserved) && wl.Status.Admission != nil:
			d.Reserved = true
			for _, ps := range wl.Status.Admission.PodSetAssignments {
				for r, f := range ps.Flavors {
					d.Flavors = append(d.Flavors, fmt.Sprintf("%s/%s=%s", ps.Name, r, strings.TrimPrefix(string(f), n.Prefix)))
				}
			}
			sort.Strings(d.Flavors)
		default:
			if c := meta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadQuotaReserved); c != nil {
				d.Why = c.Message
			}
		}
		st[wl.Name] = d
	}
	return st
}

// equal reports whether two states hold the same decisions.
func (s State) equal(o State) bool {
	if len(s) != len(o) {
		return false
	}
	for k, a := range s {
		b, ok := o[k]
		if !ok || a.String() != b.String() {
			return false
		}
	}
	return true
}

// reserved are the names of the Workloads holding quota, sorted.
func (s State) reserved() []string {
	var out []string
	for k, d := range s {
		if d.Reserved {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// live are the names of the Workloads neither finished nor deleted, sorted.
func (s State) live() []string {
	var out []string
	for k, d := range s {
		if !d.Gone {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// evicting: a Workload the system evicted and whose reservation the runner has not yet cleared.
func evicting(wl *kueue.Workload) bool {
	return meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadEvicted) &&
		meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadQuotaReserved)
}

// evictionOf is the reason and message of a Workload's eviction: the Preempted condition's reason
// (InClusterQueue, InCohortReclamation, ...) when it was preempted, else the Evicted condition's.
func evictionOf(wl *kueue.Workload) Eviction {
	e := Eviction{Workload: wl.Name}
	if c := meta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadPreempted); c != nil && c.Status == metav1.ConditionTrue {
		e.Reason, e.Message = c.Reason, c.Message
		return e
	}
	if c := meta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadEvicted); c != nil {
		e.Reason, e.Message = c.Reason, c.Message
	}
	return e
}
