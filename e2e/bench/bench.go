package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/fleetq/fleetq/e2e/lab"
)

// Options drive a whole benchmark: scenarios × systems × runs.
type Options struct {
	// ScenarioFiles are the scenario YAML files, in report order.
	ScenarioFiles []string
	// Systems are any of "fleetq", "kueue" and "direct" (the ceiling: jobs created where they
	// run, see Direct).
	Systems []string
	// Runs per scenario and system.
	Runs int
	// Scale multiplies node pools and job counts (1 = the files' full size).
	Scale float64
	// Timeout, when set, replaces every scenario's own timeout (how long one run may take
	// before it is measured as far as it got).
	Timeout time.Duration
	Knobs   Knobs
	// LoadQPS and LoadBurst size the bench's own load client.
	LoadQPS   float32
	LoadBurst int
	// Out receives the report; runs keep their labs under Out/runs/.
	Out string
	// KeepAudit keeps every run's API server audit logs beside its other logs (runs/<run>/logs).
	KeepAudit bool
	// FleetqLogLevel raises fleetq-manager's and fleetq-agent's log verbosity (0: production's).
	FleetqLogLevel int
	// Profile takes fleetq-manager's CPU and allocation profiles in every fleetq run
	// (runs/<run>/profile, with go tool pprof -top summaries).
	Profile bool
	// Command is recorded in the report (how to reproduce it).
	Command  string
	Progress io.Writer
}

// Bench runs every scenario for every system Runs times (systems alternate within each round, so
// drifts of the machine's load hit both alike), then writes the report into Out.
func Bench(ctx context.Context, o Options) (*Report, error) {
	started := time.Now()
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	out, err := filepath.Abs(o.Out)
	if err != nil {
		return nil, err
	}
	binDir, err := PrepareBinDir(filepath.Join(out, "tools"))
	if err != nil {
		return nil, err
	}
	rep := &Report{Meta: Meta{
		Command: o.Command, Started: started, Machine: machine(), Knobs: o.Knobs,
		LoadQPS: o.LoadQPS, LoadBurst: o.LoadBurst, Runs: o.Runs, Scale: o.Scale,
		APIServer: fmt.Sprintf("the lab's kube-apiserver v1.37.2 flags, plus an audit log (Metadata level, blocking mode) to count requests per client; kube-controller-manager with --kube-api-qps=%d (default 20 would pace pod creation); identical for both systems", ControllerManagerQPS),
	}}
	var scenarios []*Scenario
	for _, f := range o.ScenarioFiles {
		s, err := LoadScenario(f)
		if err != nil {
			return nil, err
		}
		s = s.Scaled(o.Scale)
		if o.Timeout > 0 {
			s.Timeout.Duration = o.Timeout
		}
		scenarios = append(scenarios, s)
		rep.Meta.Scenarios = append(rep.Meta.Scenarios, f)
	}
	rep.Scenarios = scenarios
	systems := map[string]func() System{}
	versions := []string{"kube-apiserver/controller-manager/scheduler v1.37.2", "etcd v3.7.3", "kwok v0.8.0"}
	for _, name := range o.Systems {
		switch name {
		case "fleetq":
			dir := filepath.Join(out, "tools", "fleetq")
			if err := BuildFleetq(ctx, dir); err != nil {
				return nil, err
			}
			commit := gitCommit()
			versions = append(versions, "fleetq "+commit+" (built binaries)")
			systems[name] = func() System {
				return &Fleetq{Knobs: o.Knobs, BinDir: dir, Commit: commit, LogLevel: o.FleetqLogLevel, Profile: o.Profile}
			}
		case "kueue":
			modDir, err := KueueModuleDir(ctx)
			if err != nil {
				return nil, err
			}
			binDir, err := lab.FindBinDir()
			if err != nil {
				return nil, err
			}
			bin := filepath.Join(binDir, "kueue")
			if err := lab.CheckBinaries(binDir, []string{"kueue"}); err != nil {
				return nil, fmt.Errorf("%w (build it with 'hack/tools/build.sh kueue' or 'make kueue')", err)
			}
			versions = append(versions, "Kueue "+KueueVersion+" (built from the module proxy, shipped configuration adapted to the lab)")
			rep.Meta.Notes = append(rep.Meta.Notes,
				"Kueue's MultiKueue builds its worker clients from the kubeconfig Secret with client-go's defaults (QPS 5, burst 10, one limiter per resource kind per worker); v0.17 has no setting for them, so the QPS/burst above apply to Kueue's own cluster clients only. fleetq's worker clients use the QPS/burst above (multiCluster.workerClientConnection).",
				"Kueue's webhooks: only those of its own kinds and batch/v1 Jobs are registered (the shipped no-op webhooks of disabled integrations, pods included, are left out, which can only make Kueue faster).")
			systems[name] = func() System { return &Kueue{Knobs: o.Knobs, Binary: bin, ModuleDir: modDir} }
		case DirectName:
			rep.Meta.Notes = append(rep.Meta.Notes,
				"direct is the lab's ceiling: the bench creates each job straight in a cluster that runs jobs, with its flavor's node selector and tolerations, spread over the node pools a job fits in proportion to their capacity, through load clients sharing one rate limiter; no queue, priority or preemption. fleetq / direct compares fleetq with it (throughput: ≤ 1, the closer the better; time figures: ≥ 1, the closer the better). It does not run chain or probe scenarios (no job waits for another).")
			systems[name] = func() System { return &Direct{} }
		default:
			return nil, fmt.Errorf("bench: unknown system %q (want fleetq, kueue or direct)", name)
		}
	}
	rep.Meta.Versions = versions
	for _, s := range scenarios {
		for run := 1; run <= o.Runs; run++ {
			for _, name := range o.Systems {
				if name == DirectName && (s.Chain > 0 || s.Probes > 0) {
					continue // no queue: no job waits for another
				}
				dir := filepath.Join(out, "runs", fmt.Sprintf("%s-%s-%d", s.Name, name, run))
				_ = os.RemoveAll(dir)
				res, err := Run(ctx, RunOptions{Scenario: s, System: systems[name](), Dir: dir, BinDir: binDir, LoadQPS: o.LoadQPS, LoadBurst: o.LoadBurst, KeepAudit: o.KeepAudit, Progress: o.Progress})
				if err != nil {
					return rep, fmt.Errorf("scenario %q, %s, run %d (logs in %s): %w", s.Name, name, run, dir, err)
				}
				rep.Results = append(rep.Results, res)
				if !res.Finished {
					rep.Meta.Notes = append(rep.Meta.Notes, fmt.Sprintf("%s run %d of %s did not finish every workload within %s (logs in %s)", name, run, s.Name, s.Timeout.Duration, dir))
				}
			}
		}
	}
	rep.Meta.Duration = time.Since(started).Round(time.Second).String()
	if err := rep.Write(out); err != nil {
		return rep, err
	}
	return rep, nil
}

func machine() Machine {
	m := Machine{Cores: runtime.NumCPU(), Go: runtime.Version()}
	if out, err := exec.Command("uname", "-srm").Output(); err == nil {
		m.Kernel = strings.TrimSpace(string(out))
	}
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				m.CPU = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb float64
		if _, err := fmt.Sscanf(string(data), "MemTotal: %f kB", &kb); err == nil {
			m.MemGiB = kb / (1 << 20)
		}
	}
	return m
}

func gitCommit() string {
	root, ok := lab.RepoRoot()
	if !ok {
		return "unknown"
	}
	cmd := exec.Command("git", "rev-parse", "--short", "HEAD")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}
