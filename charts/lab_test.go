package charts

import (
	"bufio"
	"bytes"
	"context"
	"debug/elf"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/e2e/components"
	"github.com/fleetq/fleetq/e2e/framework"
	"github.com/fleetq/fleetq/e2e/lab"
	"github.com/fleetq/fleetq/e2e/manifest"
	"github.com/fleetq/fleetq/internal/workload"
	"github.com/fleetq/fleetq/manager/setup"
	"github.com/fleetq/fleetq/manager/webhooks"
)

// Lab timings: bounds after which a step fails, never assertions on how fast it went.
const (
	labTimeout  = 15 * time.Minute
	stepTimeout = 2 * time.Minute
	poll        = 250 * time.Millisecond
	// fieldManager is what the install applies with (server-side), as `helm` would own the objects.
	fieldManager = "fleetq-chart-install"
)

// TestChartsInstallInLab installs both charts into a lab — the rendered manifests applied
// server-side through client-go, CRDs first — and runs the binaries `make build` produces (the
// ones the Dockerfile copies) with the rendered configuration files and a ServiceAccount token
// bound to the charts' RBAC only, which proves those rights suffice. Then it runs jobs and checks
// that the manager's metrics move, that kubectl-fleetq shows the workers, queues and jobs, and that
// the chart's ValidatingAdmissionPolicy refuses a Job that names no queue.
func TestChartsInstallInLab(t *testing.T) {
	ctrllog.SetLogger(logr.Discard()) // the lab's clients; the components log to their files
	ctx, cancel := context.WithTimeout(context.Background(), labTimeout)
	defer cancel()
	start := time.Now()
	bin := buildBinaries(ctx, t)
	t.Logf("make build: %s", time.Since(start).Round(time.Second))

	east := lab.A100Pool()
	east.Count = 2
	spec := &lab.Spec{
		Mode:       lab.ModeFull,
		PodRunTime: metav1.Duration{Duration: time.Hour},
		Management: lab.ClusterSpec{Name: "management", Mode: lab.ModeAPIServer},
		Workers:    []lab.ClusterSpec{{Name: "us-east", NodePools: []lab.NodePool{east}}},
	}
	env, err := framework.Setup(ctx, framework.Config{Spec: spec})
	if err != nil {
		t.Fatalf("lab: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			var b bytes.Buffer
			env.DumpLogs(&b, 30)
			t.Log(b.String())
		}
		stop, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := env.Teardown(stop); err != nil {
			t.Errorf("teardown: %v", err)
		}
	})
	t.Logf("lab up: %s", time.Since(start).Round(time.Second))
	mgmt, worker := env.Management(), env.Cluster("us-east")

	// fleetq-manager on the management cluster.
	webhookPort, metricsPort, healthPort := freePort(t), freePort(t), freePort(t)
	mgrValues := map[string]any{
		"queueNamePolicy": map[string]any{"enabled": true},
		"config": map[string]any{
			// The lab runs the manager as a process: the API server calls its webhooks by URL.
			"webhook":           map[string]any{"host": "127.0.0.1", "port": webhookPort, "url": fmt.Sprintf("https://127.0.0.1:%d", webhookPort), "certDir": t.TempDir()},
			"metrics":           map[string]any{"bindAddress": fmt.Sprintf("127.0.0.1:%d", metricsPort)},
			"health":            map[string]any{"bindAddress": fmt.Sprintf("127.0.0.1:%d", healthPort)},
			"leaderElection":    map[string]any{"leaseDuration": "4s", "renewDeadline": "3s", "retryPeriod": "500ms"},
			"requeuingStrategy": map[string]any{"backoffBaseSeconds": 1, "backoffMaxSeconds": 5},
			"multiCluster":      map[string]any{"probeInterval": "1s", "leaseRenewInterval": "1s"},
		},
	}
	mgrObjs := install(ctx, t, mgmt, Manager, mrel, mgrValues)
	mgrConfig := configFile(t, mgrObjs, "fleetq-manager-config")
	mgrKubeconfig := tokenKubeconfig(ctx, t, mgmt, ns, "fleetq-manager")
	checkNotAdmin(ctx, t, mgrKubeconfig, "fleetq-manager")
	manager, err := env.Start(ctx, framework.ComponentSpec{
		Name: "fleetq-manager", Cluster: "management", Binary: filepath.Join(bin, "fleetq-manager"),
		Args: []string{"--config", mgrConfig, "--kubeconfig", mgrKubeconfig},
	})
	if err != nil {
		t.Fatal(err)
	}
	waitReady(ctx, t, manager, healthPort)
	if err := components.WaitForWebhooks(ctx, mgmt.Client(), stepTimeout); err != nil {
		t.Fatal(err)
	}
	t.Logf("manager ready: %s", time.Since(start).Round(time.Second))

	// fleetq-agent on the worker, and the manager's access to it.
	agentMetrics, agentHealth := freePort(t), freePort(t)
	agentObjs := install(ctx, t, worker, Agent, arel, map[string]any{
		"clusterName": "us-east",
		"config": map[string]any{
			"metrics":        map[string]any{"bindAddress": fmt.Sprintf("127.0.0.1:%d", agentMetrics)},
			"health":         map[string]any{"bindAddress": fmt.Sprintf("127.0.0.1:%d", agentHealth)},
			"leaderElection": map[string]any{"leaseDuration": "4s", "renewDeadline": "3s", "retryPeriod": "500ms"},
		},
	})
	agentKubeconfig := tokenKubeconfig(ctx, t, worker, ns, "fleetq-agent")
	checkNotAdmin(ctx, t, agentKubeconfig, "fleetq-agent")
	agent, err := env.Start(ctx, framework.ComponentSpec{
		Name: "fleetq-agent", Cluster: "us-east", Binary: filepath.Join(bin, "fleetq-agent"),
		Args: []string{"--config", configFile(t, agentObjs, "fleetq-agent-config"), "--kubeconfig", agentKubeconfig},
	})
	if err != nil {
		t.Fatal(err)
	}
	waitReady(ctx, t, agent, agentHealth)
	access, err := os.ReadFile(tokenKubeconfig(ctx, t, worker, ns, "fleetq-manager-access"))
	if err != nil {
		t.Fatal(err)
	}
	m := mgmt.Client()
	mustCreate(ctx, t, m, framework.KubeconfigSecret(ns, "us-east-kubeconfig", access))
	mustCreate(ctx, t, m, &kueue.MultiKueueCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "us-east"},
		Spec:       kueue.MultiKueueClusterSpec{ClusterSource: kueue.ClusterSource{KubeConfig: &kueue.KubeConfig{Location: "us-east-kubeconfig", LocationType: kueue.SecretLocationType}}},
	})
	for _, n := range []string{"research", "inference"} {
		mustCreate(ctx, t, m, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{"fleetq.dev/queue-name-required": "true"}}})
	}
	dir := filepath.Join("..", "e2e", "testdata", "multicluster")
	if err := manifest.Apply(ctx, m, filepath.Join(dir, "flavors.yaml"), filepath.Join(dir, "dispatch.yaml"), filepath.Join(dir, "queues.yaml")); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, "worker us-east active and its capacity published", func() error {
		mkc := &kueue.MultiKueueCluster{}
		if err := m.Get(ctx, client.ObjectKey{Name: "us-east"}, mkc); err != nil {
			return err
		}
		if !meta.IsStatusConditionTrue(mkc.Status.Conditions, kueue.MultiKueueClusterActive) {
			return fmt.Errorf("conditions %v", mkc.Status.Conditions)
		}
		if !strings.Contains(mkc.Annotations["fleetq.dev/capacity"], "a100-flavor") {
			return fmt.Errorf("capacity annotation %q", mkc.Annotations["fleetq.dev/capacity"])
		}
		return nil
	})
	t.Logf("worker registered: %s", time.Since(start).Round(time.Second))

	t.Run("the job webhook passes over the manager's own updates, by its service account", func(t *testing.T) {
		v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := m.Get(ctx, client.ObjectKey{Name: webhooks.ValidatingConfigurationName}, v); err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("request.userInfo.username == %q", "system:serviceaccount:"+ns+":fleetq-manager")
		for _, w := range v.Webhooks {
			if w.Name != "vjob.fleetq.dev" {
				continue
			}
			if len(w.MatchConditions) != 1 || !strings.Contains(w.MatchConditions[0].Expression, want) {
				t.Errorf("vjob.fleetq.dev match conditions %+v; want one leaving out updates where %s", w.MatchConditions, want)
			}
			return
		}
		t.Errorf("no vjob.fleetq.dev in %s", webhooks.ValidatingConfigurationName)
	})

	t.Run("queue-name policy refuses a Job without a queue", func(t *testing.T) {
		err := m.Create(ctx, gpuJob("no-queue", "", 1, 1, ""))
		if err == nil || !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "requires the label kueue.x-k8s.io/queue-name") {
			t.Errorf("creating a Job without a queue in a selected namespace: %v, want it refused by the policy", err)
		}
	})

	scrape := func(t *testing.T) string { return get(ctx, t, fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort)) }
	gpu := map[string]string{"cluster_queue": "research-gpu-cq", "flavor": "a100-flavor", "resource": "nvidia.com/gpu"}
	free := map[string]string{"cluster": "us-east", "flavor": "a100-flavor", "resource": "nvidia.com/gpu"}
	t.Run("metrics before any job", func(t *testing.T) {
		eventuallyMetrics(ctx, t, scrape, []want{
			{"fleetq_worker_active", map[string]string{"cluster": "us-east"}, eq(1)},
			{"fleetq_worker_free_capacity", free, eq(16)},
			{"fleetq_worker_allocatable_capacity", free, eq(16)},
			{"kueue_cluster_queue_nominal_quota", gpu, eq(16)},
			{"kueue_cluster_queue_status", map[string]string{"cluster_queue": "research-gpu-cq", "status": "active"}, eq(1)},
			{"kueue_reserving_active_workloads", map[string]string{"cluster_queue": "research-gpu-cq"}, eq(0)},
		})
	})

	// Long enough for the checks below to see it running on a slow machine.
	train := gpuJob("train", "team-queue", 1, 8, "45s")
	mustCreate(ctx, t, m, train)
	t.Run("metrics while a job runs in the worker", func(t *testing.T) {
		eventuallyMetrics(ctx, t, scrape, []want{
			{"kueue_quota_reserved_workloads_total", map[string]string{"cluster_queue": "research-gpu-cq"}, eq(1)},
			{"kueue_admitted_workloads_total", map[string]string{"cluster_queue": "research-gpu-cq"}, eq(1)},
			{"kueue_admission_wait_time_seconds_count", map[string]string{"cluster_queue": "research-gpu-cq"}, eq(1)},
			{"kueue_admission_attempts_total", map[string]string{"result": "success"}, atLeast(1)},
			{"fleetq_dispatch_latency_seconds_count", map[string]string{"cluster": "us-east"}, eq(1)},
			{"kueue_reserving_active_workloads", map[string]string{"cluster_queue": "research-gpu-cq"}, eq(1)},
			{"kueue_admitted_active_workloads", map[string]string{"cluster_queue": "research-gpu-cq"}, eq(1)},
			{"kueue_cluster_queue_resource_usage", gpu, eq(8)},
			{"fleetq_worker_free_capacity", free, eq(8)},
		})
	})

	// 24 GPUs never fit a worker of 16: it stays pending with the reason.
	mustCreate(ctx, t, m, gpuJob("too-big", "team-queue", 3, 8, "20s"))
	t.Run("metrics of a job that cannot be admitted", func(t *testing.T) {
		eventuallyMetrics(ctx, t, scrape, []want{
			{"kueue_pending_workloads", map[string]string{"cluster_queue": "research-gpu-cq", "status": "inadmissible"}, eq(1)},
			{"kueue_admission_attempts_total", map[string]string{"result": "inadmissible"}, atLeast(1)},
		})
	})

	t.Run("kubectl fleetq on the lab", func(t *testing.T) {
		plugin := func(args ...string) string {
			cmd := exec.CommandContext(ctx, filepath.Join(bin, "kubectl-fleetq"), append(args, "--kubeconfig", mgmt.KubeconfigPath())...)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("kubectl fleetq %v: %v\n%s", args, err, out)
			}
			t.Logf("$ kubectl fleetq %s\n%s", strings.Join(args, " "), out)
			return string(out)
		}
		eventually(ctx, t, "clusters shows us-east active with 8 of 16 GPUs free", func() error {
			if out := plugin("clusters"); !strings.Contains(out, "a100-flavor: 8/16 nvidia.com/gpu on 2 nodes") || !strings.Contains(out, "True") {
				return fmt.Errorf("output:\n%s", out)
			}
			return nil
		})
		// Queue status is written at most once a second per queue: it catches up.
		eventually(ctx, t, "queues shows 1 pending, 1 reserving, 1 admitted", func() error {
			if out := plugin("queues", "-n", "research"); !matches(out, `research-gpu-cq\s+ai-platform\s+True\s+1\s+1\s+1`) || !matches(out, `team-queue\s+research-gpu-cq\s+1\s+1\s+1`) {
				return fmt.Errorf("output:\n%s", out)
			}
			return nil
		})
		if out := plugin("explain", "train", "-n", "research"); !strings.Contains(out, "admitted, running in worker us-east") || !strings.Contains(out, "Placed on worker us-east: us-east: chosen") {
			t.Errorf("explain train: want where it runs and why there:\n%s", out)
		}
		if out := plugin("explain", "too-big", "-n", "research"); !strings.Contains(out, "pending (") {
			t.Errorf("explain too-big: want why it is pending:\n%s", out)
		}
	})

	t.Run("metrics once the job finished", func(t *testing.T) {
		eventually(ctx, t, "job train finished", func() error {
			wl := &kueue.Workload{}
			if err := m.Get(ctx, client.ObjectKey{Namespace: "research", Name: workload.NameFor("Job", train.Name, train.UID)}, wl); err != nil {
				return err
			}
			if !workload.IsFinished(wl) {
				return fmt.Errorf("conditions %v", wl.Status.Conditions)
			}
			return nil
		})
		eventuallyMetrics(ctx, t, scrape, []want{
			{"kueue_reserving_active_workloads", map[string]string{"cluster_queue": "research-gpu-cq"}, eq(0)},
			{"kueue_cluster_queue_resource_usage", gpu, absentOr(0)},
			{"fleetq_worker_free_capacity", free, eq(16)},
		})
	})

	// The components ran with the charts' RBAC only: nothing they did was refused.
	for _, c := range []*framework.Component{manager, agent} {
		if !c.Running() {
			t.Errorf("%s exited: %v", c.LogPath(), c.Err())
		}
		if lines := grep(t, c.LogPath(), "forbidden"); len(lines) > 0 {
			t.Errorf("%s: requests refused by RBAC:\n%s", filepath.Base(c.LogPath()), strings.Join(lines, "\n"))
		}
	}
	t.Logf("total: %s", time.Since(start).Round(time.Second))
}

