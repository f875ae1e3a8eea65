package local

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/fleetq/fleetq/e2e/lab"
	"github.com/fleetq/fleetq/e2e/lab/kwok"
	"github.com/fleetq/fleetq/e2e/lab/pki"
	"github.com/fleetq/fleetq/e2e/lab/process"
)

// Identities of the lab's clients. The admin, kwok and the job operators are cluster admins; the
// controller-manager and scheduler use the users the API server's bootstrap RBAC already grants
// what they need.
var clients = []pki.Client{
	{Name: "admin", User: "fleetq-lab-admin", Groups: []string{"system:masters"}},
	{Name: "controller-manager", User: "system:kube-controller-manager"},
	{Name: "scheduler", User: "system:kube-scheduler"},
	{Name: "kwok", User: "kwok-controller", Groups: []string{"system:masters"}},
	{Name: "operators", User: "lab-job-operators", Groups: []string{"system:masters"}},
}

// How long startup steps may take. Generous: three API servers starting together on a loaded 2-core CI
// box take many times their idle 3 s.
const (
	etcdReadyTimeout  = 60 * time.Second
	apiReadyTimeout   = 180 * time.Second
	nodesReadyTimeout = 120 * time.Second
	stopGrace         = 15 * time.Second
	bindAttempts      = 3
)

// cluster is one local cluster: its directory, certificates, ports and processes.
type cluster struct {
	lab  *localLab
	spec lab.ClusterSpec
	role lab.Role
	dir  string

	// mu serializes the fault functions and startup on this cluster.
	mu sync.Mutex

	etcdPort, peerPort, apiPort int
	server                      string
	kubeconfig                  string

	// bundle is set on the cluster that generated it; clusters reattached from a state file read
	// credentials from their kubeconfig instead.
	bundle *pki.Bundle
	procs  map[string]*process.Process
	order  []string
}

var _ lab.Cluster = (*cluster)(nil)
var _ lab.Faults = (*cluster)(nil)

func (c *cluster) Name() string           { return c.spec.Name }
func (c *cluster) Role() lab.Role         { return c.role }
func (c *cluster) Spec() lab.ClusterSpec  { return c.spec }
func (c *cluster) Server() string         { return c.server }
func (c *cluster) KubeconfigPath() string { return c.kubeconfig }
func (c *cluster) path(elem ...string) string {
	return filepath.Join(append([]string{c.dir}, elem...)...)
}

// save records the cluster's processes in the state file. It is called by whoever changes them (startup
// and the fault functions, under mu), so it never reads a process another goroutine is changing.
func (c *cluster) save() {
	cs := lab.ClusterState{Name: c.spec.Name, Server: c.server, Kubeconfig: c.kubeconfig}
	for _, name := range c.order {
		cs.Processes = append(cs.Processes, c.procs[name].State)
	}
	c.lab.store(cs)
}

// proc returns the named process, creating its record on first use.
func (c *cluster) proc(name string) *process.Process {
	if p, ok := c.procs[name]; ok {
		return p
	}
	p := &process.Process{Owner: c.spec.Name, State: lab.ProcessState{Name: name, Log: c.path("logs", name+".log")}}
	c.procs[name] = p
	c.order = append(c.order, name)
	return p
}

// prepare writes the cluster's certificates and kwok stages into a fresh directory.
func (c *cluster) prepare(spec *lab.Spec) error {
	if err := os.RemoveAll(c.dir); err != nil {
		return fmt.Errorf("cluster %q: clear %s: %w", c.spec.Name, c.dir, err)
	}
	for _, d := range []string{"pki", "etcd", "logs", "kwok"} {
		// etcd warns about (and may one day refuse) a data directory others can read.
		if err := os.MkdirAll(c.path(d), 0o700); err != nil {
			return fmt.Errorf("cluster %q: %w", c.spec.Name, err)
		}
	}
	b, err := pki.NewBundle(c.spec.Name, pki.ServingHosts, clients)
	if err != nil {
		return err
	}
	c.bundle = b
	pkiDir := c.path("pki")
	if _, _, err := b.CA.WriteFiles(pkiDir, "ca"); err != nil {
		return fmt.Errorf("cluster %q: %w", c.spec.Name, err)
	}
	if _, _, err := b.Serving.WriteFiles(pkiDir, "apiserver"); err != nil {
		return fmt.Errorf("cluster %q: %w", c.spec.Name, err)
	}
	if err := os.WriteFile(c.path("pki", "sa.key"), b.ServiceAccountKeyPEM, 0o600); err != nil {
		return fmt.Errorf("cluster %q: %w", c.spec.Name, err)
	}
	if err := os.WriteFile(c.path("pki", "sa.pub"), b.ServiceAccountPubPEM, 0o644); err != nil {
		return fmt.Errorf("cluster %q: %w", c.spec.Name, err)
	}
	stages, err := kwok.Render(kwok.Options{PodRunTime: spec.PodRunTime.Duration, PodTerminationDelay: spec.PodTerminationDelay.Duration})
	if err != nil {
		return fmt.Errorf("cluster %q: %w", c.spec.Name, err)
	}
	if err := os.WriteFile(c.path("kwok", "stages.yaml"), stages, 0o644); err != nil {
		return fmt.Errorf("cluster %q: %w", c.spec.Name, err)
	}
	return nil
}

