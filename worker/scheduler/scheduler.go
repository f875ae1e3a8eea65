// Package scheduler is fleetq-agent's local scheduler: one pass at a time over every copy the
// manager dispatched to this worker (Workloads and Jobs carrying the agent's origin label, nothing
// else), it
//
//  1. reads the manager's Lease and, when no renewal was seen for its duration, fences: suspends
//     every admitted copy's Job and marks its Workload Evicted (reason Fenced), admitting nothing;
//  2. otherwise asks the admission planner which pending copies fit now on the real nodes, which
//     wait, and which lower-priority copies to evict for them, and applies that: admit (Workload
//     status, then unsuspend the Job), evict (suspend the Job, Evicted and Preempted conditions) and
//     pending reasons with numbers;
//  3. keeps every copy's Job in the state its Workload calls for, mirrors a finished Job into the
//     Workload's Finished condition, and releases an evicted copy's admission once its pods are
//     gone.
//
// A pass looks at the world every time (a restart loses nothing but the planned node of admitted
// pods not yet bound, which the next pass places again); it remembers only its own writes that the
// informer cache has not shown yet, so two passes never admit into the same room.
package scheduler

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	fleetq "github.com/fleetq/fleetq/api/fleetq/v1alpha1"
	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/internal/engine/nodefit"
	"github.com/fleetq/fleetq/internal/integration"
	"github.com/fleetq/fleetq/internal/workload"
	"github.com/fleetq/fleetq/worker/admission"
	"github.com/fleetq/fleetq/worker/capacity"
	"github.com/fleetq/fleetq/worker/fencing"
	"github.com/fleetq/fleetq/worker/watch"
)

// Scheduler is the agent's local scheduler. Its client must read Workloads, job copies and
// ResourceFlavors through a cache restricted to the agent's origin label.
type Scheduler struct {
	Client client.Client
	// Integrations are the kinds of job copies the agent runs (those its cluster serves).
	Integrations *integration.Registry
	// CopyCaches hold the copies of the kinds the agent's main cache holds in another shape
	// (watch.SeparateCopies: Pods), by kind; the scheduler reads and watches those copies there.
	CopyCaches map[schema.GroupVersionKind]cache.Cache
	Clock      clock.WithDelayedExecution
	Log        logr.Logger
	Recorder   events.EventRecorder
	// ClusterName names this worker in messages.
	ClusterName string
	// Origin is the origin label value of the copies this agent handles.
	Origin string
	// Namespace holds the manager's Lease.
	Namespace string
	// Fence tracks the manager's Lease renewals.
	Fence *fencing.Observer
	// KeepRunningWhenFenced leaves admitted copies running while fenced (fencingPolicy
	// KeepRunning); pending ones still wait.
	KeepRunningWhenFenced bool
	// Publish hands each pass's reservations and fencing state to the capacity report, before the
	// pass writes anything, so a report stamped after an admission always accounts for it.
	Publish func(reserved map[string]capacity.Amounts, fenced bool)

	once sync.Once
	wake chan event.GenericEvent

	mu sync.Mutex
	// admitted remembers copies this agent admitted until the cache shows their admission.
	admitted map[types.UID]assumedAdmission
	// evictions remembers copies this agent evicted until the cache shows their eviction.
	evictions map[types.UID]bool
	// planned remembers where admitted copies' pods were planned, for pods not bound yet.
	planned map[types.UID][]nodefit.Placement
	// warnedUnfenced remembers copies already warned about running without the manager's lease.
	warnedUnfenced map[types.UID]bool
	timer          clock.Timer
}

type assumedAdmission struct {
	at time.Time
}

// reportUnfenced makes copies that run without the manager's Lease visible: the metric, and one
// warning event on each such copy's Workload (the lease is the only thing that stops a copy
// whose manager is lost; a missing one is usually a namespace mismatch between the manager's
// multiCluster.agentNamespace and the agent's namespace).
func (s *Scheduler) reportUnfenced(fence fencing.State, live []*copyState) {
	if !fence.NoLease {
		unfencedGauge.Set(0)
		s.mu.Lock()
		s.warnedUnfenced = nil
		s.mu.Unlock()
		return
	}
	unfencedGauge.Set(float64(len(live)))
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.warnedUnfenced == nil {
		s.warnedUnfenced = map[types.UID]bool{}
	}
	for _, c := range live {
		if s.warnedUnfenced[c.wl.UID] {
			continue
		}
		s.warnedUnfenced[c.wl.UID] = true
		s.Log.Info("Copy runs with no manager lease to fence it", "workload", c.wl.Namespace+"/"+c.wl.Name, "lease", s.Namespace+"/"+fleetq.ManagerLeaseName(s.Origin))
		s.Recorder.Eventf(c.wl, nil, corev1.EventTypeWarning, ReasonUnfenced, "Unfenced",
			"no lease %s in namespace %s: if the manager were lost this copy would not be stopped; the manager writes its lease to its multiCluster.agentNamespace, which must be this agent's namespace", fleetq.ManagerLeaseName(s.Origin), s.Namespace)
	}
}