// buildBinaries runs `make build` (the target the Dockerfile runs) with CGO_ENABLED=0 into a
// temporary directory and checks the binaries the images ship are static.
func buildBinaries(ctx context.Context, t *testing.T) string {
	t.Helper()
	root, ok := lab.RepoRoot()
	if !ok {
		t.Fatal("not inside the repository")
	}
	bin := t.TempDir()
	cmd := exec.CommandContext(ctx, "make", "build", "BIN="+bin)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make build: %v\n%s", err, out)
	}
	for _, name := range []string{"fleetq-manager", "fleetq-agent", "kubectl-fleetq"} {
		f, err := elf.Open(filepath.Join(bin, name))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				t.Errorf("%s is dynamically linked; the distroless static image cannot run it", name)
			}
		}
		if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
			t.Errorf("%s needs shared libraries %v", name, libs)
		}
		f.Close()
	}
	return bin
}

// install applies a chart the way `helm install` does: its CRDs (created, then Established), then
// its rendered objects, all server-side through client-go's dynamic client.
func install(ctx context.Context, t *testing.T, c framework.ClusterProxy, chart string, rel Release, values map[string]any) []*unstructured.Unstructured {
	t.Helper()
	crds, err := CRDs(chart)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Render(chart, rel, values)
	if err != nil {
		t.Fatal(err)
	}
	cfg := c.RESTConfig()
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	nsObj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": rel.Namespace}}}
	for _, o := range append(append([]*unstructured.Unstructured{nsObj}, crds...), objs...) {
		if o.GetKind() == "CustomResourceDefinition" && established(ctx, c, o.GetName()) {
			continue // a CRD of the other chart, already there
		}
		mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(c.Clientset().Discovery()))
		mapping, err := mapper.RESTMapping(o.GroupVersionKind().GroupKind(), o.GroupVersionKind().Version)
		if err != nil {
			t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
		}
		var ri dynamic.ResourceInterface = dyn.Resource(mapping.Resource)
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			ri = dyn.Resource(mapping.Resource).Namespace(o.GetNamespace())
		}
		if _, err := ri.Apply(ctx, o.GetName(), o, metav1.ApplyOptions{FieldManager: fieldManager, Force: true}); err != nil {
			t.Fatalf("applying %s %s of chart %s: %v", o.GetKind(), o.GetName(), chart, err)
		}
		if o.GetKind() == "CustomResourceDefinition" {
			eventually(ctx, t, "CRD "+o.GetName()+" established", func() error {
				if !established(ctx, c, o.GetName()) {
					return fmt.Errorf("not established")
				}
				return nil
			})
		}
	}
	return objs
}

