// Package kubeflow integrates the jobs of Kubeflow's training-operator v1 (kubeflow.org/v1):
// PyTorchJob, TFJob, XGBoostJob, PaddleJob and MPIJob. They share one shape: a map of replica
// types to {replicas, template} under spec.<kind>ReplicaSpecs (one pod set per replica type,
// named by its lowercase type), spec.runPolicy.suspend, and the operator's conditions
// (Succeeded, Failed, Suspended) and replicaStatuses. training-operator v1.8.1 has no managedBy:
// a dispatched job stays suspended in the management cluster while its copy runs.
package kubeflow

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/internal/integration"
)

// GroupVersion is training-operator's API.
var GroupVersion = schema.GroupVersion{Group: "kubeflow.org", Version: "v1"}

// Adapter integrates one training-operator kind.
type Adapter struct {
	kind string
	// specs is the field under spec holding the replica specs (pytorchReplicaSpecs).
	specs string
	// order lists the replica types in pod-set order; others follow alphabetically.
	order []string
}

var _ integration.Adapter = Adapter{}

// The kinds training-operator v1.8.1 serves (MXJob is deprecated there and left out).
var (
	PyTorchJob = Adapter{kind: "PyTorchJob", specs: "pytorchReplicaSpecs", order: []string{"Master", "Worker"}}
	TFJob      = Adapter{kind: "TFJob", specs: "tfReplicaSpecs", order: []string{"Chief", "Master", "PS", "Worker", "Evaluator"}}
	XGBoostJob = Adapter{kind: "XGBoostJob", specs: "xgbReplicaSpecs", order: []string{"Master", "Worker"}}
	PaddleJob  = Adapter{kind: "PaddleJob", specs: "paddleReplicaSpecs", order: []string{"Master", "Worker"}}
	MPIJob     = Adapter{kind: "MPIJob", specs: "mpiReplicaSpecs", order: []string{"Launcher", "Worker"}}
)

// Adapters are every training-operator kind.
func Adapters() []integration.Adapter {
	return []integration.Adapter{PyTorchJob, TFJob, XGBoostJob, PaddleJob, MPIJob}
}

var suspendPath = integration.Path{"spec", "runPolicy", "suspend"}

// Framework is the kind's name in integrations.frameworks ("kubeflow.org/pytorchjob").
func (a Adapter) Framework() string { return GroupVersion.Group + "/" + strings.ToLower(a.kind) }

// GVK implements integration.Adapter.
func (a Adapter) GVK() schema.GroupVersionKind { return GroupVersion.WithKind(a.kind) }

// Fields implements integration.Adapter: v1.8.1 has no runPolicy.managedBy.
func (a Adapter) Fields() integration.Fields {
	return integration.Fields{Suspend: suspendPath.String()}
}

// New implements integration.Adapter.
func (a Adapter) New() client.Object { return integration.NewUnstructured(a.GVK()) }

func (a Adapter) specsPath() integration.Path { return integration.Path{"spec", a.specs} }

// replicaTypes lists the object's replica types in pod-set order.
func (a Adapter) replicaTypes(obj client.Object) ([]string, map[string]any, error) {
	specs, ok, err := unstructured.NestedMap(integration.Content(obj), a.specsPath()...)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", a.specsPath(), err)
	}
	if !ok || len(specs) == 0 {
		return nil, nil, fmt.Errorf("%s has no replica types", a.specsPath())
	}
	types := make([]string, 0, len(specs))
	for t := range specs {
		types = append(types, t)
	}
	sort.Slice(types, func(i, j int) bool {
		ri, rj := rank(a.order, types[i]), rank(a.order, types[j])
		if ri != rj {
			return ri < rj
		}
		return types[i] < types[j]
	})
	// Work on the object's own maps: the caller may change templates in place.
	live, _, _ := unstructured.NestedFieldNoCopy(integration.Content(obj), a.specsPath()...)
	return types, live.(map[string]any), nil
}

func rank(order []string, t string) int {
	if i := slices.IndexFunc(order, func(o string) bool { return strings.EqualFold(o, t) }); i >= 0 {
		return i
	}
	return len(order)
}

// podSetName is a replica type's pod set: its lowercase name.
func podSetName(replicaType string) kueue.PodSetReference {
	return kueue.PodSetReference(strings.ToLower(replicaType))
}

// PodSets is one pod set per replica type: replicas (default 1) pods of its template.
func (a Adapter) PodSets(obj client.Object) ([]kueue.PodSet, error) {
	types, specs, err := a.replicaTypes(obj)
	if err != nil {
		return nil, err
	}
	out := make([]kueue.PodSet, 0, len(types))
	for _, t := range types {
		spec, ok := specs[t].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s is not an object", a.specsPath().Child(t))
		}
		count, err := integration.Int32(spec, integration.Path{"replicas"}, 1)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", a.specsPath().Child(t), err)
		}
		if count < 0 {
			return nil, fmt.Errorf("%s is %d; it must not be negative", a.specsPath().Child(t, "replicas"), count)
		}
		tmpl, err := integration.Template(spec, integration.Path{"template"})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", a.specsPath().Child(t), err)
		}
		out = append(out, kueue.PodSet{Name: podSetName(t), Count: count, Template: *tmpl})
	}
	return out, nil
}

