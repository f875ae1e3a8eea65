package scheduler

import (
	"fmt"
	"sort"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"

	fleetq "github.com/fleetq/fleetq/api/fleetq/v1alpha1"
	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/internal/engine/nodefit"
	"github.com/fleetq/fleetq/internal/workload"
	"github.com/fleetq/fleetq/worker/admission"
	"github.com/fleetq/fleetq/worker/capacity"
)

// copyState is one copied Workload with its Job and pods, as one pass read them.
type copyState struct {
	wl  *kueue.Workload
	job *batchv1.Job
	// invalid says why the copy cannot be admitted at all (no Job, no ClusterQueue annotation).
	invalid string
	// finished is the Finished condition the Job's state calls for, if the Job finished.
	finished *finish
	plan     admission.Copy
}

type finish struct {
	reason, message string
}

// podUsage is what one Job's non-terminal bound pods hold, per node.
type podUsage struct {
	held  map[string]capacity.Amounts
	count map[string]int32
}

// usageByJob groups bound non-terminal pods by the UID of the Job that owns them.
func usageByJob(pods []*corev1.Pod) map[types.UID]*podUsage {
	out := map[types.UID]*podUsage{}
	for _, p := range pods {
		uid := types.UID(p.Labels[batchv1.ControllerUidLabel])
		if uid == "" || p.Spec.NodeName == "" || capacity.Terminal(p) {
			continue
		}
		u := out[uid]
		if u == nil {
			u = &podUsage{held: map[string]capacity.Amounts{}, count: map[string]int32{}}
			out[uid] = u
		}
		if u.held[p.Spec.NodeName] == nil {
			u.held[p.Spec.NodeName] = capacity.Amounts{}
		}
		u.held[p.Spec.NodeName].Add(capacity.PodRequests(&p.Spec))
		u.count[p.Spec.NodeName]++
	}
	return out
}

// ownerJob finds the Job a copy's ownerReference names, among the origin-labelled Jobs.
func ownerJob(wl *kueue.Workload, jobs map[types.NamespacedName]*batchv1.Job) *batchv1.Job {
	for _, ref := range wl.OwnerReferences {
		if ref.Kind != "Job" || ref.APIVersion != batchv1.SchemeGroupVersion.String() {
			continue
		}
		if j := jobs[types.NamespacedName{Namespace: wl.Namespace, Name: ref.Name}]; j != nil && j.UID == ref.UID {
			return j
		}
	}
	return nil
}

// jobFinished reads a Job's terminal condition.
func jobFinished(job *batchv1.Job) *finish {
	for _, c := range job.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			return &finish{kueue.WorkloadFinishedReasonSucceeded, orDefault(c.Message, "Job finished successfully")}
		case batchv1.JobFailed:
			return &finish{kueue.WorkloadFinishedReasonFailed, orDefault(c.Message, "Job failed: "+c.Reason)}
		}
	}
	return nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// podSets turns a copy's pod sets into nodefit's, taking node selection from the Job's pod template
// when the workload has one pod set (as a batch/v1 Job does): the manager injected the flavor's
// nodeSelector and tolerations there, not into the Workload.
func podSets(wl *kueue.Workload, job *batchv1.Job, flavors []*kueue.ResourceFlavor) []nodefit.PodSet {
	out := make([]nodefit.PodSet, 0, len(wl.Spec.PodSets))
	for i := range wl.Spec.PodSets {
		ps := &wl.Spec.PodSets[i]
		spec := &ps.Template.Spec
		if len(wl.Spec.PodSets) == 1 && job != nil {
			spec = &job.Spec.Template.Spec
		}
		var required *corev1.NodeSelector
		if spec.Affinity != nil && spec.Affinity.NodeAffinity != nil {
			required = spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
		}
		fit := nodefit.PodSet{
			Name:                 string(ps.Name),
			Count:                ps.Count,
			Requests:             capacity.PodRequests(spec),
			NodeSelector:         spec.NodeSelector,
			RequiredNodeAffinity: required,
			Tolerations:          spec.Tolerations,
		}
		if f := selectedFlavor(spec.NodeSelector, flavors); f != nil {
			fit.FlavorLabels = f.Spec.NodeLabels
		}
		out = append(out, fit)
	}
	return out
}

