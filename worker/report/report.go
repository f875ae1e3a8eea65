// Package report publishes the worker's CapacityReport: recomputed from the cached nodes, pods and
// synced flavors (plus the room the scheduler reserved for admitted pods not bound yet) whenever
// one of them changes, written when its content changed, at most once per MinInterval, and
// rewritten every Resync even when nothing changed, so its updateTime shows the agent is alive.
package report

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	fleetq "github.com/fleetq/fleetq/api/fleetq/v1alpha1"
	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/worker/capacity"
	"github.com/fleetq/fleetq/worker/watch"
)

// writesTotal counts report writes, for the API-writes budget of a worker.
var writesTotal = prometheus.NewCounter(prometheus.CounterOpts{
	Name: "fleetq_agent_capacity_report_writes_total",
	Help: "Writes of the CapacityReport (content changes and periodic refreshes).",
})

func init() { ctrlmetrics.Registry.MustRegister(writesTotal) }

// DefaultMinInterval is the shortest time between two writes of the report.
const DefaultMinInterval = time.Second

// Publisher writes the CapacityReport.
type Publisher struct {
	// Client reads nodes, pods and flavors from the agent's cache.
	Client client.Client
	// APIReader reads the report itself, uncached, right before writing it.
	APIReader   client.Reader
	Clock       clock.PassiveClock
	Log         logr.Logger
	ClusterName string
	Namespace   string
	Origin      string
	// Kinds are the kinds of jobs the agent runs, reported as status.kinds.
	Kinds []string
	// FencingPolicy is the agent's, reported as status.fencingPolicy.
	FencingPolicy string
	// MinInterval debounces writes; default DefaultMinInterval.
	MinInterval time.Duration
	// Resync rewrites the report (same revision, new updateTime) when nothing changed for so long.
	Resync time.Duration

	wake chan event.GenericEvent

	mu        sync.Mutex
	published bool
	reserved  map[string]capacity.Amounts
	fenced    bool
	lastWrite time.Time
	last      *fleetq.CapacityReportStatus
	writes    int64
}

var reportKey = reconcile.Request{NamespacedName: types.NamespacedName{Name: "report"}}

// SetupWithManager registers the publisher's controller.
func (p *Publisher) SetupWithManager(mgr ctrl.Manager) error {
	if p.MinInterval <= 0 {
		p.MinInterval = DefaultMinInterval
	}
	p.wake = make(chan event.GenericEvent, 1)
	one := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request { return []reconcile.Request{reportKey} })
	return ctrl.NewControllerManagedBy(mgr).
		Named("agent-capacity-report").
		Watches(&kueue.ResourceFlavor{}, one).
		Watches(&corev1.Pod{}, one, builder.WithPredicates(watch.PodChanged())).
		Watches(&corev1.Node{}, one, builder.WithPredicates(watch.NodeChanged())).
		WatchesRawSource(source.Channel(p.wake, one)).
		Complete(p)
}

// Set takes the scheduler's latest reservations and fencing state; the report is recomputed when
// they changed.
func (p *Publisher) Set(reserved map[string]capacity.Amounts, fenced bool) {
	p.mu.Lock()
	changed := !p.published || fenced != p.fenced || !equality.Semantic.DeepEqual(reserved, p.reserved)
	p.published, p.reserved, p.fenced = true, reserved, fenced
	p.mu.Unlock()
	if changed && p.wake != nil {
		select {
		case p.wake <- event.GenericEvent{Object: &fleetq.CapacityReport{}}:
		default:
		}
	}
}

// Writes counts the report writes so far, for tests and the API-writes figures.
func (p *Publisher) Writes() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.writes
}

