// Package dispatch runs admitted workloads in worker clusters. It wires, on the elected manager:
// the worker registry (MultiKueueCluster objects, or Cluster API Clusters), the MultiKueue
// admission checks, capacity-aware placement (which the scheduler consults before it reserves
// quota, so a workload only gets quota where a worker has room for all its pods), the copies
// controller (create in the worker, follow its verdict, mirror status, clean up), the Lease that
// fences partitioned workers, flavor sync and garbage collection.
package dispatch

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	fleetq "github.com/fleetq/fleetq/api/fleetq/v1alpha1"
	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/config"
	"github.com/fleetq/fleetq/dispatch/checks"
	"github.com/fleetq/fleetq/dispatch/clusterapi"
	"github.com/fleetq/fleetq/dispatch/copies"
	"github.com/fleetq/fleetq/dispatch/flavorsync"
	"github.com/fleetq/fleetq/dispatch/gc"
	"github.com/fleetq/fleetq/dispatch/lease"
	"github.com/fleetq/fleetq/dispatch/placement"
	"github.com/fleetq/fleetq/dispatch/registry"
	"github.com/fleetq/fleetq/internal/engine"
	"github.com/fleetq/fleetq/internal/integration"
	"github.com/fleetq/fleetq/internal/workload"
	"github.com/fleetq/fleetq/manager/metrics"
)

// ClusterNameIndex indexes manager Workloads by status.clusterName.
const ClusterNameIndex = "status.clusterName"

// Dispatcher is the wired dispatch subsystem.
type Dispatcher struct {
	Registry *registry.Registry
	Book     *placement.Book
	Checks   *checks.Index

	client  client.Client
	copies  *copies.Reconciler
	mkc     *registry.Controller
	flavors *flavorsync.Syncer
	gc      *gc.Collector
	wake    func()
	// integrations are the kinds of jobs dispatched.
	integrations *integration.Registry
	log          logr.Logger
	clock        clock.PassiveClock
}

// Options wire a Dispatcher.
type Options struct {
	Config *config.Configuration
	Clock  clock.PassiveClock
	Log    logr.Logger
	// WakeQueues runs an admission cycle for every queue (capacity appeared somewhere).
	WakeQueues func()
	// Integrations are the kinds of jobs dispatched.
	Integrations *integration.Registry
}

