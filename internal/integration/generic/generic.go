// Package generic integrates a CRD fleetq has no built-in adapter for, from a description a user
// writes in the configuration (integrations.generic): where its suspend and managedBy fields are,
// where its pod templates are and how many pods each makes, and which status conditions end it.
// JobSet, whose module fleetq cannot import, is covered this way (see the README).
//
// What the adapter cannot know about a kind it gets from fleetq's own rules instead: a job counts
// as stopped once its suspend field is set, and its quota is released only after every pod
// carrying fleetq's identity label has ended (the job controller checks that for every kind).
package generic

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/internal/integration"
)

// Spec describes one kind, as integrations.generic[] of the manager's and the agent's
// configuration. Paths are dotted field paths ("spec.suspend").
type Spec struct {
	// Group, Version and Kind name the CRD's kind (jobset.x-k8s.io, v1alpha2, JobSet).
	Group   string `json:"group"`
	Version string `json:"version"`
	Kind    string `json:"kind"`
	// Resource is the kind's resource name (plural); default the lowercase kind with an "s". The
	// charts grant the manager and the agent access to it; the start fails if the cluster
	// serves the kind under another name.
	Resource string `json:"resource,omitempty"`
	// SuspendPath is the boolean that keeps the kind's controller from creating pods.
	SuspendPath string `json:"suspendPath"`
	// ManagedByPath is the field that hands the object to another controller (MultiKueue); ""
	// when the kind has none: on a multi-cluster queue the management cluster's object then
	// stays suspended while its copy runs, as for Kubeflow's jobs.
	ManagedByPath string `json:"managedByPath,omitempty"`
	// PodSets say where the pod templates are; at least one.
	PodSets []PodSetSpec `json:"podSets"`
	// SucceededConditions and FailedConditions are status.conditions types whose True status
	// ends the job, as succeeded or failed; without any the job never finishes by itself (a
	// service), and its quota is released when it is deleted.
	SucceededConditions []string `json:"succeededConditions,omitempty"`
	FailedConditions    []string `json:"failedConditions,omitempty"`
}

// PodSetSpec is one pod template, or a list whose every item holds one.
type PodSetSpec struct {
	// Name is the pod set's name; with List, NameField names it per item instead.
	Name string `json:"name,omitempty"`
	// List is the path of a list each of whose items is a pod set (spec.replicatedJobs).
	List string `json:"list,omitempty"`
	// NameField is the path, inside each List item, of the pod set's name.
	NameField string `json:"nameField,omitempty"`
	// Template is the path of the pod template: from the object, or inside each List item.
	Template string `json:"template"`
	// Count lists integer fields (same base as Template) whose product is the pod count; a
	// missing field counts 1, so a pod set without Count has one pod.
	Count []string `json:"count,omitempty"`
}

// Framework is the kind's name in integrations: "<group>/<lowercase kind>", as Kueue names its
// frameworks.
func (s Spec) Framework() string { return s.Group + "/" + strings.ToLower(s.Kind) }

// ResourceName is Resource, or its default.
func (s Spec) ResourceName() string {
	if s.Resource != "" {
		return s.Resource
	}
	return strings.ToLower(s.Kind) + "s"
}

// GVK is the kind's group, version and kind.
func (s Spec) GVK() schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: s.Group, Version: s.Version, Kind: s.Kind}
}

// Adapter is the integration.Adapter of one Spec.
type Adapter struct {
	spec Spec
}

var _ integration.Adapter = Adapter{}

// New returns the adapter of a spec the configuration validated.
func New(s Spec) Adapter { return Adapter{spec: s} }

// Spec returns the description the adapter follows.
func (a Adapter) Spec() Spec { return a.spec }

// Framework implements integration.Adapter.
func (a Adapter) Framework() string { return a.spec.Framework() }

// GVK implements integration.Adapter.
func (a Adapter) GVK() schema.GroupVersionKind { return a.spec.GVK() }

// Fields implements integration.Adapter.
func (a Adapter) Fields() integration.Fields {
	return integration.Fields{Suspend: a.spec.SuspendPath, ManagedBy: a.spec.ManagedByPath}
}

// New implements integration.Adapter.
func (a Adapter) New() client.Object { return integration.NewUnstructured(a.GVK()) }

// podSet is one pod set and the map its template path starts from.
type podSet struct {
	kueue.PodSet
	base     map[string]any
	template integration.Path
}