// Reconcile recomputes the report and writes it if due.
func (p *Publisher) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	p.mu.Lock()
	published, lastWrite, last := p.published, p.lastWrite, p.last
	p.mu.Unlock()
	if !published {
		// The scheduler's first pass publishes the reservations; a report without them would
		// promise room that admitted copies already hold.
		return reconcile.Result{}, nil
	}
	now := p.Clock.Now()
	if since := now.Sub(lastWrite); since < p.MinInterval {
		return reconcile.Result{RequeueAfter: p.MinInterval - since}, nil
	}
	st, err := p.compute(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	if last != nil && capacity.SameContent(last, &st) && now.Sub(lastWrite) < p.Resync {
		return reconcile.Result{RequeueAfter: p.Resync - now.Sub(lastWrite)}, nil
	}
	st.UpdateTime = metav1.NewTime(now)
	if err := p.write(ctx, &st); err != nil {
		return reconcile.Result{}, err
	}
	p.mu.Lock()
	p.lastWrite, p.last = now, &st
	p.writes++
	p.mu.Unlock()
	writesTotal.Inc()
	return reconcile.Result{RequeueAfter: p.Resync}, nil
}

// compute reads the cache and the latest reservations into a report's content.
func (p *Publisher) compute(ctx context.Context) (fleetq.CapacityReportStatus, error) {
	p.mu.Lock()
	reserved, fenced := p.reserved, p.fenced
	p.mu.Unlock()
	var nodes corev1.NodeList
	if err := p.Client.List(ctx, &nodes); err != nil {
		return fleetq.CapacityReportStatus{}, fmt.Errorf("list nodes: %w", err)
	}
	var pods corev1.PodList
	if err := p.Client.List(ctx, &pods); err != nil {
		return fleetq.CapacityReportStatus{}, fmt.Errorf("list pods: %w", err)
	}
	var flavors kueue.ResourceFlavorList
	if err := p.Client.List(ctx, &flavors, client.MatchingLabels{fleetq.OriginLabel: p.Origin}); err != nil {
		return fleetq.CapacityReportStatus{}, fmt.Errorf("list resourceflavors: %w", err)
	}
	nodePtrs := make([]*corev1.Node, len(nodes.Items))
	for i := range nodes.Items {
		nodePtrs[i] = &nodes.Items[i]
	}
	podPtrs := make([]*corev1.Pod, len(pods.Items))
	for i := range pods.Items {
		podPtrs[i] = &pods.Items[i]
	}
	flavorPtrs := make([]*kueue.ResourceFlavor, len(flavors.Items))
	for i := range flavors.Items {
		flavorPtrs[i] = &flavors.Items[i]
	}
	st := capacity.Report(p.ClusterName, capacity.Nodes(nodePtrs, podPtrs), flavorPtrs, reserved, fenced)
	st.Kinds = p.Kinds
	st.FencingPolicy = p.FencingPolicy
	return st, nil
}

// write creates the report or patches it, bumping the revision when the content changed.
func (p *Publisher) write(ctx context.Context, st *fleetq.CapacityReportStatus) error {
	key := types.NamespacedName{Namespace: p.Namespace, Name: fleetq.CapacityReportName(p.ClusterName)}
	existing := &fleetq.CapacityReport{}
	err := p.APIReader.Get(ctx, key, existing)
	if apierrors.IsNotFound(err) {
		st.Revision = 1
		r := &fleetq.CapacityReport{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}, Status: *st}
		if err := p.Client.Create(ctx, r); err != nil {
			return fmt.Errorf("capacityreport %q: create: %w", key, err)
		}
		p.Log.V(1).Info("Capacity report created", "report", key, "revision", st.Revision)
		return nil
	}
	if err != nil {
		return fmt.Errorf("capacityreport %q: %w", key, err)
	}
	st.Revision = existing.Status.Revision
	if !capacity.SameContent(&existing.Status, st) {
		st.Revision++
	}
	changed := existing.DeepCopy()
	changed.Status = *st
	if err := p.Client.Patch(ctx, changed, client.MergeFromWithOptions(existing, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("capacityreport %q: patch: %w", key, err)
	}
	p.Log.V(2).Info("Capacity report written", "report", key, "revision", st.Revision)
	return nil
}
