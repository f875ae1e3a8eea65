package kind

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/kind/pkg/cluster"
	"sigs.k8s.io/kind/pkg/cluster/nodeutils"
	kindexec "sigs.k8s.io/kind/pkg/exec"

	"github.com/fleetq/fleetq/e2e/lab"
)

// ProviderName is the kind provider's name in state files and on the command line.
const ProviderName = "kind"

// Options configure the kind provider.
type Options struct {
	// NodeImage is the kindest/node image; default DefaultNodeImage.
	NodeImage string
	// KwokImage runs kwok in each cluster; default DefaultKwokImage.
	KwokImage string
	// Images are local Docker images (fleetq-manager, fleetq-agent) loaded into every cluster's node.
	Images []string
	// DetectRuntime finds the container engine; default kind's own detection (docker, nerdctl, podman).
	DetectRuntime func() (cluster.ProviderOption, error)
}

// Provider starts labs as kind clusters.
type Provider struct {
	opts Options
}

var _ lab.Provider = (*Provider)(nil)

// New returns a kind provider.
func New(opts Options) *Provider {
	if opts.DetectRuntime == nil {
		opts.DetectRuntime = detectEngine
	}
	return &Provider{opts: opts}
}

// detectEngine is kind's detection plus a check that the engine answers: kind only looks for the
// client binary, and a docker client without a daemon would fail later with a less clear message.
func detectEngine() (cluster.ProviderOption, error) {
	opt, err := cluster.DetectNodeProvider()
	if err != nil {
		return nil, err
	}
	if lines, err := kindexec.CombinedOutputLines(kindexec.Command("docker", "info", "--format", "{{.ServerVersion}}")); err != nil {
		var msgs []string
		for _, l := range lines {
			if l = strings.TrimSpace(l); l != "" {
				msgs = append(msgs, l)
			}
		}
		return nil, fmt.Errorf("docker info: %s", strings.Join(msgs, "; "))
	}
	return opt, nil
}

// Name implements lab.Provider.
func (*Provider) Name() string { return ProviderName }

// ErrNeedsDocker is wrapped by every error that comes from the container engine being absent or unable
// to pull images.
var ErrNeedsDocker = errors.New("the kind provider needs a Docker engine with access to a container registry " +
	"(to pull kindest/node and the kwok image); on machines without one use the local provider (the default)")

func (p *Provider) runtime() (*cluster.Provider, error) {
	opt, err := p.opts.DetectRuntime()
	if err != nil {
		return nil, fmt.Errorf("%w: no container engine found: %v", ErrNeedsDocker, err)
	}
	return cluster.NewProvider(opt), nil
}

// Up implements lab.Provider: it creates one kind cluster per lab cluster, runs kwok in each, registers
// the fake nodes, and loads Options.Images.
func (p *Provider) Up(ctx context.Context, spec lab.Spec, opts lab.UpOptions) (lab.Lab, error) {
	spec.Default()
	if err := spec.Validate(); err != nil {
		return nil, fmt.Errorf("lab spec: %w", err)
	}
	for _, cs := range spec.Clusters() {
		if len(cs.Operators) > 0 {
			return nil, fmt.Errorf("cluster %q: operators %v: the kind provider does not run job operators (they are local processes); install them in the kind clusters with their own charts, or use --provider local", cs.Name, cs.Operators)
		}
	}
	kp, err := p.runtime()
	if err != nil {
		return nil, err
	}
	out := opts.ProgressWriter()
	l := &kindLab{p: p, kp: kp, dir: opts.Dir,
		state: &lab.State{Provider: ProviderName, Dir: opts.Dir, Owner: os.Getpid(), Spec: spec}}
	for _, cs := range spec.Clusters() {
		c := &kindCluster{lab: l, spec: cs, role: spec.RoleOf(cs.Name), name: ClusterName(cs),
			dir: filepath.Join(opts.Dir, cs.Name)}
		l.clusters = append(l.clusters, c)
		l.state.Clusters = append(l.state.Clusters, lab.ClusterState{Name: cs.Name, KindCluster: c.name})
	}
	if err := lab.WriteState(opts.Dir, l.state); err != nil {
		return nil, err
	}
	for i, c := range l.clusters {
		fmt.Fprintf(out, "%-12s creating kind cluster %s\n", c.spec.Name, c.name)
		if err := c.create(ctx, spec); err != nil {
			return nil, err
		}
		l.state.Clusters[i].Server, l.state.Clusters[i].Kubeconfig = c.server, c.kubeconfig
		if err := lab.WriteState(opts.Dir, l.state); err != nil {
			return nil, err
		}
		fmt.Fprintf(out, "%-12s ready at %s\n", c.spec.Name, c.server)
	}
	return l, nil
}

