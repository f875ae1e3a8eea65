// Package enginetest has fluent builders for engine inputs, so a test states only what matters
// to it: MakeWorkload("ns/w", "cq").PodSets(MakePodSet("main", 2).Request("cpu", "1").Obj()).Obj().
// Quantities are written as in manifests ("1", "512Mi") and converted with engine.Amount.
package enginetest

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/fleetq/fleetq/internal/engine"
)

// Amount parses a manifest quantity into canonical units for resource name.
func Amount(name, q string) int64 {
	return engine.Amount(corev1.ResourceName(name), resource.MustParse(q))
}

// FlavorWrapper builds a ResourceFlavor.
type FlavorWrapper struct{ f engine.ResourceFlavor }

// MakeFlavor starts a flavor that matches every node.
func MakeFlavor(name string) *FlavorWrapper {
	return &FlavorWrapper{f: engine.ResourceFlavor{Name: name}}
}

// NodeLabel adds a node label.
func (w *FlavorWrapper) NodeLabel(k, v string) *FlavorWrapper {
	if w.f.NodeLabels == nil {
		w.f.NodeLabels = map[string]string{}
	}
	w.f.NodeLabels[k] = v
	return w
}

// Taint adds a node taint.
func (w *FlavorWrapper) Taint(key, value string, effect corev1.TaintEffect) *FlavorWrapper {
	w.f.NodeTaints = append(w.f.NodeTaints, corev1.Taint{Key: key, Value: value, Effect: effect})
	return w
}

// Toleration adds a toleration the flavor injects into pods.
func (w *FlavorWrapper) Toleration(t corev1.Toleration) *FlavorWrapper {
	w.f.Tolerations = append(w.f.Tolerations, t)
	return w
}

// Obj returns the flavor.
func (w *FlavorWrapper) Obj() engine.ResourceFlavor { return w.f }

// FlavorQuotasWrapper builds the quotas of one flavor.
type FlavorQuotasWrapper struct{ fq engine.FlavorQuotas }

// MakeFlavorQuotas starts the quotas of flavor name.
func MakeFlavorQuotas(name string) *FlavorQuotasWrapper {
	return &FlavorQuotasWrapper{fq: engine.FlavorQuotas{Name: name}}
}

// Resource adds a nominal quota; optional limits are borrowingLimit then lendingLimit ("" skips).
func (w *FlavorQuotasWrapper) Resource(name, nominal string, limits ...string) *FlavorQuotasWrapper {
	q := engine.ResourceQuota{Name: corev1.ResourceName(name), Nominal: Amount(name, nominal)}
	if len(limits) > 0 && limits[0] != "" {
		v := Amount(name, limits[0])
		q.BorrowingLimit = &v
	}
	if len(limits) > 1 && limits[1] != "" {
		v := Amount(name, limits[1])
		q.LendingLimit = &v
	}
	w.fq.Resources = append(w.fq.Resources, q)
	return w
}

// Obj returns the flavor quotas.
func (w *FlavorQuotasWrapper) Obj() engine.FlavorQuotas { return w.fq }

// group makes a resource group covering the resources of the first flavor, in order.
func group(fqs []engine.FlavorQuotas) engine.ResourceGroup {
	g := engine.ResourceGroup{Flavors: fqs}
	if len(fqs) > 0 {
		for _, r := range fqs[0].Resources {
			g.CoveredResources = append(g.CoveredResources, r.Name)
		}
	}
	return g
}

// ClusterQueueWrapper builds a ClusterQueue.
type ClusterQueueWrapper struct{ cq engine.ClusterQueue }

// MakeClusterQueue starts a BestEffortFIFO queue without preemption.
func MakeClusterQueue(name string) *ClusterQueueWrapper {
	return &ClusterQueueWrapper{cq: engine.ClusterQueue{Name: name, QueueingStrategy: engine.BestEffortFIFO}}
}

