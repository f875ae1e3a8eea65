package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/dispatch/registry"
	"github.com/fleetq/fleetq/internal/workload"
)

var update = flag.Bool("update", false, "rewrite the golden files")

var now = time.Date(2026, 3, 4, 12, 0, 0, 0, time.UTC)

func ago(d time.Duration) metav1.Time { return metav1.Time{Time: now.Add(-d)} }

func capacity(t *testing.T, s registry.CapacitySummary) string {
	t.Helper()
	raw, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

func gpus(n string) corev1.ResourceList {
	return corev1.ResourceList{"nvidia.com/gpu": resource.MustParse(n), corev1.ResourceCPU: resource.MustParse("96")}
}

func mkc(name string, active bool, reason, msg string, since time.Duration, annotation string) *kueue.MultiKueueCluster {
	status := metav1.ConditionFalse
	if active {
		status = metav1.ConditionTrue
	}
	m := &kueue.MultiKueueCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: kueue.MultiKueueClusterStatus{Conditions: []metav1.Condition{{
			Type: kueue.MultiKueueClusterActive, Status: status, Reason: reason, Message: msg, LastTransitionTime: ago(since),
		}}},
	}
	if annotation != "" {
		m.Annotations = map[string]string{registry.CapacityAnnotation: annotation}
	}
	return m
}

func job(name, queue string, uid types.UID) *batchv1.Job {
	j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "research", Name: name, UID: uid, Labels: map[string]string{}}}
	if queue != "" {
		j.Labels[kueue.QueueNameLabel] = queue
	}
	return j
}

func workloadFor(j *batchv1.Job, conds []metav1.Condition, st func(*kueue.WorkloadStatus)) *kueue.Workload {
	wl := &kueue.Workload{
		ObjectMeta: metav1.ObjectMeta{Namespace: j.Namespace, Name: workload.NameFor("Job", j.Name, j.UID), Labels: map[string]string{jobUIDLabel: string(j.UID)}},
		Spec:       kueue.WorkloadSpec{QueueName: kueue.LocalQueueName(j.Labels[kueue.QueueNameLabel])},
		Status:     kueue.WorkloadStatus{Conditions: conds},
	}
	if st != nil {
		st(&wl.Status)
	}
	return wl
}

func event(name, kind, regarding, reason, note string, at time.Duration) *eventsv1.Event {
	return &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: "research", Name: name},
		EventTime:  metav1.MicroTime{Time: now.Add(-at)}, Type: "Normal", Reason: reason, Note: note, Action: reason,
		ReportingController: "fleetq", ReportingInstance: "fleetq-1",
		Regarding: corev1.ObjectReference{Kind: kind, Namespace: "research", Name: regarding},
	}
}