// start brings the cluster up step by step: etcd, the API server, the kubeconfigs and fake nodes, and in
// full mode the controller-manager, scheduler and kwok; it returns when the cluster can run pods.
func (c *cluster) start(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.startEtcd(ctx); err != nil {
		return err
	}
	c.lab.progress(c.spec.Name, "etcd ready on 127.0.0.1:%d", c.etcdPort)
	if err := c.startAPIServer(ctx); err != nil {
		return err
	}
	c.lab.progress(c.spec.Name, "kube-apiserver ready at %s", c.server)
	if err := c.writeKubeconfigs(); err != nil {
		return err
	}
	c.save()
	cs, err := c.clientset()
	if err != nil {
		return err
	}
	if err := lab.RegisterNodes(ctx, cs, c.spec); err != nil {
		return err
	}
	if c.spec.Mode == lab.ModeAPIServer {
		// Without kwok nobody marks the nodes Ready; capacity readers that skip unready nodes would
		// see nothing, so the lab does it once (no node controller runs to undo it).
		if err := markNodesReady(ctx, cs, c.spec); err != nil {
			return err
		}
		c.lab.progress(c.spec.Name, "%d nodes registered", len(lab.Nodes(c.spec)))
		return nil
	}
	for _, name := range []string{lab.KubeControllerManager, lab.KubeScheduler, lab.Kwok} {
		p := c.proc(name)
		p.State.Args, p.State.Env = c.args(name)
		if err := p.Start(c.lab.owned); err != nil {
			return err
		}
	}
	c.save()
	if err := c.proc(lab.Kwok).WaitFor(ctx, "nodes Ready", func(ctx context.Context) bool {
		return nodesReady(ctx, cs, c.spec)
	}); err != nil {
		return err
	}
	c.lab.progress(c.spec.Name, "%d fake nodes Ready (kwok)", len(lab.Nodes(c.spec)))
	// Pods cannot be created before the default service account exists; tests create them right away.
	if err := c.proc(lab.KubeControllerManager).WaitFor(ctx, "serving (no default service account)", func(ctx context.Context) bool {
		_, err := cs.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err == nil
	}); err != nil {
		return err
	}
	if p := c.proc(lab.KubeScheduler); !p.Running() {
		return p.Failure(fmt.Sprintf("%v", p.ExitError()))
	}
	c.lab.progress(c.spec.Name, "kube-controller-manager, kube-scheduler and kwok running")
	return c.startOperators(ctx)
}

func (c *cluster) startEtcd(ctx context.Context) error {
	p := c.proc(lab.Etcd)
	for attempt := 1; ; attempt++ {
		p.State.Args, p.State.Env = c.args(lab.Etcd)
		p.State.Ports = []int{c.etcdPort, c.peerPort}
		if err := p.Start(c.lab.owned); err != nil {
			return err
		}
		c.save()
		waitCtx, cancel := context.WithTimeout(ctx, etcdReadyTimeout)
		err := p.WaitFor(waitCtx, "healthy", func(ctx context.Context) bool { return etcdHealthy(ctx, c.etcdPort) })
		cancel()
		if err == nil || attempt == bindAttempts || !lostPortRace(p) {
			return err
		}
		if err := c.repick(&c.etcdPort, &c.peerPort); err != nil {
			return err
		}
	}
}

