// Package setup wires fleetq-agent from its configuration: one controller-runtime manager on the
// worker cluster with one shared client rate limiter, a cache restricted to what the agent needs,
// the local scheduler, the capacity report publisher, leader election, health probes and metrics.
// cmd/fleetq-agent and the integration tests both start the agent through it.
package setup

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	fleetq "github.com/fleetq/fleetq/api/fleetq/v1alpha1"
	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/config"
	"github.com/fleetq/fleetq/internal/integration"
	"github.com/fleetq/fleetq/internal/integration/builtin"
	"github.com/fleetq/fleetq/worker/fencing"
	"github.com/fleetq/fleetq/worker/report"
	"github.com/fleetq/fleetq/worker/scheduler"
	"github.com/fleetq/fleetq/worker/watch"
)

// Scheme returns the types the agent reads and writes.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(kueue.AddToScheme(s))
	utilruntime.Must(fleetq.AddToScheme(s))
	return s
}

// Options are what a caller provides besides the configuration file.
type Options struct {
	Config     *config.AgentConfiguration
	RestConfig *rest.Config
	Log        logr.Logger
	// Clock defaults to the real clock; tests may inject a fake one to time fencing.
	Clock clock.WithDelayedExecution
	// SeveralPerProcess lets tests run agents of several workers in one process; controller
	// names are then not checked for uniqueness.
	SeveralPerProcess bool
}

// Agent is a wired, not yet started, fleetq-agent.
type Agent struct {
	manager.Manager
	Scheduler *scheduler.Scheduler
	Report    *report.Publisher
	Fence     *fencing.Observer
	// Integrations are the kinds of job copies the agent runs: those of integrations.frameworks
	// its cluster serves.
	Integrations *integration.Registry
}

// frameworks names the integrations of a registry.
func frameworks(r *integration.Registry) []string {
	var out []string
	for _, a := range r.Adapters() {
		out = append(out, a.Framework())
	}
	return out
}

// servedIntegrations selects the configured integrations whose kinds the cluster serves.
func servedIntegrations(rc *rest.Config, cfg *config.AgentConfiguration, log logr.Logger) (*integration.Registry, error) {
	selected, err := builtin.Configured(context.Background(), rc, cfg.Integrations)
	if err != nil {
		return nil, err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(rc)
	if err != nil {
		return nil, err
	}
	served, err := integration.Served(dc, selected)
	if err != nil {
		return nil, err
	}
	for _, a := range selected {
		if !slices.ContainsFunc(served, func(b integration.Adapter) bool { return b.Framework() == a.Framework() }) {
			log.Info("Integration left out: the cluster does not serve its kind; install its CRD and operator, then restart fleetq-agent", "integration", a.Framework(), "kind", a.GVK().String())
		}
	}
	return integration.NewRegistry(served...)
}

// New wires the agent. It asks the API server only which integrated kinds it serves; the rest
// waits for Start.
func New(opts Options) (*Agent, error) {
	cfg := opts.Config
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	restCfg := cfg.ClientConnection.RESTConfig(opts.RestConfig, fleetq.AgentName)
	integrations, err := servedIntegrations(restCfg, cfg, opts.Log)
	if err != nil {
		return nil, fmt.Errorf("cluster %q: %w", cfg.ClusterName, err)
	}
	var kinds []client.Object
	for _, a := range integrations.Adapters() {
		kinds = append(kinds, a.New())
	}

	mgr, err := ctrl.NewManager(restCfg, ctrl.Options{
		Scheme:                        Scheme(),
		Logger:                        opts.Log,
		Cache:                         watch.CacheOptions(cfg.Origin, cfg.Namespace, kinds),
		Metrics:                       metricsserver.Options{BindAddress: cfg.Metrics.BindAddress},
		HealthProbeBindAddress:        cfg.Health.BindAddress,
		LeaderElection:                *cfg.LeaderElection.Enabled,
		LeaderElectionID:              cfg.LeaderElection.LeaseName,
		LeaderElectionNamespace:       cfg.Namespace,
		LeaseDuration:                 &cfg.LeaderElection.LeaseDuration.Duration,
		RenewDeadline:                 &cfg.LeaderElection.RenewDeadline.Duration,
		RetryPeriod:                   &cfg.LeaderElection.RetryPeriod.Duration,
		LeaderElectionReleaseOnCancel: true,
		Client:                        client.Options{FieldOwner: fleetq.AgentName},
		Controller:                    ctrlconfig.Controller{SkipNameValidation: ptr.To(opts.SeveralPerProcess)},
	})
	if err != nil {
		return nil, fmt.Errorf("creating manager for cluster %q: %w", cfg.ClusterName, err)
	}
	copyCaches := map[schema.GroupVersionKind]cache.Cache{}
	for _, ad := range integrations.Adapters() {
		if !watch.SeparateCopies(ad.New()) {
			continue
		}
		opts := watch.CopyCacheOptions(cfg.Origin, ad.New())
		opts.Scheme, opts.Mapper = mgr.GetScheme(), mgr.GetRESTMapper()
		c, err := cache.New(restCfg, opts)
		if err != nil {
			return nil, fmt.Errorf("cache of %s copies: %w", ad.GVK().Kind, err)
		}
		if err := mgr.Add(c); err != nil {
			return nil, err
		}
		copyCaches[ad.GVK()] = c
	}
	a := &Agent{Manager: mgr, Integrations: integrations, Fence: fencing.NewObserver(opts.Clock, fleetq.ManagerLeaseName(cfg.Origin))}
	a.Report = &report.Publisher{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Clock: opts.Clock, Log: opts.Log.WithName("report"),
		ClusterName: cfg.ClusterName, Namespace: cfg.Namespace, Origin: cfg.Origin, Kinds: frameworks(integrations), FencingPolicy: cfg.FencingPolicy,
		Resync: cfg.CapacityResyncPeriod.Duration,
	}
	a.Scheduler = &scheduler.Scheduler{
		Client: mgr.GetClient(), Integrations: integrations, CopyCaches: copyCaches, Clock: opts.Clock, Log: opts.Log.WithName("scheduler"),
		Recorder:    mgr.GetEventRecorder(fleetq.AgentName),
		ClusterName: cfg.ClusterName, Origin: cfg.Origin, Namespace: cfg.Namespace,
		Fence: a.Fence, KeepRunningWhenFenced: cfg.FencingPolicy == config.FenceKeepRunning, Publish: a.Report.Set,
	}
	if err := a.Report.SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("capacity report controller: %w", err)
	}
	if err := a.Scheduler.SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("scheduler controller: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	// Ready once the informers have synced: before that the agent knows no copy and no node.
	if err := mgr.AddReadyzCheck("informers", func(req *http.Request) error {
		if !mgr.GetCache().WaitForCacheSync(req.Context()) {
			return errors.New("informer caches not synced")
		}
		return nil
	}); err != nil {
		return nil, err
	}
	return a, nil
}
