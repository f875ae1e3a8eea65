package kind

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	"sigs.k8s.io/kind/pkg/cluster"
	"sigs.k8s.io/yaml"

	"github.com/fleetq/fleetq/e2e/lab"
)

func defaultSpec() lab.Spec {
	s := lab.DefaultSpec(2)
	s.Default()
	return s
}

func TestConfigFollowsSpec(t *testing.T) {
	spec := defaultSpec()
	spec.Workers[0].APIServerPort = 16443
	for _, c := range spec.Clusters() {
		t.Run(c.Name, func(t *testing.T) {
			cfg := Config(c, "")
			if cfg.Name != "fleetq-"+c.Name {
				t.Errorf("kind cluster name = %q", cfg.Name)
			}
			if len(cfg.Nodes) != 1 || cfg.Nodes[0].Role != v1alpha4.ControlPlaneRole {
				t.Fatalf("nodes = %+v, want one control-plane node (fake nodes come from kwok)", cfg.Nodes)
			}
			if cfg.Nodes[0].Image != DefaultNodeImage || !strings.HasPrefix(DefaultNodeImage, "kindest/node:v1.37") {
				t.Errorf("node image = %q, want kind's v1.37 default", cfg.Nodes[0].Image)
			}
			if diff := cmp.Diff(map[string]string{lab.RegionLabel: c.Region, "lab.fleetq.dev/cluster": c.Name}, cfg.Nodes[0].Labels); diff != "" {
				t.Errorf("node labels (-want +got):\n%s", diff)
			}
			if cfg.Networking.APIServerAddress != "127.0.0.1" || cfg.Networking.APIServerPort != int32(c.APIServerPort) {
				t.Errorf("API server at %s:%d, want 127.0.0.1:%d", cfg.Networking.APIServerAddress, cfg.Networking.APIServerPort, c.APIServerPort)
			}
		})
	}
	if got := Config(spec.Management, "kindest/node:custom").Nodes[0].Image; got != "kindest/node:custom" {
		t.Errorf("explicit node image ignored: %s", got)
	}
}

func TestConfigYAMLIsWhatKindReads(t *testing.T) {
	data, err := ConfigYAML(defaultSpec().Workers[0], "")
	if err != nil {
		t.Fatal(err)
	}
	var back v1alpha4.Cluster
	if err := yaml.UnmarshalStrict(data, &back); err != nil {
		t.Fatalf("rendered config does not parse as a kind v1alpha4 Cluster: %v\n%s", err, data)
	}
	if back.Kind != "Cluster" || back.APIVersion != "kind.x-k8s.io/v1alpha4" || back.Name != "fleetq-us-east" {
		t.Errorf("rendered config header: %s %s %s", back.APIVersion, back.Kind, back.Name)
	}
}

