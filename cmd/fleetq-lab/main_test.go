package main

import (
	"bytes"
	"errors"
	"flag"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fleetq/fleetq/e2e/lab"
	"github.com/fleetq/fleetq/e2e/lab/command"
	"github.com/fleetq/fleetq/e2e/lab/process"
)

// asCommand makes the test binary behave as fleetq-lab, so each step below runs as its own process and
// exits, exactly as a user's shell runs the command; the lab must outlive it.
const asCommand = "FLEETQ_LAB_TEST_AS_COMMAND"

func TestMain(m *testing.M) {
	if os.Getenv(asCommand) == "1" {
		os.Exit(command.Execute())
	}
	flag.Parse()
	os.Exit(m.Run())
}

// fleetqLab runs the command as a child process and returns its output and exit error.
func fleetqLab(t *testing.T, env []string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(append(os.Environ(), asCommand+"=1"), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

func mustRun(t *testing.T, args ...string) string {
	t.Helper()
	out, err := fleetqLab(t, nil, args...)
	if err != nil {
		t.Fatalf("fleetq-lab %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func processes(t *testing.T, dir string) map[string]lab.ProcessState {
	t.Helper()
	s, err := lab.ReadState(dir)
	if err != nil {
		t.Fatalf("read state: %v", err)
	}
	out := map[string]lab.ProcessState{}
	for _, c := range s.Clusters {
		for _, p := range c.Processes {
			out[c.Name+"/"+p.Name] = p
		}
	}
	return out
}

// waitUntil polls cond until it holds, failing the test after a minute.
func waitUntil(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.NewTimer(time.Minute)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline.C:
			t.Fatalf("waited a minute for %s", what)
		case <-tick.C:
		}
	}
}

func portOpen(port int) bool {
	c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// TestLifecycle drives the command the way a user does: up, up again, status, kubeconfig, a crash of
// one API server, up over the stale lab, down, down again. API-server mode keeps it quick; the full
// mode is what the lab conformance suite runs.
func TestLifecycle(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "lab")
	flags := []string{"--dir", dir, "--mode", "apiserver", "--workers", "1"}
	t.Cleanup(func() { _, _ = fleetqLab(t, nil, "down", "--dir", dir) })

	out := mustRun(t, append([]string{"up"}, flags...)...)
	for _, want := range []string{"etcd ready", "kube-apiserver ready", "lab up in", "management", "us-east", "export KUBECONFIG=" + filepath.Join(dir, "management", "kubeconfig")} {
		if !strings.Contains(out, want) {
			t.Errorf("up output lacks %q:\n%s", want, out)
		}
	}
	first := processes(t, dir)
	if len(first) != 4 {
		t.Fatalf("got %d processes, want etcd and kube-apiserver for 2 clusters: %v", len(first), first)
	}
	for name, p := range first {
		if !process.Running(p) {
			t.Errorf("%s (pid %d) is not running after up exited", name, p.PID)
		}
	}

	t.Run("up twice does not start twice", func(t *testing.T) {
		out := mustRun(t, append([]string{"up"}, flags...)...)
		if !strings.Contains(out, "lab already up") {
			t.Errorf("second up output:\n%s", out)
		}
		for name, p := range processes(t, dir) {
			if p.PID != first[name].PID {
				t.Errorf("%s was restarted: pid %d, was %d", name, p.PID, first[name].PID)
			}
		}
	})

	t.Run("status and kubeconfig", func(t *testing.T) {
		out := mustRun(t, "status", "--dir", dir)
		if !strings.Contains(out, "us-east") || !strings.Contains(out, "4/4") || !strings.Contains(out, "32/32") {
			t.Errorf("status does not show us-east with 4 Ready nodes and 32 free GPUs:\n%s", out)
		}
		path := strings.TrimSpace(mustRun(t, "kubeconfig", "us-east", "--dir", dir))
		if path != filepath.Join(dir, "us-east", "kubeconfig") {
			t.Errorf("kubeconfig path = %q", path)
		}
		if _, err := os.Stat(path); err != nil {
			t.Errorf("kubeconfig: %v", err)
		}
		out, err := fleetqLab(t, nil, "kubeconfig", "nowhere", "--dir", dir)
		if err == nil || !strings.Contains(out, `no cluster "nowhere"`) {
			t.Errorf("kubeconfig of an unknown cluster: err=%v\n%s", err, out)
		}
	})

	t.Run("errors name the wrong port, directory or binary", func(t *testing.T) {
		busy := first["us-east/kube-apiserver"].Ports[0]
		cases := map[string]struct {
			env  []string
			args []string
			want string
		}{
			"port in use": {args: []string{"up", "--dir", filepath.Join(t.TempDir(), "lab2"), "--mode", "apiserver", "--workers", "0", "--base-port", strconv.Itoa(busy)},
				want: "port " + strconv.Itoa(busy) + " on 127.0.0.1 is in use"},
			"directory is a file": {args: []string{"up", "--dir", filepath.Join(dir, "lab.json")}, want: "not a directory"},
			"binaries missing": {env: []string{lab.EnvBinDir + "=" + t.TempDir()}, args: []string{"up", "--dir", filepath.Join(t.TempDir(), "lab3")},
				want: "binary kube-apiserver: not found in"},
		}
		for name, tc := range cases {
			t.Run(name, func(t *testing.T) {
				out, err := fleetqLab(t, tc.env, tc.args...)
				var exit *exec.ExitError
				if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(out, tc.want) {
					t.Errorf("err=%v, want exit code 1 and %q in:\n%s", err, tc.want, out)
				}
			})
		}
	})

	t.Run("a crashed API server is reported, and up replaces the stale lab", func(t *testing.T) {
		crashed := first["us-east/kube-apiserver"]
		if err := syscall.Kill(crashed.PID, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, func() bool { return !process.Running(crashed) }, "the killed API server to be gone")
		out := mustRun(t, "status", "--dir", dir)
		if !strings.Contains(out, "unreachable") || !strings.Contains(out, "problem:") {
			t.Errorf("status does not report the crash:\n%s", out)
		}
		out = mustRun(t, append([]string{"up"}, flags...)...)
		if !strings.Contains(out, "stopping the stale lab") || !strings.Contains(out, "lab up in") {
			t.Errorf("up over a stale lab:\n%s", out)
		}
		for name, p := range first {
			if process.Running(p) {
				t.Errorf("%s of the stale lab (pid %d) still runs", name, p.PID)
			}
		}
	})

	t.Run("down after the creator exited leaves nothing", func(t *testing.T) {
		second := processes(t, dir)
		out := mustRun(t, "down", "--dir", dir)
		if !strings.Contains(out, "stopped") {
			t.Errorf("down output:\n%s", out)
		}
		for name, p := range second {
			if process.Running(p) {
				t.Errorf("%s (pid %d) still runs after down", name, p.PID)
			}
			for _, port := range p.Ports {
				if portOpen(port) {
					t.Errorf("%s's port %d is still open after down", name, port)
				}
			}
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("lab dir still exists: %v", err)
		}
		if out := mustRun(t, "down", "--dir", dir); !strings.Contains(out, "no lab in") {
			t.Errorf("second down:\n%s", out)
		}
	})
}
