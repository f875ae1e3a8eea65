// Package charts holds fleetq's Helm charts (fleetq-manager for the management cluster,
// fleetq-agent for each worker) embedded, and renders them with Helm's own engine and schema
// validation, so tests, the lab and tools install exactly what `helm install` would.
package charts

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// Chart names.
const (
	Manager = "fleetq-manager"
	Agent   = "fleetq-agent"
)

//go:embed all:fleetq-manager all:fleetq-agent
var files embed.FS

// Load returns one of the embedded charts.
func Load(name string) (*chart.Chart, error) {
	var buffered []*loader.BufferedFile
	err := fs.WalkDir(files, name, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := files.ReadFile(p)
		if err != nil {
			return err
		}
		buffered = append(buffered, &loader.BufferedFile{Name: strings.TrimPrefix(p, name+"/"), Data: data})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("chart %s: %w", name, err)
	}
	c, err := loader.LoadFiles(buffered)
	if err != nil {
		return nil, fmt.Errorf("chart %s: %w", name, err)
	}
	return c, nil
}

// Release names a rendering: the release name and namespace `helm install` would get.
type Release struct {
	Name      string
	Namespace string
}

// Render renders a chart with values over its defaults, validating them against the chart's
// values.schema.json as Helm does, and returns the objects of its templates (CRDs excluded,
// see CRDs) in file order.
func Render(name string, rel Release, values map[string]any) ([]*unstructured.Unstructured, error) {
	c, err := Load(name)
	if err != nil {
		return nil, err
	}
	vals, err := chartutil.ToRenderValues(c, values, chartutil.ReleaseOptions{Name: rel.Name, Namespace: rel.Namespace, IsInstall: true, Revision: 1}, chartutil.DefaultCapabilities)
	if err != nil {
		return nil, fmt.Errorf("chart %s: %w", name, err)
	}
	out, err := engine.Render(c, vals)
	if err != nil {
		return nil, fmt.Errorf("chart %s: %w", name, err)
	}
	keys := make([]string, 0, len(out))
	for k := range out {
		if path.Ext(k) == ".yaml" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var objs []*unstructured.Unstructured
	for _, k := range keys {
		o, err := decode(out[k])
		if err != nil {
			return nil, fmt.Errorf("chart %s: %s: %w", name, k, err)
		}
		objs = append(objs, o...)
	}
	return objs, nil
}

// CRDs returns the objects of a chart's crds/ directory, which Helm installs before the templates.
func CRDs(name string) ([]*unstructured.Unstructured, error) {
	c, err := Load(name)
	if err != nil {
		return nil, err
	}
	var objs []*unstructured.Unstructured
	for _, f := range c.CRDObjects() {
		o, err := decode(string(f.File.Data))
		if err != nil {
			return nil, fmt.Errorf("chart %s: %s: %w", name, f.Filename, err)
		}
		objs = append(objs, o...)
	}
	return objs, nil
}

func decode(manifest string) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader([]byte(manifest)), 4096)
	var out []*unstructured.Unstructured
	for {
		o := &unstructured.Unstructured{}
		err := dec.Decode(&o.Object)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if len(o.Object) > 0 {
			out = append(out, o)
		}
	}
}
