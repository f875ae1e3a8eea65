package integration

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Registry holds the adapters of the kinds a process integrates, keyed by GroupVersionKind.
type Registry struct {
	byGVK map[schema.GroupVersionKind]Adapter
	order []Adapter
}

// NewRegistry registers adapters; two adapters for one kind or one framework name are an error.
func NewRegistry(adapters ...Adapter) (*Registry, error) {
	r := &Registry{byGVK: map[schema.GroupVersionKind]Adapter{}}
	names := map[string]bool{}
	for _, a := range adapters {
		if _, dup := r.byGVK[a.GVK()]; dup {
			return nil, fmt.Errorf("integration %s: kind %s is integrated twice", a.Framework(), a.GVK())
		}
		if names[a.Framework()] {
			return nil, fmt.Errorf("integration %s is registered twice", a.Framework())
		}
		names[a.Framework()] = true
		r.byGVK[a.GVK()] = a
		r.order = append(r.order, a)
	}
	return r, nil
}

// Adapters lists the registered adapters in registration order (none for a nil registry).
func (r *Registry) Adapters() []Adapter {
	if r == nil {
		return nil
	}
	return slices.Clone(r.order)
}

// ForGVK returns the adapter of a kind.
func (r *Registry) ForGVK(gvk schema.GroupVersionKind) (Adapter, bool) {
	if r == nil {
		return nil, false
	}
	a, ok := r.byGVK[gvk]
	return a, ok
}

// ForOwner returns the adapter of the kind an ownerReference names.
func (r *Registry) ForOwner(ref metav1.OwnerReference) (Adapter, bool) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return nil, false
	}
	return r.ForGVK(gv.WithKind(ref.Kind))
}

// Owner returns the controller ownerReference of obj that names an integrated kind, with its
// adapter.
func (r *Registry) Owner(obj metav1.Object) (*metav1.OwnerReference, Adapter, bool) {
	ref := metav1.GetControllerOf(obj)
	if ref == nil {
		return nil, nil, false
	}
	a, ok := r.ForOwner(*ref)
	return ref, a, ok
}

// GroupOf returns the grouping kind and the group name of a group's Workload: the manager's group
// controller and dispatch label it with the kind's group label (it is owned by none of its
// members), so the label is how the manager, dispatch and the agent all recognise one.
func (r *Registry) GroupOf(wl metav1.Object) (Adapter, string, bool) {
	for _, a := range r.Adapters() {
		if g, ok := a.(Grouper); ok && wl.GetLabels()[g.GroupLabel()] != "" {
			return a, wl.GetLabels()[g.GroupLabel()], true
		}
	}
	return nil, "", false
}

// Select keeps the adapters whose framework names are listed, in the list's order; an unknown
// name is an error that lists the known ones.
func Select(available []Adapter, frameworks []string) ([]Adapter, error) {
	byName := map[string]Adapter{}
	for _, a := range available {
		byName[a.Framework()] = a
	}
	var out []Adapter
	for _, f := range frameworks {
		a, ok := byName[f]
		if !ok {
			known := make([]string, 0, len(byName))
			for n := range byName {
				known = append(known, n)
			}
			sort.Strings(known)
			return nil, fmt.Errorf("integration %q is not known; known integrations: %s", f, strings.Join(known, ", "))
		}
		out = append(out, a)
	}
	return out, nil
}

// NewObject returns an empty object of the owner's kind, named as the ownerReference says.
func NewObject(a Adapter, namespace string, ref metav1.OwnerReference) client.Object {
	obj := a.New()
	obj.SetNamespace(namespace)
	obj.SetName(ref.Name)
	return obj
}

// NewList returns an empty list of the adapter's kind: typed when the kind is (from the scheme),
// unstructured otherwise, so it is served by the same informer as the kind's objects.
func NewList(a Adapter, scheme *runtime.Scheme) (client.ObjectList, error) {
	gvk := a.GVK().GroupVersion().WithKind(a.GVK().Kind + "List")
	if _, ok := a.New().(*unstructured.Unstructured); ok {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(gvk)
		return l, nil
	}
	obj, err := scheme.New(gvk)
	if err != nil {
		return nil, fmt.Errorf("integration %s: %w", a.Framework(), err)
	}
	l, ok := obj.(client.ObjectList)
	if !ok {
		return nil, fmt.Errorf("integration %s: %s is not a list", a.Framework(), gvk)
	}
	return l, nil
}

// Items returns the objects of a list.
func Items(list client.ObjectList) ([]client.Object, error) {
	objs, err := meta.ExtractList(list)
	if err != nil {
		return nil, err
	}
	out := make([]client.Object, 0, len(objs))
	for _, o := range objs {
		if co, ok := o.(client.Object); ok {
			out = append(out, co)
		}
	}
	return out, nil
}
