package lab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"
)

// File names at the top of a lab directory.
const (
	// StateFile records what runs, so `fleetq-lab down` in another process can stop a lab whose
	// creator exited or crashed.
	StateFile = "lab.json"
	// MarkerFile says the directory belongs to a lab, so the lab never deletes a directory it did not
	// create; it is also the lock that keeps two `up`s from starting at once.
	MarkerFile = ".fleetq-lab"
	// stateVersion changes when State changes incompatibly.
	stateVersion = 1
)

// ErrNoLab is returned when a directory holds no running lab.
var ErrNoLab = errors.New("no lab")

// State is the lab's state file: enough to find, use and stop every process of the lab.
type State struct {
	Version  int    `json:"version"`
	Provider string `json:"provider"`
	Dir      string `json:"dir"`
	// Owner is the process that started the lab; Owned says its processes die with it.
	Owner int  `json:"owner"`
	Owned bool `json:"owned,omitempty"`
	// Spec is the defaulted spec the lab was started from.
	Spec     Spec           `json:"spec"`
	Clusters []ClusterState `json:"clusters"`
}

// ClusterState is one cluster of the state file.
type ClusterState struct {
	Name       string `json:"name"`
	Server     string `json:"server,omitempty"`
	Kubeconfig string `json:"kubeconfig,omitempty"`
	// Processes are the local provider's processes, in start order, then those RecordProcess added
	// (fleetq's manager and agents that `make demo` runs against the lab).
	Processes []ProcessState `json:"processes,omitempty"`
	// KindCluster is the kind provider's cluster name.
	KindCluster string `json:"kindCluster,omitempty"`
}

// ProcessState identifies one process well enough to signal it safely from another process and to
// start it again the same way.
type ProcessState struct {
	Name string `json:"name"`
	PID  int    `json:"pid"`
	// StartTime is the process's start time in clock ticks since boot (/proc/<pid>/stat field 22):
	// together with the pid it tells our process from an unrelated one that reused the pid.
	StartTime uint64   `json:"startTime"`
	Args      []string `json:"args"`
	Env       []string `json:"env,omitempty"`
	Log       string   `json:"log"`
	// Ports are the loopback ports the process listens on.
	Ports []int `json:"ports,omitempty"`
}

// Cluster returns the state of the named cluster.
func (s *State) Cluster(name string) (*ClusterState, bool) {
	for i := range s.Clusters {
		if s.Clusters[i].Name == name {
			return &s.Clusters[i], true
		}
	}
	return nil, false
}

// ReadState loads dir's state file; a directory without one gives ErrNoLab.
func ReadState(dir string) (*State, error) {
	data, err := os.ReadFile(filepath.Join(dir, StateFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("lab dir %s: %w", dir, ErrNoLab)
	}
	if err != nil {
		return nil, fmt.Errorf("lab dir %s: read state: %w", dir, err)
	}
	var s State
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("lab dir %s: state file %s is corrupt (remove it and stop the lab's processes by hand): %w",
			dir, StateFile, err)
	}
	if s.Version != stateVersion {
		return nil, fmt.Errorf("lab dir %s: state file version %d, this fleetq-lab understands %d", dir, s.Version, stateVersion)
	}
	return &s, nil
}

