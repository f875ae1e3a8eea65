package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/e2e/framework"
	"github.com/fleetq/fleetq/e2e/lab"
	"github.com/fleetq/fleetq/e2e/manifest"
	"github.com/fleetq/fleetq/internal/pki"
	"github.com/fleetq/fleetq/manager/setup"
)

// KueueVersion is the release the tools module hack/tools/kueue pins.
const KueueVersion = "v0.17.0"

// KueueNamespace is where each Kueue runs and reads worker kubeconfig Secrets.
const KueueNamespace = "kueue-system"

// Kueue runs Kueue v0.17.0 (bin/kueue, built by `hack/tools/build.sh kueue`) as shipped, with its
// CRDs and webhook manifests from the same module: on the management cluster with MultiKueue in
// multi-cluster scenarios, and one more Kueue per worker. The lab needs three changes to the shipped
// install: webhooks are called by URL on loopback with a generated CA, internal certificate
// management is off, and each Kueue runs in a private mount namespace (unshare -m) with an overlay
// on /etc, because it reads its metrics certificate from the hard-coded /etc/kueue/metrics/certs.
type Kueue struct {
	Knobs Knobs
	// Binary is the built kueue.
	Binary string
	// ModuleDir is sigs.k8s.io/kueue@v0.17.0 in the module cache (KueueModuleDir).
	ModuleDir string
	// Extra is appended to every Kueue's configuration file (e.g. a fairSharing section).
	Extra string

	procs []Proc
}

// KueueModuleDir locates the Kueue module the tools module pins, downloading it if needed.
func KueueModuleDir(ctx context.Context) (string, error) {
	root, ok := lab.RepoRoot()
	if !ok {
		return "", fmt.Errorf("kueue module: not inside the fleetq repository")
	}
	cmd := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/kueue")
	cmd.Dir = filepath.Join(root, "hack", "tools", "kueue")
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("kueue module in hack/tools/kueue: %w", err)
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		return "", fmt.Errorf("kueue module in hack/tools/kueue: not downloaded (run 'go mod download' there)")
	}
	return dir, nil
}

func (k *Kueue) Name() string    { return "kueue" }
func (k *Kueue) Version() string { return "kueue " + KueueVersion }

func (k *Kueue) CRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	return framework.LoadCRDs(filepath.Join(k.ModuleDir, "config", "components", "crd", "bases"))
}

func (k *Kueue) Processes() []Proc { return k.procs }

// RestartManager restarts the manager process in place (the scale scenario's restart figure).
func (k *Kueue) RestartManager(ctx context.Context) (time.Time, error) {
	return restartFirst(ctx, k.procs)
}

// Role: the manager's Kueue talks to its own cluster as "kueue/<version>" and to workers through
// MultiKueue's clients, whose user agent is client-go's default from the binary's name; the bench
// starts the manager's binary as kueue-manager so the workers' audit logs tell it from their own Kueue.
func (k *Kueue) Role(clusterRole lab.Role, ua string) string {
	switch {
	case strings.HasPrefix(ua, "kueue-manager/"):
		return "manager"
	case strings.HasPrefix(ua, "kueue/") && clusterRole == lab.RoleManagement:
		return "manager"
	case strings.HasPrefix(ua, "kueue/"):
		return "agent"
	}
	return ""
}

func (k *Kueue) Stop(ctx context.Context) error { return stopProcs(ctx, k.procs) }

func (k *Kueue) Install(ctx context.Context, env *framework.Environment, s *Scenario, dir string) error {
	m := env.Management().Client()
	mgr, err := k.start(ctx, env, ManagementCluster, "manager", s.Topology == MultiCluster, dir)
	if err != nil {
		return err
	}
	k.procs = append(k.procs, mgr)
	for _, w := range s.Workers {
		p, err := k.start(ctx, env, w.Name, "agent", false, dir)
		if err != nil {
			return err
		}
		k.procs = append(k.procs, p)
	}
	for _, c := range env.Clusters() {
		if c.Role() == lab.RoleWorker || c.Name() == ManagementCluster {
			if err := waitWebhook(ctx, c.Client(), c.Name(), k.procs); err != nil {
				return err
			}
		}
	}
	for _, w := range s.Workers {
		if err := createAll(ctx, env.Cluster(w.Name).Client(), w.Name, kueueWorkerObjects(s, w)); err != nil {
			return err
		}
	}
	if s.Topology == MultiCluster {
		if err := registerWorkers(ctx, env, s, KueueNamespace); err != nil {
			return err
		}
	}
	if err := createAll(ctx, m, ManagementCluster, managementObjects(s)); err != nil {
		return err
	}
	if err := waitFor(ctx, "queues and workers", k.procs, func(ctx context.Context) (bool, string) {
		if ok, why := queuesActive(ctx, m, s); !ok {
			return false, why
		}
		for _, w := range s.Workers {
			cq := &kueue.ClusterQueue{}
			if err := env.Cluster(w.Name).Client().Get(ctx, client.ObjectKey{Name: WorkerQueueName}, cq); err != nil {
				return false, err.Error()
			}
		}
		return true, ""
	}); err != nil {
		return err
	}
	return nil
}

