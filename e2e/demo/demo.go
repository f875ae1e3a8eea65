// Package demo is fleetq's main demo (`make demo`): on the local lab (or an existing management
// cluster) it starts fleetq-manager and one fleetq-agent per worker, applies the Kueue tutorial's GPU
// flavors and team queues, submits bursts of jobs from two teams and shows live how they queue, borrow,
// get dispatched to the worker that has their GPUs, and get preempted when a team reclaims its share.
//
// The story is data (Scenario), its state a pure model folded from API snapshots (State), and the
// screen a pure rendering of that model (RenderFrame), so each part is tested on its own; Run wires
// them to real clusters for cmd/fleetq-demo and the test on the lab.
package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/fleetq/fleetq/config"
	"github.com/fleetq/fleetq/config/crd"
	"github.com/fleetq/fleetq/e2e/lab"
	"github.com/fleetq/fleetq/e2e/lab/local"
)

// WorkerKubeconfig is a worker to register on an existing management cluster.
type WorkerKubeconfig struct {
	Name, Kubeconfig string
}

// Options configure one run.
type Options struct {
	// Kubeconfig, when set, is an existing management cluster: no lab is started and no process either;
	// fleetq-manager must already run against it (and agents in the workers).
	Kubeconfig string
	// Workers are registered on that cluster (Secret + MultiKueueCluster); without any, the workers
	// already registered there are used.
	Workers []WorkerKubeconfig
	// Namespace is fleetq-manager's namespace on an existing cluster (worker Secrets go there).
	Namespace string

	// Dir is the lab directory (see lab.ResolveDir); BinDir holds the control-plane binaries (see
	// lab.FindBinDir) and FleetqBinDir fleetq-manager and fleetq-agent (see FindBinaries).
	Dir, BinDir, FleetqBinDir string
	// Owned ties the lab and fleetq's processes to the caller (tests).
	Owned bool

	Scenario Scenario
	// Screen shows the story; Progress receives one line per set-up step.
	Screen   *Screen
	Progress io.Writer
}

// Result is what a run leaves behind.
type Result struct {
	State   *State
	Summary Summary
	// LabDir is the lab's directory ("" on an existing cluster).
	LabDir string
	// Management and Workers are the kubeconfigs to explore with.
	Management string
	Workers    map[string]string
	// Logs are fleetq's log files the demo started.
	Logs []string
	// SetupTime is from the start to the first job; LabStarted says the lab was started (not reused).
	SetupTime  time.Duration
	LabStarted bool
}

// Run sets up the fleet and plays the scenario. The lab and fleetq's processes keep running after
// it returns (unless Options.Owned).
func Run(ctx context.Context, o Options) (*Result, error) {
	start := time.Now()
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	res := &Result{Workers: map[string]string{}}
	var (
		fleet *Fleet
		names []string
		check func() error
		err   error
	)
	if o.Kubeconfig != "" {
		fleet, names, err = existing(ctx, o)
	} else {
		fleet, names, check, err = onLab(ctx, o, res)
	}
	if err != nil {
		return res, err
	}
	res.Management = fleet.Management.Kubeconfig
	for _, w := range fleet.Workers {
		res.Workers[w.Name] = w.Kubeconfig
	}
	step(o.Progress, "applying the tutorial's GPU flavors (a100-flavor, l4-flavor), dispatch to %s, and the teams' queues (cohort ai-platform)", strings.Join(names, ", "))
	if err := Apply(ctx, fleet.Management, names); err != nil {
		return res, err
	}
	if err := WaitReady(ctx, fleet, names, 2*time.Minute); err != nil {
		if check != nil {
			if cerr := check(); cerr != nil {
				err = fmt.Errorf("%w\n%w", err, cerr)
			}
		}
		return res, err
	}
	if caps := Capacity(ctx, fleet); len(caps) > 0 {
		step(o.Progress, "workers connected; agents report %s", strings.Join(caps, "; "))
	}
	if err := Clean(ctx, fleet.Management, o.Progress); err != nil {
		return res, err
	}
	missing, err := MissingKinds(ctx, fleet, o.Scenario)
	if err != nil {
		return res, err
	}
	if sc, dropped := o.Scenario.WithoutKinds(missing); len(dropped) > 0 {
		step(o.Progress, "leaving the story's %s out: no worker runs them (their CRDs and operators; on the lab: fleetq-lab down, then run the demo again)", strings.Join(dropped, " and "))
		o.Scenario = sc
	}
	res.SetupTime = time.Since(start)
	step(o.Progress, "ready in %s; the story begins", since(res.SetupTime))
	r := &Runner{Management: fleet.Management, Scenario: o.Scenario, Screen: o.Screen, Check: check}
	s, err := r.Run(ctx)
	res.State = s
	if s != nil {
		res.Summary = Summarize(s)
	}
	return res, err
}