func world(t *testing.T) []client.Object {
	east := registry.CapacitySummary{Revision: 7, Flavors: []registry.FlavorSummary{{Name: "a100-flavor", Nodes: 2, Free: gpus("12"), Allocatable: gpus("16")}}}
	eu := registry.CapacitySummary{Revision: 3, Flavors: []registry.FlavorSummary{{Name: "a100-flavor"}, {Name: "l4-flavor", Nodes: 2, Free: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}, Allocatable: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}}}}
	fenced := registry.CapacitySummary{Revision: 1, Fenced: true, Flavors: []registry.FlavorSummary{{Name: "cpu", Nodes: 1, Free: corev1.ResourceList{"cpu": resource.MustParse("6"), "memory": resource.MustParse("30Gi")}, Allocatable: corev1.ResourceList{"cpu": resource.MustParse("8"), "memory": resource.MustParse("32Gi")}}}}
	pending := job("big-train", "team-queue", "uid-pending")
	running := job("train", "team-queue", "uid-running")
	return []client.Object{
		mkc("us-east", true, "Active", "Connected", 90*time.Minute, capacity(t, east)),
		mkc("eu-west", false, "ClientConnectionFailed", "worker stopped answering: connection refused", 3*time.Minute, capacity(t, eu)),
		mkc("us-west", false, "KubeconfigNotFound", "Secret fleetq-system/us-west-kubeconfig not found", 40*time.Second, ""),
		mkc("ap-south", true, "Active", "Connected", 50*time.Hour, capacity(t, fenced)),
		mkc("broken", true, "Active", "Connected", time.Minute, "{not json"),
		&kueue.ClusterQueue{
			ObjectMeta: metav1.ObjectMeta{Name: "research-gpu-cq"}, Spec: kueue.ClusterQueueSpec{CohortName: "ai-platform"},
			Status: kueue.ClusterQueueStatus{
				PendingWorkloads: 1, ReservingWorkloads: 3, AdmittedWorkloads: 2,
				Conditions: []metav1.Condition{{Type: kueue.ClusterQueueActive, Status: metav1.ConditionTrue, Reason: "Ready"}},
				FlavorsReservation: []kueue.FlavorUsage{{Name: "a100-flavor", Resources: []kueue.ResourceUsage{
					{Name: "cpu", Total: resource.MustParse("24")},
					{Name: "nvidia.com/gpu", Total: resource.MustParse("20"), Borrowed: resource.MustParse("4")},
				}}},
			},
		},
		&kueue.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: "inference-gpu-cq"},
			Status: kueue.ClusterQueueStatus{Conditions: []metav1.Condition{{Type: kueue.ClusterQueueActive, Status: metav1.ConditionFalse, Reason: "AdmissionCheckNotFound"}}}},
		&kueue.LocalQueue{ObjectMeta: metav1.ObjectMeta{Namespace: "research", Name: "team-queue"}, Spec: kueue.LocalQueueSpec{ClusterQueue: "research-gpu-cq"},
			Status: kueue.LocalQueueStatus{PendingWorkloads: 1, ReservingWorkloads: 3, AdmittedWorkloads: 2}},
		&kueue.LocalQueue{ObjectMeta: metav1.ObjectMeta{Namespace: "inference", Name: "other"}, Spec: kueue.LocalQueueSpec{ClusterQueue: "inference-gpu-cq"}},
		pending,
		workloadFor(pending, []metav1.Condition{{Type: kueue.WorkloadQuotaReserved, Status: metav1.ConditionFalse, Reason: "NoPlacement", LastTransitionTime: ago(2 * time.Minute),
			Message: "no worker has room: us-east: no node has room: largest node fit 4 of 8 nvidia.com/gpu; us-west: not connected (KubeconfigNotFound: not registered); eu-west: flavor a100-flavor absent"}}, nil),
		running,
		workloadFor(running, []metav1.Condition{
			{Type: kueue.WorkloadQuotaReserved, Status: metav1.ConditionTrue, Reason: "QuotaReserved", Message: "Quota reserved in ClusterQueue research-gpu-cq, placed on worker us-east", LastTransitionTime: ago(5 * time.Minute)},
			{Type: kueue.WorkloadAdmitted, Status: metav1.ConditionTrue, Reason: "Admitted", Message: "The workload is admitted and runs in worker us-east", LastTransitionTime: ago(4 * time.Minute)},
		}, func(st *kueue.WorkloadStatus) {
			st.ClusterName = ptr.To("us-east")
			st.Admission = &kueue.Admission{ClusterQueue: "research-gpu-cq", PodSetAssignments: []kueue.PodSetAssignment{{
				Name: "main", Count: ptr.To[int32](2),
				Flavors:       map[corev1.ResourceName]kueue.ResourceFlavorReference{"nvidia.com/gpu": "a100-flavor", "cpu": "a100-flavor"},
				ResourceUsage: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8"), "cpu": resource.MustParse("2")},
			}}}
			st.AdmissionChecks = []kueue.AdmissionCheckState{{Name: "dispatch", State: kueue.CheckStateReady, Message: "Running in worker us-east"}}
		}),
		event("e1", "Workload", workload.NameFor("Job", "train", "uid-running"), "QuotaReserved", "Quota reserved in ClusterQueue research-gpu-cq, placed on worker us-east; pod set main: cpu=2 in a100-flavor nvidia.com/gpu=8 in a100-flavor; Placed on worker us-east: us-east: chosen (fits on 1 node(s))", 5*time.Minute),
		event("e3", "Job", "train", "Started", "Admitted by clusterQueue research-gpu-cq", 4*time.Minute),
		event("e4", "Job", "someone-else", "Started", "not ours", time.Minute),
		job("no-queue", "", "uid-free"),
		job("not-yet", "team-queue", "uid-new"),
	}
}

func newView(t *testing.T, objs []client.Object, out *bytes.Buffer) *view {
	c := fake.NewClientBuilder().WithScheme(scheme()).WithObjects(objs...).Build()
	return &view{client: c, namespace: "research", out: out, now: func() time.Time { return now }}
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to write it)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("output differs from %s (-want +got):\n%s", path, diff)
	}
}