func established(ctx context.Context, c framework.ClusterProxy, name string) bool {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.Client().Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
		return false
	}
	for _, cond := range crd.Status.Conditions {
		if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}

// configFile writes a rendered ConfigMap's config.yaml where the binary reads it.
func configFile(t *testing.T, objs []*unstructured.Unstructured, name string) string {
	t.Helper()
	data, _, _ := unstructured.NestedString(find(t, objs, "ConfigMap", name).Object, "data", "config.yaml")
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// tokenKubeconfig writes a kubeconfig for a chart's ServiceAccount, with a token from the
// TokenRequest API and the cluster's CA inline.
func tokenKubeconfig(ctx context.Context, t *testing.T, c framework.ClusterProxy, namespace, sa string) string {
	t.Helper()
	tr, err := c.Clientset().CoreV1().ServiceAccounts(namespace).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token of %s/%s: %v", namespace, sa, err)
	}
	admin := c.RESTConfig()
	kc := clientcmdapi.NewConfig()
	kc.Clusters[c.Name()] = &clientcmdapi.Cluster{Server: admin.Host, CertificateAuthorityData: admin.CAData}
	kc.AuthInfos[sa] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	kc.Contexts[sa] = &clientcmdapi.Context{Cluster: c.Name(), AuthInfo: sa, Namespace: namespace}
	kc.CurrentContext = sa
	raw, err := clientcmd.Write(*kc)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), sa+".kubeconfig")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// checkNotAdmin asks the API server, as the component, whether it may do everything, or read
