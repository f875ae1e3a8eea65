// Package components runs fleetq's manager (and, later, agents) against lab clusters for the
// integration and e2e suites, in-process, with configurations suited to tests: webhooks served on
// a free loopback port that the API server calls by URL, short backoffs, probes off.
package components

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/config"
	"github.com/fleetq/fleetq/e2e/framework"
	"github.com/fleetq/fleetq/manager/setup"
	workersetup "github.com/fleetq/fleetq/worker/setup"
)

// ManagerConfig returns a manager configuration for a test lab: webhooks on a free loopback port
// reached by URL, metrics and probes off, leader election with short timings (a stopped manager
// releases its lease, so a restart takes over at once; the lease still survives a loaded 2-core
// machine), and a one-second requeue backoff.
func ManagerConfig() (*config.Configuration, error) {
	port, err := setup.FreePort()
	if err != nil {
		return nil, err
	}
	cfg := &config.Configuration{
		Metrics: config.Endpoint{BindAddress: "0"},
		Health:  config.Endpoint{BindAddress: "0"},
		Webhook: config.Webhook{
			Host: "127.0.0.1",
			Port: ptr.To(int32(port)),
			URL:  fmt.Sprintf("https://127.0.0.1:%d", port),
		},
		LeaderElection: config.LeaderElection{
			LeaseDuration: &metav1.Duration{Duration: 10 * time.Second},
			RenewDeadline: &metav1.Duration{Duration: 8 * time.Second},
			RetryPeriod:   &metav1.Duration{Duration: time.Second},
		},
		RequeuingStrategy: config.RequeuingStrategy{BackoffBaseSeconds: ptr.To[int32](1), BackoffMaxSeconds: ptr.To[int32](5)},
		ClientConnection:  config.ClientConnection{QPS: ptr.To[float32](200), Burst: ptr.To[int32](400)},
	}
	cfg.SetDefaults()
	if errs := cfg.Validate(); len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	return cfg, nil
}

// StartManager runs fleetq-manager in-process against a lab cluster until the suite's Teardown
// (or Component.Stop); Component.Restart starts a fresh manager, as a process restart would.
func StartManager(ctx context.Context, env *framework.Environment, cluster string, cfg *config.Configuration) (*framework.Component, error) {
	c := env.Cluster(cluster)
	if c == nil {
		return nil, fmt.Errorf("no cluster %q in the lab", cluster)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: cfg.Namespace}}
	if err := c.Client().Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("namespace %s: %w", cfg.Namespace, err)
	}
	return env.Start(ctx, framework.ComponentSpec{
		Name:    "fleetq-manager",
		Cluster: cluster,
		Run: func(ctx context.Context, rc *rest.Config) error {
			mgr, err := setup.New(setup.Options{Config: cfg, RestConfig: rc, Log: ctrl.Log.WithName("manager"), SeveralPerProcess: true})
			if err != nil {
				return err
			}
			return mgr.Start(ctx)
		},
	})
}

// WaitForWebhooks waits until the API server reaches the manager's webhooks: a server-side dry
// run of a ClusterQueue written with the tutorial's cohort alias comes back with cohortName set
// by the defaulting webhook.
func WaitForWebhooks(ctx context.Context, c client.Client, timeout time.Duration) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		cq := &kueue.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: "fleetq-webhook-probe"}, Spec: kueue.ClusterQueueSpec{Cohort: "probe"}}
		if last = c.Create(ctx, cq, client.DryRunAll); last != nil {
			return false, nil
		}
		return cq.Spec.CohortName == "probe", nil
	})
	if err != nil {
		return fmt.Errorf("manager webhooks not reachable: %w (last error: %v)", err, last)
	}
	return nil
}

// AgentConfig returns an agent configuration for a lab worker: probes and metrics off, short
// leader-election timings, the manager's origin and namespace.
func AgentConfig(cluster string, mgr *config.Configuration) (*config.AgentConfiguration, error) {
	cfg := &config.AgentConfiguration{
		ClusterName: cluster,
		Namespace:   mgr.Namespace,
		Origin:      mgr.MultiCluster.Origin,
		Metrics:     config.Endpoint{BindAddress: "0"},
		Health:      config.Endpoint{BindAddress: "0"},
		LeaderElection: config.LeaderElection{
			LeaseDuration: &metav1.Duration{Duration: 4 * time.Second},
			RenewDeadline: &metav1.Duration{Duration: 3 * time.Second},
			RetryPeriod:   &metav1.Duration{Duration: 500 * time.Millisecond},
		},
		CapacityResyncPeriod: &metav1.Duration{Duration: 30 * time.Second},
		ClientConnection:     config.ClientConnection{QPS: ptr.To[float32](200), Burst: ptr.To[int32](400)},
	}
	cfg.SetDefaults()
	if errs := cfg.Validate(); len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	return cfg, nil
}

// StartAgent runs fleetq-agent in-process against a lab worker.
func StartAgent(ctx context.Context, env *framework.Environment, cfg *config.AgentConfiguration) (*framework.Component, error) {
	c := env.Cluster(cfg.ClusterName)
	if c == nil {
		return nil, fmt.Errorf("no cluster %q in the lab", cfg.ClusterName)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: cfg.Namespace}}
	if err := c.Client().Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("namespace %s in %s: %w", cfg.Namespace, cfg.ClusterName, err)
	}
	return env.Start(ctx, framework.ComponentSpec{
		Name:    "fleetq-agent",
		Cluster: cfg.ClusterName,
		Run: func(ctx context.Context, rc *rest.Config) error {
			agent, err := workersetup.New(workersetup.Options{Config: cfg, RestConfig: rc, Log: ctrl.Log.WithName("agent").WithValues("cluster", cfg.ClusterName), SeveralPerProcess: true})
			if err != nil {
				return err
			}
			return agent.Start(ctx)
		},
	})
}

// RegisterWorker makes a lab worker known to the manager the way a user does: a Secret with
// the worker's kubeconfig (credentials embedded) in the manager's namespace and a
// MultiKueueCluster pointing at it.
func RegisterWorker(ctx context.Context, env *framework.Environment, mgr *config.Configuration, worker string) error {
	w := env.Cluster(worker)
	if w == nil {
		return fmt.Errorf("no cluster %q in the lab", worker)
	}
	sec, err := framework.WorkerKubeconfigSecret(w, mgr.Namespace, worker+"-kubeconfig")
	if err != nil {
		return err
	}
	m := env.Management().Client()
	if err := m.Create(ctx, sec); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("kubeconfig secret of %s: %w", worker, err)
	}
	mkc := &kueue.MultiKueueCluster{
		ObjectMeta: metav1.ObjectMeta{Name: worker},
		Spec: kueue.MultiKueueClusterSpec{ClusterSource: kueue.ClusterSource{KubeConfig: &kueue.KubeConfig{
			Location: sec.Name, LocationType: kueue.SecretLocationType,
		}}},
	}
	if err := m.Create(ctx, mkc); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("multikueuecluster %s: %w", worker, err)
	}
	return nil
}