func (c *cluster) startAPIServer(ctx context.Context) error {
	p := c.proc(lab.KubeAPIServer)
	for attempt := 1; ; attempt++ {
		p.State.Args, p.State.Env = c.args(lab.KubeAPIServer)
		p.State.Ports = []int{c.apiPort}
		c.server = fmt.Sprintf("https://127.0.0.1:%d", c.apiPort)
		if err := p.Start(c.lab.owned); err != nil {
			return err
		}
		c.save()
		err := c.waitAPIReady(ctx, apiReadyTimeout)
		if err == nil || attempt == bindAttempts || c.spec.APIServerPort != 0 || !lostPortRace(p) {
			return err
		}
		if err := c.repick(&c.apiPort); err != nil {
			return err
		}
	}
}

func (c *cluster) waitAPIReady(ctx context.Context, timeout time.Duration) error {
	cs, err := c.clientset()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return c.proc(lab.KubeAPIServer).WaitFor(ctx, "ready (/readyz)", func(ctx context.Context) bool {
		probeCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(probeCtx)
		return err == nil
	})
}

// lostPortRace says whether a process exited because another program bound its port first.
func lostPortRace(p *process.Process) bool {
	return !p.Running() && strings.Contains(process.Tail(p.State.Log, 30), "address already in use")
}

func (c *cluster) repick(ports ...*int) error {
	var pp portPicker
	defer pp.release()
	for _, port := range ports {
		n, err := pp.pick()
		if err != nil {
			return fmt.Errorf("cluster %q: %w", c.spec.Name, err)
		}
		*port = n
	}
	return nil
}

// args returns the command line and extra environment of one process.
func (c *cluster) args(name string) (args, env []string) {
	bin := filepath.Join(c.lab.binDir, name)
	pkiFile := func(f string) string { return c.path("pki", f) }
	switch name {
	case lab.Etcd:
		peer := fmt.Sprintf("http://127.0.0.1:%d", c.peerPort)
		client := fmt.Sprintf("http://127.0.0.1:%d", c.etcdPort)
		return []string{bin,
			"--name=" + c.spec.Name,
			"--data-dir=" + c.path("etcd"),
			"--listen-client-urls=" + client,
			"--advertise-client-urls=" + client,
			"--listen-peer-urls=" + peer,
			"--initial-advertise-peer-urls=" + peer,
			"--initial-cluster=" + c.spec.Name + "=" + peer,
			// The lab's data is disposable; fsync on every write would make etcd the bottleneck.
			"--unsafe-no-fsync=true",
			"--log-level=warn",
		}, nil
	case lab.KubeAPIServer:
		args := []string{bin,
			fmt.Sprintf("--etcd-servers=http://127.0.0.1:%d", c.etcdPort),
			"--bind-address=127.0.0.1",
			"--advertise-address=127.0.0.1",
			fmt.Sprintf("--secure-port=%d", c.apiPort),
			// v1.37 refuses a loopback advertise address with the default endpoint reconciler.
			"--endpoint-reconciler-type=none",
			"--cert-dir=" + c.path("pki"),
			"--tls-cert-file=" + pkiFile("apiserver.crt"),
			"--tls-private-key-file=" + pkiFile("apiserver.key"),
			"--client-ca-file=" + pkiFile("ca.crt"),
			"--service-account-key-file=" + pkiFile("sa.pub"),
			"--service-account-signing-key-file=" + pkiFile("sa.key"),
			"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
			"--service-cluster-ip-range=10.0.0.0/24",
			"--authorization-mode=RBAC",
			"--allow-privileged=true",
			"--profiling=false",
			"--shutdown-watch-termination-grace-period=2s",
		}
		if c.spec.Mode == lab.ModeAPIServer {
			// No controller-manager creates the default service account, so admission would refuse
			// every pod a test creates directly.
			args = append(args, "--disable-admission-plugins=ServiceAccount")
		}
		return args, nil
	case lab.KubeControllerManager:
		return []string{bin,
			"--kubeconfig=" + pkiFile("controller-manager.kubeconfig"),
			"--controllers=*",
			"--leader-elect=false",
			"--secure-port=0",
			"--use-service-account-credentials=true",
			"--service-account-private-key-file=" + pkiFile("sa.key"),
			"--root-ca-file=" + pkiFile("ca.crt"),
			"--cluster-signing-cert-file=" + pkiFile("ca.crt"),
			"--cluster-signing-key-file=" + pkiFile("ca.key"),
			"--cluster-name=" + c.spec.Name,
		}, nil
	case lab.KubeScheduler:
		return []string{bin,
			"--kubeconfig=" + pkiFile("scheduler.kubeconfig"),
			"--leader-elect=false",
			"--secure-port=0",
		}, nil
	case lab.Kwok:
		return []string{bin,
				"--kubeconfig=" + pkiFile("kwok.kubeconfig"),
				"--config=" + c.path("kwok", "stages.yaml"),
				"--manage-all-nodes=false",
				"--manage-nodes-with-annotation-selector=" + lab.FakeNodeAnnotation + "=fake",
				"--cidr=10.244.0.0/16",
				"--node-ip=10.1.0.1",
			},
			// kwok also loads ~/.kwok/kwok.yaml when it exists; a private HOME keeps a user's file out.
			[]string{"HOME=" + c.path("kwok")}
	}
	panic("unknown process " + name)
}

