// Package framework is the harness of fleetq's integration and e2e suites: it starts a lab once per
// suite, installs the CRDs, runs fleetq's components against its clusters (in-process or as built
// binaries with captured logs), and gives specs a provider-independent view of each cluster, so the
// same spec runs on the local lab and on kind (Cluster API's e2e style: specs are functions taking an
// input struct).
package framework

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/fleetq/fleetq/e2e/lab"
	"github.com/fleetq/fleetq/e2e/lab/local"
)

// Config says what lab a suite needs.
type Config struct {
	// Provider runs the clusters; default the local provider.
	Provider lab.Provider
	// Spec describes the clusters; default lab.DefaultSpec(2) (management, us-east, eu-west).
	Spec *lab.Spec
	// Dir is the lab directory; default a new temporary directory, removed by Teardown.
	Dir string
	// Reuse, with Dir, uses a lab already running there with the same spec (started by `fleetq-lab up`)
	// and leaves it running at Teardown: fast iteration on a suite. Without one, a lab is started.
	Reuse bool
	// CRDs are installed on every cluster; CRDDir adds the CRD manifests of a directory.
	CRDs   []*apiextensionsv1.CustomResourceDefinition
	CRDDir string
	// Progress receives the lab's startup lines; default discarded. Suites pass GinkgoWriter.
	Progress io.Writer
}

// Environment is a suite's running lab with its components.
type Environment struct {
	// Lab is the running lab.
	Lab lab.Lab

	provider lab.Provider
	clusters []*clusterProxy
	byName   map[string]*clusterProxy
	// owned labs were started by Setup and are stopped by Teardown.
	owned  bool
	tmpDir string

	mu         sync.Mutex
	components []*Component
}

// Setup starts (or, with Reuse, finds) the lab and installs the CRDs on every cluster. Labs it starts
// die with the test process (Pdeathsig), so a crashed or timed-out suite leaves no process behind.
func Setup(ctx context.Context, cfg Config) (*Environment, error) {
	if cfg.Provider == nil {
		cfg.Provider = local.New()
	}
	spec := lab.DefaultSpec(2)
	if cfg.Spec != nil {
		spec = *cfg.Spec
	}
	spec.Default()
	e := &Environment{provider: cfg.Provider, byName: map[string]*clusterProxy{}}
	dir := cfg.Dir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "fleetq-lab-")
		if err != nil {
			return nil, fmt.Errorf("lab dir: %w", err)
		}
		dir, e.tmpDir = tmp, tmp
	}
	var err error
	if cfg.Reuse {
		e.Lab, err = reuse(ctx, cfg.Provider, spec, dir)
		if err != nil {
			return nil, err
		}
	}
	if e.Lab == nil {
		var started bool
		e.Lab, started, err = lab.Up(ctx, cfg.Provider, spec, lab.UpOptions{Dir: dir, Owned: !cfg.Reuse, Progress: cfg.Progress})
		if err != nil {
			e.removeTmp()
			return nil, err
		}
		e.owned = started && !cfg.Reuse
	}
	for _, c := range e.Lab.Clusters() {
		p, err := newClusterProxy(c)
		if err != nil {
			_ = e.Teardown(ctx)
			return nil, err
		}
		e.clusters = append(e.clusters, p)
		e.byName[c.Name()] = p
	}
	crds := cfg.CRDs
	if cfg.CRDDir != "" {
		fromDir, err := LoadCRDs(cfg.CRDDir)
		if err != nil {
			_ = e.Teardown(ctx)
			return nil, err
		}
		crds = append(crds, fromDir...)
	}
	if len(crds) > 0 {
		if err := e.installCRDs(ctx, crds); err != nil {
			_ = e.Teardown(ctx)
			return nil, err
		}
	}
	return e, nil
}

