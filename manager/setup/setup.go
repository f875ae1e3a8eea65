// Package setup wires fleetq-manager from its configuration: one controller-runtime manager
// with a shared client rate limiter, the cache and queues, the scheduler, the controllers that
// feed them, the Job integration, the webhooks with their self-managed certificate, and leader
// election. cmd/fleetq-manager and the integration tests both start the manager through it.
package setup

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	fleetq "github.com/fleetq/fleetq/api/fleetq/v1alpha1"
	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/config"
	"github.com/fleetq/fleetq/dispatch"
	"github.com/fleetq/fleetq/internal/engine"
	"github.com/fleetq/fleetq/internal/integration"
	"github.com/fleetq/fleetq/internal/integration/builtin"
	"github.com/fleetq/fleetq/manager/cache"
	"github.com/fleetq/fleetq/manager/certs"
	"github.com/fleetq/fleetq/manager/drain"
	"github.com/fleetq/fleetq/manager/jobs"
	"github.com/fleetq/fleetq/manager/queue"
	"github.com/fleetq/fleetq/manager/quota"
	"github.com/fleetq/fleetq/manager/scheduler"
	"github.com/fleetq/fleetq/manager/webhooks"
	"github.com/fleetq/fleetq/manager/workloads"
)

// FieldManager is the name fleetq-manager writes with.
const FieldManager = "fleetq-manager"

// Scheme returns the types the manager reads and writes.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(kueue.AddToScheme(s))
	utilruntime.Must(fleetq.AddToScheme(s))
	utilruntime.Must(clusterv1.AddToScheme(s))
	return s
}

// Options are what a caller provides besides the configuration file.
type Options struct {
	Config     *config.Configuration
	RestConfig *rest.Config
	Log        logr.Logger
	// Clock defaults to the real clock; tests inject a fake one.
	Clock clock.WithTickerAndDelayedExecution
	// SeveralPerProcess lets tests run more than one manager in one process (a restart
	// in-process); controller names are then not checked for uniqueness.
	SeveralPerProcess bool
}

// Manager is a wired, not yet started, fleetq-manager.
type Manager struct {
	manager.Manager
	Cache     *cache.Cache
	Queues    *queue.Queues
	Scheduler *scheduler.Scheduler
	// Dispatcher runs admitted workloads of MultiKueue queues in worker clusters.
	Dispatcher *dispatch.Dispatcher
	// Integrations are the kinds of jobs the manager runs, those of integrations.frameworks
	// whose API the management cluster serves.
	Integrations *integration.Registry
	certs        *certs.Manager
}