// ReasonUnfenced is the reason of the warning on copies that run without the manager's lease.
const ReasonUnfenced = "NoManagerLease"

// passKey is the one request every event maps to: a pass looks at all copies at once.
var passKey = reconcile.Request{NamespacedName: types.NamespacedName{Name: "pass"}}

// SetupWithManager registers the scheduler's controller: every change of a copy, its job, a pod,
// a node, a synced flavor or the manager's Lease triggers a pass.
func (s *Scheduler) SetupWithManager(mgr ctrl.Manager) error {
	s.init()
	one := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request { return []reconcile.Request{passKey} })
	lease := fleetq.ManagerLeaseName(s.Origin)
	b := ctrl.NewControllerManagedBy(mgr).
		Named("agent-scheduler").
		Watches(&kueue.Workload{}, one)
	for _, a := range s.Integrations.Adapters() {
		if c, ok := s.CopyCaches[a.GVK()]; ok {
			b = b.WatchesRawSource(source.Kind(c, a.New(), one))
			continue
		}
		b = b.Watches(a.New(), one)
	}
	return b.
		Watches(&kueue.ResourceFlavor{}, one).
		Watches(&corev1.Pod{}, one, builder.WithPredicates(watch.PodChanged())).
		Watches(&corev1.Node{}, one, builder.WithPredicates(watch.NodeChanged())).
		Watches(&coordinationv1.Lease{}, one, builder.WithPredicates(watch.Named(s.Namespace, lease))).
		WatchesRawSource(source.Channel(s.wake, one)).
		Complete(s)
}

// init makes the in-memory state; SetupWithManager calls it, and a Reconcile called directly (in
// unit tests) too.
func (s *Scheduler) init() {
	s.once.Do(func() {
		s.wake = make(chan event.GenericEvent, 1)
		s.admitted, s.evictions, s.planned = map[types.UID]assumedAdmission{}, map[types.UID]bool{}, map[types.UID][]nodefit.Placement{}
	})
}

// Reconcile runs one pass.
func (s *Scheduler) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	s.init()
	start := s.Clock.Now()
	defer func() { passSeconds.Observe(s.Clock.Since(start).Seconds()) }()
	log := s.Log
	lease := &coordinationv1.Lease{}
	err := s.Client.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: fleetq.ManagerLeaseName(s.Origin)}, lease)
	switch {
	case apierrors.IsNotFound(err):
		s.Fence.Observe(nil)
	case err != nil:
		return reconcile.Result{}, fmt.Errorf("lease %s/%s: %w", s.Namespace, fleetq.ManagerLeaseName(s.Origin), err)
	default:
		s.Fence.Observe(lease)
	}
	fence := s.Fence.State()
	fencedGauge.Set(map[bool]float64{true: 1, false: 0}[fence.Fenced])

	in, err := s.read(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	var errs []error
	var live []*copyState
	for _, c := range in.copies {
		if c.finished != nil {
			errs = append(errs, s.finish(ctx, c))
			continue
		}
		if workload.IsFinished(c.wl) {
			continue
		}
		live = append(live, c)
	}
	phases := map[admission.Phase]int{}
	for _, c := range live {
		phases[c.plan.Phase]++
	}
	s.reportUnfenced(fence, live)
	copiesGauge.WithLabelValues("pending").Set(float64(phases[admission.Pending]))
	copiesGauge.WithLabelValues("admitted").Set(float64(phases[admission.Admitted]))
	copiesGauge.WithLabelValues("evicting").Set(float64(phases[admission.Evicting]))

	var plan admission.Plan
	if fence.Fenced {
		s.Publish(nil, true)
		errs = append(errs, s.fence(ctx, live, fence.Message, s.KeepRunningWhenFenced)...)
	} else {
		planIn := admission.Input{Cluster: s.ClusterName, Nodes: in.nodes}
		for _, c := range live {
			if c.invalid == "" && workload.IsActive(c.wl) {
				planIn.Copies = append(planIn.Copies, c.plan)
			}
		}
		plan = admission.Make(planIn)
		s.Publish(plan.Reserved, false)
		errs = append(errs, s.apply(ctx, live, plan)...)
	}
	errs = append(errs, s.converge(ctx, live)...)
	s.forget(in.copies)
	s.armFenceTimer(fence)
	stale := false
	var failed []error
	for _, err := range errs {
		switch {
		case err == nil:
		case errors.Is(err, errStale):
			stale = true
		default:
			failed = append(failed, err)
		}
	}
	if err := errors.Join(failed...); err != nil {
		return reconcile.Result{}, err
	}
	if stale {
		return reconcile.Result{RequeueAfter: staleRetry}, nil
	}
	log.V(2).Info("Pass done", "copies", len(live), "admitted", len(plan.Admit), "evicted", len(plan.Evict), "fenced", fence.Fenced)
	return reconcile.Result{}, nil
}

