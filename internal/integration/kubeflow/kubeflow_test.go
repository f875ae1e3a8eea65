package kubeflow

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/internal/integration"
)

const pytorchJob = `
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: mnist, namespace: research, labels: {kueue.x-k8s.io/queue-name: team-queue}}
spec:
  pytorchReplicaSpecs:
    Worker:
      replicas: 3
      template:
        metadata: {labels: {role: worker}}
        spec:
          containers: [{name: pytorch, image: trainer, resources: {requests: {nvidia.com/gpu: "1"}}}]
    Master:
      template:
        spec:
          containers: [{name: pytorch, image: trainer}]
`

func object(t *testing.T, manifest string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(manifest), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

func TestPodSetsOnePerReplicaTypeInOrder(t *testing.T) {
	sets, err := PyTorchJob.PodSets(object(t, pytorchJob))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ps := range sets {
		got = append(got, fmt.Sprintf("%s×%d", ps.Name, ps.Count))
	}
	if diff := cmp.Diff([]string{"master×1", "worker×3"}, got); diff != "" {
		t.Errorf("pod sets (-want +got):\n%s", diff)
	}
	if q := sets[1].Template.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"]; q.Value() != 1 {
		t.Errorf("worker template lost its requests: %+v", sets[1].Template.Spec)
	}
}

func TestPodSetsErrorsNameTheField(t *testing.T) {
	cases := map[string]string{
		"no replica specs": `{apiVersion: kubeflow.org/v1, kind: PyTorchJob, spec: {}}`,
		"negative":         `{apiVersion: kubeflow.org/v1, kind: PyTorchJob, spec: {pytorchReplicaSpecs: {Worker: {replicas: -1, template: {}}}}}`,
		"no template":      `{apiVersion: kubeflow.org/v1, kind: PyTorchJob, spec: {pytorchReplicaSpecs: {Worker: {replicas: 1}}}}`,
	}
	want := map[string]string{
		"no replica specs": "spec.pytorchReplicaSpecs has no replica types",
		"negative":         "spec.pytorchReplicaSpecs.Worker.replicas is -1",
		"no template":      "spec.pytorchReplicaSpecs.Worker: template is missing",
	}
	for name, m := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := PyTorchJob.PodSets(object(t, m))
			if err == nil || !strings.Contains(err.Error(), want[name]) {
				t.Errorf("error = %v, want %q", err, want[name])
			}
		})
	}
}

func TestSuspendPlaceRestore(t *testing.T) {
	a, obj := PyTorchJob, object(t, pytorchJob)
	if a.Suspended(obj) {
		t.Fatal("a new job is not suspended")
	}
	a.SetSuspended(obj, true)
	if !a.Suspended(obj) || !integration.Bool(obj, integration.ParsePath("spec.runPolicy.suspend")) {
		t.Fatal("SetSuspended did not set spec.runPolicy.suspend")
	}
	original, _ := a.PodSets(obj)
	placements := []integration.PodSetPlacement{
		{Name: "worker", Count: ptr.To[int32](2), Placement: integration.Placement{
			NodeSelector: map[string]string{"gpu": "a100"},
			Tolerations:  []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists}},
			Labels:       map[string]string{integration.PodSetLabel: "worker"},
		}},
		{Name: "master", Placement: integration.Placement{Labels: map[string]string{integration.PodSetLabel: "master"}}},
	}
	if err := a.ApplyPlacements(obj, placements); err != nil {
		t.Fatal(err)
	}
	sets, _ := a.PodSets(obj)
	if sets[1].Count != 2 || sets[1].Template.Spec.NodeSelector["gpu"] != "a100" || sets[1].Template.Labels["role"] != "worker" ||
		sets[1].Template.Labels[integration.PodSetLabel] != "worker" || len(sets[1].Template.Spec.Tolerations) != 1 {
		t.Errorf("worker after placement: count %d, %+v", sets[1].Count, sets[1].Template)
	}
	if sets[0].Template.Labels[integration.PodSetLabel] != "master" {
		t.Errorf("master after placement: %+v", sets[0].Template)
	}
	if !a.RestorePodSets(obj, original) {
		t.Fatal("RestorePodSets reported no change")
	}
	restored, _ := a.PodSets(obj)
	for i := range original {
		if diff := cmp.Diff(original[i].Template, restored[i].Template); diff != "" {
			t.Errorf("pod set %s restored (-want +got):\n%s", original[i].Name, diff)
		}
	}
	if err := a.ApplyPlacements(obj, []integration.PodSetPlacement{{Name: "launcher"}}); err == nil || !strings.Contains(err.Error(), `no pod set "launcher"`) {
		t.Errorf("placement of an unknown pod set: %v", err)
	}
}

