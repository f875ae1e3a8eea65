package framework

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/fleetq/fleetq/e2e/lab"
	"github.com/fleetq/fleetq/e2e/lab/local"
	"github.com/fleetq/fleetq/e2e/lab/pki"
)

func TestLoadCRDs(t *testing.T) {
	root, ok := lab.RepoRoot()
	if !ok {
		t.Fatal("not inside the repository")
	}
	crds, err := LoadCRDs(filepath.Join(root, "config", "crd", "bases"))
	if err != nil {
		t.Fatalf("LoadCRDs: %v", err)
	}
	var names []string
	for _, c := range crds {
		names = append(names, c.Name)
	}
	for _, want := range []string{"clusterqueues.kueue.x-k8s.io", "workloads.kueue.x-k8s.io", "resourceflavors.kueue.x-k8s.io"} {
		if !strings.Contains(strings.Join(names, ","), want) {
			t.Errorf("loaded %v, want %s among them", names, want)
		}
	}

	dir := t.TempDir()
	multi := `apiVersion: v1
kind: ConfigMap
metadata: {name: not-a-crd}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  names: {kind: Widget, plural: widgets}
  scope: Namespaced
  versions: [{name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object}}}]
`
	if err := os.WriteFile(filepath.Join(dir, "all.yaml"), []byte(multi), 0o644); err != nil {
		t.Fatal(err)
	}
	crds, err = LoadCRDs(dir)
	if err != nil || len(crds) != 1 || crds[0].Name != "widgets.example.com" {
		t.Errorf("multi-document file: %v, %v; want only the CRD", crds, err)
	}
	if _, err := LoadCRDs(t.TempDir()); err == nil || !strings.Contains(err.Error(), "no .yaml") {
		t.Errorf("empty dir: %v", err)
	}
}

// fileCluster is a lab.Cluster backed by a kubeconfig file only.
type fileCluster struct{ path string }

func (c fileCluster) Name() string           { return "us-east" }
func (c fileCluster) Role() lab.Role         { return lab.RoleWorker }
func (c fileCluster) Spec() lab.ClusterSpec  { return lab.ClusterSpec{Name: "us-east"} }
func (c fileCluster) Server() string         { return "https://127.0.0.1:6443" }
func (c fileCluster) KubeconfigPath() string { return c.path }

func TestClosedPortKubeconfigSecret(t *testing.T) {
	b, err := pki.NewBundle("us-east", pki.ServingHosts, []pki.Client{{Name: "admin", User: "admin", Groups: []string{"system:masters"}}})
	if err != nil {
		t.Fatal(err)
	}
	kc, err := local.Kubeconfig("us-east", "https://127.0.0.1:6443", b.CA.CertPEM, b.Clients["admin"], "admin")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	closed, err := ClosedPortKubeconfig(fileCluster{path})
	if err != nil {
		t.Fatalf("ClosedPortKubeconfig: %v", err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(closed)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host == "https://127.0.0.1:6443" || !strings.HasPrefix(cfg.Host, "https://127.0.0.1:") {
		t.Errorf("server = %s, want another loopback port", cfg.Host)
	}
	if len(cfg.CertData) == 0 || len(cfg.CAData) == 0 {
		t.Errorf("credentials were not kept")
	}

	s := KubeconfigSecret("kueue-system", "us-east", closed)
	if s.Namespace != "kueue-system" || s.Name != "us-east" || string(s.Data["kubeconfig"]) != string(closed) {
		t.Errorf("secret = %+v", s.ObjectMeta)
	}
	peer, err := WorkerKubeconfigSecret(&clusterProxy{Cluster: fileCluster{path}}, "kueue-system", "w")
	if err != nil || string(peer.Data[KubeconfigSecretKey]) != string(kc) {
		t.Errorf("worker secret of a local cluster must hold its kubeconfig: %v", err)
	}
}

func TestStartValidates(t *testing.T) {
	e := &Environment{byName: map[string]*clusterProxy{"us-east": {Cluster: fileCluster{}, cfg: &rest.Config{}}}}
	run := func(context.Context, *rest.Config) error { return nil }
	cases := map[string]ComponentSpec{
		"unknown cluster":      {Name: "agent", Cluster: "mars", Run: run},
		"neither Run nor path": {Name: "agent", Cluster: "us-east"},
		"both Run and path":    {Name: "agent", Cluster: "us-east", Run: run, Binary: "/bin/true"},
	}
	for name, spec := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := e.Start(context.Background(), spec); err == nil || !strings.Contains(err.Error(), `component "agent"`) {
				t.Errorf("Start = %v, want an error naming the component", err)
			}
		})
	}
}
