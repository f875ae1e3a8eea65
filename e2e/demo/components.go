package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/fleetq/fleetq/config"
	"github.com/fleetq/fleetq/e2e/lab"
	"github.com/fleetq/fleetq/e2e/lab/process"
	"github.com/fleetq/fleetq/manager/setup"
)

// Names of fleetq's processes in the lab's state file and of their logs.
const (
	ManagerName = "fleetq-manager"
	AgentName   = "fleetq-agent"
)

// componentStopGrace is how long a component may take to exit on SIGTERM.
const componentStopGrace = 15 * time.Second

// FindBinaries locates the fleetq-manager and fleetq-agent binaries: in dir when given, else next to
// the running executable (where `make build` puts fleetq-demo), else in <repo>/bin.
func FindBinaries(dir string) (managerBin, agentBin string, err error) {
	var dirs []string
	if dir != "" {
		dirs = []string{dir}
	} else {
		if exe, err := os.Executable(); err == nil {
			dirs = append(dirs, filepath.Dir(exe))
		}
		if root, ok := lab.RepoRoot(); ok {
			dirs = append(dirs, filepath.Join(root, "bin"))
		}
	}
	for _, d := range dirs {
		m, a := filepath.Join(d, ManagerName), filepath.Join(d, AgentName)
		if isExecutable(m) && isExecutable(a) {
			return m, a, nil
		}
	}
	return "", "", fmt.Errorf("%s and %s not found in %v: run 'make build' in the fleetq repository ('make demo' builds them)", ManagerName, AgentName, dirs)
}

func isExecutable(p string) bool {
	info, err := os.Stat(p)
	return err == nil && !info.IsDir() && info.Mode().Perm()&0o111 != 0
}

// StopRecorded stops the fleetq processes an earlier demo recorded in the lab in dir, and forgets
// them, so the demo starts fresh ones (built from the current source) and the lab's health check
// does not count a crashed manager against the clusters. No lab there is no error.
func StopRecorded(ctx context.Context, dir string, progress io.Writer) error {
	st, err := lab.ReadState(dir)
	if errors.Is(err, lab.ErrNoLab) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, c := range st.Clusters {
		for _, ps := range c.Processes {
			if ps.Name != ManagerName && ps.Name != AgentName {
				continue
			}
			p := &process.Process{Owner: c.Name, State: ps}
			if p.Running() {
				fmt.Fprintf(progress, "stopping the %s of an earlier demo in %s (pid %d)\n", ps.Name, c.Name, ps.PID)
			}
			if err := p.Stop(ctx, componentStopGrace); err != nil {
				return err
			}
			if err := lab.ForgetProcess(ctx, dir, c.Name, ps.Name); err != nil {
				return err
			}
		}
	}
	return nil
}

// Components are the fleetq processes the demo runs against a local lab.
type Components struct {
	Manager *process.Process
	Agents  []*process.Process
	// Config is the manager's configuration (its namespace, origin, webhook).
	Config *config.Configuration
}

// Check reports the first component that is no longer running, with the end of its log.
func (c *Components) Check() error {
	for _, p := range append([]*process.Process{c.Manager}, c.Agents...) {
		if p != nil && !p.Running() {
			reason := p.ExitError()
			if reason == nil {
				reason = errors.New("is gone")
			}
			return p.Failure(reason.Error())
		}
	}
	return nil
}

// Logs lists the components' log files.
func (c *Components) Logs() []string {
	var out []string
	for _, p := range append([]*process.Process{c.Manager}, c.Agents...) {
		if p != nil {
			out = append(out, p.State.Log)
		}
	}
	return out
}

// StartOptions say how to start the components.
type StartOptions struct {
	ManagerBinary, AgentBinary string
	// Owned ties the processes to the caller (tests); otherwise they outlive it, recorded in the
	// lab's state file so `fleetq-lab down` stops them.
	Owned    bool
	Progress io.Writer
}

