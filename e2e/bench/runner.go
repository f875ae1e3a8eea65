package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/ptr"

	"github.com/fleetq/fleetq/e2e/framework"
	"github.com/fleetq/fleetq/e2e/lab"
)

// User agents of the bench's own clients: neither system's role, so their requests count as "other".
const (
	loadUserAgent  = "fleetq-bench-load"
	watchUserAgent = "fleetq-bench-watch"
)

// RunOptions describe one run: one scenario, one system, a fresh lab.
type RunOptions struct {
	Scenario *Scenario
	System   System
	// Dir receives the lab (and its logs, audit logs included) and the system's files.
	Dir string
	// BinDir is the audited bin dir (PrepareBinDir).
	BinDir string
	// LoadQPS and LoadBurst size the bench's load client.
	LoadQPS   float32
	LoadBurst int
	// KeepAudit keeps the API servers' audit logs with the other logs (they are large).
	KeepAudit bool
	Progress  io.Writer
}

// ProfileDir is where a run of a Profiler keeps its manager's profiles, under the run's Dir.
const ProfileDir = "profile"

// ProcResult is one process's cost over the measured window.
type ProcResult struct {
	Name, Role, Cluster string
	CPUSeconds          float64
	PeakRSSMiB          float64
}

// RunResult is everything one run measured.
type RunResult struct {
	Scenario string
	System   string
	// Profile is the directory of the manager's profiles when it was profiled, ProfileError
	// why they are incomplete.
	Profile, ProfileError string
	Records               []Record
	// Start is the first submission; End when the last workload finished (or the timeout).
	Start, End time.Time
	// Finished says every workload finished before the timeout.
	Finished bool
	// Requests per cluster from apiserver_request_total over the window (all clients).
	Requests map[string]RequestCounts
	// Audit per cluster and client role over the window.
	Audit map[string]AuditCounts
	// Writes per cluster, role and verb+resource, to explain the totals.
	Writes map[string]ResourceWrites
	// Procs are the system's processes and each cluster's kube-apiserver.
	Procs []ProcResult
	// ChainGaps are issue 5's deletion → next unsuspension times (chain scenarios only).
	ChainGaps []time.Duration
	// LoadBefore and LoadAfter are the 1-minute load averages around the run.
	LoadBefore, LoadAfter float64
	// Capacity is the total of the scenario's main resource (GPUs, else CPUs), for utilisation.
	Capacity float64
	// Setup is how long the lab and the system took to come up.
	Setup time.Duration
	// SubmitSpan is how long creating the first wave took, from its first create call until its
	// last returned; BareSubmitSpan the same creates before the system was installed (0 when not
	// measured: see measuresSubmission).
	SubmitSpan, BareSubmitSpan time.Duration
	// Webhooks per cluster: admission webhook calls and the time the API server spent in them.
	Webhooks map[string]Webhooks
	// Scale are a probe scenario's figures (Scenario.Probes).
	Scale *ScaleResult
}

// PrepareBinDir makes the audited bin dir under dir (see auditedBinDir).
func PrepareBinDir(dir string) (string, error) { return auditedBinDir(dir) }

// clientConfig copies an admin configuration with the bench's user agent and limits.
func clientConfig(c framework.ClusterProxy, ua string, qps float32, burst int) *rest.Config {
	cfg := c.RESTConfig()
	cfg.UserAgent, cfg.QPS, cfg.Burst = ua, qps, burst
	return cfg
}

