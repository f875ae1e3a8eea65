package framework

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/rest"

	"github.com/fleetq/fleetq/e2e/lab"
	"github.com/fleetq/fleetq/e2e/lab/process"
)

// ComponentSpec describes one fleetq component (manager, agent) to run against one cluster of the
// lab, either in-process (Run) or as a built binary (Binary).
type ComponentSpec struct {
	// Name is unique per cluster; it names the binary's log file.
	Name string
	// Cluster is the lab cluster the component talks to.
	Cluster string
	// Run runs the component in this process until ctx ends; a nil return after ctx ends is a clean
	// stop. It gets the cluster's admin configuration.
	Run func(ctx context.Context, cfg *rest.Config) error
	// Binary is the path of a built binary, started with Args and Env plus KUBECONFIG set to the
	// cluster's admin kubeconfig; its output goes to <lab dir>/<cluster>/logs/<name>.log.
	Binary string
	Args   []string
	Env    []string
}

// Component is a running component.
type Component struct {
	spec ComponentSpec
	cfg  *rest.Config

	mu sync.Mutex
	// in-process
	cancel context.CancelFunc
	done   chan struct{}
	err    error
	// binary
	proc *process.Process
}

// stopGrace is how long a component may take to exit after it is asked to.
const stopGrace = 10 * time.Second

// Start runs a component against one of the lab's clusters; Teardown stops it.
func (e *Environment) Start(ctx context.Context, spec ComponentSpec) (*Component, error) {
	c, ok := e.byName[spec.Cluster]
	if !ok {
		return nil, fmt.Errorf("component %q: no cluster %q in the lab", spec.Name, spec.Cluster)
	}
	if (spec.Run == nil) == (spec.Binary == "") {
		return nil, fmt.Errorf("component %q: set exactly one of Run and Binary", spec.Name)
	}
	comp := &Component{spec: spec, cfg: c.RESTConfig()}
	if spec.Binary != "" {
		abs, err := filepath.Abs(spec.Binary)
		if err != nil {
			return nil, fmt.Errorf("component %q: %w", spec.Name, err)
		}
		logDir := filepath.Join(e.Lab.Dir(), spec.Cluster, "logs")
		if err := os.MkdirAll(logDir, 0o755); err != nil {
			return nil, fmt.Errorf("component %q: %w", spec.Name, err)
		}
		comp.proc = &process.Process{Owner: spec.Cluster, State: lab.ProcessState{
			Name: spec.Name,
			Args: append([]string{abs}, spec.Args...),
			Env:  append([]string{"KUBECONFIG=" + c.KubeconfigPath()}, spec.Env...),
			Log:  filepath.Join(logDir, spec.Name+".log"),
		}}
	}
	if err := comp.start(); err != nil {
		return nil, err
	}
	e.mu.Lock()
	e.components = append(e.components, comp)
	e.mu.Unlock()
	return comp, nil
}

func (c *Component) start() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.proc != nil {
		// Test components die with the test process, like the lab.
		return c.proc.Start(true)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel, c.done, c.err = cancel, make(chan struct{}), nil
	go func(done chan struct{}) {
		defer close(done)
		defer func() {
			if r := recover(); r != nil {
				c.setErr(fmt.Errorf("component %q panicked: %v", c.spec.Name, r))
			}
		}()
		err := c.spec.Run(ctx, rest.CopyConfig(c.cfg))
		if err != nil && ctx.Err() == nil {
			c.setErr(fmt.Errorf("component %q: %w", c.spec.Name, err))
		}
	}(c.done)
	return nil
}

func (c *Component) setErr(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.err = err
}

// Running says whether the component has not exited.
func (c *Component) Running() bool {
	if c.proc != nil {
		return c.proc.Running()
	}
	c.mu.Lock()
	done := c.done
	c.mu.Unlock()
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// Err is why the component exited on its own (an error, a panic, a non-zero exit), or nil.
func (c *Component) Err() error {
	if c.proc != nil {
		if c.proc.Running() {
			return nil
		}
		return c.proc.ExitError()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// LogPath is the binary's log file ("" for in-process components, whose logs go where they log).
func (c *Component) LogPath() string {
	if c.proc == nil {
		return ""
	}
	return c.proc.State.Log
}

// Stop stops the component: cancels an in-process one and waits for it; SIGTERM, then SIGKILL, to a
// binary.
func (c *Component) Stop(ctx context.Context) error {
	if c.proc != nil {
		return c.proc.Stop(ctx, stopGrace)
	}
	c.mu.Lock()
	cancel, done := c.cancel, c.done
	c.mu.Unlock()
	cancel()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("component %q: did not stop: %w", c.spec.Name, ctx.Err())
	case <-time.After(stopGrace):
		return fmt.Errorf("component %q: still running %s after its context ended", c.spec.Name, stopGrace)
	}
}

// Kill ends a binary component with SIGKILL, as a crash or the OOM killer would: nothing is
// released on the way out (its leader lease runs until it expires). Restart starts it again.
func (c *Component) Kill(ctx context.Context) error {
	if c.proc == nil {
		return fmt.Errorf("component %q: runs in-process; only a binary can be killed", c.spec.Name)
	}
	if err := c.proc.Signal(syscall.SIGKILL); err != nil {
		return err
	}
	return c.proc.Stop(ctx, 0)
}

// Restart stops the component and starts it again with the same spec, as a crash and restart would.
func (c *Component) Restart(ctx context.Context) error {
	if err := c.Stop(ctx); err != nil {
		return err
	}
	return c.start()
}

// BuildBinary builds a Go package of the module (e.g. "./cmd/fleetq-manager") into dir and returns the
// binary's path, for ComponentSpec.Binary.
func BuildBinary(ctx context.Context, pkg, dir string) (string, error) {
	root, ok := lab.RepoRoot()
	if !ok {
		return "", errors.New("build " + pkg + ": not inside the fleetq repository")
	}
	out := filepath.Join(dir, filepath.Base(pkg))
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, pkg)
	cmd.Dir = root
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build %s: %w\n%s", pkg, err, msg)
	}
	return out, nil
}

func tailFile(path string, lines int) string { return process.Tail(path, lines) }
