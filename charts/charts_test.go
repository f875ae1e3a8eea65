package charts

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/fleetq/fleetq/config"
	workersetup "github.com/fleetq/fleetq/worker/setup"
)

const ns = "fleetq-system"

type (
	deployment = appsv1.Deployment
	service    = corev1.Service
)

// Releases named after their chart, as the README installs them.
var (
	mrel = Release{Name: Manager, Namespace: ns}
	arel = Release{Name: Agent, Namespace: ns}
)

func relFor(chart string) Release {
	if chart == Manager {
		return mrel
	}
	return arel
}

// agentValues are the least an agent install needs.
func agentValues() map[string]any { return map[string]any{"clusterName": "us-east"} }

func kinds(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.GetKind()+"/"+o.GetName())
	}
	return out
}

func find(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("no %s %s in %v", kind, name, kinds(objs))
	return nil
}

func into[T any](t *testing.T, o *unstructured.Unstructured) *T {
	t.Helper()
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, out, true); err != nil {
		t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
	}
	return out
}

// loadManagerConfig loads the rendered ConfigMap's file the way fleetq-manager does (strict,
// defaulted, validated).
func loadManagerConfig(t *testing.T, objs []*unstructured.Unstructured, cm string) *config.Configuration {
	t.Helper()
	data, _, _ := unstructured.NestedString(find(t, objs, "ConfigMap", cm).Object, "data", "config.yaml")
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatalf("the manager refuses the chart's configuration: %v\n%s", err, data)
	}
	return cfg
}

func loadAgentConfig(t *testing.T, objs []*unstructured.Unstructured, cm string) *config.AgentConfiguration {
	t.Helper()
	data, _, _ := unstructured.NestedString(find(t, objs, "ConfigMap", cm).Object, "data", "config.yaml")
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.LoadAgent(path, "")
	if err != nil {
		t.Fatalf("the agent refuses the chart's configuration: %v\n%s", err, data)
	}
	return cfg
}

func TestManagerDefaults(t *testing.T) {
	objs, err := Render(Manager, mrel, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"ConfigMap/fleetq-manager-config",
		"Deployment/fleetq-manager",
		"ClusterRole/fleetq-manager", "ClusterRoleBinding/fleetq-manager", "Role/fleetq-manager", "RoleBinding/fleetq-manager",
		"ServiceAccount/fleetq-manager",
		"Service/fleetq-manager-webhook", "Service/fleetq-manager-metrics",
	}
	if diff := cmp.Diff(want, kinds(objs)); diff != "" {
		t.Errorf("objects (-want +got):\n%s", diff)
	}
	cfg := loadManagerConfig(t, objs, "fleetq-manager-config")
	got := map[string]any{
		"namespace": cfg.Namespace, "metrics": cfg.Metrics.BindAddress, "health": cfg.Health.BindAddress,
		"webhookPort": *cfg.Webhook.Port, "webhookService": cfg.Webhook.ServiceName, "certDir": cfg.Webhook.CertDir,
		"leaderElection": *cfg.LeaderElection.Enabled, "qps": *cfg.ClientConnection.QPS,
	}
	wantCfg := map[string]any{
		"namespace": ns, "metrics": ":8080", "health": ":8081", "webhookPort": int32(9443), "webhookService": "fleetq-manager-webhook",
		"certDir": "/tmp/k8s-webhook-server/serving-certs", "leaderElection": true, "qps": float32(50),
	}
	if diff := cmp.Diff(wantCfg, got); diff != "" {
		t.Errorf("configuration (-want +got):\n%s", diff)
	}
	dep := into[deployment](t, find(t, objs, "Deployment", "fleetq-manager"))
	c := dep.Spec.Template.Spec.Containers[0]
	if dep.Spec.Replicas == nil || *dep.Spec.Replicas != 2 || c.Image != "fleetq/fleetq-manager:0.1.0" ||
		!slices.Contains(c.Args, "--config=/etc/fleetq/config.yaml") || dep.Spec.Template.Spec.ServiceAccountName != "fleetq-manager" {
		t.Errorf("deployment: replicas %v, image %s, args %v, service account %s", dep.Spec.Replicas, c.Image, c.Args, dep.Spec.Template.Spec.ServiceAccountName)
	}
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if diff := cmp.Diff(map[string]int32{"webhook": 9443, "metrics": 8080, "health": 8081}, ports); diff != "" {
		t.Errorf("container ports must match the configuration (-want +got):\n%s", diff)
	}
	sc := c.SecurityContext
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		dep.Spec.Template.Spec.SecurityContext == nil || !*dep.Spec.Template.Spec.SecurityContext.RunAsNonRoot {
		t.Errorf("the manager must run non-root, read-only, without privilege escalation: %+v", sc)
	}
	svc := into[service](t, find(t, objs, "Service", "fleetq-manager-webhook"))
	if svc.Spec.Ports[0].Port != 443 || svc.Spec.Ports[0].TargetPort.StrVal != "webhook" {
		t.Errorf("webhook service ports: %+v (the manager's webhook configurations call port 443)", svc.Spec.Ports)
	}
}