// podSets reads every pod set, in the spec's order (list items in their order).
func (a Adapter) podSets(obj client.Object) ([]podSet, error) {
	content := integration.Content(obj)
	var out []podSet
	seen := map[kueue.PodSetReference]string{}
	add := func(name string, where string, base map[string]any, ps PodSetSpec) error {
		if name == "" {
			return fmt.Errorf("%s: the pod set has no name", where)
		}
		ref := kueue.PodSetReference(strings.ToLower(name))
		if other, dup := seen[ref]; dup {
			return fmt.Errorf("%s: pod set %q is also %s; pod set names must be unique", where, ref, other)
		}
		seen[ref] = where
		tp := integration.ParsePath(ps.Template)
		t, err := integration.Template(base, tp)
		if err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		count := int32(1)
		for _, c := range ps.Count {
			n, err := integration.Int32(base, integration.ParsePath(c), 1)
			if err != nil {
				return fmt.Errorf("%s: %w", where, err)
			}
			if n < 0 {
				return fmt.Errorf("%s: %s is %d; it must not be negative", where, c, n)
			}
			count *= n
		}
		out = append(out, podSet{PodSet: kueue.PodSet{Name: ref, Count: count, Template: *t}, base: base, template: tp})
		return nil
	}
	for _, ps := range a.spec.PodSets {
		if ps.List == "" {
			if err := add(ps.Name, ps.Template, content, ps); err != nil {
				return nil, err
			}
			continue
		}
		lp := integration.ParsePath(ps.List)
		items, ok, err := unstructured.NestedFieldNoCopy(content, lp...)
		if err != nil || !ok {
			return nil, fmt.Errorf("%s is missing", ps.List)
		}
		list, isList := items.([]any)
		if !isList || len(list) == 0 {
			return nil, fmt.Errorf("%s must be a list with at least one item", ps.List)
		}
		for i, item := range list {
			where := fmt.Sprintf("%s[%d]", ps.List, i)
			m, isMap := item.(map[string]any)
			if !isMap {
				return nil, fmt.Errorf("%s is not an object", where)
			}
			name, _, _ := unstructured.NestedString(m, integration.ParsePath(ps.NameField)...)
			if err := add(name, where, m, ps); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// podSetOf is a listed pod set's workload pod set, for the integration helpers.
func podSetOf(ps podSet) *kueue.PodSet { return &ps.PodSet }

// PodSets implements integration.Adapter.
func (a Adapter) PodSets(obj client.Object) ([]kueue.PodSet, error) {
	sets, err := a.podSets(obj)
	if err != nil {
		return nil, err
	}
	return integration.PodSetsOf(sets, podSetOf), nil
}

// Suspended implements integration.Adapter.
func (a Adapter) Suspended(obj client.Object) bool {
	return integration.Bool(obj, integration.ParsePath(a.spec.SuspendPath))
}

// SetSuspended implements integration.Adapter.
func (a Adapter) SetSuspended(obj client.Object, suspended bool) {
	integration.SetBool(obj, integration.ParsePath(a.spec.SuspendPath), suspended)
}

// ApplyPlacements implements integration.Adapter. A partial admission's lower count is not
// written back: the kind's count fields may be shared or derived, so pod sets are admitted whole.
func (a Adapter) ApplyPlacements(obj client.Object, placements []integration.PodSetPlacement) error {
	sets, err := a.podSets(obj)
	if err != nil {
		return err
	}
	return integration.ApplyTemplates(a, obj, placements, sets, podSetOf,
		func(ps podSet, t *corev1.PodTemplateSpec, _ integration.PodSetPlacement) error {
			return integration.SetTemplate(ps.base, ps.template, t)
		})
}

// RestorePodSets implements integration.Adapter.
func (a Adapter) RestorePodSets(obj client.Object, original []kueue.PodSet) bool {
	sets, err := a.podSets(obj)
	if err != nil {
		return false
	}
	return integration.RestoreTemplates(original, sets, podSetOf,
		func(ps podSet, t *corev1.PodTemplateSpec) error {
			return integration.SetTemplate(ps.base, ps.template, t)
		})
}

// Status implements integration.Adapter: the configured conditions end the job; until then it
// is active unless suspended (its pods are then waited for by fleetq's pod check).
func (a Adapter) Status(obj client.Object) integration.Status {
	conds := integration.Conditions(obj)
	for _, t := range a.spec.FailedConditions {
		if c, ok := integration.ConditionTrue(conds, t); ok {
			return integration.Status{Finished: true, Failed: true, Message: message(a.spec.Kind, c)}
		}
	}
	for _, t := range a.spec.SucceededConditions {
		if c, ok := integration.ConditionTrue(conds, t); ok {
			return integration.Status{Finished: true, Message: message(a.spec.Kind, c)}
		}
	}
	return integration.Status{Active: !a.Suspended(obj)}
}

func message(kind string, c integration.Condition) string {
	if c.Message != "" {
		return c.Message
	}
	if c.Reason != "" {
		return fmt.Sprintf("%s %s: %s", kind, c.Type, c.Reason)
	}
	return kind + " " + c.Type
}

// ManagedBy implements integration.Adapter.
func (a Adapter) ManagedBy(obj client.Object) string {
	if a.spec.ManagedByPath == "" {
		return ""
	}
	return integration.String(obj, integration.ParsePath(a.spec.ManagedByPath))
}

// SetManagedBy implements integration.Adapter.
func (a Adapter) SetManagedBy(obj client.Object, controller string) {
	if a.spec.ManagedByPath != "" {
		integration.SetString(obj, integration.ParsePath(a.spec.ManagedByPath), controller)
	}
}

// Copy implements integration.Adapter.
func (a Adapter) Copy(obj client.Object) client.Object { return integration.CopyUnstructured(obj) }

// MirrorStatus implements integration.Adapter.
func (a Adapter) MirrorStatus(local, remote client.Object) bool {
	return integration.MirrorUnstructuredStatus(local, remote)
}

// Validate reports what is wrong with the spec on its own (the CRD's schema is CheckSchema's).
func (s Spec) Validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Subdomain(s.Group) {
		errs = append(errs, field.Invalid(path.Child("group"), s.Group, msg))
	}
	if s.Version == "" {
		errs = append(errs, field.Required(path.Child("version"), "the kind's API version (v1alpha2)"))
	}
	if s.Kind == "" {
		errs = append(errs, field.Required(path.Child("kind"), "the kind (JobSet)"))
	}
	errs = append(errs, validPath(path.Child("suspendPath"), s.SuspendPath, true)...)
	errs = append(errs, validPath(path.Child("managedByPath"), s.ManagedByPath, false)...)
	if len(s.PodSets) == 0 {
		errs = append(errs, field.Required(path.Child("podSets"), "at least one pod set: where the kind's pod templates are"))
	}
	names := map[string]bool{}
	for i, ps := range s.PodSets {
		pp := path.Child("podSets").Index(i)
		switch {
		case ps.List == "" && ps.Name == "":
			errs = append(errs, field.Required(pp.Child("name"), "a pod set's name, or list and nameField for a list of pod sets"))
		case ps.List != "" && ps.Name != "":
			errs = append(errs, field.Forbidden(pp.Child("name"), "a list's pod sets are named by nameField"))
		case ps.List != "" && ps.NameField == "":
			errs = append(errs, field.Required(pp.Child("nameField"), "the field of each list item that names its pod set"))
		case ps.Name != "":
			lower := strings.ToLower(ps.Name)
			for _, msg := range validation.IsDNS1123Label(lower) {
				errs = append(errs, field.Invalid(pp.Child("name"), ps.Name, msg))
			}
			if names[lower] {
				errs = append(errs, field.Duplicate(pp.Child("name"), ps.Name))
			}
			names[lower] = true
		}
		errs = append(errs, validPath(pp.Child("list"), ps.List, false)...)
		errs = append(errs, validPath(pp.Child("nameField"), ps.NameField, false)...)
		errs = append(errs, validPath(pp.Child("template"), ps.Template, true)...)
		for j, c := range ps.Count {
			errs = append(errs, validPath(pp.Child("count").Index(j), c, true)...)
		}
	}
	return errs
}

// validPath checks a dotted path's syntax.
func validPath(p *field.Path, value string, required bool) field.ErrorList {
	if value == "" {
		if required {
			return field.ErrorList{field.Required(p, "a dotted field path such as spec.suspend")}
		}
		return nil
	}
	for _, seg := range strings.Split(value, ".") {
		if seg == "" || strings.ContainsAny(seg, "[]* ") {
			return field.ErrorList{field.Invalid(p, value, "must be a dotted path of field names (spec.template), without empty parts, indexes or wildcards")}
		}
	}
	return nil
}