// Cohort sets the cohort.
func (w *ClusterQueueWrapper) Cohort(c string) *ClusterQueueWrapper { w.cq.Cohort = c; return w }

// ResourceGroup adds a group whose covered resources are those of the first flavor.
func (w *ClusterQueueWrapper) ResourceGroup(fqs ...engine.FlavorQuotas) *ClusterQueueWrapper {
	w.cq.ResourceGroups = append(w.cq.ResourceGroups, group(fqs))
	return w
}

// Strategy sets the queueing strategy.
func (w *ClusterQueueWrapper) Strategy(s engine.QueueingStrategy) *ClusterQueueWrapper {
	w.cq.QueueingStrategy = s
	return w
}

// WithinClusterQueue sets preemption within the queue.
func (w *ClusterQueueWrapper) WithinClusterQueue(p engine.PreemptionPolicy) *ClusterQueueWrapper {
	w.cq.Preemption.WithinClusterQueue = p
	return w
}

// ReclaimWithinCohort sets reclaim preemption.
func (w *ClusterQueueWrapper) ReclaimWithinCohort(p engine.PreemptionPolicy) *ClusterQueueWrapper {
	w.cq.Preemption.ReclaimWithinCohort = p
	return w
}

// BorrowWithinCohort sets preemption while borrowing; threshold may be nil.
func (w *ClusterQueueWrapper) BorrowWithinCohort(p engine.BorrowWithinCohortPolicy, threshold *int32) *ClusterQueueWrapper {
	w.cq.Preemption.BorrowWithinCohort = engine.BorrowWithinCohort{Policy: p, MaxPriorityThreshold: threshold}
	return w
}

// Fungibility sets whenCanBorrow and whenCanPreempt.
func (w *ClusterQueueWrapper) Fungibility(whenCanBorrow, whenCanPreempt engine.FungibilityPolicy) *ClusterQueueWrapper {
	w.cq.FlavorFungibility = engine.FlavorFungibility{WhenCanBorrow: whenCanBorrow, WhenCanPreempt: whenCanPreempt}
	return w
}

// Weight sets the fair-sharing weight.
func (w *ClusterQueueWrapper) Weight(v float64) *ClusterQueueWrapper {
	w.cq.FairSharing = &engine.FairSharing{Weight: v}
	return w
}

// Stopped sets stopPolicy Hold.
func (w *ClusterQueueWrapper) Stopped() *ClusterQueueWrapper { w.cq.Stopped = true; return w }

// Obj returns the queue.
func (w *ClusterQueueWrapper) Obj() engine.ClusterQueue { return w.cq }

// CohortWrapper builds a Cohort.
type CohortWrapper struct{ c engine.Cohort }

// MakeCohort starts a root cohort without quota.
func MakeCohort(name string) *CohortWrapper { return &CohortWrapper{c: engine.Cohort{Name: name}} }

// Parent sets the parent cohort.
func (w *CohortWrapper) Parent(p string) *CohortWrapper { w.c.Parent = p; return w }

// ResourceGroup adds a group of the cohort's own quota.
func (w *CohortWrapper) ResourceGroup(fqs ...engine.FlavorQuotas) *CohortWrapper {
	w.c.ResourceGroups = append(w.c.ResourceGroups, group(fqs))
	return w
}

// Weight sets the fair-sharing weight.
func (w *CohortWrapper) Weight(v float64) *CohortWrapper {
	w.c.FairSharing = &engine.FairSharing{Weight: v}
	return w
}

// Obj returns the cohort.
func (w *CohortWrapper) Obj() engine.Cohort { return w.c }

// PodSetWrapper builds a PodSet.
type PodSetWrapper struct{ ps engine.PodSet }

// MakePodSet starts a pod set of count pods.
func MakePodSet(name string, count int32) *PodSetWrapper {
	return &PodSetWrapper{ps: engine.PodSet{Name: name, Count: count, Requests: map[corev1.ResourceName]int64{}}}
}

