// Package local is the lab's default provider: each cluster is etcd, kube-apiserver and (in full mode)
// kube-controller-manager, kube-scheduler and kwok, run as local processes on 127.0.0.1 from the pinned
// binaries `make tools` builds. No container runtime and no image is needed.
package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/hashicorp/go-multierror"

	"github.com/fleetq/fleetq/e2e/lab"
	"github.com/fleetq/fleetq/e2e/lab/process"
)

// ProviderName is the local provider's name in state files and on the command line.
const ProviderName = "local"

// Provider starts labs as local processes.
type Provider struct{}

var _ lab.Provider = Provider{}

// New returns the local provider.
func New() Provider { return Provider{} }

// Name implements lab.Provider.
func (Provider) Name() string { return ProviderName }

// localLab is a running local lab.
type localLab struct {
	dir      string
	binDir   string
	owned    bool
	clusters []*cluster

	// mu guards state and serializes writes of the state file.
	mu    sync.Mutex
	state *lab.State

	start time.Time
	outMu sync.Mutex
	out   io.Writer
}

var _ lab.Lab = (*localLab)(nil)

// Up implements lab.Provider: it starts every cluster in parallel and returns when all are ready. On
// failure it stops what it started and returns an error per failed cluster, each naming the process
// and quoting its log; the state file stays so `fleetq-lab down` can remove the files.
func (Provider) Up(ctx context.Context, spec lab.Spec, opts lab.UpOptions) (lab.Lab, error) {
	spec.Default()
	if err := spec.Validate(); err != nil {
		return nil, fmt.Errorf("lab spec: %w", err)
	}
	binDir := opts.BinDir
	if binDir == "" {
		var err error
		if binDir, err = lab.FindBinDir(); err != nil {
			return nil, err
		}
	}
	if err := lab.CheckBinaries(binDir, neededBinaries(spec)); err != nil {
		return nil, err
	}
	for _, cs := range spec.Clusters() {
		if cs.APIServerPort != 0 {
			if err := CheckPortFree(cs.APIServerPort); err != nil {
				return nil, fmt.Errorf("cluster %q: API server: %w; choose another port or 0 for a free one", cs.Name, err)
			}
		}
	}
	l := &localLab{
		dir: opts.Dir, binDir: binDir, owned: opts.Owned, start: time.Now(), out: opts.ProgressWriter(),
		state: &lab.State{Provider: ProviderName, Dir: opts.Dir, Owner: os.Getpid(), Owned: opts.Owned, Spec: spec},
	}
	var pp portPicker
	for _, cs := range spec.Clusters() {
		c := l.newCluster(cs, spec.RoleOf(cs.Name))
		if err := c.prepare(&spec); err != nil {
			pp.release()
			return nil, err
		}
		var err error
		if c.etcdPort, err = pp.pick(); err == nil {
			if c.peerPort, err = pp.pick(); err == nil {
				c.apiPort = cs.APIServerPort
				if c.apiPort == 0 {
					c.apiPort, err = pp.pick()
				}
			}
		}
		if err != nil {
			pp.release()
			return nil, fmt.Errorf("cluster %q: %w", cs.Name, err)
		}
	}
	pp.release()
	l.save()
	l.progress("", "starting %d clusters (%s mode) in %s", len(l.clusters), spec.Mode, opts.Dir)

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, len(l.clusters))
	var wg sync.WaitGroup
	for i, c := range l.clusters {
		wg.Go(func() {
			if err := c.start(runCtx); err != nil {
				errs[i] = err
				cancel() // one failed cluster fails the lab; do not make the others finish
			}
		})
	}
	wg.Wait()
	var result *multierror.Error
	for _, err := range errs {
		// Clusters cancelled because another failed only repeat that failure.
		if err != nil && !errors.Is(err, context.Canceled) {
			result = multierror.Append(result, err)
		}
	}
	err := result.ErrorOrNil()
	if err == nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	if err != nil {
		stopCtx, stopCancel := context.WithTimeout(context.Background(), time.Minute)
		defer stopCancel()
		_ = l.stopAll(stopCtx)
		return nil, fmt.Errorf("lab %s did not start: %w", opts.Dir, err)
	}
	l.progress("", "lab up: %d clusters in %s", len(l.clusters), time.Since(l.start).Round(100*time.Millisecond))
	return l, nil
}

