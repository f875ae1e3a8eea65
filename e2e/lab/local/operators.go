package local

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetq/fleetq/e2e/lab"
)

// startOperators installs each operator's CRDs and starts it, returning once its probe answers.
func (c *cluster) startOperators(ctx context.Context) error {
	for _, o := range c.spec.Operators {
		n, err := c.installCRDs(ctx, o)
		if err != nil {
			return err
		}
		port, err := freePort()
		if err != nil {
			return fmt.Errorf("cluster %q: %s: %w", c.spec.Name, o.Binary(), err)
		}
		p := c.proc(o.Binary())
		p.State.Args = []string{filepath.Join(c.lab.binDir, o.Binary()),
			"--kubeconfig=" + c.path("pki", "operators.kubeconfig"),
			fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", port),
		}
		p.State.Ports = []int{port}
		if err := p.Start(c.lab.owned); err != nil {
			return err
		}
		c.save()
		ready := fmt.Sprintf("http://127.0.0.1:%d/readyz", port)
		if err := p.WaitFor(ctx, "ready ("+ready+")", func(ctx context.Context) bool { return httpOK(ctx, ready) }); err != nil {
			return err
		}
		c.lab.progress(c.spec.Name, "%s running (%d CRDs)", o.Binary(), n)
	}
	return nil
}

// installCRDs creates the operator's CRDs from the bin directory and waits until they are served.
func (c *cluster) installCRDs(ctx context.Context, o lab.Operator) (int, error) {
	dir := filepath.Join(c.lab.binDir, o.CRDDir())
	crds, err := lab.LoadCRDs(dir)
	if err != nil {
		return 0, fmt.Errorf("cluster %q: the %s operator's CRDs: %w: run 'make tools'", c.spec.Name, o, err)
	}
	cfg, err := c.restConfig()
	if err != nil {
		return 0, err
	}
	scheme := runtime.NewScheme()
	utilruntime.Must(apiextensionsv1.AddToScheme(scheme))
	cl, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return 0, fmt.Errorf("cluster %q: %w", c.spec.Name, err)
	}
	if err := lab.InstallCRDs(ctx, cl, c.spec.Name, crds); err != nil {
		return 0, err
	}
	return len(crds), nil
}

// freePort returns a loopback port free right now.
func freePort() (int, error) {
	var pp portPicker
	defer pp.release()
	return pp.pick()
}

func httpOK(ctx context.Context, url string) bool {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
