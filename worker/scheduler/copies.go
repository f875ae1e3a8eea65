package scheduler

import (
	"encoding/json"
	"fmt"
	"maps"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetq "github.com/fleetq/fleetq/api/fleetq/v1alpha1"
	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/internal/engine/nodefit"
	"github.com/fleetq/fleetq/internal/integration"
	"github.com/fleetq/fleetq/internal/workload"
	"github.com/fleetq/fleetq/worker/admission"
	"github.com/fleetq/fleetq/worker/capacity"
)

// copyState is one copied Workload with its job and pods, as one pass read them.
type copyState struct {
	wl *kueue.Workload
	// job is the job copy that owns the Workload, and a its kind's adapter; nil when missing
	// and for a group's copy.
	job client.Object
	a   integration.Adapter
	// members are a group's member copies (integration.Grouper) that are here, sorted by name;
	// nil for a job of its own.
	members []client.Object
	// invalid says why the copy cannot be admitted at all (no job, no ClusterQueue annotation).
	invalid string
	// finished is the Finished condition the job's state calls for, if the job finished.
	finished *finish
	plan     admission.Copy
}

type finish struct {
	reason, message string
}

// podUsage is what one workload's non-terminal bound pods hold, per node, and how many of each
// pod set are bound where.
type podUsage struct {
	held  map[string]capacity.Amounts
	bound map[string]map[string]int32
}

// usageByWorkload groups bound non-terminal pods by the workload UID the manager labelled their
// templates with (WorkloadUIDLabel), whatever kind of job made them.
func usageByWorkload(pods []*corev1.Pod) map[types.UID]*podUsage {
	out := map[types.UID]*podUsage{}
	for _, p := range pods {
		uid := types.UID(p.Labels[fleetq.WorkloadUIDLabel])
		if uid == "" || p.Spec.NodeName == "" || capacity.Terminal(p) {
			continue
		}
		u := out[uid]
		if u == nil {
			u = &podUsage{held: map[string]capacity.Amounts{}, bound: map[string]map[string]int32{}}
			out[uid] = u
		}
		if u.held[p.Spec.NodeName] == nil {
			u.held[p.Spec.NodeName] = capacity.Amounts{}
		}
		u.held[p.Spec.NodeName].Add(capacity.PodRequests(&p.Spec))
		ps := p.Labels[fleetq.PodSetLabel]
		if u.bound[ps] == nil {
			u.bound[ps] = map[string]int32{}
		}
		u.bound[ps][p.Spec.NodeName]++
	}
	return out
}

// jobKey names a job copy: its kind, namespace and name.
type jobKey struct {
	gvk schema.GroupVersionKind
	types.NamespacedName
}

// ownerJob finds the job copy a Workload copy's ownerReference names, among the origin-labelled
// copies of the integrated kinds.
func (s *Scheduler) ownerJob(wl *kueue.Workload, jobs map[jobKey]client.Object) (client.Object, integration.Adapter) {
	ref, a, ok := s.Integrations.Owner(wl)
	if !ok {
		return nil, nil
	}
	j := jobs[jobKey{a.GVK(), types.NamespacedName{Namespace: wl.Namespace, Name: ref.Name}}]
	if j == nil || j.GetUID() != ref.UID {
		return nil, nil
	}
	return j, a
}

// objects are what the agent starts and stops for a copy: its job, or every member of its group.
func (c *copyState) objects() []client.Object {
	if c.job != nil {
		return []client.Object{c.job}
	}
	return c.members
}

// memberKey names the member copies of one group's workload: their kind and the management
// cluster Workload's UID their labels carry.
type memberKey struct {
	gvk schema.GroupVersionKind
	uid types.UID
}

// groupMembers indexes the copies of grouping kinds (integration.Grouper) by the workload UID
// label the manager put on each member, sorted by name.
func (s *Scheduler) groupMembers(jobs map[jobKey]client.Object) map[memberKey][]client.Object {
	out := map[memberKey][]client.Object{}
	for k, j := range jobs {
		a, ok := s.Integrations.ForGVK(k.gvk)
		if _, grouper := a.(integration.Grouper); !ok || !grouper {
			continue
		}
		if uid := j.GetLabels()[fleetq.WorkloadUIDLabel]; uid != "" && j.GetDeletionTimestamp() == nil {
			mk := memberKey{k.gvk, types.UID(uid)}
			out[mk] = append(out[mk], j)
		}
	}
	for _, ms := range out {
		sort.Slice(ms, func(i, j int) bool { return ms[i].GetName() < ms[j].GetName() })
	}
	return out
}

// groupFinished is the Finished condition of a group's copy, by the rule the manager's group
// controller applies to the members here: once size members succeeded, or once a member that
// says it must not be retried (kueue.x-k8s.io/retriable-in-group: "false") ended and none runs.
// A member that failed otherwise waits for its replacement, whose copy joins the group.
func groupFinished(c *copyState, name string, size int32) *finish {
	succeeded, running, final := 0, 0, ""
	for _, m := range c.members {
		st := c.a.Status(m)
		switch {
		case !st.Finished:
			running++
		case !st.Failed:
			succeeded++
		}
		if st.Finished && m.GetAnnotations()[kueue.RetriableInGroupAnnotation] == "false" {
			final = m.GetName()
		}
	}
	kind := c.a.GVK().Kind
	switch {
	case int32(succeeded) >= size:
		return &finish{kueue.WorkloadFinishedReasonSucceeded, fmt.Sprintf("all %d %ss of group %s succeeded", succeeded, kind, name)}
	case final != "" && running == 0:
		return &finish{kueue.WorkloadFinishedReasonFailed, fmt.Sprintf("group %s ended without succeeding: %d of its %d %ss succeeded, and %s says %s: false",
			name, succeeded, size, kind, final, kueue.RetriableInGroupAnnotation)}
	}
	return nil
}

