package process

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fleetq/fleetq/e2e/lab"
)

func poll(ctx context.Context, cond func() bool, failure string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", failure, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
	return nil
}

func sleeper(t *testing.T) *Process {
	t.Helper()
	sleep, err := lookPath("sleep")
	if err != nil {
		t.Fatalf("no sleep binary: %v", err)
	}
	p := &Process{Owner: "test", State: lab.ProcessState{Name: "sleep", Args: []string{sleep, "600"}, Log: filepath.Join(t.TempDir(), "sleep.log")}}
	if err := p.Start(true); err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() { _ = p.Stop(context.Background(), time.Second) })
	return p
}

func lookPath(name string) (string, error) {
	for _, dir := range []string{"/bin", "/usr/bin"} {
		p := filepath.Join(dir, name)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", os.ErrNotExist
}

func TestProcessLifecycle(t *testing.T) {
	ctx := context.Background()
	p := sleeper(t)
	if !p.Running() || p.State.StartTime == 0 {
		t.Fatalf("running=%v startTime=%d after start", p.Running(), p.State.StartTime)
	}
	if pgid, err := syscall.Getpgid(p.State.PID); err != nil || pgid != p.State.PID {
		t.Errorf("process group = %d (%v), want its own group %d", pgid, err, p.State.PID)
	}

	// Another process sees the same process through the state alone.
	if !Running(p.State) {
		t.Errorf("Running(state) = false for a live process")
	}
	reused := p.State
	reused.StartTime++
	if Running(reused) {
		t.Errorf("Running reports a process whose start time differs: a reused pid would be killed")
	}

	if err := p.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if err := poll(ctx, p.Frozen, "not frozen"); err != nil {
		t.Fatal(err)
	}
	if err := p.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if err := poll(ctx, func() bool { return !p.Frozen() }, "still frozen"); err != nil {
		t.Fatal(err)
	}

	// A frozen process still stops: stop continues it before asking it to exit.
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	pid := p.State.PID
	if err := p.Stop(ctx, 5*time.Second); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if p.Running() || p.State.PID != 0 {
		t.Errorf("still running after stop")
	}
	if _, ok := readProc(pid); ok {
		if ps, _ := readProc(pid); ps.code != 'Z' {
			t.Errorf("pid %d still exists in state %c", pid, ps.code)
		}
	}
	// Stopping twice is harmless.
	if err := p.Stop(ctx, time.Second); err != nil {
		t.Errorf("second stop: %v", err)
	}
}

func TestFailureQuotesLog(t *testing.T) {
	log := filepath.Join(t.TempDir(), "x.log")
	var lines []string
	for i := range 40 {
		lines = append(lines, "line "+strconv.Itoa(i))
	}
	if err := os.WriteFile(log, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := &Process{Owner: "us-east", State: lab.ProcessState{Name: "kube-apiserver", Log: log}}
	msg := p.Failure("exited").Error()
	for _, want := range []string{`cluster "us-east": kube-apiserver: exited`, log, "line 39", "line 25"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not contain %q", msg, want)
		}
	}
	if strings.Contains(msg, "line 24\n") {
		t.Errorf("error quotes more than the last 15 lines:\n%s", msg)
	}
}