// Suspended implements integration.Adapter.
func (a Adapter) Suspended(obj client.Object) bool { return integration.Bool(obj, suspendPath) }

// SetSuspended implements integration.Adapter.
func (a Adapter) SetSuspended(obj client.Object, suspended bool) {
	integration.SetBool(obj, suspendPath, suspended)
}

// ApplyPlacements injects each pod set's placement into its replica type's template; a partial
// admission's count lowers replicas.
func (a Adapter) ApplyPlacements(obj client.Object, placements []integration.PodSetPlacement) error {
	return a.eachTemplate(obj, func(t string, spec map[string]any) error {
		p, ok := integration.Find(placements, podSetName(t))
		if !ok {
			return nil
		}
		tmpl, err := integration.Template(spec, integration.Path{"template"})
		if err != nil {
			return err
		}
		integration.Inject(tmpl, p.Placement)
		if p.Count != nil {
			if cur, _ := integration.Int32(spec, integration.Path{"replicas"}, 1); *p.Count < cur {
				spec["replicas"] = int64(*p.Count)
			}
		}
		return integration.SetTemplate(spec, integration.Path{"template"}, tmpl)
	}, placements)
}

// RestorePodSets implements integration.Adapter.
func (a Adapter) RestorePodSets(obj client.Object, original []kueue.PodSet) bool {
	changed := false
	_ = a.eachTemplate(obj, func(t string, spec map[string]any) error {
		ps := integration.FindPodSet(original, podSetName(t))
		if ps == nil {
			return nil
		}
		tmpl, err := integration.Template(spec, integration.Path{"template"})
		if err != nil {
			return err
		}
		if integration.Restore(tmpl, &ps.Template) {
			changed = true
			return integration.SetTemplate(spec, integration.Path{"template"}, tmpl)
		}
		return nil
	}, nil)
	return changed
}

// eachTemplate calls f with each replica type's spec; every placement must name a replica type.
func (a Adapter) eachTemplate(obj client.Object, f func(replicaType string, spec map[string]any) error, placements []integration.PodSetPlacement) error {
	types, specs, err := a.replicaTypes(obj)
	if err != nil {
		return err
	}
	for _, p := range placements {
		if !slices.ContainsFunc(types, func(t string) bool { return podSetName(t) == p.Name }) {
			return integration.ErrNoPodSet(a, obj, p.Name)
		}
	}
	for _, t := range types {
		spec, ok := specs[t].(map[string]any)
		if !ok {
			return fmt.Errorf("%s is not an object", a.specsPath().Child(t))
		}
		if err := f(t, spec); err != nil {
			return fmt.Errorf("%s: %w", a.specsPath().Child(t), err)
		}
	}
	return nil
}

// Status reads the operator's conditions; pods may still run while a replica type counts active
// ones, or the job has a start time and is not marked suspended (the operator clears startTime
// when it suspends a job).
func (a Adapter) Status(obj client.Object) integration.Status {
	conds := integration.Conditions(obj)
	var st integration.Status
	if c, ok := integration.ConditionTrue(conds, "Succeeded"); ok {
		st.Finished, st.Message = true, orDefault(c.Message, a.kind+" succeeded")
	} else if c, ok := integration.ConditionTrue(conds, "Failed"); ok {
		st.Finished, st.Failed, st.Message = true, true, orDefault(c.Message, a.kind+" failed: "+c.Reason)
	}
	statuses, _, _ := unstructured.NestedMap(integration.Content(obj), "status", "replicaStatuses")
	for _, s := range statuses {
		if m, ok := s.(map[string]any); ok {
			if n, _ := integration.Int32(m, integration.Path{"active"}, 0); n > 0 {
				st.Active = true
			}
		}
	}
	if _, started, _ := unstructured.NestedString(integration.Content(obj), "status", "startTime"); started {
		if _, suspended := integration.ConditionTrue(conds, "Suspended"); !suspended && !st.Finished {
			st.Active = true
		}
	}
	return st
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// ManagedBy implements integration.Adapter: the kind has none.
func (a Adapter) ManagedBy(client.Object) string { return "" }

// SetManagedBy implements integration.Adapter: the kind has none.
func (a Adapter) SetManagedBy(client.Object, string) {}

// Copy implements integration.Adapter.
func (a Adapter) Copy(obj client.Object) client.Object { return integration.CopyUnstructured(obj) }

// MirrorStatus implements integration.Adapter.
func (a Adapter) MirrorStatus(local, remote client.Object) bool {
	return integration.MirrorUnstructuredStatus(local, remote)
}