// StartComponents starts one fleetq-agent per worker and fleetq-manager on the management cluster
// of a local lab, as background processes with their logs in <lab>/<cluster>/logs, and waits until
// the manager's webhooks answer. Configurations go to <lab>/<cluster>/fleetq/.
func StartComponents(ctx context.Context, l lab.Lab, fleet *Fleet, opts StartOptions) (*Components, error) {
	mcfg, err := managerConfig(l.Dir())
	if err != nil {
		return nil, err
	}
	comps := &Components{Config: mcfg}
	for _, w := range fleet.Workers {
		// The agent runs in its namespace; it does not create it.
		if err := ensureNamespace(ctx, w.Client, mcfg.MultiCluster.AgentNamespace); err != nil {
			return nil, fmt.Errorf("cluster %q: %w", w.Name, err)
		}
		path, err := config.Write(filepath.Join(l.Dir(), w.Name, "fleetq", "agent.yaml"), agentConfig(w.Name, mcfg))
		if err != nil {
			return nil, err
		}
		p, err := startComponent(ctx, l.Dir(), w, AgentName, opts, opts.AgentBinary, "--config", path)
		if err != nil {
			return nil, err
		}
		comps.Agents = append(comps.Agents, p)
	}
	mgmt := fleet.Management
	if err := ensureNamespace(ctx, mgmt.Client, mcfg.Namespace); err != nil {
		return nil, fmt.Errorf("cluster %q: %w", mgmt.Name, err)
	}
	path, err := config.Write(filepath.Join(l.Dir(), mgmt.Name, "fleetq", "manager.yaml"), mcfg)
	if err != nil {
		return nil, err
	}
	comps.Manager, err = startComponent(ctx, l.Dir(), mgmt, ManagerName, opts, opts.ManagerBinary, "--config", path)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(opts.Progress, "started %s on %s and %s on each worker (logs: %s/<cluster>/logs/)\n", ManagerName, mgmt.Name, AgentName, l.Dir())
	waitCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var last error
	err = comps.Manager.WaitFor(waitCtx, "answering its webhooks at "+mcfg.Webhook.URL, func(ctx context.Context) bool {
		ok, err := WaitForWebhooks(ctx, fleet.Management)
		last = err
		return ok
	})
	if err != nil {
		if last != nil {
			err = fmt.Errorf("%w\n  (last webhook call: %v)", err, last)
		}
		return comps, err
	}
	return comps, comps.Check()
}

// startComponent starts a fleetq binary against cluster c of the lab in dir, with its log in the
// cluster's logs, and records it in the lab's state file.
func startComponent(ctx context.Context, dir string, c *Cluster, name string, opts StartOptions, bin string, args ...string) (*process.Process, error) {
	logDir := filepath.Join(dir, c.Name, "logs")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, fmt.Errorf("cluster %q: %w", c.Name, err)
	}
	p := &process.Process{Owner: c.Name, State: lab.ProcessState{
		Name: name,
		Args: append(append([]string{bin}, args...), "--kubeconfig", c.Kubeconfig),
		Log:  filepath.Join(logDir, name+".log"),
	}}
	if err := p.Start(opts.Owned); err != nil {
		return nil, err
	}
	if err := lab.RecordProcess(ctx, dir, c.Name, p.State); err != nil {
		_ = p.Stop(ctx, componentStopGrace)
		return nil, fmt.Errorf("cluster %q: record %s in the lab's state: %w", c.Name, name, err)
	}
	return p, nil
}

// managerConfig is fleetq-manager's configuration for the lab: webhooks on a free loopback port the
// API server calls by URL, no metrics or probe ports (several components share this machine), short
// leader-election timings so a restarted demo takes over at once, a short requeue backoff so a
// job its worker rejected is back in the queue within seconds (a preempted one is at once).
func managerConfig(dir string) (*config.Configuration, error) {
	port, err := setup.FreePort()
	if err != nil {
		return nil, fmt.Errorf("webhook port: %w", err)
	}
	cfg := &config.Configuration{
		Metrics: config.Endpoint{BindAddress: "0"},
		Health:  config.Endpoint{BindAddress: "0"},
		Webhook: config.Webhook{
			Host:    "127.0.0.1",
			Port:    ptr.To(int32(port)),
			URL:     "https://127.0.0.1:" + strconv.Itoa(port),
			CertDir: filepath.Join(dir, "management", "fleetq", "certs"),
		},
		LeaderElection:    shortLeaderElection(),
		RequeuingStrategy: config.RequeuingStrategy{BackoffBaseSeconds: ptr.To[int32](1), BackoffMaxSeconds: ptr.To[int32](10)},
		ClientConnection:  config.ClientConnection{QPS: ptr.To[float32](200), Burst: ptr.To[int32](400)},
		MultiCluster: config.MultiCluster{
			WorkerClientConnection: config.ClientConnection{QPS: ptr.To[float32](200), Burst: ptr.To[int32](400)},
		},
	}
	cfg.SetDefaults()
	if errs := cfg.Validate(); len(errs) > 0 {
		return nil, fmt.Errorf("manager configuration: %w", errs.ToAggregate())
	}
	return cfg, nil
}

func agentConfig(cluster string, mgr *config.Configuration) *config.AgentConfiguration {
	cfg := &config.AgentConfiguration{
		ClusterName:      cluster,
		Namespace:        mgr.MultiCluster.AgentNamespace,
		Origin:           mgr.MultiCluster.Origin,
		Metrics:          config.Endpoint{BindAddress: "0"},
		Health:           config.Endpoint{BindAddress: "0"},
		LeaderElection:   shortLeaderElection(),
		ClientConnection: config.ClientConnection{QPS: ptr.To[float32](200), Burst: ptr.To[int32](400)},
	}
	cfg.SetDefaults()
	return cfg
}

func shortLeaderElection() config.LeaderElection {
	return config.LeaderElection{
		LeaseDuration: &metav1.Duration{Duration: 4 * time.Second},
		RenewDeadline: &metav1.Duration{Duration: 3 * time.Second},
		RetryPeriod:   &metav1.Duration{Duration: 500 * time.Millisecond},
	}
}
