package lab

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Operator is a job operator the lab can run in a cluster, as a local process built from a pinned
// module by `make tools` (hack/tools/<module>), with its CRDs installed from the same module.
type Operator string

const (
	// OperatorKubeflow is Kubeflow training-operator v1.8.1: PyTorchJob, TFJob, XGBoostJob,
	// PaddleJob and MPIJob (kubeflow.org/v1), without its validating webhooks.
	OperatorKubeflow Operator = "kubeflow"
	// OperatorRay is KubeRay ray-operator v1.5.0: RayCluster and RayJob (ray.io/v1), webhooks
	// off as upstream's default. No Ray runtime runs on fake nodes: the lab's build answers the
	// controllers' dashboard calls from the RayJob's submitter Job (hack/tools/kuberay).
	OperatorRay Operator = "ray"
)

// Operators are every operator the lab can run.
var Operators = []Operator{OperatorKubeflow, OperatorRay}

// Binary is the operator's executable in the bin directory.
func (o Operator) Binary() string {
	switch o {
	case OperatorKubeflow:
		return "training-operator"
	case OperatorRay:
		return "ray-operator"
	}
	return string(o)
}

// CRDDir is where `make tools` copies the operator's CRDs, relative to the bin directory.
func (o Operator) CRDDir() string { return filepath.Join("crds", string(o)) }

// ParseOperators reads a comma-separated list ("kubeflow,ray"); "" is none.
func ParseOperators(s string) ([]Operator, error) {
	var out []Operator
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		o := Operator(f)
		if !slices.Contains(Operators, o) {
			return nil, fmt.Errorf("unknown operator %q: the lab runs %s", f, operatorList())
		}
		if !slices.Contains(out, o) {
			out = append(out, o)
		}
	}
	return out, nil
}

func operatorList() string {
	names := make([]string, len(Operators))
	for i, o := range Operators {
		names[i] = string(o)
	}
	return strings.Join(names, ", ")
}

// WithOperators runs ops in every cluster of the spec (replacing what each listed).
func (s *Spec) WithOperators(ops ...Operator) *Spec {
	s.Management.Operators = slices.Clone(ops)
	for i := range s.Workers {
		s.Workers[i].Operators = slices.Clone(ops)
	}
	return s
}

// validateOperators checks a cluster's operators: known, once each, and only where pods run.
func (c *ClusterSpec) validateOperators(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[Operator]bool{}
	for i, o := range c.Operators {
		p := path.Child("operators").Index(i)
		switch {
		case !slices.Contains(Operators, o):
			errs = append(errs, field.NotSupported(p, o, Operators))
		case seen[o]:
			errs = append(errs, field.Duplicate(p, o))
		case c.Mode != ModeFull:
			errs = append(errs, field.Invalid(p, o, "an operator needs pods: set the cluster's mode to full"))
		}
		seen[o] = true
	}
	return errs
}