// Run brings up a lab for the scenario, installs the system, submits the load, waits until every
// workload finished, and collects the figures. The lab is torn down before it returns (its
// directory, with every log, stays).
func Run(ctx context.Context, o RunOptions) (res *RunResult, err error) {
	s := o.Scenario
	progress := func(format string, args ...any) {
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, "%s [%s/%s] %s\n", time.Now().Format("15:04:05"), s.Name, o.System.Name(), fmt.Sprintf(format, args...))
		}
	}
	res = &RunResult{Scenario: s.Name, System: o.System.Name(), LoadBefore: loadAverage(), Capacity: s.capacity()}
	setupStart := time.Now()
	crds, err := o.System.CRDs()
	if err != nil {
		return nil, err
	}
	spec := s.LabSpec()
	labDir := filepath.Join(o.Dir, "lab")
	progress("starting the lab in %s", labDir)
	env, err := framework.Setup(ctx, framework.Config{Provider: auditedProvider{binDir: o.BinDir}, Spec: &spec, Dir: labDir, CRDs: crds})
	if err != nil {
		return nil, err
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := o.System.Stop(sctx); err != nil {
			progress("stopping %s: %v", o.System.Name(), err)
		}
		keepLogs(env.Lab, filepath.Join(o.Dir, "logs"), o.KeepAudit)
		if err := env.Teardown(sctx); err != nil {
			progress("stopping the lab: %v", err)
		}
	}
	defer stop()

	if measuresSubmission(s, o.System) {
		bare, err := kubernetes.NewForConfig(clientConfig(env.Management(), loadUserAgent, o.LoadQPS, o.LoadBurst))
		if err != nil {
			return nil, err
		}
		if res.BareSubmitSpan, err = bareSubmit(ctx, bare, s); err != nil {
			return nil, err
		}
		progress("created the first wave's %d jobs with nothing installed in %s", s.Waves[0].Count, res.BareSubmitSpan.Round(10*time.Millisecond))
	}
	progress("installing %s", o.System.Version())
	if err := o.System.Install(ctx, env, s, o.Dir); err != nil {
		return nil, fmt.Errorf("install %s: %w", o.System.Name(), err)
	}
	res.Setup = time.Since(setupStart)

	runClusters := map[string]*rest.Config{}
	if s.Topology == SingleCluster {
		runClusters[ManagementCluster] = clientConfig(env.Management(), watchUserAgent, 1000, 2000)
	}
	for _, w := range s.Workers {
		runClusters[w.Name] = clientConfig(env.Cluster(w.Name), watchUserAgent, 1000, 2000)
	}
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	rec := NewRecorder()
	_, placed := o.System.(Placer)
	if err := rec.Watch(watchCtx, clientConfig(env.Management(), watchUserAgent, 1000, 2000), runClusters, placed); err != nil {
		return nil, err
	}

	before, err := snapshot(ctx, env, o.System)
	if err != nil {
		return nil, err
	}
	load, create, err := loadClients(env, s, o)
	if err != nil {
		return nil, err
	}
	total := s.Jobs(1)
	progress("submitting %d jobs (setup took %s)", total, res.Setup.Round(time.Second))
	res.Start = time.Now()
	runCtx, cancel := context.WithTimeout(ctx, s.Timeout.Duration)
	defer cancel()
	genErr := make(chan error, 1)
	var spans []time.Duration
	go func() {
		var err error
		spans, err = generate(runCtx, create, s, rec, res.Start)
		genErr <- err
	}()
	prof, err := profileSystem(ctx, o.System, filepath.Join(o.Dir, ProfileDir))
	if err != nil {
		return nil, err
	}
	defer prof.abandon()

	switch {
	case s.Chain > 0:
		res.ChainGaps, err = chain(runCtx, load, rec, s.Chain, o.System.Processes())
		res.Finished = err == nil
		if err != nil {
			progress("chain: %v", err)
		}
	case s.Probes > 0:
		res.Scale, err = settle(runCtx, rec, total, settleQuiet, o.System.Processes(), progress)
		if err == nil {
			progress("settled: %d reserved, %d pending; probing %d queues", res.Scale.Reserved, res.Scale.Pending, s.Probes-1)
			err = warmProbes(runCtx, load, rec, s, res.Scale)
		}
		res.Finished = err == nil
		if err != nil {
			progress("scale: %v", err)
		}
	default:
		res.Finished = waitFinished(runCtx, rec, total, o.System.Processes(), progress) == nil
	}
	res.End = time.Now()
	if err := <-genErr; err != nil {
		return nil, err
	}
	res.SubmitSpan = spans[0]
	if prof != nil {
		// A profile that could not be taken costs the figure, not the run's other figures.
		if err := prof.finish(); err != nil {
			res.ProfileError = err.Error()
			progress("profile: %v", err)
		}
		res.Profile = filepath.Join(o.Dir, ProfileDir)
	}
	// A run that timed out is still measured: the figures say how far it got.
	afterCtx, cancelAfter := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancelAfter()
	after, err := snapshot(afterCtx, env, o.System)
	if err != nil {
		return nil, err
	}
	if r, ok := o.System.(Restarter); ok && res.Scale != nil && res.Finished {
		// After the window's snapshot: the figures above are the first process's.
		progress("restarting the manager")
		restartCtx, cancelRestart := context.WithTimeout(context.WithoutCancel(ctx), stopGrace+2*probeTimeout)
		defer cancelRestart()
		// The restart is profiled on its own (profile/restart): the window's profile ended above.
		rprof, err := profileSystem(restartCtx, o.System, filepath.Join(o.Dir, ProfileDir, "restart"))
		if err != nil {
			return nil, err
		}
		defer rprof.abandon()
		if err := restartProbe(restartCtx, r, load, rec, s, res.Scale); err != nil {
			return nil, err
		}
		if err := rprof.finish(); err != nil {
			progress("restart profile: %v", err)
		}
		st, err := readProcStat(o.System.Processes()[0].PID)
		if err != nil {
			return nil, err
		}
		res.Scale.RestartPeakRSSMiB = st.PeakRSSMiB
		progress("restart → first admission %s", res.Scale.Restart.Round(10*time.Millisecond))
	}
	stopWatch()
	res.Records = withoutProbes(s, rec.Records())
	res.Requests, res.Webhooks = map[string]RequestCounts{}, map[string]Webhooks{}
	for name, m := range after.metrics {
		res.Requests[name] = m.Requests.Minus(before.metrics[name].Requests)
		res.Webhooks[name] = m.Webhooks.Minus(before.metrics[name].Webhooks)
	}
	for key, a := range after.procs {
		b := before.procs[key]
		a.CPUSeconds -= b.CPUSeconds
		res.Procs = append(res.Procs, a)
	}
	sort.Slice(res.Procs, func(i, j int) bool {
		return res.Procs[i].Cluster+res.Procs[i].Name < res.Procs[j].Cluster+res.Procs[j].Name
	})
	res.LoadAfter = loadAverage()

	// The lab removes its directory when it stops: read the audit logs first, keep the other logs.
	res.Audit, res.Writes = map[string]AuditCounts{}, map[string]ResourceWrites{}
	for _, c := range env.Clusters() {
		role := c.Role()
		counts, writes, err := readAudit(auditLog(env.Lab, c.Name()), res.Start, res.End, func(ua string) string { return o.System.Role(role, ua) })
		if err != nil {
			return nil, err
		}
		res.Audit[c.Name()], res.Writes[c.Name()] = counts, writes
	}
	stop()
	done := 0
	for _, r := range res.Records {
		if !r.Finished.IsZero() {
			done++
		}
	}
	progress("done: %d/%d finished in %s", done, total, res.End.Sub(res.Start).Round(100*time.Millisecond))
	return res, nil
}