// writeKubeconfigs writes the admin kubeconfig (the one users and tests get) and one per component.
func (c *cluster) writeKubeconfigs() error {
	files := map[string]string{
		"admin":              c.path("kubeconfig"),
		"controller-manager": c.path("pki", "controller-manager.kubeconfig"),
		"scheduler":          c.path("pki", "scheduler.kubeconfig"),
		"kwok":               c.path("pki", "kwok.kubeconfig"),
		"operators":          c.path("pki", "operators.kubeconfig"),
	}
	for _, cl := range clients {
		data, err := Kubeconfig(c.spec.Name, c.server, c.bundle.CA.CertPEM, c.bundle.Clients[cl.Name], cl.User)
		if err != nil {
			return err
		}
		if err := os.WriteFile(files[cl.Name], data, 0o600); err != nil {
			return fmt.Errorf("cluster %q: write kubeconfig: %w", c.spec.Name, err)
		}
	}
	c.kubeconfig = files["admin"]
	return nil
}

// restConfig returns an admin client configuration: from the bundle while starting (the kubeconfig
// is written only once the port is final), else from the kubeconfig.
func (c *cluster) restConfig() (*rest.Config, error) {
	if c.bundle == nil {
		return lab.RESTConfig(c)
	}
	admin := c.bundle.Clients["admin"]
	return &rest.Config{
		Host: c.server,
		TLSClientConfig: rest.TLSClientConfig{
			CAData: c.bundle.CA.CertPEM, CertData: admin.CertPEM, KeyData: admin.KeyPEM,
		},
		QPS: 200, Burst: 400,
	}, nil
}

func (c *cluster) clientset() (kubernetes.Interface, error) {
	cfg, err := c.restConfig()
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("cluster %q: %w", c.spec.Name, err)
	}
	return cs, nil
}

func nodesReady(ctx context.Context, cs kubernetes.Interface, spec lab.ClusterSpec) bool {
	want := lab.Nodes(spec)
	if len(want) == 0 {
		return true
	}
	list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return false
	}
	ready := map[string]bool{}
	for _, n := range list.Items {
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				ready[n.Name] = true
			}
		}
	}
	for _, n := range want {
		if !ready[n.Name] {
			return false
		}
	}
	return true
}

// markNodesReady does for an API-server-only cluster what kwok and the node lifecycle controller
// do in a full one: the nodes report Ready and lose the not-ready taint.
func markNodesReady(ctx context.Context, cs kubernetes.Interface, spec lab.ClusterSpec) error {
	now := metav1.Now()
	for _, n := range lab.Nodes(spec) {
		node, err := cs.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("cluster %q: node %q: %w", spec.Name, n.Name, err)
		}
		node.Status.Phase = corev1.NodeRunning
		node.Status.Conditions = []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "FleetqLab",
			Message: "API-server-only lab: marked Ready at registration", LastHeartbeatTime: now, LastTransitionTime: now,
		}}
		node, err = cs.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
		if err != nil {
			return fmt.Errorf("cluster %q: mark node %q Ready: %w", spec.Name, n.Name, err)
		}
		// The API server's TaintNodesByCondition admission gives a new node the not-ready taint;
		// the node lifecycle controller, which would lift it once the node is Ready, does not run
		// here. Left on, every reader of schedulable capacity (the scheduler, fleetq's agent)
		// sees no node at all.
		kept := node.Spec.Taints[:0]
		for _, t := range node.Spec.Taints {
			if t.Key != corev1.TaintNodeNotReady && t.Key != corev1.TaintNodeUnreachable {
				kept = append(kept, t)
			}
		}
		if len(kept) == len(node.Spec.Taints) {
			continue
		}
		node.Spec.Taints = kept
		if _, err := cs.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("cluster %q: lift node %q's not-ready taint: %w", spec.Name, n.Name, err)
		}
	}
	return nil
}
