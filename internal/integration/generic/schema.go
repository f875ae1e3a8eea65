package generic

import (
	"fmt"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// CheckSchema reports every path of the spec that the CRD's schema for the spec's version does
// not have, each naming the configuration field (under path), the path and the first missing
// segment, so a typo is found at start-up rather than as jobs that never start. A field under an
// object that keeps unknown fields (x-kubernetes-preserve-unknown-fields without properties) is
// taken to exist.
func CheckSchema(s Spec, crd *apiextensionsv1.CustomResourceDefinition, path *field.Path) field.ErrorList {
	var root *apiextensionsv1.JSONSchemaProps
	for _, v := range crd.Spec.Versions {
		if v.Name == s.Version && v.Schema != nil {
			root = v.Schema.OpenAPIV3Schema
		}
	}
	if root == nil {
		return field.ErrorList{field.Invalid(path.Child("version"), s.Version,
			fmt.Sprintf("CRD %s serves no version %q with a schema", crd.Name, s.Version))}
	}
	kind := fmt.Sprintf("%s (%s)", s.Kind, s.GVK().GroupVersion())
	var errs field.ErrorList
	check := func(p *field.Path, base *apiextensionsv1.JSONSchemaProps, baseName, value, want string) {
		if value == "" {
			return
		}
		node, missing := walk(base, strings.Split(value, "."))
		switch {
		case missing != "":
			errs = append(errs, field.Invalid(p, value, fmt.Sprintf("%s does not exist in the schema of %s%s (no field %q there); fix the path", value, kind, baseName, missing)))
		case want != "" && node != nil && node.Type != "" && node.Type != want:
			errs = append(errs, field.Invalid(p, value, fmt.Sprintf("%s is %s in the schema of %s%s, not %s", value, article(node.Type), kind, baseName, article(want))))
		}
	}
	check(path.Child("suspendPath"), root, "", s.SuspendPath, "boolean")
	check(path.Child("managedByPath"), root, "", s.ManagedByPath, "string")
	for i, ps := range s.PodSets {
		pp := path.Child("podSets").Index(i)
		base, baseName := root, ""
		if ps.List != "" {
			check(pp.Child("list"), root, "", ps.List, "array")
			list, missing := walk(root, strings.Split(ps.List, "."))
			if missing != "" || list == nil || list.Items == nil || list.Items.Schema == nil {
				continue // reported above, or items of any shape
			}
			base, baseName = list.Items.Schema, ", in the items of "+ps.List
			check(pp.Child("nameField"), base, baseName, ps.NameField, "string")
		}
		check(pp.Child("template"), base, baseName, ps.Template, "object")
		for j, c := range ps.Count {
			check(pp.Child("count").Index(j), base, baseName, c, "integer")
		}
	}
	return errs
}

// walk follows a path through the schema's properties; it returns the node reached, or the first
// segment that is not there. A node that keeps unknown fields ends the walk as found (nil node).
func walk(node *apiextensionsv1.JSONSchemaProps, path []string) (*apiextensionsv1.JSONSchemaProps, string) {
	for _, seg := range path {
		if node.XPreserveUnknownFields != nil && *node.XPreserveUnknownFields && len(node.Properties) == 0 {
			return nil, ""
		}
		next, ok := node.Properties[seg]
		if !ok {
			return nil, seg
		}
		node = &next
	}
	return node, ""
}

// article puts "a" or "an" before a schema type.
func article(typ string) string {
	if strings.ContainsAny(typ[:1], "aeiou") {
		return "an " + typ
	}
	return "a " + typ
}