// staleRetry is when a pass whose writes met a newer object runs again, in case no event does.
const staleRetry = time.Second

// passInput is what one pass read from the cache.
type passInput struct {
	nodes   []capacity.Node
	flavors []*kueue.ResourceFlavor
	copies  []*copyState
}

func (s *Scheduler) read(ctx context.Context) (*passInput, error) {
	var nodes corev1.NodeList
	if err := s.Client.List(ctx, &nodes); err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	var pods corev1.PodList
	if err := s.Client.List(ctx, &pods); err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	var flavors kueue.ResourceFlavorList
	if err := s.Client.List(ctx, &flavors, client.MatchingLabels{fleetq.OriginLabel: s.Origin}); err != nil {
		return nil, fmt.Errorf("list resourceflavors: %w", err)
	}
	jobs := map[jobKey]client.Object{}
	for _, a := range s.Integrations.Adapters() {
		list, err := integration.NewList(a, s.Client.Scheme())
		if err != nil {
			return nil, err
		}
		var reader client.Reader = s.Client
		if c, ok := s.CopyCaches[a.GVK()]; ok {
			reader = c
		}
		if err := reader.List(ctx, list, client.MatchingLabels{fleetq.OriginLabel: s.Origin}); err != nil {
			return nil, fmt.Errorf("list %s copies: %w", a.GVK().Kind, err)
		}
		items, err := integration.Items(list)
		if err != nil {
			return nil, err
		}
		for _, j := range items {
			jobs[jobKey{a.GVK(), client.ObjectKeyFromObject(j)}] = j
		}
	}
	var wls kueue.WorkloadList
	if err := s.Client.List(ctx, &wls, client.MatchingLabels{fleetq.OriginLabel: s.Origin}); err != nil {
		return nil, fmt.Errorf("list workloads: %w", err)
	}
	nodePtrs := make([]*corev1.Node, len(nodes.Items))
	for i := range nodes.Items {
		nodePtrs[i] = &nodes.Items[i]
	}
	podPtrs := make([]*corev1.Pod, len(pods.Items))
	for i := range pods.Items {
		podPtrs[i] = &pods.Items[i]
	}
	in := &passInput{nodes: capacity.Nodes(nodePtrs, podPtrs)}
	usage := usageByWorkload(podPtrs)
	members := s.groupMembers(jobs)
	in.flavors = sortedFlavors(flavors.Items)
	for i := range wls.Items {
		in.copies = append(in.copies, s.readCopy(&wls.Items[i], jobs, members, usage, in.flavors))
	}
	return in, nil
}

// assumed reports whether this agent admitted the copy and the cache does not show it yet.
func (s *Scheduler) assumed(wl *kueue.Workload) (assumedAdmission, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.admitted[wl.UID]
	return a, ok
}

func (s *Scheduler) evicted(wl *kueue.Workload) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.evictions[wl.UID]
}

func (s *Scheduler) placements(uid types.UID) ([]nodefit.Placement, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.planned[uid]
	return p, ok
}

// forget drops what the cache now shows, and everything about copies that are gone.
func (s *Scheduler) forget(copies []*copyState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := map[types.UID]*copyState{}
	for _, c := range copies {
		seen[c.wl.UID] = c
	}
	for uid := range s.admitted {
		if c, ok := seen[uid]; !ok || workload.HasQuotaReservation(c.wl) || workload.IsEvicted(c.wl) || workload.IsFinished(c.wl) {
			delete(s.admitted, uid)
		}
	}
	for uid := range s.evictions {
		if c, ok := seen[uid]; !ok || workload.IsEvicted(c.wl) {
			delete(s.evictions, uid)
		}
	}
	for uid := range s.planned {
		c, ok := seen[uid]
		if !ok || c.plan.Phase != admission.Admitted || c.finished != nil || allBound(c.plan.Missing) {
			delete(s.planned, uid)
		}
	}
}

func allBound(missing map[string]int32) bool {
	for _, n := range missing {
		if n > 0 {
			return false
		}
	}
	return true
}

// armFenceTimer wakes a pass when the lease would expire, so fencing happens on time even if
// nothing else changes.
func (s *Scheduler) armFenceTimer(st fencing.State) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
	if st.Fenced || st.Deadline.IsZero() {
		return
	}
	// The observer counts the deadline itself as expired, so a pass woken then fences.
	wait := st.Deadline.Sub(s.Clock.Now())
	s.timer = s.Clock.AfterFunc(wait, func() {
		select {
		case s.wake <- event.GenericEvent{Object: &coordinationv1.Lease{}}:
		default:
		}
	})
}
