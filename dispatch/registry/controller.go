package registry

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	capikubeconfig "sigs.k8s.io/cluster-api/util/kubeconfig"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	fleetq "github.com/fleetq/fleetq/api/fleetq/v1alpha1"
	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/manager/metrics"
)

// ClusterAPIAnnotation on a MultiKueueCluster names the Cluster API Cluster (namespace/name)
// whose <name>-kubeconfig Secret connects to it; the clusterapi controller sets it.
const ClusterAPIAnnotation = "fleetq.dev/cluster-api-cluster"

// Controller connects the registry to every MultiKueueCluster and reports each one's Active
// condition: a reason (BadKubeconfig, KubeconfigNotFound, ClientConnectionFailed) and, in its
// lastTransitionTime, when the worker became active or first failed; and, once the manager has
// tried to renew its fencing Lease there, the FencingLease condition.
type Controller struct {
	Client    client.Client
	Registry  *Registry
	Namespace string
	// KubeconfigDir is the directory locationType Path may read from; empty refuses Path.
	KubeconfigDir string
	// Health receives the workers whose health changed (from Registry OnHealth).
	Health chan event.TypedGenericEvent[*kueue.MultiKueueCluster]

	mu sync.Mutex
	// published is when each worker's capacity annotation was last written.
	published map[string]time.Time
}

// HealthChanged is the Registry's OnHealth hook: it refreshes the worker's condition.
func (c *Controller) HealthChanged(cluster string) {
	mkc := &kueue.MultiKueueCluster{}
	mkc.Name = cluster
	select {
	case c.Health <- event.TypedGenericEvent[*kueue.MultiKueueCluster]{Object: mkc}:
	default: // a full channel already holds refreshes; the periodic requeue catches up
	}
}

// SetupWithManager registers the controller; a change of a kubeconfig Secret in the manager's
// namespace reconnects the workers that use it.
func (c *Controller) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("multikueueclusters").
		For(&kueue.MultiKueueCluster{}).
		WatchesRawSource(source.Channel(c.Health, &handler.TypedEnqueueRequestForObject[*kueue.MultiKueueCluster]{})).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(c.clustersUsingSecret),
			builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetNamespace() == c.Namespace }))).
		Complete(c)
}

func (c *Controller) clustersUsingSecret(ctx context.Context, o client.Object) []reconcile.Request {
	list := &kueue.MultiKueueClusterList{}
	if err := c.Client.List(ctx, list); err != nil {
		return nil
	}
	var out []reconcile.Request
	for _, mkc := range list.Items {
		kc := mkc.Spec.ClusterSource.KubeConfig
		if kc != nil && kc.LocationType != kueue.PathLocationType && kc.Location == o.GetName() {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: mkc.Name}})
		}
	}
	return out
}

// Reconcile connects (or reconnects) one worker and writes its condition.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	mkc := &kueue.MultiKueueCluster{}
	if err := c.Client.Get(ctx, req.NamespacedName, mkc); err != nil {
		if apierrors.IsNotFound(err) {
			c.Registry.Remove(req.Name)
			metrics.ForgetWorker(req.Name)
			c.mu.Lock()
			delete(c.published, req.Name)
			c.mu.Unlock()
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, err
	}
	if mkc.DeletionTimestamp != nil {
		c.Registry.Remove(mkc.Name)
		return reconcile.Result{}, nil
	}
	kubeconfig, reason, err := c.kubeconfig(ctx, mkc)
	var h Health
	if err != nil {
		c.Registry.Fail(mkc.Name, reason, err)
		_, h = c.Registry.Get(mkc.Name)
	} else {
		h = c.Registry.Ensure(ctx, mkc.Name, kubeconfig)
	}
	if err := c.writeCondition(ctx, mkc, h); err != nil {
		return reconcile.Result{}, err
	}
	held, err := c.publishCapacity(ctx, mkc)
	if err != nil {
		return reconcile.Result{}, err
	}
	if !h.Active {
		return reconcile.Result{RequeueAfter: c.Registry.opts.ProbeInterval}, nil
	}
	return reconcile.Result{RequeueAfter: held}, nil
}