// New wires the manager. It asks the API server only which integrated kinds it serves; the rest
// waits for Start.
func New(opts Options) (*Manager, error) {
	cfg := opts.Config
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	restCfg := cfg.ClientConnection.RESTConfig(opts.RestConfig, FieldManager)

	webhookHost, webhookPort := cfg.Webhook.Host, int(*cfg.Webhook.Port)
	certDir := cfg.Webhook.CertDir
	if certDir == "" {
		dir, err := os.MkdirTemp("", "fleetq-webhook-certs-")
		if err != nil {
			return nil, fmt.Errorf("webhook cert dir: %w", err)
		}
		certDir = dir
	}
	scheme := Scheme()
	mgr, err := ctrl.NewManager(restCfg, ctrl.Options{
		Scheme:                        scheme,
		Logger:                        opts.Log,
		Metrics:                       metricsserver.Options{BindAddress: cfg.Metrics.BindAddress},
		HealthProbeBindAddress:        cfg.Health.BindAddress,
		PprofBindAddress:              cfg.Profiling.BindAddress,
		LeaderElection:                *cfg.LeaderElection.Enabled,
		LeaderElectionID:              cfg.LeaderElection.LeaseName,
		LeaderElectionNamespace:       cfg.Namespace,
		LeaseDuration:                 &cfg.LeaderElection.LeaseDuration.Duration,
		RenewDeadline:                 &cfg.LeaderElection.RenewDeadline.Duration,
		RetryPeriod:                   &cfg.LeaderElection.RetryPeriod.Duration,
		LeaderElectionReleaseOnCancel: true,
		WebhookServer:                 webhook.NewServer(webhook.Options{Host: webhookHost, Port: webhookPort, CertDir: certDir}),
		Client:                        client.Options{FieldOwner: FieldManager},
		Cache: ctrlcache.Options{
			// Nothing reads managedFields, and they are a large share of every cached Job and
			// Workload: at 20,000 waiting workloads the manager's peak RSS was 1.1 GiB.
			DefaultTransform: ctrlcache.TransformStripManagedFields(),
			ByObject: map[client.Object]ctrlcache.ByObject{
				// The manager reads Secrets (worker kubeconfigs, its webhook certificate) only in its
				// own namespace and Cluster API's: its cache never lists Secrets anywhere else.
				&corev1.Secret{}: {Namespaces: secretNamespaces(cfg)},
				// Pods: only those fleetq started (its identity label), whose end releases a stopped
				// job's reservation.
				&corev1.Pod{}: {Label: jobs.PodSelector()},
			}},
		Controller: ctrlconfig.Controller{SkipNameValidation: ptr.To(opts.SeveralPerProcess)},
	})
	if err != nil {
		return nil, fmt.Errorf("creating manager: %w", err)
	}
	direct, err := client.New(restCfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("creating client: %w", err)
	}
	m := &Manager{Manager: mgr, Cache: cache.New(), Queues: queue.New(opts.Clock)}
	kinds, err := m.integrations(restCfg, cfg, opts.Log)
	if err != nil {
		return nil, err
	}
	m.certs = &certs.Manager{Client: direct, Config: cfg, CertDir: certDir, Clock: opts.Clock, Log: opts.Log.WithName("certs"), JobKinds: kinds}
	if err := m.wire(opts); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *Manager) wire(opts Options) error {
	cfg, log, clk := opts.Config, opts.Log, opts.Clock
	ctx := context.Background()
	trigger := quota.NewTrigger(quota.StatusPeriod)
	m.Cache.OnChange = trigger.Changed
	m.Queues.OnChange = trigger.Changed
	requeue := make(chan event.TypedGenericEvent[*kueue.Workload], 1024)

	var opt engine.Options
	if cfg.FairSharing.Enable {
		fs := &engine.FairSharingOptions{}
		for _, s := range cfg.FairSharing.PreemptionStrategies {
			fs.Strategies = append(fs.Strategies, engine.FairSharingStrategy(s))
		}
		opt.FairSharing = fs
	}
	m.Scheduler = &scheduler.Scheduler{
		Client: m.GetClient(), Cache: m.Cache, Queues: m.Queues, Clock: clk,
		Recorder: m.GetEventRecorder("fleetq-scheduler"), Log: log.WithName("scheduler"), Options: opt,
	}
	if err := workloads.SetupIndexes(ctx, m); err != nil {
		return fmt.Errorf("workload index: %w", err)
	}
	if err := jobs.SetupPodIndexes(ctx, m); err != nil {
		return fmt.Errorf("workload UID index: %w", err)
	}
	if err := jobs.SetupIndexes(ctx, m); err != nil {
		return fmt.Errorf("job index: %w", err)
	}
	setups := []interface{ SetupWithManager(ctrl.Manager) error }{
		&workloads.Reconciler{Client: m.GetClient(), Cache: m.Cache, Queues: m.Queues, Clock: clk, Log: log.WithName("workloads"), Requeue: requeue,
			Admissible: m.admissible},
		&quota.ClusterQueueReconciler{Client: m.GetClient(), Cache: m.Cache, Queues: m.Queues, Clock: clk, Log: log.WithName("clusterqueues"), Trigger: trigger, FairSharing: cfg.FairSharing.Enable, Workloads: requeue},
		&quota.LocalQueueReconciler{Client: m.GetClient(), Cache: m.Cache, Queues: m.Queues, Clock: clk, Log: log.WithName("localqueues"), Trigger: trigger, Workloads: requeue},
		&quota.FlavorReconciler{Client: m.GetClient(), Cache: m.Cache, Queues: m.Queues, Trigger: trigger},
		&quota.CohortReconciler{Client: m.GetClient(), Cache: m.Cache, Queues: m.Queues, Trigger: trigger, FairSharing: cfg.FairSharing.Enable},
		&drain.Reconciler{Client: m.GetClient(), Clock: clk, Recorder: m.GetEventRecorder("fleetq-manager"), Log: log.WithName("drain")},
	}
	for _, a := range m.Integrations.Adapters() {
		setups = append(setups, &jobs.Reconciler{Adapter: a, Integrations: m.Integrations, Client: m.GetClient(), Clock: clk,
			Recorder: m.GetEventRecorder("fleetq-job-controller"), Log: log.WithName(jobs.ControllerName(a)), Config: cfg})
		if g, ok := a.(integration.Grouper); ok {
			setups = append(setups, &jobs.GroupReconciler{Adapter: a, Grouper: g, Client: m.GetClient(), Clock: clk,
				Recorder: m.GetEventRecorder("fleetq-job-controller"), Log: log.WithName(jobs.ControllerName(a) + "-groups"), Config: cfg})
		}
	}
	for _, s := range setups {
		if err := s.SetupWithManager(m); err != nil {
			return fmt.Errorf("setting up controller %T: %w", s, err)
		}
	}
	for _, r := range []manager.Runnable{trigger, m.Scheduler, m.certs} {
		if err := m.Add(r); err != nil {
			return err
		}
	}
	d, err := dispatch.Setup(ctx, m, dispatch.Options{Config: cfg, Clock: clk, Log: log.WithName("dispatch"), WakeQueues: m.Queues.WakeAll, Integrations: m.Integrations})
	if err != nil {
		return err
	}
	m.Dispatcher = d
	m.Scheduler.Placer = d
	d.Checks.OnChange = func() {
		// Whether a queue dispatches decides where its jobs may run: route them again.
		m.Queues.WakeAll()
		go func() {
			if err := workloads.RequeuePending(ctx, m.GetClient(), requeue); err != nil {
				log.Error(err, "Routing workloads again after an admission check changed")
			}
		}()
	}
	return m.setupWebhooks(cfg)
}