// Request sets a per-pod request.
func (w *PodSetWrapper) Request(name, q string) *PodSetWrapper {
	w.ps.Requests[corev1.ResourceName(name)] = Amount(name, q)
	return w
}

// NodeSelector adds a node selector entry.
func (w *PodSetWrapper) NodeSelector(k, v string) *PodSetWrapper {
	if w.ps.NodeSelector == nil {
		w.ps.NodeSelector = map[string]string{}
	}
	w.ps.NodeSelector[k] = v
	return w
}

// RequiredNodeAffinity adds a required term with one requirement.
func (w *PodSetWrapper) RequiredNodeAffinity(key string, op corev1.NodeSelectorOperator, values ...string) *PodSetWrapper {
	if w.ps.RequiredNodeAffinity == nil {
		w.ps.RequiredNodeAffinity = &corev1.NodeSelector{}
	}
	w.ps.RequiredNodeAffinity.NodeSelectorTerms = append(w.ps.RequiredNodeAffinity.NodeSelectorTerms, corev1.NodeSelectorTerm{
		MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: op, Values: values}},
	})
	return w
}

// Toleration adds a toleration.
func (w *PodSetWrapper) Toleration(t corev1.Toleration) *PodSetWrapper {
	w.ps.Tolerations = append(w.ps.Tolerations, t)
	return w
}

// Obj returns the pod set.
func (w *PodSetWrapper) Obj() engine.PodSet { return w.ps }

// WorkloadWrapper builds a Workload.
type WorkloadWrapper struct{ w engine.Workload }

// MakeWorkload starts a pending workload of queue cq.
func MakeWorkload(key, cq string) *WorkloadWrapper {
	return &WorkloadWrapper{w: engine.Workload{Key: key, ClusterQueue: cq}}
}

// Priority sets the priority.
func (w *WorkloadWrapper) Priority(p int32) *WorkloadWrapper { w.w.Priority = p; return w }

// Timestamp sets the queue-order timestamp.
func (w *WorkloadWrapper) Timestamp(t int64) *WorkloadWrapper { w.w.Timestamp = t; return w }

// PodSets adds pod sets.
func (w *WorkloadWrapper) PodSets(ps ...engine.PodSet) *WorkloadWrapper {
	w.w.PodSets = append(w.w.PodSets, ps...)
	return w
}

// Request is shorthand for one pod set "main" of count pods with the given per-pod requests
// given as name, quantity pairs.
func (w *WorkloadWrapper) Request(count int32, pairs ...string) *WorkloadWrapper {
	ps := MakePodSet("main", count)
	for i := 0; i+1 < len(pairs); i += 2 {
		ps.Request(pairs[i], pairs[i+1])
	}
	return w.PodSets(ps.Obj())
}

// AdmittedIn admits the workload in flavor for every resource at time at.
func (w *WorkloadWrapper) AdmittedIn(flavor string, at int64) *WorkloadWrapper {
	adm := &engine.Admission{ClusterQueue: w.w.ClusterQueue}
	for _, ps := range w.w.PodSets {
		psa := engine.PodSetAssignment{Name: ps.Name, Count: ps.Count, Flavors: map[corev1.ResourceName]string{}, Usage: map[corev1.ResourceName]int64{}}
		for r, v := range ps.Requests {
			psa.Flavors[r] = flavor
			psa.Usage[r] = int64(ps.Count) * v
		}
		adm.PodSets = append(adm.PodSets, psa)
	}
	w.w.Admission = adm
	w.w.AdmittedAt = at
	return w
}

// Evicting marks an eviction under way.
func (w *WorkloadWrapper) Evicting() *WorkloadWrapper { w.w.Evicting = true; return w }

// Obj returns the workload.
func (w *WorkloadWrapper) Obj() engine.Workload { return w.w }

// Ptr returns a pointer to a copy of the workload, as queue.Manager.Add takes it.
func (w *WorkloadWrapper) Ptr() *engine.Workload {
	c := w.w
	return &c
}