// kubeconfig reads a worker's kubeconfig from where its MultiKueueCluster says.
func (c *Controller) kubeconfig(ctx context.Context, mkc *kueue.MultiKueueCluster) ([]byte, string, error) {
	if ref, ok := mkc.Annotations[ClusterAPIAnnotation]; ok {
		ns, name, _ := strings.Cut(ref, "/")
		data, err := capikubeconfig.FromSecret(ctx, c.Client, types.NamespacedName{Namespace: ns, Name: name})
		if err != nil {
			return nil, ReasonKubeconfigNotFound, fmt.Errorf("Cluster API cluster %s: reading its kubeconfig Secret %s/%s-kubeconfig: %w", ref, ns, name, err)
		}
		return data, "", nil
	}
	kc := mkc.Spec.ClusterSource.KubeConfig
	if kc == nil {
		return nil, ReasonBadKubeconfig, fmt.Errorf("spec.clusterSource has no kubeConfig; fleetq does not support clusterProfileRef yet")
	}
	if kc.LocationType == kueue.PathLocationType {
		path, err := kubeconfigPath(c.KubeconfigDir, kc.Location)
		if err != nil {
			return nil, ReasonBadKubeconfig, fmt.Errorf("spec.clusterSource.kubeConfig.location: %w", err)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, ReasonKubeconfigNotFound, fmt.Errorf("spec.clusterSource.kubeConfig.location: %w", err)
		}
		return data, "", nil
	}
	sec := &corev1.Secret{}
	if err := c.Client.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: kc.Location}, sec); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, ReasonKubeconfigNotFound, fmt.Errorf("Secret %s/%s (spec.clusterSource.kubeConfig.location) not found; create it with the worker's kubeconfig under key %q", c.Namespace, kc.Location, kueue.MultiKueueConfigSecretKey)
		}
		return nil, ReasonKubeconfigNotFound, err
	}
	data, ok := sec.Data[kueue.MultiKueueConfigSecretKey]
	if !ok || len(data) == 0 {
		return nil, ReasonBadKubeconfig, fmt.Errorf("Secret %s/%s has no %q key; put the worker's kubeconfig there", c.Namespace, kc.Location, kueue.MultiKueueConfigSecretKey)
	}
	return data, "", nil
}

func (c *Controller) writeCondition(ctx context.Context, mkc *kueue.MultiKueueCluster, h Health) error {
	metrics.WorkerActive(mkc.Name, h.Active)
	want := []metav1.Condition{{
		Type:               kueue.MultiKueueClusterActive,
		Status:             metav1.ConditionFalse,
		Reason:             h.Reason,
		Message:            h.Message,
		ObservedGeneration: mkc.Generation,
		LastTransitionTime: metav1.NewTime(h.Since),
	}}
	if h.Active {
		want[0].Status = metav1.ConditionTrue
	}
	if want[0].Reason == "" {
		want[0].Reason = ReasonConnecting
	}
	if l := c.Registry.Lease(mkc.Name); !l.Since.IsZero() {
		cond := metav1.Condition{
			Type:               fleetq.MultiKueueClusterFencingLease,
			Status:             metav1.ConditionFalse,
			Reason:             l.Reason,
			Message:            l.Message,
			ObservedGeneration: mkc.Generation,
			LastTransitionTime: metav1.NewTime(l.Since),
		}
		if l.Renewed {
			cond.Status = metav1.ConditionTrue
		}
		want = append(want, cond)
	}
	orig := mkc.DeepCopy()
	changed := false
	for _, cond := range want {
		if cur := meta.FindStatusCondition(mkc.Status.Conditions, cond.Type); cur != nil &&
			cur.Status == cond.Status && cur.Reason == cond.Reason && cur.Message == cond.Message && cur.ObservedGeneration == cond.ObservedGeneration {
			continue
		}
		// SetStatusCondition keeps the old transition time when the status did not flip; the
		// registry's Since is the truth (first failure), so set it explicitly.
		meta.RemoveStatusCondition(&mkc.Status.Conditions, cond.Type)
		meta.SetStatusCondition(&mkc.Status.Conditions, cond)
		changed = true
	}
	if !changed {
		return nil
	}
	return client.IgnoreNotFound(c.Client.Status().Patch(ctx, mkc, client.MergeFrom(orig)))
}

// kubeconfigPath checks a locationType Path location against the one directory the manager's
// configuration allows, following symlinks, and returns the file to read.
func kubeconfigPath(dir, location string) (string, error) {
	if dir == "" {
		return "", fmt.Errorf("locationType Path is disabled: set multiCluster.kubeconfigDir in the manager's configuration to the directory that holds worker kubeconfigs, or use locationType Secret")
	}
	if !filepath.IsAbs(location) {
		return "", fmt.Errorf("%q is not an absolute path; kubeconfigs are read from %s", location, dir)
	}
	realDir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", fmt.Errorf("multiCluster.kubeconfigDir %s: %w", dir, err)
	}
	real, err := filepath.EvalSymlinks(location)
	if err != nil {
		return "", err
	}
	if filepath.Dir(real) != filepath.Clean(realDir) {
		return "", fmt.Errorf("%q is outside multiCluster.kubeconfigDir (%s); put the kubeconfig directly in that directory", location, dir)
	}
	return real, nil
}
