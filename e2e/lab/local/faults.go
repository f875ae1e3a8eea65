package local

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/fleetq/fleetq/e2e/lab"
)

// StopAPIServer stops the cluster's API server; its port refuses connections until RestartAPIServer.
func (c *cluster) StopAPIServer(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.proc(lab.KubeAPIServer).Stop(ctx, stopGrace); err != nil {
		return err
	}
	c.save()
	return nil
}

// FreezeAPIServer suspends the API server with SIGSTOP: clients connect but get no answer, the way a
// hung or partitioned control plane looks.
func (c *cluster) FreezeAPIServer(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.proc(lab.KubeAPIServer)
	if !p.Running() {
		return fmt.Errorf("cluster %q: freeze %s: not running", c.spec.Name, p.State.Name)
	}
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		return err
	}
	return poll(ctx, func() bool { return p.Frozen() }, fmt.Sprintf("cluster %q: %s did not stop", c.spec.Name, p.State.Name))
}

// Resume continues a frozen API server with SIGCONT.
func (c *cluster) Resume(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.proc(lab.KubeAPIServer)
	if !p.Running() {
		return fmt.Errorf("cluster %q: resume %s: not running", c.spec.Name, p.State.Name)
	}
	if err := p.Signal(syscall.SIGCONT); err != nil {
		return err
	}
	return poll(ctx, func() bool { return !p.Frozen() }, fmt.Sprintf("cluster %q: %s did not continue", c.spec.Name, p.State.Name))
}

// RestartAPIServer stops the API server if it runs (frozen or not) and starts it again with the same
// flags: same port, same etcd, so the same data. It returns once /readyz answers.
//
// Once it is ready, the cluster's other control-plane processes (controller-manager, scheduler,
// kwok) are restarted too. A real cluster's load balancer sends nothing to an API server before it
// is ready; here they reach it the moment its port opens, are told "forbidden" while its RBAC
// caches fill, and client-go then backs off for a minute or more (and the job controller refuses to
// act on a pod cache older than its own writes), so new Jobs would create no pods for minutes.
func (c *cluster) RestartAPIServer(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.proc(lab.KubeAPIServer)
	if err := p.Stop(ctx, stopGrace); err != nil {
		return err
	}
	if len(p.State.Args) == 0 {
		return fmt.Errorf("cluster %q: restart %s: no recorded command line", c.spec.Name, p.State.Name)
	}
	if err := p.Start(c.lab.owned); err != nil {
		return err
	}
	c.save()
	if err := c.waitAPIReady(ctx, apiReadyTimeout); err != nil {
		return err
	}
	if err := c.waitAuthorizing(ctx); err != nil {
		return err
	}
	for _, name := range c.order {
		if name == lab.Etcd || name == lab.KubeAPIServer {
			continue
		}
		q := c.procs[name]
		if err := q.Stop(ctx, stopGrace); err != nil {
			return err
		}
		if err := q.Start(c.lab.owned); err != nil {
			return err
		}
	}
	c.save()
	c.lab.progress(c.spec.Name, "kube-apiserver restarted at %s, and the controllers after it", c.server)
	return nil
}

// check reports the first reason the cluster is not fully running.
func (c *cluster) check(ctx context.Context) error {
	for _, name := range c.order {
		p := c.procs[name]
		if !p.Running() {
			return fmt.Errorf("cluster %q: %s (pid %d) is not running", c.spec.Name, name, p.State.PID)
		}
		if p.Frozen() {
			return fmt.Errorf("cluster %q: %s (pid %d) is frozen", c.spec.Name, name, p.State.PID)
		}
	}
	if err := c.waitAPIReady(ctx, 10*time.Second); err != nil {
		return err
	}
	return nil
}

// stopAll stops the cluster's processes, newest first, so nothing sees its API server vanish.
func (c *cluster) stopAll(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for i := len(c.order) - 1; i >= 0; i-- {
		if err := c.procs[c.order[i]].Stop(ctx, stopGrace); err != nil {
			errs = append(errs, err)
		}
	}
	c.save()
	if len(errs) > 0 {
		return errs[0]
	}
	return nil
}

func etcdHealthy(ctx context.Context, port int) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/health", port), nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode == http.StatusOK && strings.Contains(string(body), `"health":"true"`)
}

func poll(ctx context.Context, cond func() bool, failure string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", failure, ctx.Err())
		case <-tick.C:
		}
	}
	return nil
}

// waitAuthorizing waits until the API server authorizes the controller-manager: /readyz answers
// while its RBAC caches are still filling, and until they are it refuses everyone outside
// system:masters. Clusters without a controller-manager have nobody to wait for.
func (c *cluster) waitAuthorizing(ctx context.Context) error {
	if _, ok := c.procs[lab.KubeControllerManager]; !ok {
		return nil
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", c.path("pki", "controller-manager.kubeconfig"))
	if err != nil {
		return fmt.Errorf("cluster %q: %w", c.spec.Name, err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("cluster %q: %w", c.spec.Name, err)
	}
	ctx, cancel := context.WithTimeout(ctx, apiReadyTimeout)
	defer cancel()
	return c.proc(lab.KubeAPIServer).WaitFor(ctx, "authorizing the controller-manager", func(ctx context.Context) bool {
		probeCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err := cs.CoreV1().Pods("").List(probeCtx, metav1.ListOptions{Limit: 1})
		return err == nil
	})
}