// Secrets outside its namespace: it must not.
func checkNotAdmin(ctx context.Context, t *testing.T, kubeconfig, who string) {
	t.Helper()
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	for _, attrs := range []authorizationv1.ResourceAttributes{
		{Verb: "*", Group: "*", Resource: "*"},
		{Verb: "get", Resource: "secrets", Namespace: "default"},
		{Verb: "list", Resource: "secrets"},
	} {
		r, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &attrs},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if r.Status.Allowed {
			t.Errorf("%s may %s %s in %q; it must not", who, attrs.Verb, attrs.Resource, attrs.Namespace)
		}
	}
}

func waitReady(ctx context.Context, t *testing.T, c *framework.Component, port int) {
	t.Helper()
	eventually(ctx, t, filepath.Base(c.LogPath())+" ready", func() error {
		if !c.Running() {
			return wait.ErrorInterrupted(fmt.Errorf("exited: %v\n%s", c.Err(), strings.Join(tail(c.LogPath(), 30), "\n")))
		}
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", port))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			body, _ := io.ReadAll(resp.Body)
			return fmt.Errorf("readyz %d: %s", resp.StatusCode, body)
		}
		return nil
	})
}

func gpuJob(name, queue string, pods int32, gpus int64, runFor string) *batchv1.Job {
	labels := map[string]string{}
	if queue != "" {
		labels[kueue.QueueNameLabel] = queue
	}
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: "research", Name: name, Labels: labels},
		Spec: batchv1.JobSpec{
			Parallelism: ptr.To(pods), Completions: ptr.To(pods),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{lab.RunTimeAnnotation: runFor}},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{
						Name: "trainer", Image: "trainer:latest",
						Resources: corev1.ResourceRequirements{
							Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), lab.GPUResource: *resource.NewQuantity(gpus, resource.DecimalSI)},
							Limits:   corev1.ResourceList{lab.GPUResource: *resource.NewQuantity(gpus, resource.DecimalSI)},
						},
					}},
				},
			},
		},
	}
}

