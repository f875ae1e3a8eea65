package ray

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/fleetq/fleetq/internal/integration"
)

const cluster = `
headGroupSpec:
  rayStartParams: {}
  template:
    spec:
      containers: [{name: ray-head, image: rayproject/ray:2.41.0, resources: {requests: {cpu: "1"}}}]
workerGroupSpecs:
- groupName: gpu-workers
  replicas: 2
  numOfHosts: 2
  rayStartParams: {}
  template:
    spec:
      containers: [{name: ray-worker, image: rayproject/ray:2.41.0, resources: {requests: {nvidia.com/gpu: "1"}}}]
`

func rayJob(t *testing.T, extra string) *unstructured.Unstructured {
	return object(t, "apiVersion: ray.io/v1\nkind: RayJob\nmetadata: {name: train, namespace: research}\nspec:\n  entrypoint: python train.py\n"+extra+"  rayClusterSpec:\n"+indent(cluster, "    "))
}

func rayCluster(t *testing.T) *unstructured.Unstructured {
	return object(t, "apiVersion: ray.io/v1\nkind: RayCluster\nmetadata: {name: c, namespace: research}\nspec:\n"+indent(cluster, "  "))
}

func indent(s, by string) string {
	var out []string
	for _, l := range strings.Split(strings.Trim(s, "\n"), "\n") {
		out = append(out, by+l)
	}
	return strings.Join(out, "\n") + "\n"
}

func object(t *testing.T, manifest string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(manifest), &u.Object); err != nil {
		t.Fatalf("%v\n%s", err, manifest)
	}
	return u
}

func summary(t *testing.T, a Adapter, obj *unstructured.Unstructured) []string {
	t.Helper()
	sets, err := a.PodSets(obj)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ps := range sets {
		out = append(out, fmt.Sprintf("%s×%d", ps.Name, ps.Count))
	}
	return out
}

