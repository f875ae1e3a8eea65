package jobs

import (
	"maps"
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/ptr"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
)

// PodSetName is the one pod set of a batch/v1 Job.
const PodSetName kueue.PodSetReference = kueue.DefaultPodSetName

// PodSets describes a Job as the workload's pod sets: one set of parallelism pods (never more
// than completions) with the Job's pod template as the user wrote it.
func PodSets(job *batchv1.Job) []kueue.PodSet {
	count := ptr.Deref(job.Spec.Parallelism, 1)
	if c := job.Spec.Completions; c != nil && *c < count {
		count = *c
	}
	return []kueue.PodSet{{
		Name:     PodSetName,
		Template: *job.Spec.Template.DeepCopy(),
		Count:    count,
	}}
}

// PodSetsEqual reports whether a workload still describes the job (same counts and templates).
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

// Placement is what admission adds to a pod template: the assigned flavors' node labels and
// tolerations, plus admission checks' pod-set updates.
type Placement struct {
	NodeSelector map[string]string
	Tolerations  []corev1.Toleration
	Labels       map[string]string
	Annotations  map[string]string
}

// PlacementFor gathers the placement of one pod set from its assigned flavors (in resource
// name order, for a stable result) and the admission checks' updates.
func PlacementFor(psa *kueue.PodSetAssignment, flavors map[kueue.ResourceFlavorReference]*kueue.ResourceFlavor, checks []kueue.AdmissionCheckState) Placement {
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

// Restore puts back the scheduling fields of the template the user wrote (kept in the
// workload's pod set), undoing Inject when a job is suspended again.
func Restore(t *corev1.PodTemplateSpec, original *corev1.PodTemplateSpec) {
	t.Spec.NodeSelector = maps.Clone(original.Spec.NodeSelector)
	t.Spec.Tolerations = slices.Clone(original.Spec.Tolerations)
	t.Labels = maps.Clone(original.Labels)
	t.Annotations = maps.Clone(original.Annotations)
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
