package generic

import (
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"
)

// jobSetCRD is the part of JobSet's CRD the example's paths walk (its pod template keeps
// unknown fields, as a CRD embedding a PodTemplateSpec may).
const jobSetCRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: jobsets.jobset.x-k8s.io}
spec:
  group: jobset.x-k8s.io
  names: {kind: JobSet, plural: jobsets}
  scope: Namespaced
  versions:
  - name: v1alpha2
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              suspend: {type: boolean}
              managedBy: {type: string}
              replicatedJobs:
                type: array
                items:
                  type: object
                  properties:
                    name: {type: string}
                    replicas: {type: integer}
                    template:
                      type: object
                      properties:
                        spec:
                          type: object
                          properties:
                            parallelism: {type: integer}
                            template: {type: object, x-kubernetes-preserve-unknown-fields: true}
`

func crd(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	c := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict([]byte(jobSetCRD), c); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCheckSchema(t *testing.T) {
	if errs := CheckSchema(jobSet, crd(t), field.NewPath("g")); len(errs) > 0 {
		t.Fatalf("the JobSet example against its schema: %v", errs.ToAggregate())
	}
	s := jobSet
	s.SuspendPath = "spec.suspended"
	s.ManagedByPath = "spec.replicatedJobs"
	s.PodSets = []PodSetSpec{
		{List: "spec.replicatedJobs", NameField: "title", Template: "template.spek.template", Count: []string{"replicas", "template.spec.parallelism"}},
		{Name: "extra", Template: "spec.suspend"},
		// Under a field that keeps unknown fields anything may exist.
		{List: "spec.replicatedJobs", NameField: "name", Template: "template.spec.template.spec.anything"},
	}
	errs := CheckSchema(s, crd(t), field.NewPath("g"))
	want := []string{
		`g.suspendPath: Invalid value: "spec.suspended": spec.suspended does not exist in the schema of JobSet (jobset.x-k8s.io/v1alpha2) (no field "suspended" there); fix the path`,
		`g.managedByPath: Invalid value: "spec.replicatedJobs": spec.replicatedJobs is an array in the schema of JobSet (jobset.x-k8s.io/v1alpha2), not a string`,
		`g.podSets[0].nameField: Invalid value: "title": title does not exist in the schema of JobSet (jobset.x-k8s.io/v1alpha2), in the items of spec.replicatedJobs (no field "title" there)`,
		`g.podSets[0].template: Invalid value: "template.spek.template": template.spek.template does not exist in the schema of JobSet (jobset.x-k8s.io/v1alpha2), in the items of spec.replicatedJobs (no field "spek" there)`,
		`g.podSets[1].template: Invalid value: "spec.suspend": spec.suspend is a boolean in the schema of JobSet (jobset.x-k8s.io/v1alpha2), not an object`,
	}
	got := errs.ToAggregate()
	if got == nil || len(errs) != len(want) {
		t.Fatalf("errors %v, want %d", got, len(want))
	}
	for _, w := range want {
		if !strings.Contains(got.Error(), w) {
			t.Errorf("errors lack\n  %s\nin\n  %s", w, got)
		}
	}

	s = jobSet
	s.Version = "v1"
	if errs := CheckSchema(s, crd(t), field.NewPath("g")); len(errs) != 1 || !strings.Contains(errs[0].Error(), `CRD jobsets.jobset.x-k8s.io serves no version "v1"`) {
		t.Errorf("unknown version: %v", errs.ToAggregate())
	}
}