// Setup registers dispatch's controllers and runnables with the manager.
func Setup(ctx context.Context, mgr ctrl.Manager, opts Options) (*Dispatcher, error) {
	cfg, mc := opts.Config, opts.Config.MultiCluster
	d := &Dispatcher{Book: placement.NewBook(), Checks: checks.NewIndex(), client: mgr.GetClient(), wake: opts.WakeQueues, integrations: opts.Integrations, log: opts.Log, clock: opts.Clock}
	d.Checks.OnChange = opts.WakeQueues
	if err := mgr.GetFieldIndexer().IndexField(ctx, &kueue.Workload{}, ClusterNameIndex, func(o client.Object) []string {
		if c := workload.ClusterName(o.(*kueue.Workload)); c != "" {
			return []string{c}
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("workload cluster index: %w", err)
	}
	remote := make(chan event.TypedGenericEvent[*kueue.Workload], 4096)
	d.copies = &copies.Reconciler{
		Client: mgr.GetClient(), Integrations: opts.Integrations, Book: d.Book, Checks: d.Checks, Clock: opts.Clock, Log: opts.Log.WithName("copies"),
		Recorder: mgr.GetEventRecorder("fleetq-dispatch"), Origin: mc.Origin,
		WorkerLostTimeout: mc.WorkerLostTimeout.Duration, RejectAfter: 15 * time.Second, RefuseFor: 5 * time.Minute, MirrorInterval: time.Second,
		Requeuing: cfg.RequeuingStrategy, LostWorkerPolicy: mc.LostWorkerPolicy,
		Remote: remote,
	}
	d.mkc = &registry.Controller{Client: mgr.GetClient(), Namespace: cfg.Namespace, KubeconfigDir: mc.KubeconfigDir, Health: make(chan event.TypedGenericEvent[*kueue.MultiKueueCluster], 256)}
	d.Registry = registry.New(registry.Options{
		Scheme: mgr.GetScheme(), Origin: mc.Origin, AgentNamespace: mc.AgentNamespace, Integrations: opts.Integrations,
		Connection:    mc.WorkerClientConnection,
		ProbeInterval: mc.ProbeInterval.Duration, Clock: opts.Clock, Log: opts.Log.WithName("registry"),
		OnChange: d.remoteChanged, OnHealth: d.healthChanged,
	})
	d.copies.Registry, d.mkc.Registry = d.Registry, d.Registry
	d.flavors = flavorsync.New(mgr.GetClient(), d.Registry, opts.Log.WithName("flavorsync"), mc.Origin, time.Minute)
	if mc.ClusterAPISelector != nil {
		if err := setupClusterAPI(mgr, cfg); err != nil {
			return nil, err
		}
	}
	d.gc = &gc.Collector{Client: mgr.GetClient(), Registry: d.Registry, Integrations: opts.Integrations, Log: opts.Log.WithName("gc"), Origin: mc.Origin, Interval: mc.GCInterval.Duration}
	host, _ := os.Hostname()
	managerID := ""
	ks := &corev1.Namespace{}
	if err := mgr.GetAPIReader().Get(ctx, client.ObjectKey{Name: metav1.NamespaceSystem}, ks); err != nil {
		opts.Log.Info("Cannot identify this management cluster (namespace kube-system): a second manager with the same origin on a worker goes undetected", "error", err.Error())
	} else {
		managerID = string(ks.UID)
	}
	for _, s := range []interface{ SetupWithManager(ctrl.Manager) error }{
		d.copies, d.mkc, &checks.Controller{Client: mgr.GetClient(), Index: d.Checks}, &flavorWatch{d: d},
	} {
		if err := s.SetupWithManager(mgr); err != nil {
			return nil, fmt.Errorf("dispatch controller %T: %w", s, err)
		}
	}
	for _, r := range []interface {
		Start(context.Context) error
		NeedLeaderElection() bool
	}{
		d.Registry, d.flavors,
		&lease.Renewer{Registry: d.Registry, Clock: opts.Clock, Log: opts.Log.WithName("lease"), Namespace: mc.AgentNamespace,
			Origin: mc.Origin, ManagerID: managerID, Identity: host, Interval: mc.LeaseRenewInterval.Duration, Duration: mc.FenceTimeout.Duration},
		d.gc,
	} {
		if err := mgr.Add(r); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// remoteChanged routes what a worker's cache saw: reports to placement, copies to the copies
// controller.
func (d *Dispatcher) remoteChanged(cluster string, obj client.Object) {
	if cr, ok := obj.(*fleetq.CapacityReport); ok {
		if cr.Status.ClusterName != "" && cr.Status.ClusterName != cluster {
			d.log.V(1).Info("Capacity report names another cluster; registered name wins", "cluster", cluster, "report", cr.Status.ClusterName)
		}
		d.Book.SetReport(cluster, cr)
		metrics.Capacity(cluster, cr)
		d.mkc.HealthChanged(cluster) // refreshes the capacity summary users read on the MultiKueueCluster
		if d.wake != nil {
			d.wake()
		}
		return
	}
	d.copies.RemoteChanged(cluster, obj)
}

// healthChanged refreshes the worker's condition, reconciles the workloads placed there (they
// may now be lost, or reachable again) and syncs flavors to a worker that came back.
func (d *Dispatcher) healthChanged(cluster string) {
	d.mkc.HealthChanged(cluster)
	go d.requeuePlacedOn(cluster)
	if _, h := d.Registry.Get(cluster); h.Active {
		// A worker that answers again may hold copies of workloads placed elsewhere meanwhile.
		go func() {
			if n, err := d.gc.CollectCluster(context.Background(), cluster); err != nil || n > 0 {
				d.log.Info("Collected copies on a worker that answers again", "cluster", cluster, "deleted", n, "error", err)
			}
		}()
		d.flavors.Trigger()
		if d.wake != nil {
			d.wake()
		}
	}
}

func (d *Dispatcher) requeuePlacedOn(cluster string) {
	list := &kueue.WorkloadList{}
	if err := d.client.List(context.Background(), list, client.MatchingFields{ClusterNameIndex: cluster}); err != nil {
		d.log.V(1).Info("Listing workloads placed on a worker", "cluster", cluster, "error", err.Error())
		return
	}
	for i := range list.Items {
		d.copies.Remote <- event.TypedGenericEvent[*kueue.Workload]{Object: &list.Items[i]}
	}
}

// MultiCluster says whether admission checks send a ClusterQueue's workloads to worker clusters;
// known is false while a check has not been processed yet.
func (d *Dispatcher) MultiCluster(checks []kueue.AdmissionCheckReference) (multi, known bool) {
	if _, unknown := d.Checks.Unknown(checks); unknown {
		return false, false
	}
	_, multi = d.Checks.Clusters(checks)
	return multi, true
}

// reportGrace is how long after a worker connects placement waits for its first capacity report
// before passing it over: the report is there already when its agent runs, and the worker's cache
// reads it within seconds.
const reportGrace = 30 * time.Second

// Place is the scheduler's placement hook: it picks the worker for an admission in a
// ClusterQueue with a MultiKueue check, or says why none has room. Workloads of other queues
// are admitted on quota alone.
func (d *Dispatcher) Place(w *engine.Workload, a *engine.Admission, checkNames []kueue.AdmissionCheckReference) (cluster string, ok bool, why string) {
	req, multi, waiting := d.request(w, a, checkNames)
	if waiting != "" || !multi {
		return "", waiting == "", waiting
	}
	dec, ok := d.Book.Place(req)
	return dec.Cluster, ok, dec.Explanation
}

// PlaceAfter is the scheduler's hook before a preemption: whether the preemptor of a
// ClusterQueue with a MultiKueue check would have a worker with room once the victims' pods are
// gone (victims not placed on a worker free quota only). Other queues preempt on quota alone.
func (d *Dispatcher) PlaceAfter(w *engine.Workload, a *engine.Admission, checkNames []kueue.AdmissionCheckReference, victims []*engine.Workload) (ok bool, why string) {
	req, multi, waiting := d.request(w, a, checkNames)
	if waiting != "" || !multi {
		return waiting == "", waiting
	}
	var freed []placement.Freed
	for _, v := range victims {
		wl := &kueue.Workload{}
		if err := d.client.Get(context.Background(), workload.SplitKey(v.Key), wl, client.UnsafeDisableDeepCopy); err != nil {
			continue
		}
		if cluster := workload.ClusterName(wl); cluster != "" {
			freed = append(freed, placement.Freed{Cluster: cluster, PodSets: v.PodSets, Admission: v.Admission})
		}
	}
	dec, ok := d.Book.PlaceAfter(req, freed)
	return ok, dec.Explanation
}

// Shielded is the scheduler's hook before choosing victims: a workload placed on a worker that
// does not answer is not preempted. Its eviction could not land until the worker answers (its
// quota stays held until its copies are confirmed gone), and its pods may have finished there
// unseen: stopping it when the worker is back would delete a result and run the job again.
func (d *Dispatcher) Shielded(w *engine.Workload) string {
	wl := &kueue.Workload{}
	if err := d.client.Get(context.Background(), workload.SplitKey(w.Key), wl, client.UnsafeDisableDeepCopy); err != nil {
		return ""
	}
	cluster := workload.ClusterName(wl)
	if cluster == "" {
		return ""
	}
	if wk, h := d.Registry.Get(cluster); wk == nil || !h.Active {
		return fmt.Sprintf("they run on workers that do not answer, e.g. %s", cluster)
	}
	return ""
}

// request is the placement request of an admission with its candidate workers, in the
// MultiKueueConfig's order; multi is false for a ClusterQueue whose checks dispatch nowhere, and
// waiting says why nothing can be placed yet (a check not processed).
func (d *Dispatcher) request(w *engine.Workload, a *engine.Admission, checkNames []kueue.AdmissionCheckReference) (req placement.Request, multi bool, waiting string) {
	if unknown, ok := d.Checks.Unknown(checkNames); ok {
		return placement.Request{}, false, fmt.Sprintf("waiting for admission check %s to be processed", unknown)
	}
	names, multi := d.Checks.Clusters(checkNames)
	if !multi {
		return placement.Request{}, false, ""
	}
	req = placement.Request{Key: w.Key, Framework: d.framework(w.Key), PodSets: w.PodSets, Admission: a, Now: d.clock.Now()}
	justStarted := d.clock.Since(d.Registry.Started()) < reportGrace
	for _, n := range names {
		wk, h := d.Registry.Get(n)
		c := placement.Candidate{Cluster: n, Usable: wk != nil && h.Active}
		registered := c.Usable || d.Registry.Registered(n)
		switch {
		case c.Usable:
			c.AwaitReport = d.clock.Since(h.Since) < reportGrace
		case registered && h.Since.IsZero(), !registered && justStarted:
			// Its first connection still being made, or its MultiKueueCluster not read yet: the
			// manager just started.
			c.Why, c.AwaitReport = "connecting", true
		default:
			c.Why = fmt.Sprintf("not connected (%s: %s)", h.Reason, h.Message)
		}
		req.Candidates = append(req.Candidates, c)
	}
	return req, true, ""
}

// framework names the integration of a workload's job, read from the cache without a copy (it
// runs inside the admission cycle); "" when the workload has no integrated job.
func (d *Dispatcher) framework(key string) string {
	wl := &kueue.Workload{}
	if err := d.client.Get(context.Background(), workload.SplitKey(key), wl, client.UnsafeDisableDeepCopy); err != nil {
		return ""
	}
	if _, a, ok := d.integrations.Owner(wl); ok {
		return a.Framework()
	}
	return ""
}

// setupClusterAPI registers Cluster API discovery when the management cluster serves Cluster
// API's Cluster kind; otherwise it says so once and dispatch works with MultiKueueClusters only.
func setupClusterAPI(mgr ctrl.Manager, cfg *config.Configuration) error {
	sel, err := metav1.LabelSelectorAsSelector(cfg.MultiCluster.ClusterAPISelector)
	if err != nil {
		return fmt.Errorf("multiCluster.clusterAPISelector: %w", err)
	}
	if _, err := mgr.GetRESTMapper().RESTMapping(clusterv1.GroupVersion.WithKind("Cluster").GroupKind(), clusterv1.GroupVersion.Version); err != nil {
		mgr.GetLogger().Info("Cluster API is not installed; clusterAPISelector has no effect until it is and the manager restarts", "error", err.Error())
		return nil
	}
	c := &clusterapi.Controller{Client: mgr.GetClient(), Namespace: cfg.MultiCluster.ClusterAPINamespace, Selector: sel}
	return c.SetupWithManager(mgr)
}

// Forget undoes a placement whose admission was not written.
func (d *Dispatcher) Forget(key string) { d.Book.Forget(key) }
