package lab

import (
	"context"
	"fmt"
	"io"
	"os"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Cluster is one running cluster, as specs, the harness and the command see it, whatever runs it.
type Cluster interface {
	// Name is the cluster's name from the spec.
	Name() string
	// Role tells the management cluster from workers.
	Role() Role
	// Spec is the defaulted spec the cluster was started from.
	Spec() ClusterSpec
	// Server is the API server's URL.
	Server() string
	// KubeconfigPath is an admin kubeconfig with every credential embedded (no file references, which
	// MultiKueue refuses), usable from any process on this machine.
	KubeconfigPath() string
}

// Faults are the fault-injection functions of one cluster's API server, for tests of how fleetq
// behaves when a worker goes away, hangs or comes back.
type Faults interface {
	// StopAPIServer stops the API server: its port refuses connections until RestartAPIServer.
	StopAPIServer(ctx context.Context) error
	// FreezeAPIServer suspends the API server (SIGSTOP): connections open but nothing answers.
	FreezeAPIServer(ctx context.Context) error
	// Resume continues a frozen API server (SIGCONT).
	Resume(ctx context.Context) error
	// RestartAPIServer stops the API server if it runs and starts it again on the same port with the
	// same data, returning once it is ready and the cluster's controllers work with it again.
	RestartAPIServer(ctx context.Context) error
}

// Lab is a running set of clusters.
type Lab interface {
	// Dir holds the lab's state file and every cluster's data, logs and kubeconfig.
	Dir() string
	// Spec is the defaulted spec the lab was started from.
	Spec() Spec
	// Clusters lists the management cluster first, then the workers in spec order.
	Clusters() []Cluster
	// Check reports the first reason the lab is not fully running (a process gone, an API server not
	// ready), or nil.
	Check(ctx context.Context) error
	// Down stops every process of the lab and removes its state; running it twice is harmless.
	Down(ctx context.Context) error
}

// Provider starts labs and reattaches to labs another process started.
type Provider interface {
	// Name is how the state file and the command's --provider flag refer to the provider.
	Name() string
	// Up starts the clusters spec describes in opts.Dir, which must not hold a lab.
	Up(ctx context.Context, spec Spec, opts UpOptions) (Lab, error)
	// Open reattaches to the lab state describes, so another process can use or stop it.
	Open(ctx context.Context, state *State) (Lab, error)
}

// UpOptions tune how a provider starts a lab.
type UpOptions struct {
	// Dir is the lab directory (see ResolveDir).
	Dir string
	// BinDir holds etcd, kube-* and kwok; empty means FindBinDir.
	BinDir string
	// Owned ties the lab's processes to the calling process: they are killed when it dies
	// (Pdeathsig). Tests set it; `fleetq-lab up` leaves it off so the lab outlives the command.
	Owned bool
	// Progress receives one line per step; nil discards them.
	Progress io.Writer
}

// ProgressWriter returns where progress lines go, never nil.
func (o UpOptions) ProgressWriter() io.Writer {
	if o.Progress == nil {
		return io.Discard
	}
	return o.Progress
}

// RESTConfig loads a cluster's admin kubeconfig into a client configuration. The lab's servers
// handle far more than client-go's default 5 QPS; tests should not wait on a client-side limiter.
func RESTConfig(c Cluster) (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", c.KubeconfigPath())
	if err != nil {
		return nil, fmt.Errorf("cluster %q: load kubeconfig %s: %w", c.Name(), c.KubeconfigPath(), err)
	}
	cfg.QPS, cfg.Burst = 200, 400
	return cfg, nil
}

// Clientset builds a typed client for a cluster.
func Clientset(c Cluster) (*kubernetes.Clientset, error) {
	cfg, err := RESTConfig(c)
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("cluster %q: %w", c.Name(), err)
	}
	return cs, nil
}

// Kubeconfig returns a cluster's admin kubeconfig file contents, e.g. for a MultiKueue Secret.
func Kubeconfig(c Cluster) ([]byte, error) {
	data, err := os.ReadFile(c.KubeconfigPath())
	if err != nil {
		return nil, fmt.Errorf("cluster %q: %w", c.Name(), err)
	}
	return data, nil
}

// Find returns the lab's cluster with the given name.
func Find(l Lab, name string) (Cluster, error) {
	var names []string
	for _, c := range l.Clusters() {
		if c.Name() == name {
			return c, nil
		}
		names = append(names, c.Name())
	}
	return nil, fmt.Errorf("lab %s: no cluster %q (clusters: %v)", l.Dir(), name, names)
}

// Management returns the lab's management cluster.
func Management(l Lab) Cluster {
	for _, c := range l.Clusters() {
		if c.Role() == RoleManagement {
			return c
		}
	}
	return nil
}

// Workers returns the lab's worker clusters in spec order.
func Workers(l Lab) []Cluster {
	var ws []Cluster
	for _, c := range l.Clusters() {
		if c.Role() == RoleWorker {
			ws = append(ws, c)
		}
	}
	return ws
}

// PeerAccess is implemented by clusters that other clusters reach at a different address than this
// machine does (kind: the Docker network instead of a port on 127.0.0.1).
type PeerAccess interface {
	// PeerKubeconfigPath is the kubeconfig a component running in another cluster of the lab uses.
	PeerKubeconfigPath() string
}

// PeerKubeconfig returns the kubeconfig a component in another cluster of the lab uses to reach c
// (for a MultiKueue-style Secret): the peer kubeconfig where the provider has one, else the admin one.
func PeerKubeconfig(c Cluster) ([]byte, error) {
	path := c.KubeconfigPath()
	if p, ok := c.(PeerAccess); ok {
		path = p.PeerKubeconfigPath()
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cluster %q: %w", c.Name(), err)
	}
	return data, nil
}