// Open implements lab.Provider. Without a container engine the lab opens anyway, so `fleetq-lab down`
// can remove the files of a lab whose clusters cannot exist; everything else reports the missing engine.
func (p *Provider) Open(_ context.Context, state *lab.State) (lab.Lab, error) {
	kp, err := p.runtime()
	l := &kindLab{p: p, kp: kp, engineErr: err, dir: state.Dir, state: state}
	for _, cs := range state.Spec.Clusters() {
		st, ok := state.Cluster(cs.Name)
		if !ok {
			return nil, fmt.Errorf("lab %s: state has no cluster %q", state.Dir, cs.Name)
		}
		l.clusters = append(l.clusters, &kindCluster{lab: l, spec: cs, role: state.Spec.RoleOf(cs.Name),
			name: st.KindCluster, dir: filepath.Join(state.Dir, cs.Name), server: st.Server, kubeconfig: st.Kubeconfig})
	}
	return l, nil
}

type kindLab struct {
	p  *Provider
	kp *cluster.Provider
	// engineErr is why there is no container engine; kp is nil then.
	engineErr error
	dir       string
	state     *lab.State
	clusters  []*kindCluster
}

func (l *kindLab) Dir() string    { return l.dir }
func (l *kindLab) Spec() lab.Spec { return l.state.Spec }
func (l *kindLab) Clusters() []lab.Cluster {
	out := make([]lab.Cluster, len(l.clusters))
	for i, c := range l.clusters {
		out[i] = c
	}
	return out
}

func (l *kindLab) Check(ctx context.Context) error {
	if l.engineErr != nil {
		return l.engineErr
	}
	for _, c := range l.clusters {
		if err := c.waitReady(ctx, 10*time.Second); err != nil {
			return err
		}
	}
	return nil
}

