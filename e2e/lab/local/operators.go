package local

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	"github.com/fleetq/fleetq/e2e/lab"
)

// crdEstablishedTimeout bounds how long a CRD may take to be served.
const crdEstablishedTimeout = 60 * time.Second

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
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		return 0, fmt.Errorf("cluster %q: the %s operator's CRDs are not in %s: run 'make tools'", c.spec.Name, o, dir)
	}
	sort.Strings(files)
	cfg, err := c.restConfig()
	if err != nil {
		return 0, err
	}
	cs, err := apiextensions.NewForConfig(cfg)
	if err != nil {
		return 0, fmt.Errorf("cluster %q: %w", c.spec.Name, err)
	}
	var names []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return 0, fmt.Errorf("cluster %q: %w", c.spec.Name, err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(data, crd); err != nil {
			return 0, fmt.Errorf("cluster %q: CRD %s: %w", c.spec.Name, f, err)
		}
		if _, err := cs.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return 0, fmt.Errorf("cluster %q: create CRD %s: %w", c.spec.Name, crd.Name, err)
		}
		names = append(names, crd.Name)
	}
	for _, name := range names {
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, crdEstablishedTimeout, true, func(ctx context.Context) (bool, error) {
			crd, err := cs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil //nolint:nilerr // retried until the timeout
			}
			for _, cond := range crd.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return 0, fmt.Errorf("cluster %q: CRD %s not established: %w", c.spec.Name, name, err)
		}
	}
	return len(names), nil
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