func TestManagerValues(t *testing.T) {
	values := map[string]any{
		"replicaCount":   3,
		"image":          map[string]any{"repository": "registry.example/fleetq-manager", "tag": "v9"},
		"serviceAccount": map[string]any{"create": false, "name": "existing"},
		"metrics":        map[string]any{"port": 9090, "service": map[string]any{"enabled": false}},
		"webhook":        map[string]any{"port": 10443},
		"clusterAPI":     map[string]any{"enabled": true, "namespace": "capi-clusters"},
		"queueNamePolicy": map[string]any{"enabled": true, "validationActions": []any{"Deny", "Audit"},
			"namespaceSelector": map[string]any{"matchLabels": map[string]any{"team": "ml"}}},
		"config": map[string]any{
			"manageJobsWithoutQueueName": true,
			"fairSharing":                map[string]any{"enable": true},
			"multiCluster":               map[string]any{"workerLostTimeout": "10m", "fenceTimeout": "4m"},
			"clientConnection":           map[string]any{"qps": 200, "burst": 400},
		},
	}
	objs, err := Render(Manager, Release{Name: "dispatcher", Namespace: "batch-system"}, values)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"ConfigMap/dispatcher-fleetq-manager-config",
		"Deployment/dispatcher-fleetq-manager",
		"ValidatingAdmissionPolicy/dispatcher-fleetq-manager-require-queue-name",
		"ValidatingAdmissionPolicyBinding/dispatcher-fleetq-manager-require-queue-name",
		"ClusterRole/dispatcher-fleetq-manager", "ClusterRoleBinding/dispatcher-fleetq-manager", "Role/dispatcher-fleetq-manager", "RoleBinding/dispatcher-fleetq-manager",
		"Role/dispatcher-fleetq-manager-cluster-api", "RoleBinding/dispatcher-fleetq-manager-cluster-api",
		"Service/dispatcher-fleetq-manager-webhook",
	}
	if diff := cmp.Diff(want, kinds(objs)); diff != "" {
		t.Errorf("objects (-want +got):\n%s", diff)
	}
	cfg := loadManagerConfig(t, objs, "dispatcher-fleetq-manager-config")
	got := fmt.Sprintf("ns=%s metrics=%s webhook=%d svc=%s manage=%t fair=%t lost=%s fence=%s qps=%v capi=%s/%v",
		cfg.Namespace, cfg.Metrics.BindAddress, *cfg.Webhook.Port, cfg.Webhook.ServiceName, cfg.ManageJobsWithoutQueueName,
		cfg.FairSharing.Enable, cfg.MultiCluster.WorkerLostTimeout.Duration, cfg.MultiCluster.FenceTimeout.Duration,
		*cfg.ClientConnection.QPS, cfg.MultiCluster.ClusterAPINamespace, cfg.MultiCluster.ClusterAPISelector.MatchLabels)
	wantCfg := "ns=batch-system metrics=:9090 webhook=10443 svc=dispatcher-fleetq-manager-webhook manage=true fair=true lost=10m0s fence=4m0s qps=200 capi=capi-clusters/map[fleetq.dev/worker:true]"
	if got != wantCfg {
		t.Errorf("configuration:\n got %s\nwant %s", got, wantCfg)
	}
	dep := into[deployment](t, find(t, objs, "Deployment", "dispatcher-fleetq-manager"))
	if c := dep.Spec.Template.Spec.Containers[0]; *dep.Spec.Replicas != 3 || c.Image != "registry.example/fleetq-manager:v9" || dep.Spec.Template.Spec.ServiceAccountName != "existing" {
		t.Errorf("deployment: replicas %d image %s sa %s", *dep.Spec.Replicas, c.Image, dep.Spec.Template.Spec.ServiceAccountName)
	}
	binding := find(t, objs, "ValidatingAdmissionPolicyBinding", "dispatcher-fleetq-manager-require-queue-name")
	actions, _, _ := unstructured.NestedStringSlice(binding.Object, "spec", "validationActions")
	sel, _, _ := unstructured.NestedStringMap(binding.Object, "spec", "matchResources", "namespaceSelector", "matchLabels")
	if diff := cmp.Diff([]string{"Deny", "Audit"}, actions); diff != "" || sel["team"] != "ml" {
		t.Errorf("policy binding: actions %v selector %v", actions, sel)
	}
	// Both Roles bind the existing service account.
	for _, name := range []string{"dispatcher-fleetq-manager", "dispatcher-fleetq-manager-cluster-api"} {
		rb := into[rbacv1.RoleBinding](t, find(t, objs, "RoleBinding", name))
		if rb.Subjects[0].Name != "existing" || rb.Subjects[0].Namespace != "batch-system" {
			t.Errorf("rolebinding %s subjects %+v", name, rb.Subjects)
		}
	}
}

