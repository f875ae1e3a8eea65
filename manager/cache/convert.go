package cache

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/internal/engine"
	"github.com/fleetq/fleetq/internal/podrequest"
	"github.com/fleetq/fleetq/internal/workload"
)

// Flavor converts a ResourceFlavor into the engine's form.
func Flavor(rf *kueue.ResourceFlavor) engine.ResourceFlavor {
	return engine.ResourceFlavor{
		Name:        rf.Name,
		NodeLabels:  rf.Spec.NodeLabels,
		NodeTaints:  rf.Spec.NodeTaints,
		Tolerations: rf.Spec.Tolerations,
	}
}

// ClusterQueue converts a ClusterQueue into the engine's form, filling Kueue's defaults for
// fields an object created without the defaulting webhook may lack.
func ClusterQueue(cq *kueue.ClusterQueue) engine.ClusterQueue {
	out := engine.ClusterQueue{
		Name:             cq.Name,
		Cohort:           cq.Spec.EffectiveCohort(),
		ResourceGroups:   resourceGroups(cq.Spec.ResourceGroups),
		QueueingStrategy: engine.BestEffortFIFO,
		FairSharing:      fairSharing(cq.Spec.FairSharing),
		Stopped:          cq.Spec.StopPolicy != nil && *cq.Spec.StopPolicy != kueue.None,
	}
	if cq.Spec.QueueingStrategy == kueue.StrictFIFO {
		out.QueueingStrategy = engine.StrictFIFO
	}
	if p := cq.Spec.Preemption; p != nil {
		out.Preemption.WithinClusterQueue = engine.PreemptionPolicy(p.WithinClusterQueue)
		out.Preemption.ReclaimWithinCohort = engine.PreemptionPolicy(p.ReclaimWithinCohort)
		if b := p.BorrowWithinCohort; b != nil {
			out.Preemption.BorrowWithinCohort = engine.BorrowWithinCohort{
				Policy:               engine.BorrowWithinCohortPolicy(b.Policy),
				MaxPriorityThreshold: b.MaxPriorityThreshold,
			}
		}
	}
	if f := cq.Spec.FlavorFungibility; f != nil {
		out.FlavorFungibility = engine.FlavorFungibility{
			WhenCanBorrow:  engine.FungibilityPolicy(f.WhenCanBorrow),
			WhenCanPreempt: engine.FungibilityPolicy(f.WhenCanPreempt),
		}
	}
	return out
}

// Cohort converts a Cohort into the engine's form.
func Cohort(c *kueue.Cohort) engine.Cohort {
	return engine.Cohort{
		Name:           c.Name,
		Parent:         string(c.Spec.ParentName),
		ResourceGroups: resourceGroups(c.Spec.ResourceGroups),
		FairSharing:    fairSharing(c.Spec.FairSharing),
	}
}

func resourceGroups(groups []kueue.ResourceGroup) []engine.ResourceGroup {
	out := make([]engine.ResourceGroup, 0, len(groups))
	for _, g := range groups {
		eg := engine.ResourceGroup{CoveredResources: g.CoveredResources}
		for _, f := range g.Flavors {
			fq := engine.FlavorQuotas{Name: string(f.Name)}
			for _, r := range f.Resources {
				fq.Resources = append(fq.Resources, engine.ResourceQuota{
					Name:           r.Name,
					Nominal:        engine.Amount(r.Name, r.NominalQuota),
					BorrowingLimit: amountPtr(r.Name, r.BorrowingLimit),
					LendingLimit:   amountPtr(r.Name, r.LendingLimit),
				})
			}
			eg.Flavors = append(eg.Flavors, fq)
		}
		out = append(out, eg)
	}
	return out
}

func amountPtr(name corev1.ResourceName, q *resource.Quantity) *int64 {
	if q == nil {
		return nil
	}
	v := engine.Amount(name, *q)
	return &v
}

func fairSharing(fs *kueue.FairSharing) *engine.FairSharing {
	if fs == nil || fs.Weight == nil {
		return nil
	}
	return &engine.FairSharing{Weight: fs.Weight.AsApproximateFloat64()}
}