func (m *Manager) setupWebhooks(cfg *config.Configuration) error {
	for _, a := range m.Integrations.Adapters() {
		hook := &jobs.Webhook{Adapter: a, Integrations: m.Integrations, Client: m.GetClient(), APIReader: m.GetAPIReader(), Config: cfg}
		m.GetWebhookServer().Register(jobs.MutatePath(a), &webhook.Admission{Handler: hook.Mutating()})
		m.GetWebhookServer().Register(jobs.ValidatePath(a), &webhook.Admission{Handler: hook.Validating()})
	}
	cqHook := &webhooks.ClusterQueueWebhook{Client: m.GetClient()}
	if err := ctrl.NewWebhookManagedBy(m, &kueue.ClusterQueue{}).WithDefaulter(cqHook).WithValidator(cqHook).Complete(); err != nil {
		return fmt.Errorf("clusterqueue webhook: %w", err)
	}
	if err := ctrl.NewWebhookManagedBy(m, &kueue.Cohort{}).WithValidator(&webhooks.CohortWebhook{Client: m.GetClient()}).Complete(); err != nil {
		return fmt.Errorf("cohort webhook: %w", err)
	}
	if err := ctrl.NewWebhookManagedBy(m, &kueue.ResourceFlavor{}).WithValidator(&webhooks.ResourceFlavorWebhook{}).Complete(); err != nil {
		return fmt.Errorf("resourceflavor webhook: %w", err)
	}
	if err := m.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	return m.AddReadyzCheck("webhook", m.GetWebhookServer().StartedChecker())
}

// Start writes the webhook certificate and configurations, then runs everything until ctx ends.
func (m *Manager) Start(ctx context.Context) error {
	if _, err := m.certs.Ensure(ctx); err != nil {
		return fmt.Errorf("webhook certificate: %w", err)
	}
	return m.Manager.Start(ctx)
}

// admissible keeps a workload out of its queue when its job's managedBy does not fit how the
// ClusterQueue runs workloads (here or in worker clusters).
func (m *Manager) admissible(wl *kueue.Workload, route cache.Route) string {
	if m.Dispatcher == nil {
		return ""
	}
	multi, known := m.Dispatcher.MultiCluster(route.Checks)
	if !known {
		return "" // routed again once the check is known
	}
	return jobs.ManagedByProblem(m.Integrations, wl, route.ClusterQueue, multi)
}

// integrations selects the configured job integrations the management cluster serves (asking its
// discovery API), and names their webhooks; a kind whose CRD is not installed is left out with a
// log line saying so (install the CRD and restart the manager to integrate it).
func (m *Manager) integrations(restCfg *rest.Config, cfg *config.Configuration, log logr.Logger) ([]webhooks.JobKind, error) {
	selected, err := builtin.Configured(context.Background(), restCfg, cfg.Integrations)
	if err != nil {
		return nil, err
	}
	var served []integration.Adapter
	var kinds []webhooks.JobKind
	for _, a := range selected {
		gvk := a.GVK()
		mapping, err := m.GetRESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
		if meta.IsNoMatchError(err) {
			log.Info("Integration left out: the management cluster does not serve its kind; install its CRD and restart fleetq-manager", "integration", a.Framework(), "kind", gvk.String())
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("integration %s: looking up %s: %w", a.Framework(), gvk, err)
		}
		served = append(served, a)
		kinds = append(kinds, webhooks.JobKind{Kind: gvk.Kind, Group: gvk.Group, Version: gvk.Version, Resource: mapping.Resource.Resource,
			MutatePath: jobs.MutatePath(a), ValidatePath: jobs.ValidatePath(a)})
	}
	m.Integrations, err = integration.NewRegistry(served...)
	return kinds, err
}

func secretNamespaces(cfg *config.Configuration) map[string]ctrlcache.Config {
	out := map[string]ctrlcache.Config{cfg.Namespace: {}}
	if ns := cfg.MultiCluster.ClusterAPINamespace; ns != "" {
		out[ns] = ctrlcache.Config{}
	}
	return out
}

// FreePort returns a free loopback TCP port, for tests and the lab that run several managers.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	_, p, _ := net.SplitHostPort(l.Addr().String())
	return strconv.Atoi(p)
}