// TestManagerOutOfCluster: a manager run as a process (the lab) is called by URL; the chart then
// leaves the webhook Service out of the configuration, which the manager would refuse.
func TestManagerOutOfCluster(t *testing.T) {
	objs, err := Render(Manager, mrel, map[string]any{"config": map[string]any{"webhook": map[string]any{"url": "https://127.0.0.1:9443", "host": "127.0.0.1"}}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := loadManagerConfig(t, objs, "fleetq-manager-config")
	if cfg.Webhook.ServiceName != "" || cfg.Webhook.URL != "https://127.0.0.1:9443" || *cfg.Webhook.Port != 9443 {
		t.Errorf("webhook configuration %+v", cfg.Webhook)
	}
}

func TestAgentRender(t *testing.T) {
	cases := map[string]struct {
		values      map[string]any
		wantObjects []string
		check       func(t *testing.T, cfg *config.AgentConfiguration, dep *deployment)
	}{
		"defaults": {
			values: agentValues(),
			wantObjects: []string{
				"ConfigMap/fleetq-agent-config", "Deployment/fleetq-agent",
				"ServiceAccount/fleetq-manager-access", "ClusterRole/fleetq-agent-manager-access", "ClusterRoleBinding/fleetq-agent-manager-access",
				"Role/fleetq-agent-manager-access", "RoleBinding/fleetq-agent-manager-access",
				"ClusterRole/fleetq-agent", "ClusterRoleBinding/fleetq-agent", "Role/fleetq-agent", "RoleBinding/fleetq-agent",
				"ServiceAccount/fleetq-agent",
			},
			check: func(t *testing.T, cfg *config.AgentConfiguration, dep *deployment) {
				if cfg.ClusterName != "us-east" || cfg.Namespace != ns || cfg.Metrics.BindAddress != ":8080" || cfg.Origin != config.DefaultOrigin || *dep.Spec.Replicas != 1 {
					t.Errorf("config %+v replicas %d", cfg, *dep.Spec.Replicas)
				}
			},
		},
		"no manager access, other origin and ports": {
			values: map[string]any{"clusterName": "eu-west", "replicaCount": 2, "managerAccess": map[string]any{"create": false},
				"health": map[string]any{"port": 9091}, "config": map[string]any{"origin": "prod", "capacityResyncPeriod": "1m"}},
			wantObjects: []string{
				"ConfigMap/fleetq-agent-config", "Deployment/fleetq-agent",
				"ClusterRole/fleetq-agent", "ClusterRoleBinding/fleetq-agent", "Role/fleetq-agent", "RoleBinding/fleetq-agent",
				"ServiceAccount/fleetq-agent",
			},
			check: func(t *testing.T, cfg *config.AgentConfiguration, dep *deployment) {
				if cfg.ClusterName != "eu-west" || cfg.Origin != "prod" || cfg.Health.BindAddress != ":9091" || cfg.CapacityResyncPeriod.Duration.String() != "1m0s" || *dep.Spec.Replicas != 2 {
					t.Errorf("config %+v replicas %d", cfg, *dep.Spec.Replicas)
				}
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			objs, err := Render(Agent, arel, tc.values)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantObjects, kinds(objs)); diff != "" {
				t.Errorf("objects (-want +got):\n%s", diff)
			}
			tc.check(t, loadAgentConfig(t, objs, "fleetq-agent-config"), into[deployment](t, find(t, objs, "Deployment", "fleetq-agent")))
		})
	}
}

// TestSchemaRefusesBadValues: Helm refuses each bad value with a message naming it, before
// anything is rendered.
func TestSchemaRefusesBadValues(t *testing.T) {
	cases := map[string]struct {
		chart  string
		values map[string]any
		want   string
	}{
		"misspelt top-level key":        {Manager, map[string]any{"replicas": 2}, "additional properties 'replicas' not allowed"},
		"zero replicas":                 {Manager, map[string]any{"replicaCount": 0}, "/replicaCount"},
		"port out of range":             {Manager, map[string]any{"metrics": map[string]any{"port": 70000}}, "/metrics/port"},
		"misspelt configuration field":  {Manager, map[string]any{"config": map[string]any{"manageJobsWithoutQueueNames": true}}, "manageJobsWithoutQueueNames"},
		"namespace is the release's":    {Manager, map[string]any{"config": map[string]any{"namespace": "other"}}, "additional properties 'namespace' not allowed"},
		"bad duration":                  {Manager, map[string]any{"config": map[string]any{"multiCluster": map[string]any{"workerLostTimeout": "5 minutes"}}}, "/config/multiCluster/workerLostTimeout"},
		"unknown fair sharing strategy": {Manager, map[string]any{"config": map[string]any{"fairSharing": map[string]any{"preemptionStrategies": []any{"Greedy"}}}}, "/config/fairSharing/preemptionStrategies/0"},
		"qps not positive":              {Manager, map[string]any{"config": map[string]any{"clientConnection": map[string]any{"qps": 0}}}, "/config/clientConnection/qps"},
		"unknown validation action":     {Manager, map[string]any{"queueNamePolicy": map[string]any{"validationActions": []any{"Block"}}}, "/queueNamePolicy/validationActions/0"},
		"bad selector operator":         {Manager, map[string]any{"queueNamePolicy": map[string]any{"namespaceSelector": map[string]any{"matchExpressions": []any{map[string]any{"key": "a", "operator": "Is"}}}}}, "/queueNamePolicy/namespaceSelector/matchExpressions/0/operator"},
		"bad pull policy":               {Manager, map[string]any{"image": map[string]any{"pullPolicy": "Sometimes"}}, "/image/pullPolicy"},
		"bad log level":                 {Manager, map[string]any{"logLevel": "verbose"}, "/logLevel"},
		"agent without cluster name":    {Agent, nil, "missing property 'clusterName'"},
		"agent cluster name not DNS":    {Agent, map[string]any{"clusterName": "US_East"}, "/clusterName"},
		"agent clusterName is set once": {Agent, map[string]any{"clusterName": "us-east", "config": map[string]any{"clusterName": "x"}}, "additional properties 'clusterName' not allowed"},
		"agent bad origin":              {Agent, map[string]any{"clusterName": "us-east", "config": map[string]any{"origin": "Not Valid"}}, "/config/origin"},
		"agent manager access name":     {Agent, map[string]any{"clusterName": "us-east", "managerAccess": map[string]any{"serviceAccountName": ""}}, "/managerAccess/serviceAccountName"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Render(tc.chart, relFor(tc.chart), tc.values)
			if err == nil || !strings.Contains(err.Error(), "values don't meet the specifications of the schema") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Render = %v; want a schema error mentioning %q", err, tc.want)
			}
		})
	}
}

