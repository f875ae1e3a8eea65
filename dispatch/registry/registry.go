// Package registry keeps one connection per worker cluster: a client and a cache of what the
// manager needs from the worker (its copies of dispatched workloads and jobs, its capacity
// report), behind a rate limiter shared by everything that talks to that worker. It probes each
// worker, records when it first stopped answering, and reconnects with backoff; the
// MultiKueueCluster controller turns that health into the Active condition users see.
package registry

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/clock"
	ctrlcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetq "github.com/fleetq/fleetq/api/fleetq/v1alpha1"
	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/config"
	"github.com/fleetq/fleetq/internal/integration"
)

// Reasons of the MultiKueueCluster Active condition.
const (
	ReasonActive                 = "Active"
	ReasonBadKubeconfig          = "BadKubeconfig"
	ReasonKubeconfigNotFound     = "KubeconfigNotFound"
	ReasonClientConnectionFailed = "ClientConnectionFailed"
	ReasonConnecting             = "Connecting"
)

// Reasons of the MultiKueueCluster FencingLease condition (fleetq's own condition).
const (
	ReasonLeaseRenewed       = "Renewed"
	ReasonLeaseHeldElsewhere = "HeldByAnotherManager"
	ReasonLeaseRenewFailed   = "RenewFailed"
)

// LeaseHealth is what the manager last learnt renewing its fencing Lease in a worker: while it
// fails, the worker's agent fences (or, with no Lease at all, admits with nothing to fence
// against), so users see why on the MultiKueueCluster rather than only in the manager's logs.
type LeaseHealth struct {
	Renewed bool
	Reason  string
	Message string
	// Since is when renewals last started to succeed or to fail; zero before the first try.
	Since time.Time
}

// Health is what the registry last learnt about a worker.
type Health struct {
	Active  bool
	Reason  string
	Message string
	// Since is when the worker became active, or first failed while inactive.
	Since time.Time
}

// Worker is a connected worker cluster.
type Worker struct {
	Name string
	// Client reads origin-labelled Workloads and Jobs and CapacityReports from the cache and
	// everything else from the API server; all its requests share the worker's rate limiter.
	Client client.Client
	// Reader bypasses the cache (ownership checks before deletes).
	Reader client.Reader

	cache     ctrlcache.Cache
	discovery discovery.ServerVersionInterface
	// served are the integrated kinds of jobs the worker's API server serves (when it connected).
	served map[schema.GroupVersionKind]bool
	cancel context.CancelFunc
	synced chan struct{}
}

// Serves reports whether the worker's API server served a kind of job when the manager
// connected: copies of other kinds cannot be created there.
func (w *Worker) Serves(gvk schema.GroupVersionKind) bool { return w.served[gvk] }

// Options configure a Registry.
type Options struct {
	Scheme *runtime.Scheme
	Origin string
	// AgentNamespace is where every worker's agent writes its CapacityReport: reports elsewhere
	// (anyone's, with any revision) never reach placement. Empty reads every namespace.
	AgentNamespace string
	// Integrations are the kinds of jobs whose copies the registry caches in every worker that
	// serves them.
	Integrations *integration.Registry
	// Connection sizes each worker's shared rate limiter.
	Connection config.ClientConnection
	// ProbeInterval is how often workers are probed; ConnectTimeout bounds the first sync.
	ProbeInterval  time.Duration
	ConnectTimeout time.Duration
	Clock          clock.PassiveClock
	Log            logr.Logger
	// OnChange hears about every change the registry sees: a remote object (a copy, a report)
	// or a worker's health; it must not block.
	OnChange func(cluster string, obj client.Object)
	// OnHealth hears when a worker's health changed; it must not block.
	OnHealth func(cluster string)
}

// Registry holds the workers.
type Registry struct {
	opts Options

	mu      sync.Mutex
	workers map[string]*entry
	// started is when this manager began to talk to workers (it became leader).
	started time.Time
}

type entry struct {
	kubeconfigHash [32]byte
	worker         *Worker
	health         Health
	lease          LeaseHealth
	// nextAttempt backs off reconnections after failures.
	nextAttempt time.Time
	failures    int
}

// New returns an empty registry.
func New(opts Options) *Registry {
	if opts.ProbeInterval <= 0 {
		opts.ProbeInterval = 10 * time.Second
	}
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = 30 * time.Second
	}
	return &Registry{opts: opts, workers: map[string]*entry{}}
}

// Get returns a connected worker and its health; the worker is nil when not connected.
func (r *Registry) Get(name string) (*Worker, Health) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.workers[name]
	if !ok {
		return nil, Health{Reason: ReasonKubeconfigNotFound, Message: "not registered"}
	}
	return e.worker, e.health
}

