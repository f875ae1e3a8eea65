package demo

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/e2e/lab"
	"github.com/fleetq/fleetq/e2e/manifest"
)

// quota reads the demo's ClusterQueues from its manifests: nominal and borrowing limit of GPUs per
// team and GPU model.
type quota struct{ nominal, limit int64 }

// demoObjects parses the manifests the demo applies for workers us-east and eu-west.
func demoObjects(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	raw, err := Manifests([]string{"us-east", "eu-west"})
	if err != nil {
		t.Fatal(err)
	}
	objs, err := manifest.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func demoQuotas(t *testing.T) map[string]quota {
	t.Helper()
	objs := demoObjects(t)
	out := map[string]quota{}
	for _, o := range objs {
		if o.GetKind() != "ClusterQueue" {
			continue
		}
		cq := &kueue.ClusterQueue{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, cq); err != nil {
			t.Fatal(err)
		}
		for _, f := range cq.Spec.ResourceGroups[0].Flavors {
			for _, r := range f.Resources {
				if r.Name == GPU {
					q := quota{nominal: r.NominalQuota.Value(), limit: -1}
					if r.BorrowingLimit != nil {
						q.limit = r.BorrowingLimit.Value()
					}
					out[cq.Name+" "+flavorModel(string(f.Name))] = q
				}
			}
		}
	}
	return out
}

func TestManifests(t *testing.T) {
	objs := demoObjects(t)
	var got []string
	for _, o := range objs {
		got = append(got, o.GetKind()+"/"+o.GetName())
		if o.GetKind() == "MultiKueueConfig" {
			clusters, _, _ := unstructured.NestedStringSlice(o.Object, "spec", "clusters")
			if diff := cmp.Diff([]string{"us-east", "eu-west"}, clusters); diff != "" {
				t.Errorf("MultiKueueConfig clusters (-want +got):\n%s", diff)
			}
		}
	}
	want := []string{
		"Namespace/research", "Namespace/inference",
		"ResourceFlavor/a100-flavor", "ResourceFlavor/l4-flavor",
		"MultiKueueConfig/gpu-workers", "AdmissionCheck/dispatch",
		"ClusterQueue/research-gpu-cq", "ClusterQueue/inference-gpu-cq",
		"LocalQueue/team-queue", "LocalQueue/team-queue",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("objects (-want +got):\n%s", diff)
	}
}

// TestStoriesFitTheLab checks the arithmetic the story relies on against the demo's quotas and the
// default lab's nodes, so a change to either cannot silently remove a beat of the story.
func TestStoriesFitTheLab(t *testing.T) {
	quotas := demoQuotas(t)
	spec := lab.DefaultSpec(2)
	nodeGPUs := map[string]int64{}
	capacity := map[string]int64{}
	for _, w := range spec.Workers {
		for _, p := range w.NodePools {
			g := p.Capacity[lab.GPUResource]
			model := map[string]string{lab.A100: "A100", lab.L4: "L4"}[p.Labels[lab.GPUProductLabel]]
			nodeGPUs[model] = g.Value()
			capacity[model] += g.Value() * int64(p.Count)
		}
	}
	for _, model := range []string{"A100", "L4"} {
		r, i := quotas[ClusterQueueOf(Research)+" "+model], quotas[ClusterQueueOf(Inference)+" "+model]
		if r.nominal+i.nominal != capacity[model] {
			t.Errorf("%s: nominal quotas %d + %d != %d GPUs in the lab: quota must match the hardware", model, r.nominal, i.nominal, capacity[model])
		}
	}
	for name, sc := range map[string]Scenario{"default": Default(DefaultTimings), "smoke": Smoke(SmokeTimings)} {
		t.Run(name, func(t *testing.T) {
			demand := func(jobs []JobSpec, team, model string) (total int64) {
				for _, j := range jobs {
					if j.Team == team && j.GPUModel() == model && !j.Stuck {
						total += int64(j.Pods) * j.GPUs
					}
				}
				return total
			}
			names := map[string]bool{}
			for _, st := range sc.Steps {
				for _, j := range st.Jobs {
					if names[j.Key()] {
						t.Errorf("job %s submitted twice", j.Key())
					}
					names[j.Key()] = true
					if j.Stuck {
						continue
					}
					if j.GPUs > nodeGPUs[j.GPUModel()] {
						t.Errorf("job %s: %d GPUs per pod do not fit a %s node (%d)", j.Key(), j.GPUs, j.GPUModel(), nodeGPUs[j.GPUModel()])
					}
					if j.GPUModel() == "A100" && nodeGPUs["A100"]%j.GPUs != 0 {
						t.Errorf("job %s: %d-GPU pods fragment %d-GPU nodes; later jobs would find no node", j.Key(), j.GPUs, nodeGPUs["A100"])
					}
				}
			}
			research := quotas[ClusterQueueOf(Research)+" A100"]
			inference := quotas[ClusterQueueOf(Inference)+" A100"]
			first, second := sc.Steps[0].Jobs, sc.Steps[1].Jobs
			if d := demand(first, Research, "A100"); d < research.nominal+research.limit {
				t.Errorf("research asks for %d A100s at first: not enough to borrow up to its limit (%d + %d)", d, research.nominal, research.limit)
			}
			if d := demand(second, Inference, "A100"); d != inference.nominal {
				t.Errorf("inference asks for %d A100s, want exactly its nominal %d: it reclaims what it is owed, no more", d, inference.nominal)
			}
			if capacity["A100"]-research.nominal-research.limit >= demand(second, Inference, "A100") {
				t.Error("inference fits beside research's borrowing: nothing to reclaim, no preemption")
			}
			if demand(second, Inference, "L4") == 0 {
				t.Error("no L4 job: nothing goes to eu-west")
			}
			var stuck int
			for _, j := range first {
				if !j.Stuck {
					continue
				}
				stuck++
				q := quotas[ClusterQueueOf(j.Team)+" "+j.GPUModel()]
				if j.GPUs <= nodeGPUs[j.GPUModel()] || int64(j.Pods)*j.GPUs > q.nominal {
					t.Errorf("stuck job %s: %d GPUs per pod must exceed a %s node (%d) and fit the team's nominal quota (%d)",
						j.Key(), j.GPUs, j.GPUModel(), nodeGPUs[j.GPUModel()], q.nominal)
				}
			}
			if stuck != 1 {
				t.Errorf("%d jobs too big for any node, want 1", stuck)
			}
			if sc.Steps[1].When == nil {
				t.Error("inference submits without waiting for research to borrow")
			}
		})
	}
}