// TestServiceAccountNameRequired: with create false the chart needs a name, and says so.
func TestServiceAccountNameRequired(t *testing.T) {
	for _, chart := range []string{Manager, Agent} {
		values := map[string]any{"serviceAccount": map[string]any{"create": false}, "clusterName": "us-east"}
		if chart == Manager {
			delete(values, "clusterName")
		}
		if _, err := Render(chart, relFor(chart), values); err == nil || !strings.Contains(err.Error(), "serviceAccount.name is required") {
			t.Errorf("%s: Render = %v, want the missing name named", chart, err)
		}
	}
}

func TestLint(t *testing.T) {
	cases := map[string]struct {
		dir    string
		values map[string]any
	}{
		"manager defaults":        {Manager, nil},
		"manager every option":    {Manager, map[string]any{"clusterAPI": map[string]any{"enabled": true, "namespace": "capi"}, "queueNamePolicy": map[string]any{"enabled": true}}},
		"agent":                   {Agent, agentValues()},
		"agent no manager access": {Agent, map[string]any{"clusterName": "us-east", "managerAccess": map[string]any{"create": false}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			l := lint.All(tc.dir, tc.values, ns, false)
			for _, m := range l.Messages {
				if m.Severity >= support.WarningSev {
					t.Errorf("lint: %s", m)
				}
			}
		})
	}
	// Lint catches what the schema refuses.
	l := lint.All(Agent, nil, ns, false)
	if l.HighestSeverity < support.ErrorSev {
		t.Errorf("lint of the agent without clusterName: %v, want an error", l.Messages)
	}
}

// TestGeneratedFilesInSync: the charts' CRDs are config/crd/bases and the agent's rules are
// worker/setup.RBAC; run `make charts` when this fails.
func TestGeneratedFilesInSync(t *testing.T) {
	gen, err := Generated("..")
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range gen {
		got, err := os.ReadFile(p)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("charts/%s is stale (%v): run 'make charts' and commit", p, err)
		}
	}
	for _, chart := range []string{Manager, Agent} {
		files, _ := filepath.Glob(filepath.Join(chart, "crds", "*.yaml"))
		for _, f := range files {
			if _, ok := gen[f]; !ok {
				t.Errorf("charts/%s has no source in config/crd/bases: run 'make charts'", f)
			}
		}
	}
	crds, err := CRDs(Agent)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range crds {
		names = append(names, c.GetName())
	}
	sort.Strings(names)
	if diff := cmp.Diff([]string{"capacityreports.fleetq.dev", "resourceflavors.kueue.x-k8s.io", "workloads.kueue.x-k8s.io"}, names); diff != "" {
		t.Errorf("agent CRDs (-want +got):\n%s", diff)
	}
}