func TestKwokObjects(t *testing.T) {
	objs, err := KwokObjects(defaultSpec(), "")
	if err != nil {
		t.Fatal(err)
	}
	var (
		dep   *appsv1.Deployment
		cm    *corev1.ConfigMap
		role  *rbacv1.ClusterRole
		kinds []string
	)
	for _, o := range objs {
		kinds = append(kinds, o.GetObjectKind().GroupVersionKind().Kind)
		switch o := o.(type) {
		case *appsv1.Deployment:
			dep = o
		case *corev1.ConfigMap:
			cm = o
		case *rbacv1.ClusterRole:
			role = o
		}
	}
	if diff := cmp.Diff([]string{"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "ConfigMap", "Deployment"}, kinds); diff != "" {
		t.Errorf("objects (-want +got):\n%s", diff)
	}
	pod := dep.Spec.Template.Spec
	if pod.Containers[0].Image != DefaultKwokImage {
		t.Errorf("kwok image = %s", pod.Containers[0].Image)
	}
	args := strings.Join(pod.Containers[0].Args, " ")
	// On kind the real node must stay the kubelet's: kwok manages annotated (fake) nodes only.
	for _, want := range []string{"--manage-all-nodes=false", "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake", "--config=/etc/kwok/stages.yaml"} {
		if !strings.Contains(args, want) {
			t.Errorf("kwok args %q lack %q", args, want)
		}
	}
	if pod.NodeSelector["node-role.kubernetes.io/control-plane"] != "" || len(pod.NodeSelector) != 1 {
		t.Errorf("kwok must run on the real control-plane node: nodeSelector %v", pod.NodeSelector)
	}
	if !strings.Contains(cm.Data["stages.yaml"], "name: pod-complete") || !strings.Contains(cm.Data["stages.yaml"], "durationMilliseconds: 5000") {
		t.Errorf("stages ConfigMap lacks pod-complete with the spec's 5s run time:\n%s", cm.Data["stages.yaml"])
	}
	var canPatchPodStatus bool
	for _, r := range role.Rules {
		for _, res := range r.Resources {
			if res == "pods/status" {
				canPatchPodStatus = true
			}
		}
	}
	if !canPatchPodStatus {
		t.Errorf("kwok's role cannot patch pod status: %+v", role.Rules)
	}
}

// The fake nodes come from the same function on both providers, so a spec sees the same nodes.
func TestFakeNodesMatchLocalLab(t *testing.T) {
	spec := defaultSpec()
	got := map[string]string{}
	for _, n := range lab.Nodes(spec.Workers[1]) {
		got[n.Name] = n.Labels[lab.GPUProductLabel]
	}
	want := map[string]string{"eu-west-l4-0": lab.L4, "eu-west-l4-1": lab.L4, "eu-west-l4-2": lab.L4, "eu-west-l4-3": lab.L4}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("eu-west nodes (-want +got):\n%s", diff)
	}
}

// Without a container engine the provider fails at once and says what it needs, for Up, Open (used by
// status and down) alike. This is the path every machine without Docker takes.
func TestNeedsDocker(t *testing.T) {
	p := New(Options{DetectRuntime: func() (cluster.ProviderOption, error) {
		return nil, errors.New("no docker, nerdctl or podman on PATH")
	}})
	_, err := p.Up(context.Background(), defaultSpec(), lab.UpOptions{Dir: t.TempDir()})
	if !errors.Is(err, ErrNeedsDocker) {
		t.Fatalf("Up = %v, want ErrNeedsDocker", err)
	}
	for _, want := range []string{"Docker engine with access to a container registry", "local provider", "no docker, nerdctl or podman"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}

	// A lab whose clusters cannot exist still goes down: its files are removed.
	dir := t.TempDir()
	state := &lab.State{Provider: ProviderName, Dir: dir, Spec: defaultSpec()}
	for _, c := range state.Spec.Clusters() {
		state.Clusters = append(state.Clusters, lab.ClusterState{Name: c.Name, KindCluster: ClusterName(c)})
	}
	if err := lab.WriteState(dir, state); err != nil {
		t.Fatal(err)
	}
	l, err2 := p.Open(context.Background(), state)
	if err2 != nil {
		t.Fatalf("Open: %v", err2)
	}
	if err := l.Check(context.Background()); !errors.Is(err, ErrNeedsDocker) {
		t.Errorf("Check = %v, want ErrNeedsDocker", err)
	}
	if err := l.Down(context.Background()); err != nil {
		t.Errorf("Down: %v", err)
	}
	if _, err := lab.ReadState(dir); !errors.Is(err, lab.ErrNoLab) {
		t.Errorf("state after Down: %v", err)
	}
	t.Logf("kind provider without a container engine: %v", err)
}

func TestRefusesOperators(t *testing.T) {
	detected := false
	p := New(Options{DetectRuntime: func() (cluster.ProviderOption, error) {
		detected = true
		return nil, errors.New("not reached")
	}})
	spec := defaultSpec()
	spec.WithOperators(lab.OperatorRay)
	_, err := p.Up(context.Background(), spec, lab.UpOptions{Dir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), `cluster "management": operators [ray]: the kind provider does not run job operators`) {
		t.Fatalf("Up = %v, want a refusal naming the cluster and its operators", err)
	}
	if detected {
		t.Errorf("the container engine was probed before the spec was refused")
	}
}