// labSpec is the demo's lab: the default one with the job operators in every cluster, or the
// default one without them when that is what already runs in dir (`fleetq-lab up`), which the
// demo reuses rather than refuse.
func labSpec(dir string) lab.Spec {
	plain := lab.DefaultSpec(2)
	plain.Default()
	if st, err := lab.ReadState(dir); err == nil && st.Spec.String() == plain.String() {
		return plain
	}
	spec := lab.DefaultSpec(2)
	spec.WithOperators(lab.Operators...)
	return spec
}

// onLab brings up (or reuses) the default lab, installs the CRDs, starts fleetq's processes and
// registers the workers.
func onLab(ctx context.Context, o Options, res *Result) (*Fleet, []string, func() error, error) {
	dir, err := lab.ResolveDir(o.Dir)
	if err != nil {
		return nil, nil, nil, err
	}
	res.LabDir = dir
	managerBin, agentBin, err := FindBinaries(o.FleetqBinDir)
	if err != nil {
		return nil, nil, nil, err
	}
	if st, err := lab.ReadState(dir); err == nil && st.Provider != local.ProviderName {
		return nil, nil, nil, fmt.Errorf("lab dir %s: a %s lab runs there; the demo starts fleetq's processes on a local lab only: run it with --kubeconfig %s", dir, st.Provider, "<its management kubeconfig>")
	}
	// Missing tools are the first thing a fresh clone hits: say so before touching the lab.
	binDir := o.BinDir
	if binDir == "" {
		if binDir, err = lab.FindBinDir(); err != nil {
			return nil, nil, nil, err
		}
	}
	spec := labSpec(dir)
	needed := lab.BinariesFor(lab.ModeFull)
	for _, op := range spec.Management.Operators {
		needed = append(needed, op.Binary())
	}
	if err := lab.CheckBinaries(binDir, needed); err != nil {
		return nil, nil, nil, err
	}
	if err := StopRecorded(ctx, dir, o.Progress); err != nil {
		return nil, nil, nil, err
	}
	operators := "training-operator and ray-operator in each"
	if len(spec.Management.Operators) == 0 {
		operators = "no job operators (a lab started without them runs there)"
	}
	step(o.Progress, "lab: management + us-east (4 nodes × 8 A100) + eu-west (4 nodes × 4 L4), %s, in %s", operators, dir)
	l, started, err := lab.Up(ctx, local.New(), spec, lab.UpOptions{Dir: dir, BinDir: binDir, Owned: o.Owned, Progress: indent(o.Progress)})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%w\n(if a lab is half up, 'fleetq-lab down' stops what is left)", err)
	}
	res.LabStarted = started
	mgmt, err := NewCluster(lab.Management(l).Name(), lab.Management(l).KubeconfigPath())
	if err != nil {
		return nil, nil, nil, err
	}
	fleet := &Fleet{Management: mgmt}
	clusters := []*Cluster{mgmt}
	var names []string
	for _, w := range lab.Workers(l) {
		c, err := NewCluster(w.Name(), w.KubeconfigPath())
		if err != nil {
			return nil, nil, nil, err
		}
		// The manager reaches a worker at its peer address (the same on a local lab).
		if c.Raw, err = lab.PeerKubeconfig(w); err != nil {
			return nil, nil, nil, err
		}
		fleet.Workers = append(fleet.Workers, c)
		clusters = append(clusters, c)
		names = append(names, w.Name())
	}
	crds, err := crd.CustomResourceDefinitions()
	if err != nil {
		return nil, nil, nil, err
	}
	var wg sync.WaitGroup
	errs := make([]error, len(clusters))
	for i, c := range clusters {
		wg.Go(func() { errs[i] = InstallCRDs(ctx, c, crds) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, nil, nil, err
	}
	step(o.Progress, "fleetq's CRDs installed on %d clusters", len(clusters))
	comps, err := StartComponents(ctx, l, fleet, StartOptions{ManagerBinary: managerBin, AgentBinary: agentBin, Owned: o.Owned, Progress: indent(o.Progress)})
	if comps != nil {
		res.Logs = comps.Logs()
	}
	if err != nil {
		return nil, nil, nil, err
	}
	fleet.Namespace, fleet.AgentNamespace = comps.Config.Namespace, comps.Config.MultiCluster.AgentNamespace
	step(o.Progress, "fleetq-manager answers its webhooks; registering workers %s (kubeconfig Secrets + MultiKueueClusters)", strings.Join(names, ", "))
	if err := Register(ctx, fleet); err != nil {
		return nil, nil, nil, err
	}
	return fleet, names, comps.Check, nil
}

// existing uses a management cluster fleetq already runs on.
func existing(ctx context.Context, o Options) (*Fleet, []string, error) {
	path, err := filepath.Abs(o.Kubeconfig)
	if err != nil {
		return nil, nil, fmt.Errorf("kubeconfig %s: %w", o.Kubeconfig, err)
	}
	mgmt, err := NewCluster("management", path)
	if err != nil {
		return nil, nil, err
	}
	ns := o.Namespace
	if ns == "" {
		ns = config.DefaultNamespace
	}
	fleet := &Fleet{Management: mgmt, Namespace: ns, AgentNamespace: ns}
	step(o.Progress, "using the management cluster at %s (no lab, no processes started)", mgmt.Config.Host)
	if err := CheckCRDs(ctx, mgmt); err != nil {
		return nil, nil, err
	}
	var last error
	if err := poll(ctx, 30*time.Second, func() (bool, error) {
		ok, err := WaitForWebhooks(ctx, mgmt)
		last = err
		return ok, nil
	}); err != nil {
		why := "a dry-run ClusterQueue came back without the defaulting webhook's changes"
		if last != nil {
			why = last.Error()
		}
		return nil, nil, fmt.Errorf("cluster %q (%s): fleetq-manager's webhooks do not answer (is fleetq-manager running against it?): %s", mgmt.Name, mgmt.Config.Host, why)
	}
	var names []string
	for _, w := range o.Workers {
		path, err := filepath.Abs(w.Kubeconfig)
		if err != nil {
			return nil, nil, fmt.Errorf("worker %q: kubeconfig %s: %w", w.Name, w.Kubeconfig, err)
		}
		c, err := NewCluster(w.Name, path)
		if err != nil {
			return nil, nil, err
		}
		fleet.Workers = append(fleet.Workers, c)
		names = append(names, w.Name)
	}
	if len(fleet.Workers) > 0 {
		step(o.Progress, "registering workers %s", strings.Join(names, ", "))
		if err := Register(ctx, fleet); err != nil {
			return nil, nil, err
		}
		return fleet, names, nil
	}
	names, err = RegisteredWorkers(ctx, mgmt)
	if err != nil {
		return nil, nil, err
	}
	if len(names) == 0 {
		return nil, nil, fmt.Errorf("cluster %q (%s): no worker is registered: pass --worker NAME=KUBECONFIG for each worker, or create MultiKueueClusters", mgmt.Name, mgmt.Config.Host)
	}
	step(o.Progress, "using the registered workers %s", strings.Join(names, ", "))
	return fleet, names, nil
}

func step(w io.Writer, format string, args ...any) {
	fmt.Fprintf(w, "==> "+format+"\n", args...)
}

// indent prefixes every line written through it, so the lab's own progress nests under the
// demo's steps.
func indent(w io.Writer) io.Writer { return &prefixWriter{w: w, prefix: "    ", bol: true} }

type prefixWriter struct {
	w      io.Writer
	prefix string
	bol    bool
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	var out []byte
	for _, c := range b {
		if p.bol {
			out = append(out, p.prefix...)
			p.bol = false
		}
		out = append(out, c)
		if c == '\n' {
			p.bol = true
		}
	}
	if _, err := p.w.Write(out); err != nil {
		return 0, err
	}
	return len(b), nil
}
