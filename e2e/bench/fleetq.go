package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	fleetqapi "github.com/fleetq/fleetq/api/fleetq/v1alpha1"
	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/config"
	"github.com/fleetq/fleetq/config/crd"
	"github.com/fleetq/fleetq/e2e/framework"
	"github.com/fleetq/fleetq/e2e/lab"
	"github.com/fleetq/fleetq/manager/setup"
)

// Fleetq runs fleetq's built fleetq-manager on the management cluster and one fleetq-agent per
// worker, with production defaults except the knobs and what the lab needs (webhooks by URL on
// loopback, no metrics or probe ports, no leader election).
type Fleetq struct {
	Knobs Knobs
	// BinDir holds fleetq-manager and fleetq-agent (BuildFleetq).
	BinDir string
	// Commit is the git revision the binaries were built from, for the report.
	Commit string
	// LogLevel is the processes' --zap-log-level (0: production's info level).
	LogLevel int
	// Profile serves the manager's pprof on loopback, so the run takes its profiles.
	Profile bool
	// Configure, when set, changes the manager's configuration before its defaults are applied.
	Configure func(*config.Configuration)

	procs      []Proc
	profileURL string
}

// BuildFleetq builds fleetq-manager and fleetq-agent into dir.
func BuildFleetq(ctx context.Context, dir string) error {
	for _, pkg := range []string{"./cmd/fleetq-manager", "./cmd/fleetq-agent"} {
		if _, err := framework.BuildBinary(ctx, pkg, dir); err != nil {
			return err
		}
	}
	return nil
}

func (f *Fleetq) Name() string    { return "fleetq" }
func (f *Fleetq) Version() string { return "fleetq " + f.Commit }

func (f *Fleetq) CRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	return crd.CustomResourceDefinitions()
}

func (f *Fleetq) Processes() []Proc { return f.procs }

// RestartManager restarts the manager process in place (the scale scenario's restart figure).
func (f *Fleetq) RestartManager(ctx context.Context) (time.Time, error) {
	return restartFirst(ctx, f.procs)
}

func (f *Fleetq) ProfileURL() string { return f.profileURL }

func (f *Fleetq) Role(_ lab.Role, ua string) string {
	switch {
	case strings.HasPrefix(ua, "fleetq-manager"):
		return "manager"
	case strings.HasPrefix(ua, "fleetq-agent"):
		return "agent"
	}
	return ""
}

// args is a fleetq process's command line: production's log level unless LogLevel is set.
func (f *Fleetq) args(binary, configFile string) []string {
	out := []string{filepath.Join(f.BinDir, binary), "--config", configFile}
	if f.LogLevel > 0 {
		out = append(out, fmt.Sprintf("--zap-log-level=%d", f.LogLevel))
	}
	return out
}

func (f *Fleetq) Stop(ctx context.Context) error { return stopProcs(ctx, f.procs) }

func (f *Fleetq) clientConnection() config.ClientConnection {
	return config.ClientConnection{QPS: ptr.To(f.Knobs.QPS), Burst: ptr.To(f.Knobs.Burst)}
}