// reuse returns the lab running in dir when it has spec and is healthy, nil when there is none.
func reuse(ctx context.Context, p lab.Provider, spec lab.Spec, dir string) (lab.Lab, error) {
	state, err := lab.ReadState(dir)
	if errors.Is(err, lab.ErrNoLab) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if state.Spec.String() != spec.String() {
		return nil, fmt.Errorf("lab dir %s: the running lab has another spec than the suite needs; run 'fleetq-lab down' or use another dir", dir)
	}
	l, err := p.Open(ctx, state)
	if err != nil {
		return nil, err
	}
	if err := l.Check(ctx); err != nil {
		return nil, fmt.Errorf("lab dir %s: the running lab is unhealthy: %w", dir, err)
	}
	return l, nil
}

func (e *Environment) installCRDs(ctx context.Context, crds []*apiextensionsv1.CustomResourceDefinition) error {
	var wg sync.WaitGroup
	errs := make([]error, len(e.clusters))
	for i, c := range e.clusters {
		wg.Go(func() { errs[i] = InstallCRDs(ctx, c, crds) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Management is the management cluster.
func (e *Environment) Management() ClusterProxy { return e.clusters[0] }

// Workers are the worker clusters in spec order.
func (e *Environment) Workers() []ClusterProxy {
	out := make([]ClusterProxy, 0, len(e.clusters)-1)
	for _, c := range e.clusters[1:] {
		out = append(out, c)
	}
	return out
}

// Clusters lists every cluster, management first.
func (e *Environment) Clusters() []ClusterProxy {
	out := make([]ClusterProxy, len(e.clusters))
	for i, c := range e.clusters {
		out[i] = c
	}
	return out
}

// Cluster returns the named cluster; it panics on an unknown name, which is a bug in the suite.
func (e *Environment) Cluster(name string) ClusterProxy {
	c, ok := e.byName[name]
	if !ok {
		panic(fmt.Sprintf("framework: no cluster %q in the lab", name))
	}
	return c
}

// Owned says whether Teardown stops the lab (false when the suite reused a running one).
func (e *Environment) Owned() bool { return e.owned }

// Down stops the lab now, whoever started it, the way `fleetq-lab down` does: through the state file.
func (e *Environment) Down(ctx context.Context) error {
	e.stopComponents(ctx)
	_, err := lab.Down(ctx, lab.Providers{e.provider.Name(): e.provider}, e.Lab.Dir())
	e.removeTmp()
	return err
}

// Teardown stops the components, then the lab if Setup started it.
func (e *Environment) Teardown(ctx context.Context) error {
	e.stopComponents(ctx)
	if !e.owned || e.Lab == nil {
		return nil
	}
	_, err := lab.Down(ctx, lab.Providers{e.provider.Name(): e.provider}, e.Lab.Dir())
	e.removeTmp()
	return err
}

func (e *Environment) removeTmp() {
	if e.tmpDir != "" {
		_ = os.RemoveAll(e.tmpDir)
	}
}

func (e *Environment) stopComponents(ctx context.Context) {
	e.mu.Lock()
	comps := e.components
	e.components = nil
	e.mu.Unlock()
	for i := len(comps) - 1; i >= 0; i-- {
		_ = comps[i].Stop(ctx)
	}
}

// DumpLogs writes the last lines of every log in the lab directory (control plane and components),
// for a suite that failed.
func (e *Environment) DumpLogs(w io.Writer, lines int) {
	if e.Lab == nil {
		return
	}
	logs, _ := filepath.Glob(filepath.Join(e.Lab.Dir(), "*", "logs", "*.log"))
	for _, l := range logs {
		fmt.Fprintf(w, "---- %s\n%s\n", l, tailFile(l, lines))
	}
}

// SaveLogs copies every log of the lab (control plane, kwok, fleetq's binaries) into dir as
// <cluster>-<name>.log, so a failed run can be read after the lab is torn down.
func (e *Environment) SaveLogs(dir string) error {
	if e.Lab == nil {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	logs, _ := filepath.Glob(filepath.Join(e.Lab.Dir(), "*", "logs", "*.log"))
	for _, l := range logs {
		cluster := filepath.Base(filepath.Dir(filepath.Dir(l)))
		data, err := os.ReadFile(l)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, cluster+"-"+filepath.Base(l)), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// pollInterval is how often the harness's own waits look again.
const pollInterval = 200 * time.Millisecond
