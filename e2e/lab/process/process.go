// Package process runs the lab's long-lived child processes (control-plane binaries, fleetq's own
// binaries in tests): each in its own process group with its output appended to a log, optionally tied
// to the caller's life, and recognisable from a state file by pid and start time so another process can
// check, signal and stop it safely.
package process

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fleetq/fleetq/e2e/lab"
)

// Process is one child process: started here (run set, its done closes when the process exits) or known
// only from a state file (run nil), in which case it is checked and signalled through /proc.
type Process struct {
	// Owner names what the process belongs to (a cluster) in errors.
	Owner string
	// State is the command line, log and identity; Start fills PID and StartTime.
	State lab.ProcessState

	run *run
}

// run is one start of a process: each start gets its own, so the goroutine reaping an earlier start
// never touches a later one.
type run struct {
	done chan struct{}
	// err is the result of Wait, readable once done is closed.
	err error
}

// procState is what /proc says about a pid.
type procState struct {
	startTime uint64
	// code is the state letter: R, S, D, T (stopped), Z (zombie), ...
	code byte
}

// readProc reads /proc/<pid>/stat; ok is false when there is no such process.
func readProc(pid int) (procState, bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procState{}, false
	}
	// The command name (field 2) may hold spaces and parentheses; fields after the last ')' are plain.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 || i+2 >= len(data) {
		return procState{}, false
	}
	fields := strings.Fields(string(data[i+2:]))
	// fields[0] is field 3 (state); starttime is field 22, so fields[19].
	if len(fields) < 20 {
		return procState{}, false
	}
	st, err := strconv.ParseUint(fields[19], 10, 64)
	if err != nil {
		return procState{}, false
	}
	return procState{startTime: st, code: fields[0][0]}, true
}

// spawner starts processes from one goroutine locked to its OS thread for the life of the program:
// Linux sends Pdeathsig when the *thread* that forked the child exits, and Go may retire other threads.
var spawner struct {
	once sync.Once
	reqs chan spawnRequest
}

type spawnRequest struct {
	cmd *exec.Cmd
	err chan error
}

func startOnLockedThread(cmd *exec.Cmd) error {
	spawner.once.Do(func() {
		spawner.reqs = make(chan spawnRequest)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread must outlive every child
			for r := range spawner.reqs {
				r.err <- r.cmd.Start()
			}
		}()
	})
	req := spawnRequest{cmd: cmd, err: make(chan error, 1)}
	spawner.reqs <- req
	return <-req.err
}