// waitWebhook waits until the cluster's API server reaches Kueue's validating webhook: its
// configuration exists before Kueue starts, so a dry-run create only succeeds once Kueue serves.
func waitWebhook(ctx context.Context, c client.Client, cluster string, procs []Proc) error {
	return waitFor(ctx, "kueue's webhooks in "+cluster, procs, func(ctx context.Context) (bool, string) {
		rf := &kueue.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: "bench-webhook-probe"}}
		if err := c.Create(ctx, rf, client.DryRunAll); err != nil {
			return false, err.Error()
		}
		return true, ""
	})
}

// start runs one Kueue against a cluster: webhook certificate and configurations, configuration
// file, namespace, then the process.
func (k *Kueue) start(ctx context.Context, env *framework.Environment, cluster, role string, multiKueue bool, dir string) (Proc, error) {
	c := env.Cluster(cluster)
	base := filepath.Join(dir, "kueue-"+cluster)
	certDir := filepath.Join(base, "certs")
	if err := os.MkdirAll(certDir, 0o755); err != nil {
		return Proc{}, fmt.Errorf("kueue in %s: %w", cluster, err)
	}
	ca, err := pki.NewCA("kueue-webhook-ca", 24*time.Hour)
	if err != nil {
		return Proc{}, err
	}
	serving, err := ca.NewServing("kueue-webhook", []string{"127.0.0.1"}, 24*time.Hour)
	if err != nil {
		return Proc{}, err
	}
	if _, _, err := serving.WriteFiles(certDir, "tls"); err != nil {
		return Proc{}, err
	}
	port, err := setup.FreePort()
	if err != nil {
		return Proc{}, err
	}
	hooks, err := k.webhookConfigurations(fmt.Sprintf("https://127.0.0.1:%d", port), ca.CertPEM)
	if err != nil {
		return Proc{}, err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: KueueNamespace}}
	if err := createAll(ctx, c.Client(), cluster, append([]client.Object{ns}, hooks...)); err != nil {
		return Proc{}, err
	}
	cfg := k.configuration(port, certDir, multiKueue)
	cfgFile := filepath.Join(base, "config.yaml")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o644); err != nil {
		return Proc{}, fmt.Errorf("kueue in %s: %w", cluster, err)
	}
	// The manager's binary is named kueue-manager so that its MultiKueue clients, whose user agent
	// client-go derives from the binary's name, are told apart from the workers' own Kueue.
	bin := k.Binary
	name := "kueue"
	if role == "manager" {
		name = "kueue-manager"
		bin = filepath.Join(base, name)
		_ = os.Remove(bin)
		if err := os.Symlink(k.Binary, bin); err != nil {
			return Proc{}, fmt.Errorf("kueue in %s: %w", cluster, err)
		}
	}
	ov := filepath.Join(base, "etc-overlay")
	script := strings.Join([]string{
		"set -e",
		fmt.Sprintf("mkdir -p %q %q", ov+"/upper", ov+"/work"),
		fmt.Sprintf("mount -t overlay overlay -o lowerdir=/etc,upperdir=%s/upper,workdir=%s/work /etc", ov, ov),
		"mkdir -p /etc/kueue/metrics/certs",
		fmt.Sprintf("cp %q %q /etc/kueue/metrics/certs/", filepath.Join(certDir, "tls.crt"), filepath.Join(certDir, "tls.key")),
		fmt.Sprintf("exec %q --config=%q", bin, cfgFile),
	}, "\n")
	return startProc(env, role, cluster, name, []string{"/usr/bin/unshare", "-m", "--propagation", "private", "/bin/sh", "-c", script}, nil)
}