// podSetFlavors reads the flavors the manager admitted each pod set's resources with.
func podSetFlavors(wl *kueue.Workload) map[kueue.PodSetReference]map[corev1.ResourceName]kueue.ResourceFlavorReference {
	out := map[kueue.PodSetReference]map[corev1.ResourceName]kueue.ResourceFlavorReference{}
	if raw := wl.Annotations[fleetq.PodSetFlavorsAnnotation]; raw != "" {
		_ = json.Unmarshal([]byte(raw), &out) // a bad annotation steers nothing: the templates still carry the selectors
	}
	return out
}

// podSets turns a copy's pod sets into nodefit's. The manager injected each pod set's flavor
// node selector and tolerations into the Workload copy's templates, so they are read from there;
// the flavors' node labels are required as well.
func podSets(wl *kueue.Workload, flavors []*kueue.ResourceFlavor) []nodefit.PodSet {
	byName := map[string]*kueue.ResourceFlavor{}
	for _, f := range flavors {
		byName[f.Name] = f
	}
	assigned := podSetFlavors(wl)
	out := make([]nodefit.PodSet, 0, len(wl.Spec.PodSets))
	for i := range wl.Spec.PodSets {
		ps := &wl.Spec.PodSets[i]
		spec := &ps.Template.Spec
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
		for _, name := range assigned[ps.Name] {
			if f := byName[string(name)]; f != nil && len(f.Spec.NodeLabels) > 0 {
				if fit.FlavorLabels == nil {
					fit.FlavorLabels = map[string]string{}
				}
				maps.Copy(fit.FlavorLabels, f.Spec.NodeLabels)
			}
		}
		out = append(out, fit)
	}
	return out
}

// expectedPods is how many pods of a pod set should be running now: the count, less the pods that
// finished for good (a Job with completions).
func expectedPods(c *copyState, ps *kueue.PodSet) int32 {
	n := ps.Count
	if r, ok := c.a.(integration.Reclaimer); ok && c.job != nil {
		n = max(0, n-r.ReclaimablePods(c.job)[ps.Name])
	}
	for _, m := range c.members {
		// A group's member that ended needs no room any more.
		if m.GetLabels()[fleetq.PodSetLabel] == string(ps.Name) && c.a.Status(m).Finished {
			n = max(0, n-1)
		}
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
func (s *Scheduler) readCopy(wl *kueue.Workload, jobs map[jobKey]client.Object, members map[memberKey][]client.Object, usage map[types.UID]*podUsage, flavors []*kueue.ResourceFlavor) *copyState {
	c := &copyState{wl: wl}
	ga, group, grouped := s.Integrations.GroupOf(wl)
	var size int32
	if grouped {
		c.a = ga
		c.members = members[memberKey{ga.GVK(), types.UID(wl.Annotations[fleetq.OriginUIDAnnotation])}]
		for _, ps := range wl.Spec.PodSets {
			size += ps.Count
		}
	} else {
		c.job, c.a = s.ownerJob(wl, jobs)
	}
	switch {
	case grouped:
		if int32(len(c.members)) < size && !workload.HasQuotaReservation(wl) {
			// All of a group's members start together: none before every copy is here.
			c.invalid = fmt.Sprintf("waiting for the copies of group %s's members: %d of %d %ss are here", group, len(c.members), size, ga.GVK().Kind)
		}
	case c.job == nil:
		c.invalid = fmt.Sprintf("waiting for its job: no copy of an integrated kind with label %s=%s owns it", fleetq.OriginLabel, s.Origin)
		if ref := metaOwner(wl); ref != "" {
			c.invalid = fmt.Sprintf("waiting for its job: no %s with label %s=%s owns it", ref, fleetq.OriginLabel, s.Origin)
		}
	}
	if c.invalid == "" && wl.Annotations[fleetq.OriginClusterQueueAnnotation] == "" {
		c.invalid = fmt.Sprintf("cannot admit: annotation %s (the origin ClusterQueue) is missing", fleetq.OriginClusterQueueAnnotation)
	}
	if grouped {
		c.finished = groupFinished(c, group, size)
	} else if c.job != nil {
		if st := c.a.Status(c.job); st.Finished {
			c.finished = &finish{st.FinishedReason(), orDefault(st.Message, c.a.GVK().Kind+" finished")}
		}
	}
	p := &c.plan
	p.Key = workload.Key(wl)
	p.Priority = ptrOr(wl.Spec.Priority, 0)
	p.Policy = fleetq.LocalPreemptionPolicy(wl.Annotations[fleetq.LocalPreemptionAnnotation])
	p.CreatedAt = wl.CreationTimestamp.Time
	p.PodSets = podSets(wl, flavors)
	p.Held, p.Bound, p.Missing = map[string]capacity.Amounts{}, map[string]map[string]int32{}, map[string]int32{}
	if u := usage[types.UID(wl.Annotations[fleetq.OriginUIDAnnotation])]; u != nil {
		p.Held, p.Bound = u.held, u.bound
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
				p.Missing[string(ps.Name)] = max(0, expectedPods(c, ps)-bound)
			}
		}
	default:
		p.Phase = admission.Pending
	}
	return c
}

// metaOwner names the kind a Workload copy's controller reference points at, for messages.
func metaOwner(wl *kueue.Workload) string {
	for _, ref := range wl.OwnerReferences {
		if ref.Controller != nil && *ref.Controller {
			return ref.Kind + " " + ref.Name
		}
	}
	return ""
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
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