func TestPodSets(t *testing.T) {
	cases := map[string]struct {
		a    Adapter
		obj  *unstructured.Unstructured
		want []string
	}{
		"a RayCluster: head and each worker group, replicas × hosts": {a: RayCluster, obj: rayCluster(t), want: []string{"head×1", "gpu-workers×4"}},
		"a RayJob submitted by a Kubernetes Job adds its submitter":  {a: RayJob, obj: rayJob(t, ""), want: []string{"head×1", "gpu-workers×4", "submitter×1"}},
		"a RayJob submitted over HTTP has no submitter pod":          {a: RayJob, obj: rayJob(t, "  submissionMode: HTTPMode\n"), want: []string{"head×1", "gpu-workers×4"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, summary(t, tc.a, tc.obj)); diff != "" {
				t.Errorf("pod sets (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDefaultSubmitterIsKubeRaysAndGetsThePlacement(t *testing.T) {
	obj := rayJob(t, "")
	sets, _ := RayJob.PodSets(obj)
	sub := sets[2].Template.Spec.Containers[0]
	if sub.Name != submitterContainer || sub.Image != "rayproject/ray:2.41.0" || sub.Resources.Requests.Cpu().String() != "500m" {
		t.Errorf("default submitter: %+v", sub)
	}
	p := integration.PodSetPlacement{Name: SubmitterPodSet, Placement: integration.Placement{Labels: map[string]string{integration.PodSetLabel: "submitter"}}}
	if err := RayJob.ApplyPlacements(obj, []integration.PodSetPlacement{p}); err != nil {
		t.Fatal(err)
	}
	tmpl, err := integration.Template(obj.Object, integration.Path{"spec", "submitterPodTemplate"})
	if err != nil || tmpl.Labels[integration.PodSetLabel] != "submitter" || tmpl.Spec.Containers[0].Image != "rayproject/ray:2.41.0" {
		t.Errorf("spec.submitterPodTemplate after placement: %+v, %v", tmpl, err)
	}
}

func TestPlaceAndRestore(t *testing.T) {
	obj := rayCluster(t)
	original, _ := RayCluster.PodSets(obj)
	placements := []integration.PodSetPlacement{
		{Name: HeadPodSet, Placement: integration.Placement{Labels: map[string]string{integration.PodSetLabel: "head"}}},
		{Name: "gpu-workers", Count: ptr.To[int32](2), Placement: integration.Placement{NodeSelector: map[string]string{"gpu": "a100"}}},
	}
	if err := RayCluster.ApplyPlacements(obj, placements); err != nil {
		t.Fatal(err)
	}
	sets, _ := RayCluster.PodSets(obj)
	if sets[0].Template.Labels[integration.PodSetLabel] != "head" || sets[1].Template.Spec.NodeSelector["gpu"] != "a100" {
		t.Errorf("after placement: %+v", sets)
	}
	if sets[1].Count != 4 {
		t.Errorf("a multi-host group was partially admitted: count %d", sets[1].Count)
	}
	if !RayCluster.RestorePodSets(obj, original) {
		t.Fatal("RestorePodSets reported no change")
	}
	restored, _ := RayCluster.PodSets(obj)
	if diff := cmp.Diff(original, restored); diff != "" {
		t.Errorf("restored (-want +got):\n%s", diff)
	}
	if err := RayCluster.ApplyPlacements(obj, []integration.PodSetPlacement{{Name: "cpu-workers"}}); err == nil {
		t.Error("a placement for an unknown group was accepted")
	}
}

func TestPodSetErrorsNameTheField(t *testing.T) {
	cases := map[string]string{
		"spec.headGroupSpec is missing":                                  "apiVersion: ray.io/v1\nkind: RayCluster\nspec: {workerGroupSpecs: []}\n",
		"spec.workerGroupSpecs.0.groupName is missing":                   "apiVersion: ray.io/v1\nkind: RayCluster\nspec: {headGroupSpec: {template: {}}, workerGroupSpecs: [{replicas: 1, template: {}}]}\n",
		`spec.workerGroupSpecs.0.groupName "head" names a pod set twice`: "apiVersion: ray.io/v1\nkind: RayCluster\nspec: {headGroupSpec: {template: {}}, workerGroupSpecs: [{groupName: head, template: {}}]}\n",
		"spec.rayClusterSpec is missing":                                 "apiVersion: ray.io/v1\nkind: RayJob\nspec: {entrypoint: x}\n",
	}
	for want, m := range cases {
		t.Run(want, func(t *testing.T) {
			obj := object(t, m)
			a := RayCluster
			if obj.GetKind() == "RayJob" {
				a = RayJob
			}
			if _, err := a.PodSets(obj); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("error = %v, want %q", err, want)
			}
		})
	}
}

func TestStatus(t *testing.T) {
	cases := map[string]struct {
		a      Adapter
		status string
		want   integration.Status
	}{
		"a new RayJob":       {a: RayJob, status: `{}`},
		"a suspended RayJob": {a: RayJob, status: `{jobDeploymentStatus: Suspended}`},
		"a running RayJob":   {a: RayJob, status: `{jobDeploymentStatus: Running, jobStatus: RUNNING}`, want: integration.Status{Active: true}},
		"a RayJob that succeeded": {a: RayJob, status: `{jobDeploymentStatus: Complete, jobStatus: SUCCEEDED}`,
			want: integration.Status{Finished: true, Message: "RayJob Complete: job SUCCEEDED"}},
		"a RayJob whose app failed": {a: RayJob, status: `{jobDeploymentStatus: Failed, jobStatus: FAILED, reason: AppFailed, message: "exit 1"}`,
			want: integration.Status{Finished: true, Failed: true, Message: "exit 1"}},
		"a running RayCluster":   {a: RayCluster, status: `{state: ready}`, want: integration.Status{Active: true}},
		"a suspended RayCluster": {a: RayCluster, status: `{state: suspended, conditions: [{type: RayClusterSuspended, status: "True"}]}`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			obj := rayCluster(t)
			if tc.a.job {
				obj = rayJob(t, "")
			}
			if tc.status != `{}` {
				obj.Object["status"] = object(t, tc.status).Object
			}
			if diff := cmp.Diff(tc.want, tc.a.Status(obj)); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSuspendAndManagedBy(t *testing.T) {
	obj := rayJob(t, "")
	RayJob.SetSuspended(obj, true)
	RayJob.SetManagedBy(obj, "kueue.x-k8s.io/multikueue")
	if !RayJob.Suspended(obj) || RayJob.ManagedBy(obj) != "kueue.x-k8s.io/multikueue" {
		t.Errorf("spec: %v", obj.Object["spec"])
	}
	RayJob.SetManagedBy(obj, "")
	if _, ok := obj.Object["spec"].(map[string]any)["managedBy"]; ok {
		t.Error("clearing managedBy left the field")
	}
}