// loadClients are the bench's load client of the management cluster and how jobs are created: on
// the management cluster, or, for a Placer, in each job's cluster through clients that share one
// rate limiter (the same load budget as one client).
func loadClients(env *framework.Environment, s *Scenario, o RunOptions) (kubernetes.Interface, creator, error) {
	load, err := kubernetes.NewForConfig(clientConfig(env.Management(), loadUserAgent, o.LoadQPS, o.LoadBurst))
	if err != nil {
		return nil, nil, err
	}
	p, ok := o.System.(Placer)
	if !ok {
		return load, createIn(load), nil
	}
	if s.Chain > 0 {
		return nil, nil, fmt.Errorf("%s cannot run chain scenario %q: with no queue, no job waits for the one deleted", o.System.Name(), s.Name)
	}
	if s.Probes > 0 {
		return nil, nil, fmt.Errorf("%s cannot run probe scenario %q: with no queue, no job waits behind the others", o.System.Name(), s.Name)
	}
	limiter := flowcontrol.NewTokenBucketRateLimiter(o.LoadQPS, o.LoadBurst)
	clients := map[string]kubernetes.Interface{}
	for _, name := range runClusterNames(s) {
		cfg := clientConfig(env.Cluster(name), loadUserAgent, o.LoadQPS, o.LoadBurst)
		cfg.RateLimiter = limiter
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return nil, nil, err
		}
		clients[name] = cs
	}
	return load, placedCreator(p, clients), nil
}

// snapshotData is what is read before and after the window.
type snapshotData struct {
	metrics map[string]APIMetrics
	procs   map[string]ProcResult
}