func TestViews(t *testing.T) {
	cases := map[string]struct {
		objs func(t *testing.T) []client.Object
		run  func(ctx context.Context, v *view) error
	}{
		"clusters":            {world, func(ctx context.Context, v *view) error { return v.clusters(ctx) }},
		"clusters-none":       {func(*testing.T) []client.Object { return nil }, func(ctx context.Context, v *view) error { return v.clusters(ctx) }},
		"queues":              {world, func(ctx context.Context, v *view) error { return v.queues(ctx) }},
		"queues-none":         {func(*testing.T) []client.Object { return nil }, func(ctx context.Context, v *view) error { return v.queues(ctx) }},
		"explain-pending":     {world, func(ctx context.Context, v *view) error { return v.explain(ctx, "big-train") }},
		"explain-running":     {world, func(ctx context.Context, v *view) error { return v.explain(ctx, "job/train") }},
		"explain-no-queue":    {world, func(ctx context.Context, v *view) error { return v.explain(ctx, "no-queue") }},
		"explain-no-workload": {world, func(ctx context.Context, v *view) error { return v.explain(ctx, "jobs/not-yet") }},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			if err := tc.run(context.Background(), newView(t, tc.objs(t), &out)); err != nil {
				t.Fatal(err)
			}
			golden(t, name, out.String())
		})
	}
}

func TestExplainMissingJob(t *testing.T) {
	var out bytes.Buffer
	err := newView(t, world(t), &out).explain(context.Background(), "nope")
	if err == nil || err.Error() != "job research/nope not found (use -n for another namespace)" {
		t.Errorf("explain = %v", err)
	}
}

func writeKubeconfig(t *testing.T) string {
	t.Helper()
	kc := `apiVersion: v1
kind: Config
clusters:
- name: mgmt
  cluster: {server: "https://127.0.0.1:1"}
users:
- name: admin
  user: {token: abc}
contexts:
- name: one
  context: {cluster: mgmt, user: admin, namespace: research}
- name: two
  context: {cluster: mgmt, user: admin, namespace: inference}
current-context: one
`
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestFlags: --kubeconfig, --context and -n choose the cluster and namespace as kubectl's do.
func TestFlags(t *testing.T) {
	kc := writeKubeconfig(t)
	cases := map[string]struct {
		f    flags
		want string
	}{
		"current context's namespace": {flags{kubeconfig: kc}, "research"},
		"--context":                   {flags{kubeconfig: kc, context: "two"}, "inference"},
		"-n wins":                     {flags{kubeconfig: kc, context: "two", namespace: "ops"}, "ops"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			v, err := tc.f.view(&bytes.Buffer{})
			if err != nil {
				t.Fatal(err)
			}
			if v.namespace != tc.want {
				t.Errorf("namespace = %s, want %s", v.namespace, tc.want)
			}
		})
	}
}

// TestCommandErrors: what a user can get wrong on the command line is refused with a reason.
func TestCommandErrors(t *testing.T) {
	kc := writeKubeconfig(t)
	cases := map[string]struct {
		args []string
		want string
	}{
		"no such kubeconfig":  {[]string{"clusters", "--kubeconfig", "/nonexistent/kubeconfig"}, "kubeconfig:"},
		"unknown context":     {[]string{"queues", "--kubeconfig", kc, "--context", "three"}, `context "three" does not exist`},
		"explain needs a job": {[]string{"explain", "--kubeconfig", kc}, "accepts 1 arg(s), received 0"},
		"clusters takes none": {[]string{"clusters", "us-east", "--kubeconfig", kc}, `unknown command "us-east"`},
		"unreachable cluster": {[]string{"clusters", "--kubeconfig", kc}, "listing multikueueclusters"},
		"unknown subcommand":  {[]string{"nodes", "--kubeconfig", kc}, `unknown command "nodes"`},
		"stop needs a name":   {[]string{"stop", "clusterqueue", "--kubeconfig", kc}, "accepts 2 arg(s), received 1"},
		"resume needs a kind": {[]string{"resume", "--kubeconfig", kc}, "accepts 2 arg(s), received 0"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cmd := newCommand(&bytes.Buffer{})
			cmd.SetArgs(tc.args)
			cmd.SetOut(&bytes.Buffer{})
			cmd.SetErr(&bytes.Buffer{})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err := cmd.ExecuteContext(ctx)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}