// Registered reports whether a worker is registered (a MultiKueueCluster or Cluster API Cluster
// names it), connected or not.
func (r *Registry) Registered(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.workers[name]
	return ok
}

// Started is when the registry started (this manager became leader); zero before.
func (r *Registry) Started() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.started
}

// Names lists registered workers, sorted.
func (r *Registry) Names() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, len(r.workers))
	for n := range r.workers {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Fail records a worker whose kubeconfig could not be found or used, so its condition says why.
func (r *Registry) Fail(name, reason string, err error) {
	r.mu.Lock()
	e, ok := r.workers[name]
	if !ok {
		e = &entry{}
		r.workers[name] = e
	}
	changed := r.setHealthLocked(e, false, reason, err.Error())
	r.mu.Unlock()
	r.notifyHealth(name, changed)
}

// Ensure connects to a worker with a kubeconfig, or keeps the existing connection when the
// kubeconfig did not change. It returns the worker's health; a failed connection is retried
// on later calls after a backoff.
func (r *Registry) Ensure(ctx context.Context, name string, kubeconfig []byte) Health {
	hash := sha256.Sum256(kubeconfig)
	r.mu.Lock()
	e, ok := r.workers[name]
	if ok && e.kubeconfigHash == hash && (e.worker != nil || r.opts.Clock.Now().Before(e.nextAttempt)) {
		h := e.health
		r.mu.Unlock()
		return h
	}
	if !ok {
		e = &entry{}
		r.workers[name] = e
	}
	old := e.worker
	e.worker, e.kubeconfigHash = nil, hash
	r.mu.Unlock()
	if old != nil {
		old.cancel()
	}

	w, reason, err := r.connect(ctx, name, kubeconfig)
	r.mu.Lock()
	if cur, ok := r.workers[name]; !ok || cur != e {
		// Removed or replaced while connecting.
		r.mu.Unlock()
		if w != nil {
			w.cancel()
		}
		return Health{Reason: ReasonConnecting}
	}
	var changed bool
	if err != nil {
		e.failures++
		e.nextAttempt = r.opts.Clock.Now().Add(backoff(e.failures))
		r.opts.Log.Info("Worker connection failed", "cluster", name, "reason", reason, "error", err.Error(), "retryAfter", backoff(e.failures))
		changed = r.setHealthLocked(e, false, reason, err.Error())
	} else {
		e.worker, e.failures = w, 0
		changed = r.setHealthLocked(e, true, ReasonActive, "Connected")
	}
	h := e.health
	r.mu.Unlock()
	r.notifyHealth(name, changed)
	return h
}

// Lease returns what the last renewal of the fencing Lease in a worker found.
func (r *Registry) Lease(name string) LeaseHealth {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.workers[name]; ok {
		return e.lease
	}
	return LeaseHealth{}
}

// LeaseRenewal records a renewal of the fencing Lease in a worker: err nil when it was
// renewed, else the reason it failed; the worker's condition is refreshed when that changed.
func (r *Registry) LeaseRenewal(name, reason string, err error) {
	h := LeaseHealth{Renewed: err == nil, Reason: ReasonLeaseRenewed, Message: "Renewed"}
	if err != nil {
		h.Reason, h.Message = reason, err.Error()
	}
	r.mu.Lock()
	e, ok := r.workers[name]
	if !ok {
		r.mu.Unlock()
		return
	}
	changed := e.lease.Renewed != h.Renewed || e.lease.Reason != h.Reason || e.lease.Message != h.Message
	h.Since = e.lease.Since
	if e.lease.Since.IsZero() || e.lease.Renewed != h.Renewed {
		h.Since = r.opts.Clock.Now()
	}
	e.lease = h
	r.mu.Unlock()
	r.notifyHealth(name, changed)
}

// Remove disconnects a worker that is no longer registered and tells OnHealth.
func (r *Registry) Remove(name string) {
	// Nothing else tells the workloads placed there: the worker's watches stop with it.
	r.notifyHealth(name, r.drop(name))
}

// drop forgets a worker and stops its connection; it says whether the worker was known.
func (r *Registry) drop(name string) bool {
	r.mu.Lock()
	e, ok := r.workers[name]
	delete(r.workers, name)
	r.mu.Unlock()
	if ok && e.worker != nil {
		e.worker.cancel()
	}
	return ok
}

func backoff(failures int) time.Duration {
	d := time.Second << min(failures-1, 6) // 1s .. 64s
	return min(d, time.Minute)
}

// setHealthLocked records a worker's health and reports whether it changed; the caller calls
// notifyHealth after releasing the lock (the hook reads the registry).
func (r *Registry) setHealthLocked(e *entry, active bool, reason, msg string) bool {
	changed := e.health.Active != active || e.health.Reason != reason || e.health.Message != msg
	if e.health.Active != active || e.health.Since.IsZero() {
		e.health.Since = r.opts.Clock.Now()
	}
	e.health.Active, e.health.Reason, e.health.Message = active, reason, msg
	return changed
}

func (r *Registry) notifyHealth(name string, changed bool) {
	if changed && r.opts.OnHealth != nil {
		r.opts.OnHealth(name)
	}
}

// RESTConfig parses a worker kubeconfig, refusing anything that would make the manager read its
// own files or run programs (file references, exec and auth-provider plugins): a kubeconfig in a
// Secret must carry its credentials inline.
func RESTConfig(kubeconfig []byte) (*rest.Config, error) {
	cfg, err := clientcmd.Load(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("parsing kubeconfig: %w", err)
	}
	ctxName := cfg.CurrentContext
	kctx, ok := cfg.Contexts[ctxName]
	if !ok {
		return nil, fmt.Errorf("kubeconfig has no current context (current-context %q)", ctxName)
	}
	if c, ok := cfg.Clusters[kctx.Cluster]; !ok {
		return nil, fmt.Errorf("kubeconfig context %q names cluster %q, which it does not define", ctxName, kctx.Cluster)
	} else if c.CertificateAuthority != "" {
		return nil, fmt.Errorf("kubeconfig cluster %q references the file %q; embed it as certificate-authority-data", kctx.Cluster, c.CertificateAuthority)
	}
	if a, ok := cfg.AuthInfos[kctx.AuthInfo]; ok {
		switch {
		case a.ClientCertificate != "" || a.ClientKey != "" || a.TokenFile != "":
			return nil, fmt.Errorf("kubeconfig user %q references files; embed client-certificate-data, client-key-data or token", kctx.AuthInfo)
		case a.Exec != nil || a.AuthProvider != nil:
			return nil, fmt.Errorf("kubeconfig user %q runs a credential plugin, which the manager does not allow; use a token or client certificate", kctx.AuthInfo)
		}
	}
	rc, err := clientcmd.NewDefaultClientConfig(*cfg, nil).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	return rc, nil
}

func (r *Registry) connect(ctx context.Context, name string, kubeconfig []byte) (*Worker, string, error) {
	rc, err := RESTConfig(kubeconfig)
	if err != nil {
		return nil, ReasonBadKubeconfig, err
	}
	rc = r.opts.Connection.RESTConfig(rc, "fleetq-manager")
	rc.Timeout = 30 * time.Second
	probeCfg := rest.CopyConfig(rc)
	probeCfg.Timeout = 5 * time.Second // a frozen API server must not stall the probe loop
	dc, err := discovery.NewDiscoveryClientForConfig(probeCfg)
	if err != nil {
		return nil, ReasonClientConnectionFailed, err
	}
	// A quick reachability check gives a clear error before informers start retrying forever.
	if _, err := dc.ServerVersion(); err != nil {
		return nil, ReasonClientConnectionFailed, fmt.Errorf("reaching %s: %w", rc.Host, err)
	}
	kinds, served, err := r.servedKinds(dc)
	if err != nil {
		return nil, ReasonClientConnectionFailed, err
	}
	origin := labels.SelectorFromSet(labels.Set{kueue.MultiKueueOriginLabel: r.opts.Origin})
	byObject := map[client.Object]ctrlcache.ByObject{
		&kueue.Workload{}:        {Label: origin},
		&kueue.ResourceFlavor{}:  {Label: origin},
		&fleetq.CapacityReport{}: r.reportScope(),
		&coordinationv1.Lease{}:  {Label: origin},
	}
	for _, k := range kinds {
		byObject[k] = ctrlcache.ByObject{Label: origin}
	}
	c, err := ctrlcache.New(rc, ctrlcache.Options{Scheme: r.opts.Scheme, ByObject: byObject, DefaultTransform: ctrlcache.TransformStripManagedFields()})
	if err != nil {
		return nil, ReasonClientConnectionFailed, fmt.Errorf("cache: %w", err)
	}
	cl, err := client.New(rc, client.Options{Scheme: r.opts.Scheme, Cache: &client.CacheOptions{
		Reader:     c,
		DisableFor: []client.Object{&corev1.Namespace{}, &corev1.Event{}, &coordinationv1.Lease{}},
	}})
	if err != nil {
		return nil, ReasonClientConnectionFailed, fmt.Errorf("client: %w", err)
	}
	reader, err := client.New(rc, client.Options{Scheme: r.opts.Scheme})
	if err != nil {
		return nil, ReasonClientConnectionFailed, err
	}
	wctx, cancel := context.WithCancel(context.Background())
	w := &Worker{Name: name, Client: cl, Reader: reader, cache: c, discovery: dc, served: served, cancel: cancel, synced: make(chan struct{})}
	for _, obj := range append([]client.Object{&kueue.Workload{}, &fleetq.CapacityReport{}}, kinds...) {
		inf, err := c.GetInformer(wctx, obj)
		if err != nil {
			cancel()
			return nil, ReasonClientConnectionFailed, fmt.Errorf("watching %T: %w", obj, err)
		}
		if _, err := inf.AddEventHandler(r.handler(name)); err != nil {
			cancel()
			return nil, ReasonClientConnectionFailed, err
		}
	}
	go func() {
		if err := c.Start(wctx); err != nil {
			r.opts.Log.Error(err, "Worker cache stopped", "cluster", name)
		}
	}()
	syncCtx, syncCancel := context.WithTimeout(ctx, r.opts.ConnectTimeout)
	defer syncCancel()
	if !c.WaitForCacheSync(syncCtx) {
		cancel()
		return nil, ReasonClientConnectionFailed, errors.New("timed out syncing the worker's objects; is the fleetq CRD set installed there?")
	}
	close(w.synced)
	r.opts.Log.Info("Connected to worker", "cluster", name, "host", rc.Host)
	return w, "", nil
}

// servedKinds keeps the integrated kinds the worker's API server serves.
func (r *Registry) servedKinds(dc discovery.ServerResourcesInterface) ([]client.Object, map[schema.GroupVersionKind]bool, error) {
	if r.opts.Integrations == nil {
		return nil, nil, nil
	}
	adapters, err := integration.Served(dc, r.opts.Integrations.Adapters())
	if err != nil {
		return nil, nil, err
	}
	served := map[schema.GroupVersionKind]bool{}
	var kinds []client.Object
	for _, a := range adapters {
		served[a.GVK()] = true
		kinds = append(kinds, a.New())
	}
	return kinds, served, nil
}

func (r *Registry) handler(cluster string) toolscache.ResourceEventHandler {
	notify := func(obj any) {
		if r.opts.OnChange == nil {
			return
		}
		if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		if o, ok := obj.(client.Object); ok {
			r.opts.OnChange(cluster, o)
		}
	}
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    notify,
		UpdateFunc: func(_, n any) { notify(n) },
		DeleteFunc: notify,
	}
}