func snapshot(ctx context.Context, env *framework.Environment, sys System) (*snapshotData, error) {
	out := &snapshotData{metrics: map[string]APIMetrics{}, procs: map[string]ProcResult{}}
	for _, c := range env.Clusters() {
		cs, err := kubernetes.NewForConfig(clientConfig(c, watchUserAgent, 1000, 2000))
		if err != nil {
			return nil, err
		}
		m, err := ScrapeMetrics(ctx, cs)
		if err != nil {
			return nil, fmt.Errorf("cluster %q: %w", c.Name(), err)
		}
		out.metrics[c.Name()] = m
	}
	add := func(name, role, cluster string, pid int) error {
		st, err := readProcStat(pid)
		if err != nil {
			return fmt.Errorf("%s in %s: %w", name, cluster, err)
		}
		out.procs[cluster+"/"+name] = ProcResult{Name: name, Role: role, Cluster: cluster, CPUSeconds: st.CPUSeconds, PeakRSSMiB: st.PeakRSSMiB}
		return nil
	}
	for _, p := range sys.Processes() {
		if err := add(p.proc.State.Name, p.Role, p.Cluster, p.PID); err != nil {
			return nil, err
		}
	}
	state, err := lab.ReadState(env.Lab.Dir())
	if err != nil {
		return nil, err
	}
	for _, c := range state.Clusters {
		for _, p := range c.Processes {
			if p.Name == lab.KubeAPIServer {
				if err := add(p.Name, "apiserver", c.Name, p.PID); err != nil {
					return nil, err
				}
			}
		}
	}
	return out, nil
}

// waitFinished waits until every expected workload finished, reporting progress every 10 s.
func waitFinished(ctx context.Context, rec *Recorder, total int, procs []Proc, progress func(string, ...any)) error {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	lastReport := time.Now()
	for {
		finished := rec.Count(func(r *Record) bool { return !r.Finished.IsZero() })
		if finished == total {
			return nil
		}
		if err := checkRunning(procs); err != nil {
			return err
		}
		if time.Since(lastReport) > 10*time.Second {
			lastReport = time.Now()
			admitted := rec.Count(func(r *Record) bool { return !r.Admitted.IsZero() })
			running := rec.Count(func(r *Record) bool { return !r.Running.IsZero() })
			progress("admitted %d, running %d, finished %d of %d", admitted, running, finished, total)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d workloads finished: %w", finished, total, ctx.Err())
		case <-tick.C:
		}
	}
}

// chain measures issue 5's figure: with quota for one job, delete the running job and time until the
// management cluster's next Job is unsuspended, n times.
func chain(ctx context.Context, cs kubernetes.Interface, rec *Recorder, n int, procs []Proc) ([]time.Duration, error) {
	var gaps []time.Duration
	deleted := map[string]bool{}
	running := func(after time.Time) (string, time.Time, bool) {
		var key string
		var at time.Time
		rec.mu.Lock()
		defer rec.mu.Unlock()
		for k, r := range rec.records {
			if !deleted[k] && !r.Unsuspended.IsZero() && r.Unsuspended.After(after) {
				key, at = k, r.Unsuspended
			}
		}
		return key, at, key != ""
	}
	waitRunning := func(after time.Time) (string, time.Time, error) {
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			if k, at, ok := running(after); ok {
				return k, at, nil
			}
			if err := checkRunning(procs); err != nil {
				return "", time.Time{}, err
			}
			select {
			case <-ctx.Done():
				return "", time.Time{}, fmt.Errorf("no job unsuspended: %w", ctx.Err())
			case <-tick.C:
			}
		}
	}
	cur, _, err := waitRunning(time.Time{})
	if err != nil {
		return nil, err
	}
	for range n {
		ns, name, _ := strings.Cut(cur, "/")
		deleted[cur] = true
		t0 := time.Now()
		if err := cs.BatchV1().Jobs(ns).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}); err != nil {
			return gaps, fmt.Errorf("delete job %s: %w", cur, err)
		}
		next, at, err := waitRunning(t0)
		if err != nil {
			return gaps, err
		}
		gaps = append(gaps, at.Sub(t0))
		cur = next
	}
	return gaps, nil
}

// loadAverage is the 1-minute load average (0 when unreadable).
func loadAverage() float64 {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	var l float64
	_, _ = fmt.Sscanf(string(data), "%f", &l)
	return l
}

// keepLogs copies every cluster's logs (control plane and system) into dir before the lab removes
// them; audit logs only when asked.
func keepLogs(l lab.Lab, dir string, audit bool) {
	logs, _ := filepath.Glob(filepath.Join(l.Dir(), "*", "logs", "*.log"))
	for _, src := range logs {
		if filepath.Base(src) == "audit.log" && !audit {
			continue
		}
		cluster := filepath.Base(filepath.Dir(filepath.Dir(src)))
		dst := filepath.Join(dir, cluster, filepath.Base(src))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			continue
		}
		_ = os.Rename(src, dst)
	}
}
