/*
Copyright 2026 The fleetq Authors.

Licensed under the Apache License, Version 2.0.
*/

// Package crd holds the CustomResourceDefinitions of fleetq's kueue.x-k8s.io/v1beta2 API, generated
// from api/v1beta2 by `make generate` into bases/, and hands them out parsed so the lab, tests and
// charts install exactly the checked-in CRDs.
package crd

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

//go:embed bases/*.yaml
var bases embed.FS

// CustomResourceDefinitions returns fresh copies of every CRD in bases/, sorted by name, so callers
// may modify them (e.g. add a conversion webhook) without affecting each other.
func CustomResourceDefinitions() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	files, err := fs.Glob(bases, "bases/*.yaml")
	if err != nil {
		return nil, fmt.Errorf("list embedded CRDs: %w", err)
	}
	crds := make([]*apiextensionsv1.CustomResourceDefinition, 0, len(files))
	for _, file := range files {
		raw, err := bases.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("read embedded CRD %q: %w", path.Base(file), err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(raw, crd); err != nil {
			return nil, fmt.Errorf("parse embedded CRD %q: %w", path.Base(file), err)
		}
		if crd.Kind != "CustomResourceDefinition" || crd.Name == "" {
			return nil, fmt.Errorf("embedded file %q is not a named CustomResourceDefinition", path.Base(file))
		}
		crds = append(crds, crd)
	}
	sort.Slice(crds, func(i, j int) bool { return crds[i].Name < crds[j].Name })
	return crds, nil
}
