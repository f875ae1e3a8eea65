package kwok

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"text/template"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

func TestRender(t *testing.T) {
	data, err := Render(Options{PodRunTime: 7 * time.Second})
	if err != nil {
		t.Fatalf("Render: %v", err)
	}
	docs := strings.Split(string(data), "\n---\n")
	var names []string
	byName := map[string]Stage{}
	for _, d := range docs {
		var s Stage
		if err := yaml.UnmarshalStrict([]byte(d), &s); err != nil {
			t.Fatalf("rendered document does not parse back: %v\n%s", err, d)
		}
		if s.APIVersion != "kwok.x-k8s.io/v1alpha1" || s.Kind != "Stage" {
			t.Errorf("stage %q: apiVersion/kind = %s/%s", s.Metadata.Name, s.APIVersion, s.Kind)
		}
		names = append(names, s.Metadata.Name)
		byName[s.Metadata.Name] = s
	}
	if diff := cmp.Diff([]string{"node-initialize", "node-heartbeat", "pod-ready", "pod-complete", "pod-complete-timed", "pod-delete"}, names); diff != "" {
		t.Errorf("stages (-want +got):\n%s", diff)
	}

	complete := byName["pod-complete"].Spec
	wantDelay := &Delay{DurationMilliseconds: 7000, DurationFrom: &From{ExpressionFrom: `.metadata.annotations["pod-complete.stage.kwok.x-k8s.io/delay"]`}}
	if diff := cmp.Diff(wantDelay, complete.Delay); diff != "" {
		t.Errorf("pod-complete delay (-want +got):\n%s", diff)
	}
	if !strings.Contains(string(data), "ownerReferences") {
		t.Errorf("pod-complete must only complete pods owned by a Job")
	}
	// A jitter would make kwok pick a random delay (or replace the delay), so pod run times would not be
	// what tests ask for.
	if strings.Contains(string(data), "jitter") {
		t.Errorf("stages must not use jitter:\n%s", data)
	}
	if !byName["pod-delete"].Spec.Next.Delete {
		t.Errorf("pod-delete must delete")
	}
	if got := byName["node-heartbeat"].Spec.Delay.DurationMilliseconds; got != 30000 {
		t.Errorf("default heartbeat = %dms, want 30000", got)
	}
}

func TestRenderRejectsNegativeRunTime(t *testing.T) {
	if _, err := Render(Options{PodRunTime: -time.Second}); err == nil {
		t.Errorf("got no error for a negative pod run time")
	}
}

// kwokFuncs stands in for the functions kwok gives its templates, so the templates can be executed here.
var kwokFuncs = template.FuncMap{
	"Quote": func(s any) string {
		data, err := json.Marshal(s)
		if err != nil || len(data) == 0 || data[0] != '"' {
			return strconv.Quote(fmt.Sprint(s))
		}
		return string(data)
	},
	"Now":        func() string { return "2026-01-02T03:04:05Z" },
	"Version":    func() string { return "v0.8.0" },
	"NodeIP":     func() string { return "10.1.0.1" },
	"NodeName":   func() string { return "" },
	"NodeIPWith": func(string) string { return "10.1.0.1" },
	"PodIPWith":  func(string, bool, string, string, string) string { return "10.244.0.7" },
	"NodeConditions": func() any {
		return []map[string]any{{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "ready"}}
	},
	"YAML": func(v any, indent ...int) (string, error) {
		d, err := yaml.Marshal(v)
		if err != nil {
			return "", err
		}
		s := string(d)
		if len(indent) == 1 && indent[0] > 0 {
			pad := strings.Repeat(" ", indent[0]*2)
			s = strings.ReplaceAll("\n"+s, "\n", "\n"+pad)
		}
		return s, nil
	},
}