// selectedFlavor is the first flavor (by name) whose nodeLabels the pod's node selector carries:
// the one the manager admitted the workload with and injected.
func selectedFlavor(selector map[string]string, flavors []*kueue.ResourceFlavor) *kueue.ResourceFlavor {
	for _, f := range flavors {
		if len(f.Spec.NodeLabels) == 0 {
			continue
		}
		all := true
		for k, v := range f.Spec.NodeLabels {
			if selector[k] != v {
				all = false
				break
			}
		}
		if all {
			return f
		}
	}
	return nil
}

// expectedPods is how many pods of a pod set should be running now: the count, less what a Job
// with completions has already completed.
func expectedPods(wl *kueue.Workload, job *batchv1.Job, ps *kueue.PodSet) int32 {
	n := ps.Count
	if len(wl.Spec.PodSets) == 1 && job != nil && job.Spec.Completions != nil {
		n = min(n, max(0, *job.Spec.Completions-job.Status.Succeeded))
	}
	return n
}

// admittedAt is when the agent reserved quota for a copy, by its own clock.
func admittedAt(wl *kueue.Workload) time.Time {
	if c := meta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadQuotaReserved); c != nil && c.Status == "True" {
		return c.LastTransitionTime.Time
	}
	return time.Time{}
}

// readCopy classifies one copy for this pass.
func (s *Scheduler) readCopy(wl *kueue.Workload, jobs map[types.NamespacedName]*batchv1.Job, usage map[types.UID]*podUsage, flavors []*kueue.ResourceFlavor) *copyState {
	c := &copyState{wl: wl, job: ownerJob(wl, jobs)}
	switch {
	case c.job == nil:
		c.invalid = fmt.Sprintf("waiting for its Job: no batch/v1 Job with label %s=%s owns it", fleetq.OriginLabel, s.Origin)
	case wl.Annotations[fleetq.OriginClusterQueueAnnotation] == "":
		c.invalid = fmt.Sprintf("cannot admit: annotation %s (the origin ClusterQueue) is missing", fleetq.OriginClusterQueueAnnotation)
	}
	if c.job != nil {
		c.finished = jobFinished(c.job)
	}
	p := &c.plan
	p.Key = workload.Key(wl)
	p.Priority = ptrOr(wl.Spec.Priority, 0)
	p.Policy = fleetq.LocalPreemptionPolicy(wl.Annotations[fleetq.LocalPreemptionAnnotation])
	p.CreatedAt = wl.CreationTimestamp.Time
	p.PodSets = podSets(wl, c.job, flavors)
	p.Held, p.Bound, p.Missing = map[string]capacity.Amounts{}, map[string]map[string]int32{}, map[string]int32{}
	if c.job != nil {
		if u := usage[c.job.UID]; u != nil {
			p.Held = u.held
			// A Job's pods are not labelled with their pod set; a batch/v1 Job has exactly one.
			if len(wl.Spec.PodSets) > 0 {
				p.Bound[string(wl.Spec.PodSets[0].Name)] = u.count
			}
		}
	}
	a, assumed := s.assumed(wl)
	switch {
	case workload.IsEvicted(wl) || s.evicted(wl):
		p.Phase = admission.Evicting
	case workload.HasQuotaReservation(wl) || assumed:
		p.Phase = admission.Admitted
		p.AdmittedAt = admittedAt(wl)
		if assumed {
			p.AdmittedAt = a.at
		}
		if pl, ok := s.placements(wl.UID); ok {
			p.Planned = pl
		}
		if c.finished == nil {
			for i := range wl.Spec.PodSets {
				ps := &wl.Spec.PodSets[i]
				bound := int32(0)
				for _, n := range p.Bound[string(ps.Name)] {
					bound += n
				}
				p.Missing[string(ps.Name)] = max(0, expectedPods(wl, c.job, ps)-bound)
			}
		}
	default:
		p.Phase = admission.Pending
	}
	return c
}

func ptrOr[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

// sortedFlavors returns the flavors in name order.
func sortedFlavors(list []kueue.ResourceFlavor) []*kueue.ResourceFlavor {
	out := make([]*kueue.ResourceFlavor, len(list))
	for i := range list {
		out[i] = &list[i]
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