// Start launches the process in its own process group with stdout and stderr appended to its log.
// owned ties it to this process's life.
func (p *Process) Start(owned bool) error {
	logFile, err := os.OpenFile(p.State.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("cluster %q: %s: open log: %w", p.Owner, p.State.Name, err)
	}
	defer logFile.Close() // the child holds its own copy of the descriptor
	fmt.Fprintf(logFile, "\n==== fleetq-lab: starting %s at %s\n", p.State.Name, time.Now().Format(time.RFC3339))

	cmd := exec.Command(p.State.Args[0], p.State.Args[1:]...)
	cmd.Env = append(os.Environ(), p.State.Env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if owned {
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
		err = startOnLockedThread(cmd)
	} else {
		err = cmd.Start()
	}
	if err != nil {
		return fmt.Errorf("cluster %q: start %s (%s): %w", p.Owner, p.State.Name, p.State.Args[0], err)
	}
	r := &run{done: make(chan struct{})}
	p.run = r
	p.State.PID = cmd.Process.Pid
	if ps, ok := readProc(cmd.Process.Pid); ok {
		p.State.StartTime = ps.startTime
	}
	go func() {
		r.err = cmd.Wait()
		close(r.done)
	}()
	return nil
}

// Running says whether the process still exists (a frozen process counts; a zombie does not).
func (p *Process) Running() bool {
	if p.State.PID == 0 {
		return false
	}
	if p.run != nil {
		select {
		case <-p.run.done:
			return false
		default:
		}
	}
	ps, ok := readProc(p.State.PID)
	if !ok || ps.code == 'Z' || ps.code == 'X' {
		return false
	}
	// A different start time means the pid now belongs to an unrelated process.
	return p.State.StartTime == 0 || ps.startTime == p.State.StartTime
}

// Frozen says whether the process is stopped by a signal.
func (p *Process) Frozen() bool {
	ps, ok := readProc(p.State.PID)
	return ok && p.Running() && ps.code == 'T'
}

// ExitError describes why a process we started has exited.
func (p *Process) ExitError() error {
	if p.run == nil {
		return errors.New("not running")
	}
	select {
	case <-p.run.done:
		if p.run.err != nil {
			return fmt.Errorf("exited: %w", p.run.err)
		}
		return errors.New("exited with status 0")
	default:
		return nil
	}
}

// Signal sends sig to the process's group, after checking the pid is still ours.
func (p *Process) Signal(sig syscall.Signal) error {
	if !p.Running() {
		return nil
	}
	if err := syscall.Kill(-p.State.PID, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("cluster %q: %s (pid %d): send %v: %w", p.Owner, p.State.Name, p.State.PID, sig, err)
	}
	return nil
}

// Stop asks the process to exit (SIGTERM), waits up to grace, then kills its whole group and waits
// until it is gone.
func (p *Process) Stop(ctx context.Context, grace time.Duration) error {
	if !p.Running() {
		p.State.PID = 0
		return nil
	}
	// A frozen process keeps SIGTERM pending until it runs again.
	if err := p.Signal(syscall.SIGCONT); err != nil {
		return err
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	if !p.waitGone(ctx, grace) {
		if err := p.Signal(syscall.SIGKILL); err != nil {
			return err
		}
		if !p.waitGone(ctx, 30*time.Second) {
			return fmt.Errorf("cluster %q: %s (pid %d) still runs after SIGKILL", p.Owner, p.State.Name, p.State.PID)
		}
	}
	// The group may hold children of the process; they go with it.
	_ = syscall.Kill(-p.State.PID, syscall.SIGKILL)
	if p.run != nil {
		// Our own child: return once it is reaped, so nothing of it is left, not even a zombie.
		select {
		case <-p.run.done:
		case <-ctx.Done():
		}
	}
	p.State.PID = 0
	return nil
}

func (p *Process) waitGone(ctx context.Context, timeout time.Duration) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for p.Running() {
		select {
		case <-ctx.Done():
			return false
		case <-deadline.C:
			return false
		case <-tick.C:
		}
	}
	return true
}

// WaitFor polls cond until it holds, the process exits, or ctx ends; failures name the process and
// carry the tail of its log.
func (p *Process) WaitFor(ctx context.Context, what string, cond func(context.Context) bool) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if cond(ctx) {
			return nil
		}
		if !p.Running() {
			if p.run != nil {
				// /proc can show a child dead before our Wait has reaped it and recorded why.
				select {
				case <-p.run.done:
				case <-time.After(time.Second):
				}
			}
			reason := p.ExitError()
			if reason == nil {
				reason = errors.New("is gone")
			}
			return p.Failure(fmt.Sprintf("%v before %s", reason, what))
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.Canceled) {
				// Called off, not failed: the log holds nothing worth quoting.
				return fmt.Errorf("cluster %q: %s: not %s: %w", p.Owner, p.State.Name, what, ctx.Err())
			}
			return p.Failure(fmt.Sprintf("not %s within the time allowed", what))
		case <-tick.C:
		}
	}
}

// Failure builds an error naming the cluster and process, with the last lines of its log.
func (p *Process) Failure(msg string) error {
	return fmt.Errorf("cluster %q: %s: %s; last lines of %s:\n%s", p.Owner, p.State.Name, msg, p.State.Log, Tail(p.State.Log, 15))
}

// Tail returns the last n lines of a file, indented, for error messages.
func Tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return "    (no log: " + err.Error() + ")"
	}
	defer f.Close()
	const max = 16 << 10
	if info, err := f.Stat(); err == nil && info.Size() > max {
		_, _ = f.Seek(info.Size()-max, io.SeekStart)
	}
	data, _ := io.ReadAll(f)
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "    " + strings.Join(lines, "\n    ")
}

// Running reports whether the process a state file records still runs (and is the same process, not
// one that reused its pid). Tests use it to prove a stopped lab left nothing behind.
func Running(ps lab.ProcessState) bool {
	p := &Process{State: ps}
	return p.Running()
}