// WriteState replaces dir's state file atomically, so a crash mid-write never leaves half a file.
func WriteState(dir string, s *State) error {
	s.Version = stateVersion
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("lab dir %s: encode state: %w", dir, err)
	}
	tmp, err := os.CreateTemp(dir, StateFile+".*")
	if err != nil {
		return fmt.Errorf("lab dir %s: write state: %w", dir, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(data, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("lab dir %s: write state: %w", dir, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("lab dir %s: write state: %w", dir, err)
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, StateFile)); err != nil {
		return fmt.Errorf("lab dir %s: write state: %w", dir, err)
	}
	return nil
}

// RemoveState deletes dir's state file and every cluster directory it lists, leaving the marker.
func RemoveState(dir string, s *State) error {
	var errs []error
	for _, c := range s.Clusters {
		if err := os.RemoveAll(filepath.Join(dir, c.Name)); err != nil {
			errs = append(errs, fmt.Errorf("cluster %q: remove %s: %w", c.Name, filepath.Join(dir, c.Name), err))
		}
	}
	if err := os.Remove(filepath.Join(dir, StateFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// PrepareDir makes dir usable for a lab: it creates it if missing, and refuses a path that is not a
// directory, is not writable, or holds files of something other than a lab.
func PrepareDir(dir string) error {
	info, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("lab dir %s: cannot create it: %w", dir, err)
		}
	case err != nil:
		return fmt.Errorf("lab dir %s: %w", dir, err)
	case !info.IsDir():
		return fmt.Errorf("lab dir %s: not a directory", dir)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("lab dir %s: %w", dir, err)
	}
	if len(entries) > 0 && !hasFile(filepath.Join(dir, MarkerFile)) {
		return fmt.Errorf("lab dir %s: holds files but no lab (no %s); use an empty or new directory", dir, MarkerFile)
	}
	f, err := os.OpenFile(filepath.Join(dir, MarkerFile), os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("lab dir %s: not writable: %w", dir, err)
	}
	return f.Close()
}

// lockDir takes the lab directory's lock, waiting for another `up` or `down` to finish.
func lockDir(ctx context.Context, dir string) (unlock func(), err error) {
	f, err := os.OpenFile(filepath.Join(dir, MarkerFile), os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("lab dir %s: lock: %w", dir, err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lab dir %s: lock: %w", dir, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("lab dir %s: another fleetq-lab holds the lock: %w", dir, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Providers maps provider names to providers, so a lab's state file leads to the code that stops it.
type Providers map[string]Provider

// Get returns the named provider.
func (ps Providers) Get(name string) (Provider, error) {
	if p, ok := ps[name]; ok {
		return p, nil
	}
	var names []string
	for n := range ps {
		names = append(names, n)
	}
	return nil, fmt.Errorf("unknown lab provider %q (known: %v)", name, names)
}

// Up starts the lab spec describes in opts.Dir with p, or returns the lab already running there with
// started=false: running it twice never starts twice. A lab left half-running by a crash is stopped and
// started afresh.
func Up(ctx context.Context, p Provider, spec Spec, opts UpOptions) (l Lab, started bool, err error) {
	spec.Default()
	if err := spec.Validate(); err != nil {
		return nil, false, fmt.Errorf("lab spec: %w", err)
	}
	if err := PrepareDir(opts.Dir); err != nil {
		return nil, false, err
	}
	unlock, err := lockDir(ctx, opts.Dir)
	if err != nil {
		return nil, false, err
	}
	defer unlock()
	progress := opts.ProgressWriter()

	state, err := ReadState(opts.Dir)
	switch {
	case errors.Is(err, ErrNoLab):
	case err != nil:
		return nil, false, err
	default:
		if state.Provider != p.Name() {
			return nil, false, fmt.Errorf("lab dir %s: a %s lab runs there; run 'fleetq-lab down' first", opts.Dir, state.Provider)
		}
		running, err := p.Open(ctx, state)
		if err != nil {
			return nil, false, err
		}
		checkErr := running.Check(ctx)
		if checkErr == nil {
			if state.Spec.String() != spec.String() {
				return nil, false, fmt.Errorf("lab dir %s: a lab with another spec (clusters %v) runs there; run 'fleetq-lab down' first",
					opts.Dir, clusterNames(state.Spec))
			}
			fmt.Fprintf(progress, "lab already up in %s\n", opts.Dir)
			return running, false, nil
		}
		fmt.Fprintf(progress, "stopping the stale lab in %s (%v)\n", opts.Dir, checkErr)
		if err := running.Down(ctx); err != nil {
			return nil, false, fmt.Errorf("lab dir %s: stop stale lab: %w", opts.Dir, err)
		}
	}
	l, err = p.Up(ctx, spec, opts)
	if err != nil {
		return nil, false, err
	}
	return l, true, nil
}

// Open reattaches to the lab running in dir; a directory without one gives ErrNoLab.
func Open(ctx context.Context, ps Providers, dir string) (Lab, error) {
	state, err := ReadState(dir)
	if err != nil {
		return nil, err
	}
	p, err := ps.Get(state.Provider)
	if err != nil {
		return nil, fmt.Errorf("lab dir %s: %w", dir, err)
	}
	return p.Open(ctx, state)
}

// Down stops the lab in dir and removes the directory's lab files (and the directory when nothing else
// is left). It reports stopped=false when there was no lab; a second Down is harmless.
func Down(ctx context.Context, ps Providers, dir string) (stopped bool, err error) {
	if !hasFile(filepath.Join(dir, MarkerFile)) {
		if _, err := os.Stat(filepath.Join(dir, StateFile)); err == nil {
			return false, fmt.Errorf("lab dir %s: has %s but no %s; not touching it", dir, StateFile, MarkerFile)
		}
		return false, nil
	}
	unlock, err := lockDir(ctx, dir)
	if err != nil {
		return false, err
	}
	defer unlock()
	l, err := Open(ctx, ps, dir)
	switch {
	case errors.Is(err, ErrNoLab):
	case err != nil:
		return false, err
	default:
		if err := l.Down(ctx); err != nil {
			return true, err
		}
		stopped = true
	}
	// The marker goes last, and the directory only if nothing but it is left.
	entries, err := os.ReadDir(dir)
	if err == nil && len(entries) == 1 && entries[0].Name() == MarkerFile {
		_ = os.Remove(filepath.Join(dir, MarkerFile))
		_ = os.Remove(dir)
	}
	return stopped, nil
}

func clusterNames(s Spec) []string {
	var names []string
	for _, c := range s.Clusters() {
		names = append(names, c.Name)
	}
	return names
}

// RecordProcess adds ps to cluster's processes in dir's state file, replacing a process of the same
// name. The local provider treats recorded processes as the cluster's own: `fleetq-lab down` stops
// them (before their cluster's control plane) and Check reports them when they die. `make demo`
// records the fleetq-manager and fleetq-agent processes it leaves running this way.
func RecordProcess(ctx context.Context, dir, cluster string, ps ProcessState) error {
	return editCluster(ctx, dir, cluster, func(c *ClusterState) {
		for i := range c.Processes {
			if c.Processes[i].Name == ps.Name {
				c.Processes = append(c.Processes[:i], c.Processes[i+1:]...)
				break
			}
		}
		c.Processes = append(c.Processes, ps)
	})
}

// ForgetProcess removes cluster's process named name from dir's state file, once whoever recorded it
// has stopped it; a name that is not recorded is no error.
func ForgetProcess(ctx context.Context, dir, cluster, name string) error {
	return editCluster(ctx, dir, cluster, func(c *ClusterState) {
		c.Processes = slices.DeleteFunc(c.Processes, func(p ProcessState) bool { return p.Name == name })
	})
}

// editCluster changes one cluster's entry of the state file under the directory's lock, so it never
// races an `up` or `down`.
func editCluster(ctx context.Context, dir, cluster string, edit func(*ClusterState)) error {
	unlock, err := lockDir(ctx, dir)
	if err != nil {
		return err
	}
	defer unlock()
	s, err := ReadState(dir)
	if err != nil {
		return err
	}
	c, ok := s.Cluster(cluster)
	if !ok {
		return fmt.Errorf("lab dir %s: no cluster %q in the state file", dir, cluster)
	}
	edit(c)
	return WriteState(dir, s)
}
