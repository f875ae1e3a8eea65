package quota

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/internal/engine"
	"github.com/fleetq/fleetq/manager/cache"
	"github.com/fleetq/fleetq/manager/metrics"
	"github.com/fleetq/fleetq/manager/queue"
	"github.com/fleetq/fleetq/manager/workloads"
)

// MinStatusInterval is the least time between two status writes of one queue: counters change
// with every admission, and a burst must not turn into a write per workload.
const MinStatusInterval = time.Second

// ClusterQueueReconciler keeps one ClusterQueue in the cache and writes its status.
type ClusterQueueReconciler struct {
	Client      client.Client
	Cache       *cache.Cache
	Queues      *queue.Queues
	Clock       clock.PassiveClock
	Log         logr.Logger
	Trigger     *Trigger
	FairSharing bool
	// Workloads receives the workloads to route again when a queue changes.
	Workloads chan event.TypedGenericEvent[*kueue.Workload]

	track *tracker
}

// SetupWithManager registers the controller.
func (r *ClusterQueueReconciler) SetupWithManager(mgr manager.Manager) error {
	r.track = newTracker()
	return ctrl.ControllerManagedBy(mgr).
		Named("clusterqueues").
		For(&kueue.ClusterQueue{}).
		WatchesRawSource(source.Channel(r.Trigger.ClusterQueues, &handler.TypedEnqueueRequestForObject[*kueue.ClusterQueue]{})).
		Watches(&kueue.AdmissionCheck{}, handler.EnqueueRequestsFromMapFunc(r.queuesUsingCheck)).
		WithOptions(controller.Options{MaxConcurrentReconciles: QueueWorkers}).
		Complete(r)
}

func (r *ClusterQueueReconciler) queuesUsingCheck(ctx context.Context, o client.Object) []reconcile.Request {
	list := &kueue.ClusterQueueList{}
	if err := r.Client.List(ctx, list); err != nil {
		return nil
	}
	var out []reconcile.Request
	for _, cq := range list.Items {
		if slices.Contains(checkNames(&cq), kueue.AdmissionCheckReference(o.GetName())) {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: cq.Name}})
		}
	}
	return out
}

// Reconcile syncs one ClusterQueue.
func (r *ClusterQueueReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	cq := &kueue.ClusterQueue{}
	if err := r.Client.Get(ctx, req.NamespacedName, cq); err != nil {
		if !apierrors.IsNotFound(err) {
			return reconcile.Result{}, err
		}
		r.track.forget(req.Name)
		metrics.ForgetClusterQueue(req.Name)
		r.Queues.Wake(r.Cache.DeleteClusterQueue(req.Name)...)
		return reconcile.Result{}, r.reroute(ctx, req.Name)
	}
	inactive, err := r.checkProblem(ctx, cq)
	if err != nil {
		return reconcile.Result{}, err
	}
	if r.track.changed(cq.Name, fmt.Sprintf("%d/%t/%s", cq.Generation, cq.DeletionTimestamp != nil, inactive)) {
		view := cq.DeepCopy()
		if cq.DeletionTimestamp != nil || inactive != "" {
			view.Spec.StopPolicy = ptr.To(kueue.Hold) // admits nothing new; admitted work keeps quota
		}
		r.Queues.Wake(r.Cache.AddOrUpdateClusterQueue(view)...)
		if err := r.reroute(ctx, cq.Name); err != nil {
			return reconcile.Result{}, err
		}
		// The cache now, the finalizer and status on the next pass: after a restart every
		// queue reaches the cache (and admission may start) before any waits for its writes,
		// which take ~0.5 s each on a loaded API server (40 s for 500 queues, one at a time).
		return reconcile.Result{Requeue: true}, nil
	}
	if err := r.finalize(ctx, cq); err != nil {
		return reconcile.Result{}, err
	}
	return r.writeStatus(ctx, cq, inactive)
}

// checkProblem names a missing or inactive admission check, which keeps the queue inactive.
func (r *ClusterQueueReconciler) checkProblem(ctx context.Context, cq *kueue.ClusterQueue) (string, error) {
	for _, name := range checkNames(cq) {
		ac := &kueue.AdmissionCheck{}
		if err := r.Client.Get(ctx, types.NamespacedName{Name: string(name)}, ac); err != nil {
			if apierrors.IsNotFound(err) {
				return fmt.Sprintf("%s: AdmissionCheck %s doesn't exist; create it or remove it from spec.admissionChecksStrategy", kueue.ClusterQueueActiveReasonAdmissionCheckNotFound, name), nil
			}
			return "", err
		}
		if !meta.IsStatusConditionTrue(ac.Status.Conditions, kueue.AdmissionCheckActive) {
			msg := "it reports no Active condition yet"
			if c := meta.FindStatusCondition(ac.Status.Conditions, kueue.AdmissionCheckActive); c != nil {
				msg = c.Message
			}
			return fmt.Sprintf("%s: AdmissionCheck %s is not active: %s", kueue.ClusterQueueActiveReasonAdmissionCheckInactive, name, msg), nil
		}
	}
	return "", nil
}