func TestTemplatesProduceStatus(t *testing.T) {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "us-east-a100-0", CreationTimestamp: metav1.Now()},
		Status: corev1.NodeStatus{
			Capacity:    corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8"), corev1.ResourceCPU: resource.MustParse("96")},
			Allocatable: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8"), corev1.ResourceCPU: resource.MustParse("96")},
		},
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "job-x", Namespace: "ns", UID: "u1"},
		Spec: corev1.PodSpec{
			NodeName:       "us-east-a100-0",
			Containers:     []corev1.Container{{Name: "main", Image: "busybox"}},
			InitContainers: []corev1.Container{{Name: "init", Image: "busybox"}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &metav1.Time{Time: time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)}},
	}
	byName := map[string]Stage{}
	for _, s := range Stages(Options{PodRunTime: time.Second}) {
		byName[s.Metadata.Name] = s
	}
	cases := map[string]struct {
		obj  any
		want func(t *testing.T, out []byte)
	}{
		"node-initialize": {obj: node, want: func(t *testing.T, out []byte) {
			var st corev1.NodeStatus
			decode(t, out, &st)
			if st.Phase != corev1.NodeRunning || len(st.Conditions) != 1 || st.Conditions[0].Status != corev1.ConditionTrue {
				t.Errorf("node status: %+v", st)
			}
			if got := st.Allocatable["nvidia.com/gpu"]; got.String() != "8" {
				t.Errorf("allocatable GPUs = %s, want the 8 the node registered with", got.String())
			}
			if diff := cmp.Diff([]corev1.NodeAddress{{Type: "InternalIP", Address: "10.1.0.1"}, {Type: "Hostname", Address: "us-east-a100-0"}}, st.Addresses); diff != "" {
				t.Errorf("addresses (-want +got):\n%s", diff)
			}
		}},
		"node-heartbeat": {obj: node, want: func(t *testing.T, out []byte) {
			var st corev1.NodeStatus
			decode(t, out, &st)
			if len(st.Conditions) != 1 || st.Conditions[0].LastHeartbeatTime.IsZero() {
				t.Errorf("heartbeat conditions: %+v", st.Conditions)
			}
		}},
		"pod-ready": {obj: pod, want: func(t *testing.T, out []byte) {
			var st corev1.PodStatus
			decode(t, out, &st)
			if st.Phase != corev1.PodRunning || st.PodIP != "10.244.0.7" || len(st.ContainerStatuses) != 1 ||
				st.ContainerStatuses[0].State.Running == nil || len(st.InitContainerStatuses) != 1 {
				t.Errorf("pod status: %+v", st)
			}
		}},
		"pod-complete": {obj: pod, want: func(t *testing.T, out []byte) {
			var st corev1.PodStatus
			decode(t, out, &st)
			term := st.ContainerStatuses[0].State.Terminated
			if st.Phase != corev1.PodSucceeded || term == nil || term.ExitCode != 0 {
				t.Errorf("pod status: %+v", st)
			}
			if got := term.StartedAt.UTC(); !got.Equal(time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)) {
				t.Errorf("container startedAt = %s, want the pod's start time", got)
			}
		}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tmpl, err := template.New(name).Funcs(kwokFuncs).Parse(byName[name].Spec.Next.StatusTemplate)
			if err != nil {
				t.Fatalf("parse template: %v", err)
			}
			var buf bytes.Buffer
			if err := tmpl.Execute(&buf, toJSONMap(t, tc.obj)); err != nil {
				t.Fatalf("execute template: %v", err)
			}
			tc.want(t, buf.Bytes())
		})
	}
}

// toJSONMap gives the template what kwok gives it: the object as generic JSON.
func toJSONMap(t *testing.T, obj any) map[string]any {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatalf("to unstructured: %v", err)
	}
	return m
}

func decode(t *testing.T, out []byte, into any) {
	t.Helper()
	if err := yaml.UnmarshalStrict(out, into); err != nil {
		t.Fatalf("template output is not a valid status: %v\n%s", err, out)
	}
}

func TestPodTerminationDelay(t *testing.T) {
	byName := func(o Options) map[string]Stage {
		out := map[string]Stage{}
		for _, s := range Stages(o) {
			out[s.Metadata.Name] = s
		}
		return out
	}
	if d := byName(Options{})["pod-delete"].Spec.Delay; d != nil {
		t.Errorf("with no termination delay pods must go at once, got delay %+v", d)
	}
	d := byName(Options{PodTerminationDelay: 3 * time.Second})["pod-delete"].Spec.Delay
	if d == nil || d.DurationMilliseconds != 3000 || d.DurationFrom != nil {
		t.Errorf("pod-delete delay = %+v, want exactly 3000ms", d)
	}
	if _, err := Render(Options{PodTerminationDelay: -time.Second}); err == nil || !strings.Contains(err.Error(), "termination delay") {
		t.Errorf("a negative termination delay must be refused naming it, got %v", err)
	}
}
