package integration

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/ptr"

	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
)

// Placement is what admission adds to a pod template: the assigned flavors' node labels and
// tolerations, admission checks' pod-set updates, and fleetq's identity labels.
type Placement struct {
	NodeSelector map[string]string
	Tolerations  []corev1.Toleration
	Labels       map[string]string
	Annotations  map[string]string
}

// Flavors are the ResourceFlavors a workload was admitted with, by name.
type Flavors map[kueue.ResourceFlavorReference]*kueue.ResourceFlavor

// Placements gathers every pod set's placement from an admitted workload: its flavors (in
// resource name order, for a stable result), the admission checks' updates (nil for a worker's
// copy: they were meant for the management cluster) and the identity labels.
func Placements(wl *kueue.Workload, flavors Flavors, checks []kueue.AdmissionCheckState) []PodSetPlacement {
	if wl.Status.Admission == nil {
		return nil
	}
	out := make([]PodSetPlacement, 0, len(wl.Status.Admission.PodSetAssignments))
	for i := range wl.Status.Admission.PodSetAssignments {
		psa := &wl.Status.Admission.PodSetAssignments[i]
		p := PlacementFor(psa, flavors, checks)
		p.Labels[WorkloadUIDLabel] = string(wl.UID)
		p.Labels[PodSetLabel] = string(psa.Name)
		p.Labels[ManagedLabel] = "true"
		out = append(out, PodSetPlacement{Name: psa.Name, Count: psa.Count, Placement: p})
	}
	return out
}

// PlacementFor gathers the placement of one pod set from its assigned flavors and the admission
// checks' updates.
func PlacementFor(psa *kueue.PodSetAssignment, flavors Flavors, checks []kueue.AdmissionCheckState) Placement {
	p := Placement{NodeSelector: map[string]string{}, Labels: map[string]string{}, Annotations: map[string]string{}}
	seen := map[kueue.ResourceFlavorReference]bool{}
	for _, r := range slices.Sorted(maps.Keys(psa.Flavors)) {
		name := psa.Flavors[r]
		rf, ok := flavors[name]
		if !ok || seen[name] {
			continue
		}
		seen[name] = true
		maps.Copy(p.NodeSelector, rf.Spec.NodeLabels)
		p.Tolerations = appendMissing(p.Tolerations, rf.Spec.Tolerations...)
	}
	for _, ac := range checks {
		for _, u := range ac.PodSetUpdates {
			if u.Name != psa.Name {
				continue
			}
			maps.Copy(p.NodeSelector, u.NodeSelector)
			maps.Copy(p.Labels, u.Labels)
			maps.Copy(p.Annotations, u.Annotations)
			p.Tolerations = appendMissing(p.Tolerations, u.Tolerations...)
		}
	}
	return p
}

// Inject adds a placement to a pod template; the user's own selector entries and tolerations
// stay.
func Inject(t *corev1.PodTemplateSpec, p Placement) {
	if len(p.NodeSelector) > 0 {
		if t.Spec.NodeSelector == nil {
			t.Spec.NodeSelector = map[string]string{}
		}
		maps.Copy(t.Spec.NodeSelector, p.NodeSelector)
	}
	t.Spec.Tolerations = appendMissing(t.Spec.Tolerations, p.Tolerations...)
	if len(p.Labels) > 0 {
		if t.Labels == nil {
			t.Labels = map[string]string{}
		}
		maps.Copy(t.Labels, p.Labels)
	}
	if len(p.Annotations) > 0 {
		if t.Annotations == nil {
			t.Annotations = map[string]string{}
		}
		maps.Copy(t.Annotations, p.Annotations)
	}
}

// Restore puts back the scheduling fields of the template the user wrote, undoing Inject, and
// reports whether it changed anything.
func Restore(t *corev1.PodTemplateSpec, original *corev1.PodTemplateSpec) bool {
	before := t.DeepCopy()
	t.Spec.NodeSelector = maps.Clone(original.Spec.NodeSelector)
	t.Spec.Tolerations = slices.Clone(original.Spec.Tolerations)
	t.Labels = maps.Clone(original.Labels)
	t.Annotations = maps.Clone(original.Annotations)
	return !equality.Semantic.DeepEqual(before, t)
}

// Find returns the placement of a pod set, if there is one.
func Find(placements []PodSetPlacement, name kueue.PodSetReference) (PodSetPlacement, bool) {
	for _, p := range placements {
		if p.Name == name {
			return p, true
		}
	}
	return PodSetPlacement{}, false
}

// PodSetsOf is PodSets for an adapter that reads its pod sets into a list: the workload's pod sets,
// in the list's order.
func PodSetsOf[S any](sets []S, podSet func(S) *kueue.PodSet) []kueue.PodSet {
	out := make([]kueue.PodSet, len(sets))
	for i, s := range sets {
		out[i] = *podSet(s)
	}
	return out
}

// ApplyTemplates is ApplyPlacements for an adapter that reads its pod sets into a list: each
// placement's pod set gets its template with the placement injected, written back by set (which
// may also apply the placement's count); a placement naming no pod set is an error.
func ApplyTemplates[S any](a Adapter, obj client.Object, placements []PodSetPlacement, sets []S, podSet func(S) *kueue.PodSet, set func(S, *corev1.PodTemplateSpec, PodSetPlacement) error) error {
	for _, p := range placements {
		i := slices.IndexFunc(sets, func(s S) bool { return podSet(s).Name == p.Name })
		if i < 0 {
			return ErrNoPodSet(a, obj, p.Name)
		}
		t := podSet(sets[i]).Template.DeepCopy()
		Inject(t, p.Placement)
		if err := set(sets[i], t, p); err != nil {
			return err
		}
	}
	return nil
}

// RestoreTemplates is RestorePodSets for an adapter that reads its pod sets into a list: for each
// pod set that the workload's original pod sets name, it restores the scheduling fields of the
// template the user wrote and writes the template back with set; it reports whether any changed.
func RestoreTemplates[S any](original []kueue.PodSet, sets []S, podSet func(S) *kueue.PodSet, set func(S, *corev1.PodTemplateSpec) error) bool {
	changed := false
	for _, s := range sets {
		ps := podSet(s)
		o := FindPodSet(original, ps.Name)
		if o == nil {
			continue
		}
		t := ps.Template.DeepCopy()
		if Restore(t, &o.Template) && set(s, t) == nil {
			changed = true
		}
	}
	return changed
}

// FindPodSet returns the pod set of that name, if there is one.
func FindPodSet(podSets []kueue.PodSet, name kueue.PodSetReference) *kueue.PodSet {
	for i := range podSets {
		if podSets[i].Name == name {
			return &podSets[i]
		}
	}
	return nil
}

// PodSetsEqual reports whether a workload still describes its job (same names, counts and
// pod specs).
func PodSetsEqual(a, b []kueue.PodSet) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || a[i].Count != b[i].Count || !equality.Semantic.DeepEqual(a[i].Template.Spec, b[i].Template.Spec) {
			return false
		}
	}
	return true
}

func appendMissing(list []corev1.Toleration, add ...corev1.Toleration) []corev1.Toleration {
	for _, t := range add {
		if !slices.ContainsFunc(list, func(o corev1.Toleration) bool {
			return o.MatchToleration(&t) && o.Value == t.Value && ptr.Equal(o.TolerationSeconds, t.TolerationSeconds)
		}) {
			list = append(list, t)
		}
	}
	return list
}
