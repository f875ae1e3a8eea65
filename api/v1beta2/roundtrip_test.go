/*
Copyright 2026 The fleetq Authors.

Licensed under the Apache License, Version 2.0.
*/

package v1beta2_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
)

// TestKueueWrittenManifestsRoundTrip decodes objects as Kueue writes them into our types, refusing
// any field the types do not have, encodes them again and checks that every field came back with
// the same value: a Kueue manifest passes through fleetq without losing anything.
func TestKueueWrittenManifestsRoundTrip(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := kueue.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile("testdata/kueue-written.yaml")
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]bool{}
	for _, doc := range documents(t, raw) {
		kind, _ := doc["kind"].(string)
		name, _ := doc["metadata"].(map[string]any)["name"].(string)
		kinds[kind] = true
		t.Run(kind+"/"+name, func(t *testing.T) {
			obj, err := scheme.New(kueue.GroupVersion.WithKind(kind))
			if err != nil {
				t.Fatalf("kind %q is not registered: %v", kind, err)
			}
			in, err := json.Marshal(doc)
			if err != nil {
				t.Fatal(err)
			}
			dec := json.NewDecoder(bytes.NewReader(in))
			dec.DisallowUnknownFields()
			if err := dec.Decode(obj); err != nil {
				t.Fatalf("decode into %T: %v", obj, err)
			}
			out, err := json.Marshal(obj)
			if err != nil {
				t.Fatal(err)
			}
			var back map[string]any
			if err := json.Unmarshal(out, &back); err != nil {
				t.Fatal(err)
			}
			if lost := lostFields(doc, back, ""); len(lost) > 0 {
				t.Errorf("fields lost or changed by the round trip:\n%s", lost)
			}
		})
	}
	want := []string{"AdmissionCheck", "ClusterQueue", "Cohort", "LocalQueue", "MultiKueueCluster", "MultiKueueConfig", "ResourceFlavor", "Workload", "WorkloadPriorityClass"}
	var got []string
	for k := range kinds {
		got = append(got, k)
	}
	sort.Strings(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("kinds covered by testdata/kueue-written.yaml (-want +got):\n%s", diff)
	}
}

// TestEveryKindIsRegistered checks that AddToScheme registers each kind and its list, and nothing else of ours.
func TestEveryKindIsRegistered(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := kueue.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	ours := reflect.TypeFor[kueue.Workload]().PkgPath()
	var got []string
	for gvk, typ := range scheme.AllKnownTypes() {
		// AddToScheme also registers metav1's option kinds in the group version; skip them.
		if gvk.GroupVersion() == kueue.GroupVersion && typ.PkgPath() == ours {
			got = append(got, gvk.Kind)
		}
	}
	sort.Strings(got)
	var want []string
	for _, k := range []string{"AdmissionCheck", "ClusterQueue", "Cohort", "LocalQueue", "MultiKueueCluster", "MultiKueueConfig", "ResourceFlavor", "Workload", "WorkloadPriorityClass"} {
		want = append(want, k, k+"List")
	}
	sort.Strings(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("registered kinds of %s (-want +got):\n%s", kueue.GroupVersion, diff)
	}
}

func TestEffectiveCohort(t *testing.T) {
	cases := map[string]struct {
		spec kueue.ClusterQueueSpec
		want string
	}{
		"no cohort":               {spec: kueue.ClusterQueueSpec{}, want: ""},
		"cohortName":              {spec: kueue.ClusterQueueSpec{CohortName: "ai-platform"}, want: "ai-platform"},
		"cohort alias (tutorial)": {spec: kueue.ClusterQueueSpec{Cohort: "ai-platform"}, want: "ai-platform"},
		"both, equal":             {spec: kueue.ClusterQueueSpec{CohortName: "ai-platform", Cohort: "ai-platform"}, want: "ai-platform"},
		// The CRD rejects differing values; should one get through, cohortName wins as in Kueue.
		"both, differing": {spec: kueue.ClusterQueueSpec{CohortName: "a", Cohort: "b"}, want: "a"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.spec.EffectiveCohort()); diff != "" {
				t.Errorf("EffectiveCohort() (-want +got):\n%s", diff)
			}
		})
	}
}

// documents splits a multi-document YAML file into JSON-shaped maps (numbers as float64, the way
// encoding/json decodes them, so values compare equal after a round trip).
func documents(t *testing.T, raw []byte) []map[string]any {
	t.Helper()
	var docs []map[string]any
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	for {
		var doc map[string]any
		if err := dec.Decode(&doc); err != nil {
			if errors.Is(err, io.EOF) {
				return docs
			}
			t.Fatalf("decode testdata: %v", err)
		}
		if len(doc) == 0 {
			continue
		}
		j, err := json.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		var normalized map[string]any
		if err := json.Unmarshal(j, &normalized); err != nil {
			t.Fatal(err)
		}
		docs = append(docs, normalized)
	}
}

// lostFields lists, one per line, every value of want that is missing from got or differs in it.
// got may hold more (zero values the encoder adds); it may not hold less.
func lostFields(want, got any, path string) string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return fmt.Sprintf("%s: want an object, got %v\n", path, got)
		}
		keys := make([]string, 0, len(w))
		for k := range w {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var out string
		for _, k := range keys {
			if _, ok := g[k]; !ok {
				out += fmt.Sprintf("%s.%s: missing\n", path, k)
				continue
			}
			out += lostFields(w[k], g[k], path+"."+k)
		}
		return out
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return fmt.Sprintf("%s: want %d items, got %v\n", path, len(w), got)
		}
		var out string
		for i := range w {
			out += lostFields(w[i], g[i], fmt.Sprintf("%s[%d]", path, i))
		}
		return out
	default:
		if !reflect.DeepEqual(want, got) {
			return fmt.Sprintf("%s: want %v, got %v\n", path, want, got)
		}
		return ""
	}
}
