package local

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/fleetq/fleetq/e2e/lab"
	"github.com/fleetq/fleetq/e2e/lab/pki"
	"github.com/fleetq/fleetq/e2e/lab/process"
)

func TestKubeconfigEmbedsCredentials(t *testing.T) {
	b, err := pki.NewBundle("us-east", pki.ServingHosts, clients)
	if err != nil {
		t.Fatal(err)
	}
	data, err := Kubeconfig("us-east", "https://127.0.0.1:6443", b.CA.CertPEM, b.Clients["admin"], "fleetq-lab-admin")
	if err != nil {
		t.Fatalf("Kubeconfig: %v", err)
	}
	cfg, err := clientcmd.Load(data)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	if cfg.CurrentContext != "us-east" || cfg.Clusters["us-east"].Server != "https://127.0.0.1:6443" {
		t.Errorf("context %q, server %q", cfg.CurrentContext, cfg.Clusters["us-east"].Server)
	}
	// MultiKueue refuses kubeconfigs that reference files.
	for _, field := range []string{"certificate-authority:", "client-certificate:", "client-key:", "tokenFile"} {
		if strings.Contains(string(data), field) {
			t.Errorf("kubeconfig references a file (%s):\n%s", field, data)
		}
	}
	rc, err := clientcmd.RESTConfigFromKubeConfig(data)
	if err != nil {
		t.Fatalf("rest config: %v", err)
	}
	if len(rc.CAData) == 0 || len(rc.CertData) == 0 || len(rc.KeyData) == 0 {
		t.Errorf("rest config lacks embedded credentials")
	}
}

// fakeBinDir holds shell scripts named like the control-plane binaries, to drive startup failures
// without the real ones.
func fakeBinDir(t *testing.T, scripts map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range lab.BinariesFor(lab.ModeFull) {
		body, ok := scripts[name]
		if !ok {
			body = "sleep 600"
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func oneCluster(port int) lab.Spec {
	return lab.Spec{Mode: lab.ModeAPIServer, Management: lab.ClusterSpec{Name: "management", APIServerPort: port}}
}

func TestUpErrors(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	busyPort := held.Addr().(*net.TCPAddr).Port
	attempts := filepath.Join(t.TempDir(), "attempts")

	cases := map[string]struct {
		spec   lab.Spec
		binDir string
		want   []string
	}{
		"missing binary": {
			spec:   lab.DefaultSpec(0),
			binDir: t.TempDir(),
			want:   []string{"binary kube-apiserver: not found in", "make tools"},
		},
		"API server port in use": {
			spec:   oneCluster(busyPort),
			binDir: fakeBinDir(t, nil),
			want:   []string{`cluster "management": API server: port ` + strconv.Itoa(busyPort) + " on 127.0.0.1 is in use"},
		},
		"etcd exits at start": {
			spec:   oneCluster(0),
			binDir: fakeBinDir(t, map[string]string{lab.Etcd: `echo "etcdmain: open wal: permission denied" >&2; exit 3`}),
			want:   []string{`cluster "management": etcd: exited: exit status 3 before healthy`, "etcd.log", "open wal: permission denied"},
		},
		"etcd keeps losing its port": {
			spec: oneCluster(0),
			binDir: fakeBinDir(t, map[string]string{lab.Etcd: `echo x >> ` + attempts +
				`; echo "listen tcp 127.0.0.1:1234: bind: address already in use" >&2; exit 1`}),
			want: []string{"address already in use"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "lab")
			if err := lab.PrepareDir(dir); err != nil {
				t.Fatal(err)
			}
			l, err := New().Up(context.Background(), tc.spec, lab.UpOptions{Dir: dir, BinDir: tc.binDir, Owned: true})
			if err == nil {
				_ = l.Down(context.Background())
				t.Fatalf("Up succeeded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not contain %q:\n%v", w, err)
				}
			}
		})
	}
	data, _ := os.ReadFile(attempts)
	if n := strings.Count(string(data), "x"); n != bindAttempts {
		t.Errorf("etcd was started %d times after losing its port, want %d", n, bindAttempts)
	}
}

func TestUpRefusesBadLabDir(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err := lab.Up(context.Background(), New(), oneCluster(0), lab.UpOptions{Dir: file, BinDir: fakeBinDir(t, nil)})
	if err == nil || !strings.Contains(err.Error(), "lab dir "+file+": not a directory") {
		t.Errorf("Up = %v, want a lab-dir error", err)
	}
}

func TestFailedUpLeavesNothingRunning(t *testing.T) {
	// etcd "runs" (a sleep) but never becomes healthy: the startup times out only after a minute, so
	// cancel the context instead and check the sleeper was stopped.
	bin := fakeBinDir(t, nil)
	dir := filepath.Join(t.TempDir(), "lab")
	if err := lab.PrepareDir(dir); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := New().Up(ctx, oneCluster(0), lab.UpOptions{Dir: dir, BinDir: bin, Owned: true})
		errc <- err
	}()
	var etcd lab.ProcessState
	if err := poll(context.Background(), func() bool {
		s, err := lab.ReadState(dir)
		if err != nil || len(s.Clusters) == 0 || len(s.Clusters[0].Processes) == 0 {
			return false
		}
		etcd = s.Clusters[0].Processes[0]
		return etcd.PID != 0
	}, "etcd never started"); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("Up succeeded")
	}
	if process.Running(etcd) {
		t.Errorf("etcd (pid %d) still runs after a failed Up", etcd.PID)
	}
	// The state file stays, so `down` can find and remove the lab's files.
	if _, err := lab.ReadState(dir); err != nil {
		t.Errorf("state after failed Up: %v", err)
	}
}