// configuration is Kueue's shipped controller_manager_config.yaml with the lab's changes: webhook
// on loopback with our certificate, no metrics or probe ports, no leader election, no internal cert
// management, only the batch/job integration, the bench's client limits, and the visibility server
// off (it needs certificates of its own).
func (k *Kueue) configuration(port int, certDir string, multiKueue bool) string {
	cfg := fmt.Sprintf(`apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: %s
health:
  healthProbeBindAddress: "0"
metrics:
  bindAddress: "0"
webhook:
  host: 127.0.0.1
  port: %d
  certDir: %s
leaderElection:
  leaderElect: false
internalCertManagement:
  enable: false
controller:
  groupKindConcurrency:
    Job.batch: 5
    Pod: 5
    Workload.kueue.x-k8s.io: 5
    LocalQueue.kueue.x-k8s.io: 1
    Cohort.kueue.x-k8s.io: 1
    ClusterQueue.kueue.x-k8s.io: 1
    ResourceFlavor.kueue.x-k8s.io: 1
clientConnection:
  qps: %g
  burst: %d
integrations:
  frameworks:
  - batch/job
featureGates:
  VisibilityOnDemand: false
`, KueueNamespace, port, certDir, k.Knobs.QPS, k.Knobs.Burst)
	if multiKueue {
		cfg += "multiKueue:\n  gcInterval: 1m\n  origin: multikueue\n  workerLostTimeout: 15m\n"
	}
	return cfg + k.Extra
}

// webhookConfigurations reads Kueue's webhook manifests from its module and keeps the webhooks of
// what this install serves (Kueue's own kinds and batch/v1 Jobs), called by URL with caBundle.
// Dropping the no-op webhooks of disabled integrations (pods, deployments, ...) spares Kueue a call
// per pod: it can only make Kueue faster.
func (k *Kueue) webhookConfigurations(url string, caBundle []byte) ([]client.Object, error) {
	path := filepath.Join(k.ModuleDir, "config", "components", "webhook", "manifests.yaml")
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("kueue webhooks: %w", err)
	}
	objs, err := manifest.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("kueue webhooks %s: %w", path, err)
	}
	keep := func(p *string) bool {
		return p != nil && (strings.Contains(*p, "-kueue-x-k8s-io-") || strings.HasSuffix(*p, "-batch-v1-job"))
	}
	byURL := func(cc *admissionv1.WebhookClientConfig) bool {
		if cc.Service == nil || !keep(cc.Service.Path) {
			return false
		}
		*cc = admissionv1.WebhookClientConfig{URL: ptr.To(url + *cc.Service.Path), CABundle: caBundle}
		return true
	}
	var out []client.Object
	for _, u := range objs {
		data, err := u.MarshalJSON()
		if err != nil {
			return nil, err
		}
		switch u.GetKind() {
		case "MutatingWebhookConfiguration":
			cfg := &admissionv1.MutatingWebhookConfiguration{}
			if err := json.Unmarshal(data, cfg); err != nil {
				return nil, err
			}
			cfg.Name = "kueue-" + cfg.Name
			cfg.Webhooks = keepHooks(cfg.Webhooks, func(h *admissionv1.MutatingWebhook) bool { return byURL(&h.ClientConfig) })
			out = append(out, cfg)
		case "ValidatingWebhookConfiguration":
			cfg := &admissionv1.ValidatingWebhookConfiguration{}
			if err := json.Unmarshal(data, cfg); err != nil {
				return nil, err
			}
			cfg.Name = "kueue-" + cfg.Name
			cfg.Webhooks = keepHooks(cfg.Webhooks, func(h *admissionv1.ValidatingWebhook) bool { return byURL(&h.ClientConfig) })
			out = append(out, cfg)
		}
	}
	if len(out) != 2 {
		return nil, fmt.Errorf("kueue webhooks %s: want one mutating and one validating configuration, got %d objects", path, len(out))
	}
	return out, nil
}

// keepHooks keeps the webhooks for which keep (which may rewrite them) returns true.
func keepHooks[H any](hooks []H, keep func(*H) bool) []H {
	var out []H
	for i := range hooks {
		if keep(&hooks[i]) {
			out = append(out, hooks[i])
		}
	}
	return out
}
