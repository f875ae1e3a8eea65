// Package manifest applies YAML manifests the way kubectl does (server-side apply, or create for
// generateName objects), so e2e specs use the tutorial's files as users do, through client-go.
package manifest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// FieldManager is the field manager e2e applies with, like kubectl's.
const FieldManager = "e2e-kubectl"

// Read parses every object of a multi-document YAML file.
func Read(path string) ([]*unstructured.Unstructured, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	objs, err := Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return objs, nil
}

// Parse parses every object of a multi-document YAML text.
func Parse(raw []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	var out []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, err
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}

// Apply server-side applies every object of the files, like `kubectl apply --server-side -f`.
func Apply(ctx context.Context, c client.Client, paths ...string) error {
	for _, p := range paths {
		objs, err := Read(p)
		if err != nil {
			return err
		}
		for _, o := range objs {
			if err := c.Patch(ctx, o, client.Apply, client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
				return fmt.Errorf("%s: applying %s %s: %w", p, o.GetKind(), o.GetName(), err)
			}
		}
	}
	return nil
}

// Create creates every object of a file, like `kubectl create -f` (needed for generateName), and
// returns them as created.
func Create(ctx context.Context, c client.Client, path string, mutate ...func(*unstructured.Unstructured)) ([]*unstructured.Unstructured, error) {
	objs, err := Read(path)
	if err != nil {
		return nil, err
	}
	for _, o := range objs {
		for _, m := range mutate {
			m(o)
		}
		if err := c.Create(ctx, o, client.FieldOwner(FieldManager)); err != nil {
			return nil, fmt.Errorf("%s: creating %s %s%s: %w", path, o.GetKind(), o.GetName(), o.GetGenerateName(), err)
		}
	}
	return objs, nil
}
