package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetq/fleetq/e2e/demo"
	"github.com/fleetq/fleetq/e2e/lab"
	"github.com/fleetq/fleetq/e2e/lab/local"
	"github.com/fleetq/fleetq/e2e/lab/process"
)

func TestFlagErrors(t *testing.T) {
	kubeconfig := closedPortKubeconfig(t)
	cases := map[string]struct {
		args []string
		want string
	}{
		"worker without kubeconfig":    {args: []string{"--worker", "us-east=x"}, want: "--worker needs --kubeconfig"},
		"namespace without kubeconfig": {args: []string{"--namespace", "x"}, want: "--namespace needs --kubeconfig"},
		"worker without a path":        {args: []string{"--kubeconfig", kubeconfig, "--worker", "us-east"}, want: `--worker "us-east": want NAME=KUBECONFIG`},
		"unknown story":                {args: []string{"--story", "long"}, want: `--story "long": want default or smoke`},
		"positional argument":          {args: []string{"now"}, want: `unknown command "now"`},
		"fleetq binaries missing":      {args: []string{"--fleetq-bin-dir", t.TempDir()}, want: "run 'make build'"},
		"control plane missing":        {args: []string{"--fleetq-bin-dir", fakeBinaries(t, "sleep 600", "sleep 600"), "--bin-dir", t.TempDir(), "--dir", t.TempDir()}, want: "run 'make tools'"},
		"management cluster unreachable": {
			args: []string{"--kubeconfig", kubeconfig},
			want: "connection refused",
		},
		"management kubeconfig missing": {args: []string{"--kubeconfig", filepath.Join(t.TempDir(), "nope")}, want: "no such file"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			_, err := execute(context.Background(), tc.args, &out, &out)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %v, want one containing %q; output:\n%s", err, tc.want, out.String())
			}
		})
	}
}

// fakeBinaries writes shell scripts standing in for fleetq-manager and fleetq-agent.
func fakeBinaries(t *testing.T, manager, agent string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range map[string]string{demo.ManagerName: manager, demo.AgentName: agent} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// closedPortKubeconfig is a kubeconfig for an API server that is not there.
func closedPortKubeconfig(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: gone, cluster: {server: "https://%s", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: c, context: {cluster: gone, user: u}}]
current-context: c
`, addr)
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// buildFleetq builds fleetq-manager and fleetq-agent from this tree.
func buildFleetq(t *testing.T) string {
	t.Helper()
	root, ok := lab.RepoRoot()
	if !ok {
		t.Fatal("not inside the fleetq repository")
	}
	dir := t.TempDir()
	cmd := exec.Command("go", "build", "-o", dir+"/", "./cmd/fleetq-manager", "./cmd/fleetq-agent")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building fleetq: %v\n%s", err, out)
	}
	return dir
}

// recorded returns the fleetq processes the lab's state file lists.
func recorded(t *testing.T, dir string) []lab.ProcessState {
	t.Helper()
	st, err := lab.ReadState(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []lab.ProcessState
	for _, c := range st.Clusters {
		for _, p := range c.Processes {
			if p.Name == demo.ManagerName || p.Name == demo.AgentName {
				out = append(out, p)
			}
		}
	}
	return out
}

// TestDemoOnTheLab runs the command as a user does, on a lab of its own: first with a manager that
// cannot start (the error must quote its log), then the smoke story, whose beats must all happen;
// then `fleetq-lab down` must stop the processes the demo left running.
func TestDemoOnTheLab(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	dir := filepath.Join(t.TempDir(), "lab")
	t.Cleanup(func() {
		if _, err := lab.Down(context.Background(), lab.Providers{local.ProviderName: local.New()}, dir); err != nil {
			t.Errorf("fleetq-lab down: %v", err)
		}
	})
	fleetqBin := buildFleetq(t)

	// A manager that exits at once: the demo says so with the end of its log, and leaves the lab up.
	broken := fakeBinaries(t, "echo 'listen tcp 127.0.0.1:9443: bind: address already in use'; exit 1", "sleep 600")
	var out bytes.Buffer
	_, err := execute(ctx, []string{"--dir", dir, "--fleetq-bin-dir", broken, "--story", "smoke", "--owned", "--plain"}, &out, &out)
	if err == nil || !strings.Contains(err.Error(), "fleetq-manager") || !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("with a broken manager: error = %v, want one naming fleetq-manager and quoting its log; output:\n%s", err, out.String())
	}
	if got := len(recorded(t, dir)); got != 3 {
		t.Errorf("%d fleetq processes recorded in the lab's state, want 3 (manager and two agents)", got)
	}

	// The real thing, on the same lab: the broken processes are replaced.
	out.Reset()
	res, err := execute(ctx, []string{"--dir", dir, "--fleetq-bin-dir", fleetqBin, "--story", "smoke", "--owned", "--plain"}, &out, &out)
	if err != nil {
		t.Fatalf("demo: %v\noutput:\n%s", err, out.String())
	}
	t.Logf("demo output:\n%s", out.String())
	s := res.State
	for _, m := range s.Milestones {
		if !m.Reached {
			t.Errorf("story beat not seen: %s", m.Title)
		}
	}
	if s.Preemptions() == 0 {
		t.Error("no preemption observed")
	}
	if s.PeakBorrowed(demo.Research, "a100-flavor") == 0 {
		t.Error("research never borrowed")
	}
	if n := s.RanOn("eu-west", demo.L4); n == 0 {
		t.Error("no L4 job ran on eu-west")
	}
	for _, j := range s.Jobs {
		if j.Spec.GPU == demo.A100 && !j.Spec.Stuck {
			for _, c := range j.Ran {
				if c != "us-east" {
					t.Errorf("A100 job %s ran on %s", j.Spec.Key(), c)
				}
			}
		}
	}
	j := s.Explained()
	if j == nil {
		t.Fatal("the too-big job was not explained")
	}
	for _, want := range []string{"us-east", "eu-west", "largest node fit"} {
		if !strings.Contains(j.Detail, want) {
			t.Errorf("explanation of %s %q does not mention %q", j.Spec.Key(), j.Detail, want)
		}
	}
	if res.Summary.Finished != res.Summary.Total || res.Summary.Total == 0 {
		t.Errorf("%d of %d jobs finished", res.Summary.Finished, res.Summary.Total)
	}
	for _, want := range []string{"Summary of the smoke story", "export KUBECONFIG=" + filepath.Join(dir, "management", "kubeconfig"), "describe workload " + j.Workload, "fleetq-lab down --dir " + dir} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output does not say %q", want)
		}
	}

	// The demo's processes outlive it (here: the test), recorded so `down` stops them.
	procs := recorded(t, dir)
	if len(procs) != 3 {
		t.Fatalf("recorded processes %v, want the manager and two agents", procs)
	}
	for _, p := range procs {
		if !process.Running(p) {
			t.Errorf("%s (pid %d) is not running after the demo", p.Name, p.PID)
		}
	}
	if _, err := lab.Down(ctx, lab.Providers{local.ProviderName: local.New()}, dir); err != nil {
		t.Fatalf("fleetq-lab down: %v", err)
	}
	for _, p := range procs {
		if process.Running(p) {
			t.Errorf("%s (pid %d) still runs after fleetq-lab down", p.Name, p.PID)
		}
	}
}
