package copies

import (
	"context"
	"fmt"
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/dispatch/registry"
)

// PodSecurityLabelPrefix starts the labels of Pod Security admission (enforce, audit, warn and
// their -version): a namespace fleetq creates in a worker carries its management namespace's,
// so a tenant gets no pod on a worker that its own namespace would refuse.
const PodSecurityLabelPrefix = "pod-security.kubernetes.io/"

// podSecurityLabels picks the Pod Security labels out of a namespace's labels.
func podSecurityLabels(labels map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range labels {
		if strings.HasPrefix(k, PodSecurityLabelPrefix) {
			out[k] = v
		}
	}
	return out
}

// withPodSecurity returns a worker namespace's labels with its Pod Security labels replaced by
// want, and whether that changes them.
func withPodSecurity(labels, want map[string]string) (map[string]string, bool) {
	if maps.Equal(podSecurityLabels(labels), want) {
		return labels, false
	}
	out := map[string]string{}
	for k, v := range labels {
		if !strings.HasPrefix(k, PodSecurityLabelPrefix) {
			out[k] = v
		}
	}
	maps.Copy(out, want)
	return out, true
}

// ensureNamespace makes sure a copy's namespace exists in the worker with the management
// namespace's Pod Security labels: created with them when missing, brought in line when fleetq
// created it. A namespace the worker's admin created is theirs, labels included.
// It runs on every reconcile of a dispatched workload: while the management namespace is
// unchanged since the worker's was last brought in line (same resourceVersion), it costs one
// read from the cache, not copied.
func (r *Reconciler) ensureNamespace(ctx context.Context, w *registry.Worker, name string) error {
	mgmtNS := &corev1.Namespace{}
	if err := r.Client.Get(ctx, types.NamespacedName{Name: name}, mgmtNS, client.UnsafeDisableDeepCopy); err != nil {
		return fmt.Errorf("reading namespace %s on the management cluster: %w", name, err)
	}
	key, version := w.Name+"/"+name, mgmtNS.ResourceVersion
	r.mu.Lock()
	seen, known := r.namespaces[key]
	r.mu.Unlock()
	if known && seen == version {
		return nil
	}
	want := podSecurityLabels(mgmtNS.Labels)
	ns := &corev1.Namespace{}
	err := w.Client.Get(ctx, types.NamespacedName{Name: name}, ns)
	switch {
	case apierrors.IsNotFound(err):
		labels := map[string]string{CreatedByLabel: "fleetq", kueue.MultiKueueOriginLabel: r.Origin}
		maps.Copy(labels, want)
		ns = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
		if err = w.Client.Create(ctx, ns); apierrors.IsAlreadyExists(err) {
			return nil // created meanwhile: the copy goes on, and the next reconcile checks its labels
		}
		if err != nil {
			return fmt.Errorf("creating namespace %s: %w", name, err)
		}
	case err != nil:
		return fmt.Errorf("reading namespace %s: %w", name, err)
	case ns.DeletionTimestamp != nil:
		return nil // the worker refuses the copy (namespace terminating), which says so; not remembered
	case ns.Labels[CreatedByLabel] == "fleetq":
		if labels, changed := withPodSecurity(ns.Labels, want); changed {
			orig := ns.DeepCopy()
			ns.Labels = labels
			if err := w.Client.Patch(ctx, ns, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
				return fmt.Errorf("updating the Pod Security labels of namespace %s: %w", name, err)
			}
			r.Log.Info("Worker namespace follows the management namespace's Pod Security labels", "cluster", w.Name, "namespace", name, "labels", want)
		}
	}
	r.mu.Lock()
	r.namespaces[key] = version
	r.mu.Unlock()
	return nil
}

// namespaceGone forgets that a namespace exists in a worker.
func (r *Reconciler) namespaceGone(w *registry.Worker, name string) {
	r.mu.Lock()
	delete(r.namespaces, w.Name+"/"+name)
	r.mu.Unlock()
}