// grants lists every verb a rendered role grants as "group/resource[name] verb", sorted.
func grants(rules []rbacv1.PolicyRule) []string {
	var out []string
	for _, r := range rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				names := []string{""}
				if len(r.ResourceNames) > 0 {
					names = r.ResourceNames
				}
				for _, n := range names {
					for _, v := range r.Verbs {
						key := g + "/" + res
						if g == "" {
							key = "core/" + res
						}
						if n != "" {
							key += "[" + n + "]"
						}
						out = append(out, key+" "+v)
					}
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

func rules(t *testing.T, objs []*unstructured.Unstructured, kind, name string) []rbacv1.PolicyRule {
	t.Helper()
	o := find(t, objs, kind, name)
	if kind == "ClusterRole" {
		return into[rbacv1.ClusterRole](t, o).Rules
	}
	return into[rbacv1.Role](t, o).Rules
}

// TestRBAC lists every verb each role of the charts grants and compares it with the minimal set
// the components need (the lab install test runs them with exactly these rights).
func TestRBAC(t *testing.T) {
	mgr, err := Render(Manager, mrel, map[string]any{"clusterAPI": map[string]any{"enabled": true, "namespace": "capi"}})
	if err != nil {
		t.Fatal(err)
	}
	agent, err := Render(Agent, arel, agentValues())
	if err != nil {
		t.Fatal(err)
	}
	kueueRead := func(res ...string) []string {
		var out []string
		for _, r := range res {
			out = append(out, "kueue.x-k8s.io/"+r+" get", "kueue.x-k8s.io/"+r+" list", "kueue.x-k8s.io/"+r+" watch")
		}
		return out
	}
	cases := map[string]struct {
		objs       []*unstructured.Unstructured
		kind, name string
		want       []string
	}{
		"manager, cluster-wide": {mgr, "ClusterRole", "fleetq-manager", append([]string{
			"admissionregistration.k8s.io/mutatingwebhookconfigurations create",
			"admissionregistration.k8s.io/mutatingwebhookconfigurations[fleetq-mutating-webhook-configuration] get",
			"admissionregistration.k8s.io/mutatingwebhookconfigurations[fleetq-mutating-webhook-configuration] patch",
			"admissionregistration.k8s.io/validatingwebhookconfigurations create",
			"admissionregistration.k8s.io/validatingwebhookconfigurations[fleetq-validating-webhook-configuration] get",
			"admissionregistration.k8s.io/validatingwebhookconfigurations[fleetq-validating-webhook-configuration] patch",
			"authentication.k8s.io/selfsubjectreviews create",
			"batch/jobs get", "batch/jobs list", "batch/jobs patch", "batch/jobs watch",
			"batch/jobs/finalizers update", "batch/jobs/status patch", "batch/jobs/status update",
			"kubeflow.org/pytorchjobs get", "kubeflow.org/pytorchjobs list", "kubeflow.org/pytorchjobs watch", "kubeflow.org/pytorchjobs patch", "kubeflow.org/tfjobs get", "kubeflow.org/tfjobs list", "kubeflow.org/tfjobs watch", "kubeflow.org/tfjobs patch", "kubeflow.org/xgboostjobs get", "kubeflow.org/xgboostjobs list", "kubeflow.org/xgboostjobs watch", "kubeflow.org/xgboostjobs patch", "kubeflow.org/paddlejobs get", "kubeflow.org/paddlejobs list", "kubeflow.org/paddlejobs watch", "kubeflow.org/paddlejobs patch", "kubeflow.org/mpijobs get", "kubeflow.org/mpijobs list", "kubeflow.org/mpijobs watch", "kubeflow.org/mpijobs patch", "ray.io/rayjobs get", "ray.io/rayjobs list", "ray.io/rayjobs watch", "ray.io/rayjobs patch", "ray.io/rayclusters get", "ray.io/rayclusters list", "ray.io/rayclusters watch", "ray.io/rayclusters patch",
			"kubeflow.org/pytorchjobs/status patch", "kubeflow.org/pytorchjobs/status update", "kubeflow.org/tfjobs/status patch", "kubeflow.org/tfjobs/status update", "kubeflow.org/xgboostjobs/status patch", "kubeflow.org/xgboostjobs/status update", "kubeflow.org/paddlejobs/status patch", "kubeflow.org/paddlejobs/status update", "kubeflow.org/mpijobs/status patch", "kubeflow.org/mpijobs/status update", "ray.io/rayjobs/status patch", "ray.io/rayjobs/status update", "ray.io/rayclusters/status patch", "ray.io/rayclusters/status update",
			"kubeflow.org/pytorchjobs/finalizers update", "kubeflow.org/tfjobs/finalizers update", "kubeflow.org/xgboostjobs/finalizers update", "kubeflow.org/paddlejobs/finalizers update", "kubeflow.org/mpijobs/finalizers update", "ray.io/rayjobs/finalizers update", "ray.io/rayclusters/finalizers update",
			"cluster.x-k8s.io/clusters get", "cluster.x-k8s.io/clusters list", "cluster.x-k8s.io/clusters watch",
			"core/namespaces get", "core/namespaces list", "core/namespaces watch",
			"core/pods get", "core/pods list", "core/pods watch", "core/pods patch", "core/pods delete", "core/pods/finalizers update", "core/pods/status patch", "core/pods/status update",
			"events.k8s.io/events create", "events.k8s.io/events patch",
			"kueue.x-k8s.io/admissionchecks/status patch",
			"kueue.x-k8s.io/clusterqueues patch", "kueue.x-k8s.io/clusterqueues/status patch", "kueue.x-k8s.io/cohorts/status patch",
			"kueue.x-k8s.io/localqueues/status patch",
			"kueue.x-k8s.io/multikueueclusters create", "kueue.x-k8s.io/multikueueclusters delete", "kueue.x-k8s.io/multikueueclusters patch",
			"kueue.x-k8s.io/multikueueclusters/status patch",
			"kueue.x-k8s.io/resourceflavors patch",
			"kueue.x-k8s.io/workloads create", "kueue.x-k8s.io/workloads delete", "kueue.x-k8s.io/workloads patch", "kueue.x-k8s.io/workloads/status patch",
			"scheduling.k8s.io/priorityclasses get", "scheduling.k8s.io/priorityclasses list", "scheduling.k8s.io/priorityclasses watch",
		}, kueueRead("admissionchecks", "clusterqueues", "cohorts", "localqueues", "multikueueclusters", "multikueueconfigs", "resourceflavors", "workloadpriorityclasses", "workloads")...)},
		"manager, own namespace": {mgr, "Role", "fleetq-manager", []string{
			"coordination.k8s.io/leases create", "coordination.k8s.io/leases get", "coordination.k8s.io/leases update",
			"core/events create", "core/events patch",
			"core/secrets create", "core/secrets get", "core/secrets list", "core/secrets watch",
			"core/secrets[fleetq-webhook-server-cert] update",
		}},
		"manager, Cluster API namespace": {mgr, "Role", "fleetq-manager-cluster-api", []string{
			"core/secrets get", "core/secrets list", "core/secrets watch",
		}},
		"agent, cluster-wide": {agent, "ClusterRole", "fleetq-agent", []string{
			"batch/jobs get", "batch/jobs list", "batch/jobs patch", "batch/jobs watch",
			"kubeflow.org/pytorchjobs get", "kubeflow.org/pytorchjobs list", "kubeflow.org/pytorchjobs watch", "kubeflow.org/pytorchjobs patch", "kubeflow.org/tfjobs get", "kubeflow.org/tfjobs list", "kubeflow.org/tfjobs watch", "kubeflow.org/tfjobs patch", "kubeflow.org/xgboostjobs get", "kubeflow.org/xgboostjobs list", "kubeflow.org/xgboostjobs watch", "kubeflow.org/xgboostjobs patch", "kubeflow.org/paddlejobs get", "kubeflow.org/paddlejobs list", "kubeflow.org/paddlejobs watch", "kubeflow.org/paddlejobs patch", "kubeflow.org/mpijobs get", "kubeflow.org/mpijobs list", "kubeflow.org/mpijobs watch", "kubeflow.org/mpijobs patch", "ray.io/rayjobs get", "ray.io/rayjobs list", "ray.io/rayjobs watch", "ray.io/rayjobs patch", "ray.io/rayclusters get", "ray.io/rayclusters list", "ray.io/rayclusters watch", "ray.io/rayclusters patch",
			"core/nodes get", "core/nodes list", "core/nodes watch", "core/pods get", "core/pods list", "core/pods watch", "core/pods patch", "core/pods delete",
			"events.k8s.io/events create", "events.k8s.io/events patch",
			"kueue.x-k8s.io/resourceflavors get", "kueue.x-k8s.io/resourceflavors list", "kueue.x-k8s.io/resourceflavors watch",
			"kueue.x-k8s.io/workloads get", "kueue.x-k8s.io/workloads list", "kueue.x-k8s.io/workloads watch",
			"kueue.x-k8s.io/workloads/status get", "kueue.x-k8s.io/workloads/status patch",
		}},
		"agent, own namespace": {agent, "Role", "fleetq-agent", []string{
			"coordination.k8s.io/leases create", "coordination.k8s.io/leases get", "coordination.k8s.io/leases list",
			"coordination.k8s.io/leases patch", "coordination.k8s.io/leases update", "coordination.k8s.io/leases watch",
			"core/events create", "core/events patch",
			"fleetq.dev/capacityreports create", "fleetq.dev/capacityreports get", "fleetq.dev/capacityreports list",
			"fleetq.dev/capacityreports patch", "fleetq.dev/capacityreports update", "fleetq.dev/capacityreports watch",
		}},
		"manager's access to a worker, cluster-wide": {agent, "ClusterRole", "fleetq-agent-manager-access", []string{
			"batch/jobs create", "batch/jobs delete", "batch/jobs get", "batch/jobs list", "batch/jobs watch",
			"kubeflow.org/pytorchjobs get", "kubeflow.org/pytorchjobs list", "kubeflow.org/pytorchjobs watch", "kubeflow.org/pytorchjobs create", "kubeflow.org/pytorchjobs delete", "kubeflow.org/tfjobs get", "kubeflow.org/tfjobs list", "kubeflow.org/tfjobs watch", "kubeflow.org/tfjobs create", "kubeflow.org/tfjobs delete", "kubeflow.org/xgboostjobs get", "kubeflow.org/xgboostjobs list", "kubeflow.org/xgboostjobs watch", "kubeflow.org/xgboostjobs create", "kubeflow.org/xgboostjobs delete", "kubeflow.org/paddlejobs get", "kubeflow.org/paddlejobs list", "kubeflow.org/paddlejobs watch", "kubeflow.org/paddlejobs create", "kubeflow.org/paddlejobs delete", "kubeflow.org/mpijobs get", "kubeflow.org/mpijobs list", "kubeflow.org/mpijobs watch", "kubeflow.org/mpijobs create", "kubeflow.org/mpijobs delete", "ray.io/rayjobs get", "ray.io/rayjobs list", "ray.io/rayjobs watch", "ray.io/rayjobs create", "ray.io/rayjobs delete", "ray.io/rayclusters get", "ray.io/rayclusters list", "ray.io/rayclusters watch", "ray.io/rayclusters create", "ray.io/rayclusters delete",
			"core/namespaces create", "core/namespaces get", "core/namespaces patch", "core/pods create", "core/pods delete", "core/pods get", "core/pods list", "core/pods watch",
			"fleetq.dev/capacityreports get", "fleetq.dev/capacityreports list", "fleetq.dev/capacityreports watch",
			"kueue.x-k8s.io/resourceflavors create", "kueue.x-k8s.io/resourceflavors delete", "kueue.x-k8s.io/resourceflavors get",
			"kueue.x-k8s.io/resourceflavors list", "kueue.x-k8s.io/resourceflavors patch", "kueue.x-k8s.io/resourceflavors watch",
			"kueue.x-k8s.io/workloads create", "kueue.x-k8s.io/workloads delete", "kueue.x-k8s.io/workloads get",
			"kueue.x-k8s.io/workloads list", "kueue.x-k8s.io/workloads watch",
		}},
		"manager's access to a worker, agent namespace": {agent, "Role", "fleetq-agent-manager-access", []string{
			"coordination.k8s.io/leases create", "coordination.k8s.io/leases get", "coordination.k8s.io/leases update",
		}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := grants(rules(t, tc.objs, tc.kind, tc.name))
			want := slices.Clone(tc.want)
			sort.Strings(want)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s %s grants (-want +got):\n%s", tc.kind, tc.name, diff)
			}
			for _, g := range got {
				if strings.Contains(g, "*") || strings.HasPrefix(g, "core/secrets") && tc.kind == "ClusterRole" {
					t.Errorf("%s %s grants %s", tc.kind, tc.name, g)
				}
			}
		})
	}
	// The agent chart grants exactly what worker/setup.RBAC says (the integration suite runs the
	// agent with those objects).
	for _, obj := range workersetup.RBAC(ns, "fleetq-agent") {
		switch o := obj.(type) {
		case *rbacv1.ClusterRole:
			if diff := cmp.Diff(grants(o.Rules), grants(rules(t, agent, "ClusterRole", "fleetq-agent"))); diff != "" {
				t.Errorf("agent ClusterRole differs from worker/setup.RBAC (-setup +chart):\n%s", diff)
			}
		case *rbacv1.Role:
			if diff := cmp.Diff(grants(o.Rules), grants(rules(t, agent, "Role", "fleetq-agent"))); diff != "" {
				t.Errorf("agent Role differs from worker/setup.RBAC (-setup +chart):\n%s", diff)
			}
		}
	}
	// Every binding binds its own role to the chart's service account in the release namespace.
	for _, objs := range [][]*unstructured.Unstructured{mgr, agent} {
		for _, o := range objs {
			if o.GetKind() != "RoleBinding" && o.GetKind() != "ClusterRoleBinding" {
				continue
			}
			b := into[rbacv1.RoleBinding](t, o)
			if b.RoleRef.Name != b.Name || len(b.Subjects) != 1 || b.Subjects[0].Kind != "ServiceAccount" || b.Subjects[0].Namespace != ns {
				t.Errorf("%s %s: roleRef %+v subjects %+v", o.GetKind(), o.GetName(), b.RoleRef, b.Subjects)
			}
		}
	}
}

