package framework

import (
	"context"
	"fmt"
	"net"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/fleetq/fleetq/e2e/lab"
)

// KubeconfigSecretKey is the key MultiKueue (and fleetq's dispatch) read a worker's kubeconfig from.
const KubeconfigSecretKey = "kubeconfig"

// KubeconfigSecret is a Secret holding a kubeconfig the way a MultiKueueCluster references it.
func KubeconfigSecret(namespace, name string, kubeconfig []byte) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Data:       map[string][]byte{KubeconfigSecretKey: kubeconfig},
	}
}

// WorkerKubeconfigSecret is the Secret a manager uses to reach worker: its peer kubeconfig (reachable
// from the management cluster) with embedded credentials.
func WorkerKubeconfigSecret(worker ClusterProxy, namespace, name string) (*corev1.Secret, error) {
	data, err := lab.PeerKubeconfig(worker)
	if err != nil {
		return nil, err
	}
	return KubeconfigSecret(namespace, name, data), nil
}

// ClosedPort returns a loopback port nothing listens on right now: it was free, bound, then released.
func ClosedPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("closed port: %w", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		return 0, fmt.Errorf("closed port: %w", err)
	}
	return port, nil
}

// ClosedPortKubeconfig is c's kubeconfig with its server moved to a closed loopback port: valid
// credentials, unreachable cluster, as a worker that is gone looks to the manager.
func ClosedPortKubeconfig(c lab.Cluster) ([]byte, error) {
	port, err := ClosedPort()
	if err != nil {
		return nil, err
	}
	return KubeconfigWithServer(c, fmt.Sprintf("https://127.0.0.1:%d", port))
}

// KubeconfigWithServer is c's admin kubeconfig reaching it at another address (a proxy before it,
// a closed port): the same credentials and CA, so the address must be one the API server's
// certificate names (any port of 127.0.0.1 on the local lab).
func KubeconfigWithServer(c lab.Cluster, server string) ([]byte, error) {
	data, err := lab.Kubeconfig(c)
	if err != nil {
		return nil, err
	}
	cfg, err := clientcmd.Load(data)
	if err != nil {
		return nil, fmt.Errorf("cluster %q: parse kubeconfig: %w", c.Name(), err)
	}
	for _, cl := range cfg.Clusters {
		cl.Server = server
	}
	out, err := clientcmd.Write(*cfg)
	if err != nil {
		return nil, fmt.Errorf("cluster %q: write kubeconfig: %w", c.Name(), err)
	}
	return out, nil
}

// Reachable says whether the cluster's API server answers /readyz within timeout.
func Reachable(ctx context.Context, c ClusterProxy, timeout time.Duration) bool {
	cfg := c.RESTConfig()
	cfg.Timeout = timeout
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	_, err = cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	return err == nil
}