func TestStatus(t *testing.T) {
	cases := map[string]struct {
		status string
		want   integration.Status
	}{
		"new":       {status: `{}`},
		"running":   {status: `{startTime: "2026-12-03T10:00:00Z", conditions: [{type: Running, status: "True"}], replicaStatuses: {Worker: {active: 3}}}`, want: integration.Status{Active: true}},
		"suspended": {status: `{conditions: [{type: Suspended, status: "True"}], replicaStatuses: {Worker: {}}}`},
		"succeeded": {status: `{startTime: "2026-12-03T10:00:00Z", conditions: [{type: Succeeded, status: "True", message: "PyTorchJob mnist is successfully completed."}]}`,
			want: integration.Status{Finished: true, Message: "PyTorchJob mnist is successfully completed."}},
		"failed": {status: `{conditions: [{type: Failed, status: "True", reason: BackoffLimitExceeded}]}`,
			want: integration.Status{Finished: true, Failed: true, Message: "PyTorchJob failed: BackoffLimitExceeded"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			obj := object(t, pytorchJob)
			st := object(t, tc.status)
			obj.Object["status"] = st.Object
			if diff := cmp.Diff(tc.want, PyTorchJob.Status(obj)); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCopyAndMirror(t *testing.T) {
	obj := object(t, pytorchJob)
	obj.SetUID("u")
	obj.SetResourceVersion("9")
	obj.Object["status"] = map[string]any{"startTime": "t0"}
	c := PyTorchJob.Copy(obj).(*unstructured.Unstructured)
	if c.GetUID() != "" || c.GetResourceVersion() != "" || c.Object["status"] != nil || c.GetName() != "mnist" || c.GetLabels()[kueue.QueueNameLabel] != "team-queue" {
		t.Errorf("copy: %+v", c.Object)
	}
	if sets, err := PyTorchJob.PodSets(c); err != nil || len(sets) != 2 {
		t.Errorf("copy's pod sets %v, %v", sets, err)
	}
	remote := object(t, pytorchJob)
	remote.Object["status"] = map[string]any{"replicaStatuses": map[string]any{"Worker": map[string]any{"active": int64(3)}}}
	if !PyTorchJob.MirrorStatus(obj, remote) || !PyTorchJob.Status(obj).Active {
		t.Errorf("mirrored status %v", obj.Object["status"])
	}
	if PyTorchJob.MirrorStatus(obj, remote) {
		t.Error("mirroring the same status reported a change")
	}
	if !PyTorchJob.MirrorStatus(obj, nil) || obj.Object["status"] != nil {
		t.Error("a gone copy's status is not cleared")
	}
}

func TestFrameworkNames(t *testing.T) {
	var got []string
	for _, a := range Adapters() {
		got = append(got, a.Framework())
	}
	want := []string{"kubeflow.org/pytorchjob", "kubeflow.org/tfjob", "kubeflow.org/xgboostjob", "kubeflow.org/paddlejob", "kubeflow.org/mpijob"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("frameworks (-want +got):\n%s", diff)
	}
}
