package framework

import (
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetq "github.com/fleetq/fleetq/api/fleetq/v1alpha1"
	kueuev1beta2 "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/e2e/lab"
)

// Scheme knows the built-in kinds, CRDs, fleetq's kueue.x-k8s.io/v1beta2 and fleetq.dev kinds and
// Cluster API's Cluster; every client the harness builds uses it.
var Scheme = runtime.NewScheme()

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(Scheme))
	utilruntime.Must(apiextensionsv1.AddToScheme(Scheme))
	utilruntime.Must(kueuev1beta2.AddToScheme(Scheme))
	utilruntime.Must(fleetq.AddToScheme(Scheme))
	utilruntime.Must(clusterv1.AddToScheme(Scheme))
}

// ClusterProxy is how a spec reaches one cluster, whatever provider runs it.
type ClusterProxy interface {
	lab.Cluster
	// RESTConfig is a fresh admin client configuration (callers may change it).
	RESTConfig() *rest.Config
	// Client is a controller-runtime client with Scheme.
	Client() client.Client
	// Clientset is a typed client-go client.
	Clientset() kubernetes.Interface
	// Faults returns the cluster's fault functions, or an error if its provider has none.
	Faults() (lab.Faults, error)
}

type clusterProxy struct {
	lab.Cluster
	cfg       *rest.Config
	client    client.Client
	clientset kubernetes.Interface
}

func newClusterProxy(c lab.Cluster) (*clusterProxy, error) {
	cfg, err := lab.RESTConfig(c)
	if err != nil {
		return nil, err
	}
	cl, err := client.New(cfg, client.Options{Scheme: Scheme})
	if err != nil {
		return nil, fmt.Errorf("cluster %q: client: %w", c.Name(), err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("cluster %q: clientset: %w", c.Name(), err)
	}
	return &clusterProxy{Cluster: c, cfg: cfg, client: cl, clientset: cs}, nil
}

func (c *clusterProxy) RESTConfig() *rest.Config        { return rest.CopyConfig(c.cfg) }
func (c *clusterProxy) Client() client.Client           { return c.client }
func (c *clusterProxy) Clientset() kubernetes.Interface { return c.clientset }

func (c *clusterProxy) Faults() (lab.Faults, error) {
	f, ok := c.Cluster.(lab.Faults)
	if !ok {
		return nil, fmt.Errorf("cluster %q: its provider has no fault functions", c.Name())
	}
	return f, nil
}