// TestConfigSchemaCoversConfiguration: the values schema of `config` names exactly the fields of
// the configuration types (but those the chart sets), so a new field is never refused and a removed
// one never accepted.
func TestConfigSchemaCoversConfiguration(t *testing.T) {
	cases := map[string]struct {
		chart     string
		typ       reflect.Type
		chartSets []string
	}{
		"manager": {Manager, reflect.TypeFor[config.Configuration](), []string{"apiVersion", "kind", "namespace"}},
		"agent":   {Agent, reflect.TypeFor[config.AgentConfiguration](), []string{"apiVersion", "kind", "namespace", "clusterName"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join(tc.chart, "values.schema.json"))
			if err != nil {
				t.Fatal(err)
			}
			var schema map[string]any
			if err := json.Unmarshal(raw, &schema); err != nil {
				t.Fatal(err)
			}
			defs := schema["definitions"].(map[string]any)
			cfgSchema := schema["properties"].(map[string]any)["config"].(map[string]any)
			want := fieldPaths(tc.typ, "")
			want = slices.DeleteFunc(want, func(p string) bool { return slices.Contains(tc.chartSets, p) })
			if diff := cmp.Diff(want, schemaPaths(cfgSchema, defs, "")); diff != "" {
				t.Errorf("config schema fields (-type +schema):\n%s", diff)
			}
		})
	}
}

