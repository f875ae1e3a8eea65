/*
Copyright 2026 The fleetq Authors.

Licensed under the Apache License, Version 2.0.
*/

// Command bounds adds, to the CRDs controller-gen wrote into a directory, the size limits that
// markers cannot express: limits inside types we embed but do not own (corev1 pod templates and
// taints) and maxLength on resource.Quantity fields (controller-gen refuses maxLength on int-or-string).
//
// The API server rejects a CRD whose CEL rules may cost more than its budget, and it estimates the
// cost of a rule from the largest list, map or string the schema allows. Without these limits the
// rules of api/v1beta2 (non-negative requests, unique taints, lendingLimit <= nominalQuota...) would be
// refused. Every limit is far above what real manifests use; each is listed with its reason below.
//
// Usage: go run ./config/crd/bounds config/crd/bases
//
// It rewrites only the files it changes, in controller-gen's own format, and fails if a path no
// longer exists so that a type change cannot silently drop a limit.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// limit is one size limit at one place of one CRD's schema.
type limit struct {
	// crd is the CRD's metadata.name.
	crd string
	// path walks the openAPIV3Schema: ".name" is a property, "[]" the items of a list.
	path string
	// keyword is the OpenAPI keyword set (maxItems, maxProperties or maxLength) to value.
	keyword string
	value   int64
}

const (
	clusterQueues   = "clusterqueues.kueue.x-k8s.io"
	cohorts         = "cohorts.kueue.x-k8s.io"
	resourceFlavors = "resourceflavors.kueue.x-k8s.io"
	workloads       = "workloads.kueue.x-k8s.io"

	// maxQuantityLength bounds quota quantities so quantity() in CEL is cheap; "768Gi" is 5 characters.
	maxQuantityLength = 64
	// maxQualifiedNameLength is the longest qualified name: a 253-character prefix, "/" and 63 characters.
	maxQualifiedNameLength = 317
	// maxTaintEffectLength is the length of the longest valid effect, PreferNoSchedule.
	maxTaintEffectLength = 16
	// maxContainers bounds containers and init containers per pod template.
	maxContainers = 64
	// maxResourcesPerList bounds the resource names in one requests or limits map.
	maxResourcesPerList = 64
)

// limits lists every limit this command adds.
func limits() []limit {
	var ls []limit
	for _, crd := range []string{clusterQueues, cohorts} {
		ls = append(ls, limit{crd, ".spec.resourceGroups[].coveredResources[]", "maxLength", maxQualifiedNameLength})
		for _, q := range []string{"nominalQuota", "borrowingLimit", "lendingLimit"} {
			ls = append(ls, limit{crd, ".spec.resourceGroups[].flavors[].resources[]." + q, "maxLength", maxQuantityLength})
		}
	}
	ls = append(ls,
		limit{resourceFlavors, ".spec.nodeTaints[].key", "maxLength", maxQualifiedNameLength},
		limit{resourceFlavors, ".spec.nodeTaints[].effect", "maxLength", maxTaintEffectLength},
	)
	const podSpec = ".spec.podSets[].template.spec"
	for _, list := range []string{"containers", "initContainers"} {
		ls = append(ls, limit{workloads, podSpec + "." + list, "maxItems", maxContainers})
		for _, m := range []string{"requests", "limits"} {
			ls = append(ls, limit{workloads, podSpec + "." + list + "[].resources." + m, "maxProperties", maxResourcesPerList})
		}
	}
	for _, m := range []string{"requests", "limits"} {
		ls = append(ls, limit{workloads, podSpec + ".resources." + m, "maxProperties", maxResourcesPerList})
	}
	return ls
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: bounds <directory of generated CRD YAML files>")
		os.Exit(2)
	}
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "bounds:", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return err
	}
	byCRD := map[string][]limit{}
	for _, l := range limits() {
		byCRD[l.crd] = append(byCRD[l.crd], l)
	}
	seen := map[string]bool{}
	for _, file := range files {
		name, err := patchFile(file, byCRD)
		if err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		seen[name] = true
	}
	var missing []string
	for crd := range byCRD {
		if !seen[crd] {
			missing = append(missing, crd)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		return fmt.Errorf("no generated CRD named %s in %s", strings.Join(missing, ", "), dir)
	}
	return nil
}

// patchFile applies the limits of the CRD in file and rewrites the file when something changed.
func patchFile(file string, byCRD map[string][]limit) (string, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	doc, err := decode(raw)
	if err != nil {
		return "", err
	}
	name, _ := lookup(doc, "metadata", "name").(string)
	ls := byCRD[name]
	if len(ls) == 0 {
		return name, nil
	}
	versions, _ := lookup(doc, "spec", "versions").([]any)
	if len(versions) == 0 {
		return name, fmt.Errorf("crd %q has no versions", name)
	}
	for _, v := range versions {
		root, _ := lookup(v, "schema", "openAPIV3Schema").(map[string]any)
		if root == nil {
			return name, fmt.Errorf("crd %q has a version without openAPIV3Schema", name)
		}
		for _, l := range ls {
			node, err := walk(root, l.path)
			if err != nil {
				return name, fmt.Errorf("crd %q: %s: %w", name, l.path, err)
			}
			node[l.keyword] = json.Number(fmt.Sprint(l.value))
		}
	}
	out, err := yaml.Marshal(doc)
	if err != nil {
		return name, err
	}
	out = append([]byte("---\n"), out...)
	if bytes.Equal(out, raw) {
		return name, nil
	}
	return name, os.WriteFile(file, out, 0o644)
}

// decode reads one YAML document the way controller-gen builds it before writing: JSON numbers kept
// exact, so that re-encoding an unchanged CRD gives back the same bytes.
func decode(raw []byte) (map[string]any, error) {
	j, err := yaml.YAMLToJSON(raw)
	if err != nil {
		return nil, err
	}
	d := json.NewDecoder(bytes.NewReader(j))
	d.UseNumber()
	var doc map[string]any
	if err := d.Decode(&doc); err != nil {
		return nil, err
	}
	return doc, nil
}

func lookup(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// walk follows path (".a.b[].c") from a schema node through properties and items.
func walk(node map[string]any, path string) (map[string]any, error) {
	rest := path
	for rest != "" {
		switch {
		case strings.HasPrefix(rest, "[]"):
			items, ok := node["items"].(map[string]any)
			if !ok {
				return nil, fmt.Errorf("not a list at %q", strings.TrimSuffix(path, rest))
			}
			node, rest = items, rest[2:]
		case strings.HasPrefix(rest, "."):
			rest = rest[1:]
			end := strings.IndexAny(rest, ".[")
			if end < 0 {
				end = len(rest)
			}
			field := rest[:end]
			props, _ := node["properties"].(map[string]any)
			child, ok := props[field].(map[string]any)
			if !ok {
				return nil, fmt.Errorf("no property %q", field)
			}
			node, rest = child, rest[end:]
		default:
			return nil, fmt.Errorf("cannot parse %q", rest)
		}
	}
	return node, nil
}
