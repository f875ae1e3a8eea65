package integration

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Helpers for adapters of kinds fleetq reads as unstructured objects (CRDs whose Go types it does
// not import): fields by path, and pod templates in and out of their typed form.

// NewUnstructured returns an empty object of a kind.
func NewUnstructured(gvk schema.GroupVersionKind) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u
}

// Path is a field path ("spec.runPolicy.suspend").
type Path []string

// ParsePath splits a dotted field path.
func ParsePath(s string) Path { return strings.Split(s, ".") }

// String joins the path for messages.
func (p Path) String() string { return strings.Join(p, ".") }

// Child extends the path.
func (p Path) Child(elem ...string) Path { return append(append(Path{}, p...), elem...) }

// Content is the object's content as a map (the object itself for unstructured ones).
func Content(obj client.Object) map[string]any {
	return obj.(*unstructured.Unstructured).Object
}

// Bool reads a boolean field; a missing one is false.
func Bool(obj client.Object, p Path) bool {
	v, _, _ := unstructured.NestedBool(Content(obj), p...)
	return v
}

// SetBool sets a boolean field, creating the maps on its path.
func SetBool(obj client.Object, p Path, v bool) {
	_ = unstructured.SetNestedField(Content(obj), v, p...)
}

// String reads a string field; a missing one is "".
func String(obj client.Object, p Path) string {
	v, _, _ := unstructured.NestedString(Content(obj), p...)
	return v
}

// SetString sets a string field, or removes it when v is "".
func SetString(obj client.Object, p Path, v string) {
	if v == "" {
		unstructured.RemoveNestedField(Content(obj), p...)
		return
	}
	_ = unstructured.SetNestedField(Content(obj), v, p...)
}

// Int32 reads an integer field, def when it is missing.
func Int32(m map[string]any, p Path, def int32) (int32, error) {
	v, ok, err := unstructured.NestedFieldNoCopy(m, p...)
	if err != nil || !ok || v == nil {
		return def, err
	}
	switch n := v.(type) {
	case int64:
		return int32(n), nil
	case float64:
		return int32(n), nil
	case int32:
		return n, nil
	case int:
		return int32(n), nil
	}
	return def, fmt.Errorf("%s is a %T, not an integer", p, v)
}

// Template reads the pod template at a path of a map.
func Template(m map[string]any, p Path) (*corev1.PodTemplateSpec, error) {
	raw, ok, err := unstructured.NestedMap(m, p...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	if !ok {
		return nil, fmt.Errorf("%s is missing", p)
	}
	t := &corev1.PodTemplateSpec{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, t); err != nil {
		return nil, fmt.Errorf("%s is not a pod template: %w", p, err)
	}
	return t, nil
}

// SetTemplate writes a pod template at a path of a map.
func SetTemplate(m map[string]any, p Path, t *corev1.PodTemplateSpec) error {
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(t)
	if err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	delete(raw, "creationTimestamp")
	if md, ok := raw["metadata"].(map[string]any); ok {
		delete(md, "creationTimestamp")
		if len(md) == 0 {
			delete(raw, "metadata")
		}
	}
	return unstructured.SetNestedMap(m, raw, p...)
}

// CopyUnstructured is an adapter's Copy for an unstructured kind: name, namespace, labels,
// annotations and spec; no status and nothing the API server filled in.
func CopyUnstructured(obj client.Object) *unstructured.Unstructured {
	src := obj.(*unstructured.Unstructured)
	c := NewUnstructured(src.GroupVersionKind())
	c.SetName(src.GetName())
	c.SetNamespace(src.GetNamespace())
	c.SetLabels(src.GetLabels())
	c.SetAnnotations(src.GetAnnotations())
	if spec, ok := src.Object["spec"]; ok {
		c.Object["spec"] = runtime.DeepCopyJSONValue(spec)
	}
	return c
}

// MirrorUnstructuredStatus copies status from remote into local (clears it when remote is nil)
// and reports whether it changed.
func MirrorUnstructuredStatus(local, remote client.Object) bool {
	l := local.(*unstructured.Unstructured)
	var want any
	if remote != nil {
		want = runtime.DeepCopyJSONValue(remote.(*unstructured.Unstructured).Object["status"])
	}
	cur, had := l.Object["status"]
	if remote == nil {
		if !had {
			return false
		}
		delete(l.Object, "status")
		return true
	}
	if had && equality.Semantic.DeepEqual(cur, want) {
		return false
	}
	if want == nil {
		delete(l.Object, "status")
		return had
	}
	l.Object["status"] = want
	return true
}

// Condition is one entry of a status.conditions list, as most kinds write them.
type Condition struct {
	Type, Status, Reason, Message string
}

// Conditions reads status.conditions.
func Conditions(obj client.Object) []Condition {
	list, _, _ := unstructured.NestedSlice(Content(obj), "status", "conditions")
	out := make([]Condition, 0, len(list))
	for _, item := range list {
		m, ok := item.(map[string]any)
		if !ok {
			continue
		}
		c := Condition{}
		c.Type, _ = m["type"].(string)
		c.Status, _ = m["status"].(string)
		c.Reason, _ = m["reason"].(string)
		c.Message, _ = m["message"].(string)
		out = append(out, c)
	}
	return out
}

// ConditionTrue finds a True condition of a type.
func ConditionTrue(conds []Condition, typ string) (Condition, bool) {
	for _, c := range conds {
		if c.Type == typ && c.Status == string(corev1.ConditionTrue) {
			return c, true
		}
	}
	return Condition{}, false
}