// fieldPaths lists the JSON paths of a configuration type's fields, descending into fleetq's own
// structs only (selectors and durations are leaves).
func fieldPaths(typ reflect.Type, prefix string) []string {
	var out []string
	for f := range typ.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous {
			if f.Type.Name() == "TypeMeta" {
				out = append(out, "apiVersion", "kind")
			}
			continue
		}
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct && ft.PkgPath() == typ.PkgPath() {
			out = append(out, fieldPaths(ft, prefix+name+".")...)
			continue
		}
		out = append(out, prefix+name)
	}
	sort.Strings(out)
	return out
}

func schemaPaths(s, defs map[string]any, prefix string) []string {
	if ref, ok := s["$ref"].(string); ok {
		s = defs[strings.TrimPrefix(ref, "#/definitions/")].(map[string]any)
		if strings.HasSuffix(ref, "labelSelector") || strings.HasSuffix(ref, "duration") {
			return []string{strings.TrimSuffix(prefix, ".")}
		}
	}
	props, ok := s["properties"].(map[string]any)
	if !ok {
		return []string{strings.TrimSuffix(prefix, ".")}
	}
	var out []string
	for name, p := range props {
		out = append(out, schemaPaths(p.(map[string]any), defs, prefix+name+".")...)
	}
	sort.Strings(out)
	return out
}

