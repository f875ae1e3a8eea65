package lab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CRDEstablishTimeout bounds how long a CRD may take to be served.
const CRDEstablishTimeout = 2 * time.Minute

// crdPoll is how often InstallCRDs looks again for Established.
const crdPoll = 200 * time.Millisecond

// LoadCRDs reads every CustomResourceDefinition from the .yaml and .json files of dir (multi-document
// files included; other kinds are ignored), sorted by name.
func LoadCRDs(dir string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	var files []string
	for _, pattern := range []string{"*.yaml", "*.yml", "*.json"} {
		m, err := filepath.Glob(filepath.Join(dir, pattern))
		if err != nil {
			return nil, fmt.Errorf("CRD dir %s: %w", dir, err)
		}
		files = append(files, m...)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("CRD dir %s: no .yaml or .json files", dir)
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("CRD file %s: %w", f, err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			err := dec.Decode(crd)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("CRD file %s: %w", f, err)
			}
			if crd.Kind == "CustomResourceDefinition" && crd.Name != "" {
				crds = append(crds, crd)
			}
		}
	}
	sort.Slice(crds, func(i, j int) bool { return crds[i].Name < crds[j].Name })
	return crds, nil
}

// InstallCRDs creates the CRDs on a cluster through cl (updating ones that exist, for reused
// labs) and waits until each is Established, i.e. served. cluster names it in errors.
func InstallCRDs(ctx context.Context, cl client.Client, cluster string, crds []*apiextensionsv1.CustomResourceDefinition) error {
	for _, want := range crds {
		obj := want.DeepCopy()
		obj.ResourceVersion = ""
		err := cl.Create(ctx, obj)
		if apierrors.IsAlreadyExists(err) {
			existing := &apiextensionsv1.CustomResourceDefinition{}
			if err := cl.Get(ctx, client.ObjectKeyFromObject(obj), existing); err != nil {
				return fmt.Errorf("cluster %q: crd %q: %w", cluster, obj.Name, err)
			}
			existing.Spec = obj.Spec
			err = cl.Update(ctx, existing)
		}
		if err != nil {
			return fmt.Errorf("cluster %q: install crd %q: %w", cluster, obj.Name, err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, CRDEstablishTimeout)
	defer cancel()
	for _, want := range crds {
		for {
			got := &apiextensionsv1.CustomResourceDefinition{}
			if err := cl.Get(ctx, client.ObjectKey{Name: want.Name}, got); err == nil && established(got) {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("cluster %q: crd %q not Established: %w", cluster, want.Name, ctx.Err())
			case <-time.After(crdPoll):
			}
		}
	}
	return nil
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}