func (l *kindLab) Down(ctx context.Context) error {
	if l.engineErr != nil {
		// No engine, so no container of the lab can be running: only its files are left.
		return lab.RemoveState(l.dir, l.state)
	}
	var errs []error
	for _, c := range l.clusters {
		if err := l.kp.Delete(c.name, ""); err != nil {
			errs = append(errs, fmt.Errorf("cluster %q: delete kind cluster %s: %w", c.spec.Name, c.name, err))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	return lab.RemoveState(l.dir, l.state)
}

type kindCluster struct {
	lab        *kindLab
	spec       lab.ClusterSpec
	role       lab.Role
	name       string
	dir        string
	server     string
	kubeconfig string
}

var _ lab.Cluster = (*kindCluster)(nil)
var _ lab.Faults = (*kindCluster)(nil)
var _ lab.PeerAccess = (*kindCluster)(nil)

func (c *kindCluster) Name() string           { return c.spec.Name }
func (c *kindCluster) Role() lab.Role         { return c.role }
func (c *kindCluster) Spec() lab.ClusterSpec  { return c.spec }
func (c *kindCluster) Server() string         { return c.server }
func (c *kindCluster) KubeconfigPath() string { return c.kubeconfig }

// PeerKubeconfigPath is the kubeconfig that reaches this cluster from inside another kind cluster: the
// API server's address on the Docker network, not the host's 127.0.0.1.
func (c *kindCluster) PeerKubeconfigPath() string { return filepath.Join(c.dir, "kubeconfig.internal") }

func (c *kindCluster) node() string { return c.name + "-control-plane" }

func (c *kindCluster) create(ctx context.Context, spec lab.Spec) error {
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return fmt.Errorf("cluster %q: %w", c.spec.Name, err)
	}
	cfg := Config(c.spec, c.lab.p.opts.NodeImage)
	if data, err := ConfigYAML(c.spec, c.lab.p.opts.NodeImage); err == nil {
		_ = os.WriteFile(filepath.Join(c.dir, "kind-config.yaml"), data, 0o644)
	}
	err := c.lab.kp.Create(c.name,
		cluster.CreateWithV1Alpha4Config(cfg),
		cluster.CreateWithKubeconfigPath(filepath.Join(c.dir, "kind-export.kubeconfig")),
		cluster.CreateWithWaitForReady(3*time.Minute),
		cluster.CreateWithDisplayUsage(false), cluster.CreateWithDisplaySalutation(false))
	if err != nil {
		return fmt.Errorf("cluster %q: create kind cluster %s from image %s: %v: %w", c.spec.Name, c.name, cfg.Nodes[0].Image, err, ErrNeedsDocker)
	}
	for path, internal := range map[string]bool{filepath.Join(c.dir, "kubeconfig"): false, c.PeerKubeconfigPath(): true} {
		kc, err := c.lab.kp.KubeConfig(c.name, internal)
		if err != nil {
			return fmt.Errorf("cluster %q: kubeconfig of kind cluster %s: %w", c.spec.Name, c.name, err)
		}
		if err := os.WriteFile(path, []byte(kc), 0o600); err != nil {
			return fmt.Errorf("cluster %q: %w", c.spec.Name, err)
		}
	}
	c.kubeconfig = filepath.Join(c.dir, "kubeconfig")
	cfgRest, err := lab.RESTConfig(c)
	if err != nil {
		return err
	}
	c.server = cfgRest.Host
	cs, err := lab.Clientset(c)
	if err != nil {
		return err
	}
	objs, err := KwokObjects(spec, c.lab.p.opts.KwokImage)
	if err != nil {
		return err
	}
	if err := apply(ctx, cs, objs); err != nil {
		return fmt.Errorf("cluster %q: install kwok: %w", c.spec.Name, err)
	}
	if err := lab.RegisterNodes(ctx, cs, c.spec); err != nil {
		return err
	}
	if err := c.loadImages(); err != nil {
		return err
	}
	return c.waitNodesReady(ctx, cs)
}

func (c *kindCluster) loadImages() error {
	nodes, err := c.lab.kp.ListInternalNodes(c.name)
	if err != nil {
		return fmt.Errorf("cluster %q: list kind nodes: %w", c.spec.Name, err)
	}
	for _, img := range c.lab.p.opts.Images {
		for _, n := range nodes {
			save := kindexec.Command("docker", "save", img)
			err := kindexec.RunWithStdoutReader(save, func(r io.Reader) error { return nodeutils.LoadImageArchive(n, r) })
			if err != nil {
				return fmt.Errorf("cluster %q: load image %s into %s: %w", c.spec.Name, img, n.String(), err)
			}
		}
	}
	return nil
}

func (c *kindCluster) waitNodesReady(ctx context.Context, cs kubernetes.Interface) error {
	want := lab.Nodes(c.spec)
	return pollUntil(ctx, 3*time.Minute, func(ctx context.Context) bool {
		for _, n := range want {
			node, err := cs.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			if err != nil || !nodeReady(node) {
				return false
			}
		}
		return true
	}, fmt.Sprintf("cluster %q: fake nodes not Ready (is the kwok image %s pullable?)", c.spec.Name, c.lab.p.opts.KwokImage))
}

func (c *kindCluster) waitReady(ctx context.Context, timeout time.Duration) error {
	cs, err := lab.Clientset(c)
	if err != nil {
		return err
	}
	return pollUntil(ctx, timeout, func(ctx context.Context) bool {
		_, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil
	}, fmt.Sprintf("cluster %q: API server %s not ready", c.spec.Name, c.server))
}

// The fault functions act on the control-plane container: the kubelet stops the API server when its
// static-pod manifest is moved away and starts it when it is back; pausing the container freezes it.
const (
	manifest      = "/etc/kubernetes/manifests/kube-apiserver.yaml"
	movedManifest = "/etc/kubernetes/kube-apiserver.yaml.stopped"
)

func (c *kindCluster) StopAPIServer(ctx context.Context) error {
	if err := c.docker("exec", c.node(), "mv", manifest, movedManifest); err != nil {
		return err
	}
	return pollUntil(ctx, 2*time.Minute, func(ctx context.Context) bool { return c.waitReady(ctx, time.Second) != nil },
		fmt.Sprintf("cluster %q: API server still answers", c.spec.Name))
}

func (c *kindCluster) FreezeAPIServer(context.Context) error { return c.docker("pause", c.node()) }
func (c *kindCluster) Resume(context.Context) error          { return c.docker("unpause", c.node()) }

func (c *kindCluster) RestartAPIServer(ctx context.Context) error {
	if err := c.waitReady(ctx, time.Second); err == nil {
		if err := c.StopAPIServer(ctx); err != nil {
			return err
		}
	}
	if err := c.docker("exec", c.node(), "mv", movedManifest, manifest); err != nil {
		return err
	}
	return c.waitReady(ctx, 2*time.Minute)
}

func (c *kindCluster) docker(args ...string) error {
	if c.lab.engineErr != nil {
		return c.lab.engineErr
	}
	if out, err := kindexec.CombinedOutputLines(kindexec.Command("docker", args...)); err != nil {
		return fmt.Errorf("cluster %q: docker %v: %w: %v", c.spec.Name, args, err, out)
	}
	return nil
}

// apply creates the objects, leaving those that exist.
func apply(ctx context.Context, cs kubernetes.Interface, objs []runtime.Object) error {
	for _, o := range objs {
		var err error
		switch o := o.(type) {
		case *corev1.ServiceAccount:
			_, err = cs.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *corev1.ConfigMap:
			_, err = cs.CoreV1().ConfigMaps(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRole:
			_, err = cs.RbacV1().ClusterRoles().Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRoleBinding:
			_, err = cs.RbacV1().ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{})
		case *appsv1.Deployment:
			_, err = cs.AppsV1().Deployments(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		default:
			err = fmt.Errorf("unsupported object %T", o)
		}
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return nil
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func pollUntil(ctx context.Context, timeout time.Duration, cond func(context.Context) bool, failure string) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		probe, cancelProbe := context.WithTimeout(ctx, 5*time.Second)
		ok := cond(probe)
		cancelProbe()
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", failure, ctx.Err())
		case <-tick.C:
		}
	}
}