// TestQueueNamePolicy: the policy matches Job creation and requires a non-empty queue-name label.
func TestQueueNamePolicy(t *testing.T) {
	objs, err := Render(Manager, mrel, map[string]any{"queueNamePolicy": map[string]any{"enabled": true}})
	if err != nil {
		t.Fatal(err)
	}
	p := find(t, objs, "ValidatingAdmissionPolicy", "fleetq-manager-require-queue-name")
	out, _ := yaml.Marshal(p.Object["spec"])
	for _, want := range []string{"'kueue.x-k8s.io/queue-name' in object.metadata.labels", "resources:\n    - jobs", "failurePolicy: Fail", "- CREATE"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("policy spec lacks %q:\n%s", want, out)
		}
	}
}

// TestGenericIntegrationRBAC: a kind described in config.integrations.generic (the JobSet
// example) is granted to the manager, to the agent and to the manager in workers, with read
// access to CRDs for the start-up schema check.
func TestGenericIntegrationRBAC(t *testing.T) {
	cfg, err := config.Load(filepath.Join("..", "config", "examples", "jobset.yaml"))
	if err != nil {
		t.Fatalf("the JobSet example does not load: %v", err)
	}
	raw, err := json.Marshal(cfg.Integrations)
	if err != nil {
		t.Fatal(err)
	}
	var integrations map[string]any
	if err := json.Unmarshal(raw, &integrations); err != nil {
		t.Fatal(err)
	}
	integrations = map[string]any{"generic": integrations["generic"]}
	mgr, err := Render(Manager, mrel, map[string]any{"config": map[string]any{"integrations": integrations}})
	if err != nil {
		t.Fatal(err)
	}
	values := agentValues()
	values["config"] = map[string]any{"integrations": integrations}
	agent, err := Render(Agent, arel, values)
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		objs       []*unstructured.Unstructured
		kind, name string
		want       []string
	}{
		"manager": {mgr, "ClusterRole", "fleetq-manager", []string{"apiextensions.k8s.io/customresourcedefinitions get",
			"jobset.x-k8s.io/jobsets get", "jobset.x-k8s.io/jobsets list", "jobset.x-k8s.io/jobsets watch", "jobset.x-k8s.io/jobsets patch",
			"jobset.x-k8s.io/jobsets/status patch", "jobset.x-k8s.io/jobsets/status update", "jobset.x-k8s.io/jobsets/finalizers update"}},
		"agent": {agent, "ClusterRole", "fleetq-agent", []string{"apiextensions.k8s.io/customresourcedefinitions get",
			"jobset.x-k8s.io/jobsets get", "jobset.x-k8s.io/jobsets list", "jobset.x-k8s.io/jobsets watch", "jobset.x-k8s.io/jobsets patch"}},
		"manager in the worker": {agent, "ClusterRole", "fleetq-agent-manager-access", []string{
			"jobset.x-k8s.io/jobsets get", "jobset.x-k8s.io/jobsets list", "jobset.x-k8s.io/jobsets watch", "jobset.x-k8s.io/jobsets create", "jobset.x-k8s.io/jobsets delete"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := grants(rules(t, tc.objs, tc.kind, tc.name))
			for _, w := range tc.want {
				if !slices.Contains(got, w) {
					t.Errorf("%s %s does not grant %s", tc.kind, tc.name, w)
				}
			}
		})
	}
	cm := find(t, mgr, "ConfigMap", "fleetq-manager-config")
	if data, _ := json.Marshal(cm.Object["data"]); !strings.Contains(string(data), "replicatedJobs") {
		t.Errorf("the manager's configuration lacks the generic description: %s", data)
	}
}
