package jobs

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/internal/integration"
)

// A stopped job's reservation is released only once its pods are gone, whatever its kind's
// status says: a kind's controller may report a job stopped while the pods it deleted are still
// terminating (ray-operator marks a RayJob Suspended as soon as it has asked for its RayCluster's
// deletion), and a preemptor admitted then would run beside them, over quota. fleetq puts its
// identity label on every pod template it admits, so this check knows no kind.

// WorkloadUIDIndex indexes Workloads by their UID, to find a pod's workload from its
// integration.WorkloadUIDLabel.
const WorkloadUIDIndex = "fleetq.workloadUID"

// SetupPodIndexes registers WorkloadUIDIndex.
func SetupPodIndexes(ctx context.Context, mgr ctrl.Manager) error {
	return mgr.GetFieldIndexer().IndexField(ctx, &kueue.Workload{}, WorkloadUIDIndex, func(o client.Object) []string {
		return []string{string(o.GetUID())}
	})
}

// PodSelector selects the pods fleetq manages (integration.ManagedLabel), the only pods the
// manager caches: those it started, and the plain Pods it holds.
func PodSelector() labels.Selector {
	req, err := labels.NewRequirement(integration.ManagedLabel, selection.Exists, nil)
	if err != nil {
		panic(err) // a constant, valid label key
	}
	return labels.NewSelector().Add(*req)
}

// runningPods counts the pods of a workload that may still run: every pod that has not ended,
// terminating ones included.
func runningPods(ctx context.Context, c client.Reader, wl *kueue.Workload) (int, error) {
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, client.InNamespace(wl.Namespace), client.MatchingLabels{integration.WorkloadUIDLabel: string(wl.UID)}); err != nil {
		return 0, fmt.Errorf("listing the pods of workload %s/%s: %w", wl.Namespace, wl.Name, err)
	}
	n := 0
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			n++
		}
	}
	return n, nil
}

// podOwner maps a pod fleetq started to the job of this reconciler's kind whose workload it
// belongs to, so the pod's end wakes the job that waits for it.
func (r *Reconciler) podOwner(ctx context.Context, obj client.Object) []reconcile.Request {
	uid := obj.GetLabels()[integration.WorkloadUIDLabel]
	if uid == "" {
		return nil
	}
	wls := &kueue.WorkloadList{}
	if err := r.Client.List(ctx, wls, client.InNamespace(obj.GetNamespace()), client.MatchingFields{WorkloadUIDIndex: uid}); err != nil {
		return nil
	}
	var out []reconcile.Request
	gvk := r.Adapter.GVK()
	for _, wl := range wls.Items {
		ref := metav1.GetControllerOf(&wl)
		if ref != nil && ref.Kind == gvk.Kind && ref.APIVersion == gvk.GroupVersion().String() {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: wl.Namespace, Name: ref.Name}})
		}
	}
	return out
}