// NeedLeaderElection: only the leader dispatches, so only it talks to workers.
func (r *Registry) NeedLeaderElection() bool { return true }

// Start probes connected workers every ProbeInterval until ctx ends, and disconnects them all
// when it does.
func (r *Registry) Start(ctx context.Context) error {
	r.mu.Lock()
	r.started = r.opts.Clock.Now()
	r.mu.Unlock()
	t := time.NewTicker(r.opts.ProbeInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			for _, n := range r.Names() {
				r.drop(n) // the manager stops: no one is left to tell
			}
			return nil
		case <-t.C:
		}
		r.probeAll()
	}
}

func (r *Registry) probeAll() {
	r.mu.Lock()
	type probe struct {
		name string
		e    *entry
		w    *Worker
	}
	var ps []probe
	for n, e := range r.workers {
		if e.worker != nil {
			ps = append(ps, probe{n, e, e.worker})
		}
	}
	r.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range ps {
		wg.Go(func() {
			_, err := p.w.discovery.ServerVersion()
			r.mu.Lock()
			if cur := r.workers[p.name]; cur != p.e {
				r.mu.Unlock()
				return
			}
			var changed bool
			if err != nil {
				changed = r.setHealthLocked(p.e, false, ReasonClientConnectionFailed, fmt.Sprintf("worker stopped answering: %v", err))
			} else {
				changed = r.setHealthLocked(p.e, true, ReasonActive, "Connected")
			}
			r.mu.Unlock()
			r.notifyHealth(p.name, changed)
		})
	}
	wg.Wait()
}

// reportScope caches CapacityReports of the agent's namespace only.
func (r *Registry) reportScope() ctrlcache.ByObject {
	if r.opts.AgentNamespace == "" {
		return ctrlcache.ByObject{}
	}
	return ctrlcache.ByObject{Namespaces: map[string]ctrlcache.Config{r.opts.AgentNamespace: {}}}
}