// reroute sends the workloads of every LocalQueue feeding the queue back to the workloads
// controller, since where (and whether) they queue may have changed.
func (r *ClusterQueueReconciler) reroute(ctx context.Context, clusterQueue string) error {
	for _, key := range r.Cache.LocalQueuesOf(clusterQueue) {
		ns, name := splitKey(key)
		if err := workloads.RequeueLocalQueue(ctx, r.Client, r.Workloads, ns, name); err != nil {
			return err
		}
	}
	return nil
}

// finalize keeps the resource-in-use finalizer while workloads hold quota in the queue, so a
// deleted queue never loses track of running work.
func (r *ClusterQueueReconciler) finalize(ctx context.Context, cq *kueue.ClusterQueue) error {
	if cq.DeletionTimestamp == nil {
		if controllerutil.ContainsFinalizer(cq, kueue.ResourceInUseFinalizerName) {
			return nil
		}
		orig := cq.DeepCopy()
		controllerutil.AddFinalizer(cq, kueue.ResourceInUseFinalizerName)
		return client.IgnoreNotFound(r.Client.Patch(ctx, cq, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})))
	}
	st, _, _ := r.Cache.ClusterQueueStatus(cq.Name)
	if st.AdmittedWorkloads > 0 || !controllerutil.ContainsFinalizer(cq, kueue.ResourceInUseFinalizerName) {
		return nil
	}
	orig := cq.DeepCopy()
	controllerutil.RemoveFinalizer(cq, kueue.ResourceInUseFinalizerName)
	return client.IgnoreNotFound(r.Client.Patch(ctx, cq, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})))
}

func (r *ClusterQueueReconciler) writeStatus(ctx context.Context, cq *kueue.ClusterQueue, inactive string) (reconcile.Result, error) {
	st, admitted, ok := r.Cache.ClusterQueueStatus(cq.Name)
	if !ok {
		return reconcile.Result{}, nil
	}
	counts := r.Queues.ClusterQueueCounts(cq.Name)
	want := cq.Status.DeepCopy()
	want.PendingWorkloads = int32(counts.Active + counts.Parked + counts.BackingOff)
	want.ReservingWorkloads = int32(st.AdmittedWorkloads)
	want.AdmittedWorkloads = int32(admitted)
	want.FlavorsReservation = flavorUsage(st.Usage)
	want.FlavorsUsage = flavorUsage(st.Usage)
	if r.FairSharing {
		want.FairSharing = &kueue.FairSharingStatus{WeightedShare: st.WeightedShare}
	}
	status, reason, msg := metav1.ConditionTrue, kueue.ClusterQueueActiveReasonReady, "Can admit new workloads"
	switch {
	case cq.DeletionTimestamp != nil:
		status, reason = metav1.ConditionFalse, kueue.ClusterQueueActiveReasonTerminating
		msg = fmt.Sprintf("Can't admit new workloads: the ClusterQueue is being deleted and goes away once its %d workload(s) holding quota finish", st.AdmittedWorkloads)
	case inactive != "":
		var detail string
		reason, detail, _ = strings.Cut(inactive, ": ")
		status, msg = metav1.ConditionFalse, "Can't admit new workloads: "+detail
	case !st.Active:
		status, reason = metav1.ConditionFalse, string(st.InactiveReason)
		msg = "Can't admit new workloads: " + st.Message
	}
	meta.SetStatusCondition(&want.Conditions, metav1.Condition{Type: kueue.ClusterQueueActive, Status: status, Reason: reason, Message: msg, ObservedGeneration: cq.Generation})
	metrics.ClusterQueue(cq, want, st, admitted, counts.Active, counts.Parked+counts.BackingOff)
	return r.track.writeStatus(ctx, r.Client, r.Clock, cq.Name, cq, &cq.Status, want)
}

func checkNames(cq *kueue.ClusterQueue) []kueue.AdmissionCheckReference {
	var out []kueue.AdmissionCheckReference
	if s := cq.Spec.AdmissionChecksStrategy; s != nil {
		for _, rule := range s.AdmissionChecks {
			out = append(out, rule.Name)
		}
	}
	return out
}

func flavorUsage(in []engine.FlavorUsage) []kueue.FlavorUsage {
	out := make([]kueue.FlavorUsage, 0, len(in))
	for _, f := range in {
		fu := kueue.FlavorUsage{Name: kueue.ResourceFlavorReference(f.Name)}
		for _, r := range f.Resources {
			fu.Resources = append(fu.Resources, kueue.ResourceUsage{
				Name:     r.Name,
				Total:    quantity(r.Name, r.Total),
				Borrowed: quantity(r.Name, r.Borrowed),
			})
		}
		out = append(out, fu)
	}
	return out
}

func quantity(name corev1.ResourceName, v int64) resource.Quantity {
	return resource.MustParse(engine.FormatAmount(name, v))
}
