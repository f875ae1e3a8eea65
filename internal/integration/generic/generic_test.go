package generic

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/internal/integration"
)

// jobSet is the configuration's JobSet description (config/examples/jobset.yaml).
var jobSet = Spec{
	Group: "jobset.x-k8s.io", Version: "v1alpha2", Kind: "JobSet",
	SuspendPath: "spec.suspend", ManagedByPath: "spec.managedBy",
	PodSets: []PodSetSpec{{
		List: "spec.replicatedJobs", NameField: "name",
		Template: "template.spec.template", Count: []string{"replicas", "template.spec.parallelism"},
	}},
	SucceededConditions: []string{"Completed"}, FailedConditions: []string{"Failed"},
}

const jobSetYAML = `
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata: {name: trainer, namespace: research}
spec:
  suspend: true
  replicatedJobs:
  - name: Driver
    template:
      spec:
        template:
          spec:
            containers: [{name: main, image: driver}]
  - name: workers
    replicas: 2
    template:
      spec:
        parallelism: 4
        template:
          metadata: {labels: {team: research}}
          spec:
            nodeSelector: {disk: ssd}
            containers: [{name: main, image: trainer}]
`

func object(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

func TestPodSets(t *testing.T) {
	a := New(jobSet)
	sets, err := a.PodSets(object(t, jobSetYAML))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ps := range sets {
		got = append(got, string(ps.Name)+"="+ps.Template.Spec.Containers[0].Image+"×"+string(rune('0'+ps.Count)))
	}
	if diff := cmp.Diff([]string{"driver=driver×1", "workers=trainer×8"}, got); diff != "" {
		t.Errorf("pod sets (-want +got):\n%s", diff)
	}
	if a.Framework() != "jobset.x-k8s.io/jobset" || a.Fields().ManagedBy != "spec.managedBy" {
		t.Errorf("framework %q, fields %+v", a.Framework(), a.Fields())
	}

	bad := map[string]struct {
		doc  string
		want string
	}{
		"no list":          {`{spec: {}}`, "spec.replicatedJobs is missing"},
		"empty list":       {`{spec: {replicatedJobs: []}}`, "spec.replicatedJobs must be a list with at least one item"},
		"unnamed item":     {`{spec: {replicatedJobs: [{template: {}}]}}`, "spec.replicatedJobs[0]: the pod set has no name"},
		"no template":      {`{spec: {replicatedJobs: [{name: a, template: {spec: {}}}]}}`, "spec.replicatedJobs[0]: template.spec.template is missing"},
		"negative count":   {`{spec: {replicatedJobs: [{name: a, replicas: -1, template: {spec: {template: {}}}}]}}`, "replicas is -1; it must not be negative"},
		"names that clash": {`{spec: {replicatedJobs: [{name: a, template: {spec: {template: {}}}}, {name: A, template: {spec: {template: {}}}}]}}`, `pod set "a" is also spec.replicatedJobs[0]`},
	}
	for name, tc := range bad {
		t.Run(name, func(t *testing.T) {
			_, err := a.PodSets(object(t, tc.doc))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}

func TestPlacementsAndRestore(t *testing.T) {
	a := New(jobSet)
	obj := object(t, jobSetYAML)
	original, err := a.PodSets(obj)
	if err != nil {
		t.Fatal(err)
	}
	placement := integration.Placement{
		NodeSelector: map[string]string{"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"},
		Tolerations:  []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists}},
		Labels:       map[string]string{integration.WorkloadUIDLabel: "uid-1", integration.PodSetLabel: "workers"},
	}
	if err := a.ApplyPlacements(obj, []integration.PodSetPlacement{{Name: "workers", Placement: placement}}); err != nil {
		t.Fatal(err)
	}
	sets, _ := a.PodSets(obj)
	w := sets[1].Template
	if w.Spec.NodeSelector["nvidia.com/gpu.product"] != "NVIDIA-A100-SXM4-80GB" || w.Spec.NodeSelector["disk"] != "ssd" ||
		len(w.Spec.Tolerations) != 1 || w.Labels[integration.WorkloadUIDLabel] != "uid-1" || w.Labels["team"] != "research" {
		t.Errorf("workers template after placement: %+v", w)
	}
	if len(sets[0].Template.Spec.NodeSelector) != 0 {
		t.Errorf("the driver got a placement it was not given: %+v", sets[0].Template.Spec)
	}
	if err := a.ApplyPlacements(obj, []integration.PodSetPlacement{{Name: "launcher", Placement: placement}}); err == nil {
		t.Errorf("a placement for a pod set the JobSet lacks was accepted")
	}
	if !a.RestorePodSets(obj, original) {
		t.Fatalf("RestorePodSets changed nothing")
	}
	restored, _ := a.PodSets(obj)
	if diff := cmp.Diff(original, restored); diff != "" {
		t.Errorf("restored pod sets (-original +restored):\n%s", diff)
	}
	if a.RestorePodSets(obj, original) {
		t.Errorf("a second restore changed something")
	}
}

func TestSuspendManagedByStatus(t *testing.T) {
	a := New(jobSet)
	obj := object(t, jobSetYAML)
	if !a.Suspended(obj) {
		t.Errorf("suspend: true reads as running")
	}
	if st := a.Status(obj); st.Active || st.Finished {
		t.Errorf("suspended JobSet status %+v", st)
	}
	a.SetSuspended(obj, false)
	if a.Suspended(obj) || !a.Status(obj).Active {
		t.Errorf("an unsuspended JobSet is not active: %+v", a.Status(obj))
	}
	a.SetManagedBy(obj, kueue.MultiKueueControllerName)
	if got := a.ManagedBy(obj); got != kueue.MultiKueueControllerName {
		t.Errorf("managedBy = %q", got)
	}
	a.SetManagedBy(obj, "")
	if _, ok, _ := unstructured.NestedString(obj.Object, "spec", "managedBy"); ok {
		t.Errorf("clearing managedBy left the field")
	}
	conds := func(typ, status, msg string) {
		_ = unstructured.SetNestedSlice(obj.Object, []any{map[string]any{"type": typ, "status": status, "reason": "R", "message": msg}}, "status", "conditions")
	}
	conds("Completed", "True", "")
	if st := a.Status(obj); !st.Finished || st.Failed || st.Message != "JobSet Completed: R" {
		t.Errorf("completed: %+v", st)
	}
	conds("Failed", "True", "jobs failed")
	if st := a.Status(obj); !st.Finished || !st.Failed || st.Message != "jobs failed" {
		t.Errorf("failed: %+v", st)
	}
	conds("Completed", "False", "")
	if st := a.Status(obj); st.Finished {
		t.Errorf("a False condition finished the job: %+v", st)
	}
}

func TestValidate(t *testing.T) {
	cases := map[string]struct {
		mutate func(*Spec)
		want   []string
	}{
		"the JobSet example": {mutate: func(*Spec) {}},
		"kind, version, suspend and pod sets missing": {
			mutate: func(s *Spec) { s.Kind, s.Version, s.SuspendPath, s.PodSets = "", "", "", nil },
			want:   []string{"g.kind: Required", "g.version: Required", "g.suspendPath: Required", "g.podSets: Required"},
		},
		"bad group and paths": {
			mutate: func(s *Spec) {
				s.Group, s.ManagedByPath, s.PodSets[0].Template = "Jobs", "spec..managedBy", "template[0].spec"
			},
			want: []string{"g.group: Invalid", "g.managedByPath: Invalid value: \"spec..managedBy\": must be a dotted path", "g.podSets[0].template: Invalid"},
		},
		"list without nameField, name with list": {
			mutate: func(s *Spec) {
				s.PodSets = append(s.PodSets, PodSetSpec{Name: "x", List: "spec.more", Template: "t"})
				s.PodSets[0].NameField = ""
			},
			want: []string{"g.podSets[0].nameField: Required", "g.podSets[1].name: Forbidden"},
		},
		"duplicate names": {
			mutate: func(s *Spec) {
				s.PodSets = []PodSetSpec{{Name: "main", Template: "spec.template"}, {Name: "Main", Template: "spec.other"}, {Template: "spec.third"}}
			},
			want: []string{"g.podSets[1].name: Duplicate", "g.podSets[2].name: Required"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := jobSet
			s.PodSets = append([]PodSetSpec(nil), jobSet.PodSets...)
			tc.mutate(&s)
			errs := s.Validate(field.NewPath("g"))
			got := errs.ToAggregate()
			if len(tc.want) == 0 {
				if got != nil {
					t.Fatalf("unexpected errors: %v", got)
				}
				return
			}
			if got == nil || len(errs) != len(tc.want) {
				t.Fatalf("errors %v, want %d: %q", got, len(tc.want), tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(got.Error(), w) {
					t.Errorf("errors %q lack %q", got, w)
				}
			}
		})
	}
}