func mustCreate(ctx context.Context, t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	if err := c.Create(ctx, obj); err != nil {
		t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
}

// eventually polls f until it succeeds, failing the test with f's last error after stepTimeout.
func eventually(ctx context.Context, t *testing.T, what string, f func() error) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(ctx, poll, stepTimeout, true, func(context.Context) (bool, error) {
		last = f()
		if wait.Interrupted(last) {
			return false, last
		}
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("%s: %v (last: %v)", what, err, last)
	}
}

// want is one series of a metrics scrape and the value it must reach.
type want struct {
	name   string
	labels map[string]string
	ok     func(v float64, found bool) bool
}

func eq(x float64) func(float64, bool) bool {
	return func(v float64, f bool) bool { return f && v == x }
}
func atLeast(x float64) func(float64, bool) bool {
	return func(v float64, f bool) bool { return f && v >= x }
}
func absentOr(x float64) func(float64, bool) bool {
	return func(v float64, f bool) bool { return !f || v == x }
}

func eventuallyMetrics(ctx context.Context, t *testing.T, scrape func(*testing.T) string, wants []want) {
	t.Helper()
	eventually(ctx, t, "metrics", func() error {
		body := scrape(t)
		var bad []string
		for _, w := range wants {
			v, found := metricValue(body, w.name, w.labels)
			if !w.ok(v, found) {
				bad = append(bad, fmt.Sprintf("%s%v = %v (present %t)", w.name, w.labels, v, found))
			}
		}
		if len(bad) > 0 {
			return fmt.Errorf("%s", strings.Join(bad, "; "))
		}
		return nil
	})
}

// metricValue finds the series of name whose labels include every given label in a text
// exposition; found is false when there is none.
func metricValue(body, name string, labels map[string]string) (float64, bool) {
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		series, value, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		match := true
		for k, v := range labels {
			if !strings.Contains(series, fmt.Sprintf("%s=%q", k, v)) {
				match = false
			}
		}
		if !match {
			continue
		}
		f, err := strconv.ParseFloat(strings.Fields(value)[0], 64)
		if err == nil {
			return f, true
		}
	}
	return 0, false
}

func get(ctx context.Context, t *testing.T, url string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return string(body)
}

func freePort(t *testing.T) int {
	t.Helper()
	p, err := setup.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func grep(t *testing.T, path, word string) []string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(raw), "\n") {
		if strings.Contains(strings.ToLower(l), word) {
			out = append(out, l)
		}
	}
	return out
}

func tail(path string, n int) []string {
	raw, _ := os.ReadFile(path)
	lines := strings.Split(string(raw), "\n")
	return lines[max(0, len(lines)-n):]
}

func matches(s, pattern string) bool {
	return regexp.MustCompile(pattern).MatchString(s)
}