// Open implements lab.Provider: it rebuilds the lab from its state file. Processes it restarts (for
// RestartAPIServer) are not tied to the calling process.
func (Provider) Open(_ context.Context, state *lab.State) (lab.Lab, error) {
	if state.Provider != ProviderName {
		return nil, fmt.Errorf("lab %s: a %s lab, not %s", state.Dir, state.Provider, ProviderName)
	}
	l := &localLab{dir: state.Dir, state: state, start: time.Now(), out: io.Discard}
	for _, cs := range state.Spec.Clusters() {
		c := l.newCluster(cs, state.Spec.RoleOf(cs.Name))
		st, ok := state.Cluster(cs.Name)
		if !ok {
			return nil, fmt.Errorf("lab %s: state has no cluster %q", state.Dir, cs.Name)
		}
		c.server, c.kubeconfig = st.Server, st.Kubeconfig
		for _, ps := range st.Processes {
			p := c.proc(ps.Name)
			p.State = ps
			if len(ps.Args) > 0 && l.binDir == "" {
				l.binDir = filepath.Dir(ps.Args[0])
			}
		}
	}
	return l, nil
}

func (l *localLab) newCluster(cs lab.ClusterSpec, role lab.Role) *cluster {
	c := &cluster{lab: l, spec: cs, role: role, dir: filepath.Join(l.dir, cs.Name), procs: map[string]*process.Process{}}
	l.clusters = append(l.clusters, c)
	return c
}

func (l *localLab) Dir() string    { return l.dir }
func (l *localLab) Spec() lab.Spec { return l.state.Spec }

func (l *localLab) Clusters() []lab.Cluster {
	out := make([]lab.Cluster, len(l.clusters))
	for i, c := range l.clusters {
		out[i] = c
	}
	return out
}

// Check implements lab.Lab.
func (l *localLab) Check(ctx context.Context) error {
	for _, c := range l.clusters {
		if err := c.check(ctx); err != nil {
			return err
		}
	}
	return nil
}

// Down implements lab.Lab: it stops every process and removes the clusters' directories and the state
// file.
func (l *localLab) Down(ctx context.Context) error {
	if err := l.stopAll(ctx); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return lab.RemoveState(l.dir, l.state)
}

func (l *localLab) stopAll(ctx context.Context) error {
	var wg sync.WaitGroup
	errs := make([]error, len(l.clusters))
	for i, c := range l.clusters {
		wg.Go(func() { errs[i] = c.stopAll(ctx) })
	}
	wg.Wait()
	var result *multierror.Error
	for _, err := range errs {
		if err != nil {
			result = multierror.Append(result, err)
		}
	}
	return result.ErrorOrNil()
}

// save writes the state file from every cluster's current processes; only for moments when no
// cluster is starting or stopping.
func (l *localLab) save() {
	for _, c := range l.clusters {
		c.save()
	}
}

// store records one cluster's state and rewrites the state file, so a crash at any point leaves a file
// that leads `fleetq-lab down` to everything that runs.
func (l *localLab) store(cs lab.ClusterState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range l.state.Clusters {
		if l.state.Clusters[i].Name == cs.Name {
			l.state.Clusters[i] = cs
			if err := lab.WriteState(l.dir, l.state); err != nil {
				l.progress("", "warning: %v", err)
			}
			return
		}
	}
	l.state.Clusters = append(l.state.Clusters, cs)
	if err := lab.WriteState(l.dir, l.state); err != nil {
		l.progress("", "warning: %v", err)
	}
}

// progress prints one line: elapsed time, cluster, message.
func (l *localLab) progress(cluster, format string, args ...any) {
	l.outMu.Lock()
	defer l.outMu.Unlock()
	if cluster == "" {
		cluster = "lab"
	}
	fmt.Fprintf(l.out, "[%5.1fs] %-12s %s\n", time.Since(l.start).Seconds(), cluster, fmt.Sprintf(format, args...))
}

func neededBinaries(spec lab.Spec) []string {
	set := map[string]bool{}
	for _, c := range spec.Clusters() {
		for _, b := range lab.BinariesFor(c.Mode) {
			set[b] = true
		}
		for _, o := range c.Operators {
			set[o.Binary()] = true
		}
	}
	var out []string
	for b := range set {
		out = append(out, b)
	}
	sort.Strings(out)
	return out
}