// Workload converts a Workload into the engine's form. clusterQueue is where it queues (from
// its LocalQueue) when it is pending; an admitted workload's queue comes from its admission.
func Workload(wl *kueue.Workload, clusterQueue string) engine.Workload {
	out := engine.Workload{
		Key:          workload.Key(wl),
		ClusterQueue: clusterQueue,
		Timestamp:    workload.QueueTime(wl).UnixNano(),
		PodSets:      make([]engine.PodSet, 0, len(wl.Spec.PodSets)),
	}
	if wl.Spec.Priority != nil {
		out.Priority = *wl.Spec.Priority
	}
	for i := range wl.Spec.PodSets {
		ps := &wl.Spec.PodSets[i]
		spec := &ps.Template.Spec
		eps := engine.PodSet{
			Name:         string(ps.Name),
			Count:        ps.Count,
			Requests:     map[corev1.ResourceName]int64{},
			NodeSelector: spec.NodeSelector,
			Tolerations:  spec.Tolerations,
		}
		for name, q := range podrequest.Of(spec) {
			if !q.IsZero() {
				eps.Requests[name] = engine.Amount(name, q)
			}
		}
		if a := spec.Affinity; a != nil && a.NodeAffinity != nil {
			eps.RequiredNodeAffinity = a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
		}
		out.PodSets = append(out.PodSets, eps)
	}
	if adm := wl.Status.Admission; adm != nil && workload.HasQuotaReservation(wl) {
		out.ClusterQueue = string(adm.ClusterQueue)
		out.Admission = admission(adm)
		if c := meta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadQuotaReserved); c != nil {
			out.AdmittedAt = c.LastTransitionTime.UnixNano()
		}
		out.Evicting = workload.IsEvicted(wl)
	}
	return out
}

func admission(adm *kueue.Admission) *engine.Admission {
	out := &engine.Admission{ClusterQueue: string(adm.ClusterQueue)}
	for _, psa := range adm.PodSetAssignments {
		a := engine.PodSetAssignment{
			Name:    string(psa.Name),
			Flavors: make(map[corev1.ResourceName]string, len(psa.Flavors)),
			Usage:   make(map[corev1.ResourceName]int64, len(psa.ResourceUsage)),
		}
		if psa.Count != nil {
			a.Count = *psa.Count
		}
		for r, f := range psa.Flavors {
			a.Flavors[r] = string(f)
		}
		for r, q := range psa.ResourceUsage {
			a.Usage[r] = engine.Amount(r, q)
		}
		out.PodSets = append(out.PodSets, a)
	}
	return out
}

// Admission converts an engine admission back into the API form written to the workload status.
func Admission(a *engine.Admission) *kueue.Admission {
	out := &kueue.Admission{ClusterQueue: kueue.ClusterQueueReference(a.ClusterQueue)}
	for _, ps := range a.PodSets {
		psa := kueue.PodSetAssignment{
			Name:          kueue.PodSetReference(ps.Name),
			Flavors:       make(map[corev1.ResourceName]kueue.ResourceFlavorReference, len(ps.Flavors)),
			ResourceUsage: make(corev1.ResourceList, len(ps.Usage)),
			Count:         ptrTo(ps.Count),
		}
		for r, f := range ps.Flavors {
			psa.Flavors[r] = kueue.ResourceFlavorReference(f)
		}
		for r, v := range ps.Usage {
			psa.ResourceUsage[r] = quantity(r, v)
		}
		out.PodSetAssignments = append(out.PodSetAssignments, psa)
	}
	return out
}

// quantity turns an engine amount back into a Quantity in the resource's natural format.
func quantity(name corev1.ResourceName, v int64) resource.Quantity {
	q, err := resource.ParseQuantity(engine.FormatAmount(name, v))
	if err != nil {
		// FormatAmount always yields a valid quantity; fall back to the raw value.
		return *resource.NewQuantity(v, resource.DecimalSI)
	}
	return q
}

func ptrTo(v int32) *int32 { return &v }