func (f *Fleetq) Install(ctx context.Context, env *framework.Environment, s *Scenario, dir string) error {
	port, err := setup.FreePort()
	if err != nil {
		return err
	}
	mgr := &config.Configuration{
		Metrics:          config.Endpoint{BindAddress: "0"},
		Health:           config.Endpoint{BindAddress: "0"},
		Webhook:          config.Webhook{Host: "127.0.0.1", Port: ptr.To(int32(port)), URL: fmt.Sprintf("https://127.0.0.1:%d", port), CertDir: filepath.Join(dir, "fleetq-certs")},
		LeaderElection:   config.LeaderElection{Enabled: ptr.To(false)},
		ClientConnection: f.clientConnection(),
		MultiCluster:     config.MultiCluster{WorkerClientConnection: f.clientConnection()},
	}
	if f.Profile {
		pport, err := setup.FreePort()
		if err != nil {
			return err
		}
		mgr.Profiling.BindAddress = fmt.Sprintf("127.0.0.1:%d", pport)
		f.profileURL = fmt.Sprintf("http://%s/debug/pprof", mgr.Profiling.BindAddress)
	}
	if f.Configure != nil {
		f.Configure(mgr)
	}
	mgr.SetDefaults()
	if errs := mgr.Validate(); len(errs) > 0 {
		return fmt.Errorf("fleetq-manager config: %w", errs.ToAggregate())
	}
	mgrFile := filepath.Join(dir, "fleetq-manager.yaml")
	if err := writeYAML(mgrFile, mgr); err != nil {
		return err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: mgr.Namespace}}
	if err := createAll(ctx, env.Management().Client(), ManagementCluster, []client.Object{ns}); err != nil {
		return err
	}
	for _, w := range s.Workers {
		agent := &config.AgentConfiguration{
			ClusterName:      w.Name,
			Namespace:        mgr.Namespace,
			Origin:           mgr.MultiCluster.Origin,
			Metrics:          config.Endpoint{BindAddress: "0"},
			Health:           config.Endpoint{BindAddress: "0"},
			LeaderElection:   config.LeaderElection{Enabled: ptr.To(false)},
			ClientConnection: f.clientConnection(),
		}
		agent.SetDefaults()
		if errs := agent.Validate(); len(errs) > 0 {
			return fmt.Errorf("fleetq-agent config for %s: %w", w.Name, errs.ToAggregate())
		}
		file := filepath.Join(dir, "fleetq-agent-"+w.Name+".yaml")
		if err := writeYAML(file, agent); err != nil {
			return err
		}
		wns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: mgr.Namespace}}
		if err := createAll(ctx, env.Cluster(w.Name).Client(), w.Name, []client.Object{wns}); err != nil {
			return err
		}
		p, err := startProc(env, "agent", w.Name, "fleetq-agent", f.args("fleetq-agent", file), nil)
		if err != nil {
			return err
		}
		f.procs = append(f.procs, p)
	}
	p, err := startProc(env, "manager", ManagementCluster, "fleetq-manager", f.args("fleetq-manager", mgrFile), nil)
	if err != nil {
		return err
	}
	f.procs = append([]Proc{p}, f.procs...)

	m := env.Management().Client()
	// The manager registers its own webhooks; the defaulting webhook answering (cohort alias →
	// cohortName) proves the API server reaches it, so every queue object below went through it.
	if err := waitFor(ctx, "fleetq-manager's webhooks", f.procs, func(ctx context.Context) (bool, string) {
		cq := &kueue.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: "bench-webhook-probe"}, Spec: kueue.ClusterQueueSpec{Cohort: "probe"}}
		if err := m.Create(ctx, cq, client.DryRunAll); err != nil {
			return false, err.Error()
		}
		return cq.Spec.CohortName == "probe", "cohortName not defaulted"
	}); err != nil {
		return err
	}
	if s.Topology == MultiCluster {
		if err := registerWorkers(ctx, env, s, mgr.Namespace); err != nil {
			return err
		}
	}
	if err := createAll(ctx, m, ManagementCluster, managementObjects(s)); err != nil {
		return err
	}
	if err := waitFor(ctx, "queues and workers", f.procs, func(ctx context.Context) (bool, string) {
		if ok, why := queuesActive(ctx, m, s); !ok {
			return false, why
		}
		for _, w := range s.Workers {
			rep := &fleetqapi.CapacityReport{}
			if err := env.Cluster(w.Name).Client().Get(ctx, client.ObjectKey{Namespace: mgr.Namespace, Name: w.Name}, rep); err != nil {
				return false, fmt.Sprintf("capacity report of %s: %v", w.Name, err)
			}
		}
		return true, ""
	}); err != nil {
		return err
	}
	return nil
}

func writeYAML(path string, v any) error {
	data, err := yaml.Marshal(v)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
