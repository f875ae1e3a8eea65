// Package clusterapi registers Cluster API clusters as workers: every Cluster matching the
// configured label selector gets a MultiKueueCluster of the same name that reads the Cluster's
// <name>-kubeconfig Secret, so it is dispatched to, probed, fenced and shown like any other
// worker; it is deregistered when the Cluster goes away or stops matching.
package clusterapi

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	capisecret "sigs.k8s.io/cluster-api/util/secret"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/dispatch/registry"
)

// ManagedLabel marks MultiKueueClusters this controller created (and may delete).
const ManagedLabel = "fleetq.dev/cluster-api"

// Controller mirrors matching Cluster API Clusters into MultiKueueClusters.
type Controller struct {
	Client    client.Client
	Namespace string
	Selector  labels.Selector
}

// SetupWithManager registers the controller; MultiKueueClusters it manages map back to their
// Cluster, so a deleted or edited registration is restored.
func (c *Controller) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("clusterapi").
		For(&clusterv1.Cluster{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetNamespace() == c.Namespace
		}))).
		Watches(&kueue.MultiKueueCluster{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			ref, ok := o.GetAnnotations()[registry.ClusterAPIAnnotation]
			if !ok {
				return nil
			}
			ns, name := splitRef(ref)
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}}
		})).
		Complete(c)
}

// Reconcile registers or deregisters one Cluster.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	cl := &clusterv1.Cluster{}
	err := c.Client.Get(ctx, req.NamespacedName, cl)
	if err != nil && !apierrors.IsNotFound(err) {
		return reconcile.Result{}, err
	}
	want := err == nil && cl.DeletionTimestamp == nil && c.Selector.Matches(labels.Set(cl.Labels))
	mkc := &kueue.MultiKueueCluster{}
	getErr := c.Client.Get(ctx, types.NamespacedName{Name: req.Name}, mkc)
	if getErr != nil && !apierrors.IsNotFound(getErr) {
		return reconcile.Result{}, getErr
	}
	exists := getErr == nil
	ref := req.Namespace + "/" + req.Name
	if exists && mkc.Annotations[registry.ClusterAPIAnnotation] != ref {
		if want {
			return reconcile.Result{}, fmt.Errorf("cluster API cluster %s: a MultiKueueCluster named %s already exists and is not registered from it; rename one of them", ref, req.Name)
		}
		return reconcile.Result{}, nil
	}
	switch {
	case want && !exists:
		mkc = &kueue.MultiKueueCluster{
			ObjectMeta: metav1.ObjectMeta{
				Name:        req.Name,
				Labels:      map[string]string{ManagedLabel: "true"},
				Annotations: map[string]string{registry.ClusterAPIAnnotation: ref},
			},
			Spec: kueue.MultiKueueClusterSpec{ClusterSource: kueue.ClusterSource{KubeConfig: &kueue.KubeConfig{
				Location:     capisecret.Name(req.Name, capisecret.Kubeconfig),
				LocationType: kueue.SecretLocationType,
			}}},
		}
		return reconcile.Result{}, client.IgnoreAlreadyExists(c.Client.Create(ctx, mkc))
	case !want && exists:
		return reconcile.Result{}, client.IgnoreNotFound(c.Client.Delete(ctx, mkc, client.Preconditions{UID: ptr.To(mkc.UID)}))
	}
	return reconcile.Result{}, nil
}

func splitRef(ref string) (string, string) {
	for i := range len(ref) {
		if ref[i] == '/' {
			return ref[:i], ref[i+1:]
		}
	}
	return "", ref
}
