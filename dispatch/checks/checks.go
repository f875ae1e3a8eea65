// Package checks runs the MultiKueue AdmissionChecks: it keeps their Active condition (the
// parameters must name an existing MultiKueueConfig) and remembers, per check, the workers its
// MultiKueueConfig lists in preference order, which the scheduler's placement reads.
package checks

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
)

// Reasons of the AdmissionCheck Active condition.
const (
	ReasonActive                  = "Active"
	ReasonBadParameters           = "BadParameters"
	ReasonMultiKueueConfigMissing = "MultiKueueConfigNotFound"
)

// Index maps MultiKueue admission checks to their workers. It is safe for concurrent use.
type Index struct {
	mu       sync.Mutex
	clusters map[string][]string // check name → ordered worker names
	// seen holds every check reconciled so far, MultiKueue or not.
	seen map[string]bool
	// OnChange, when set, hears that the index changed (queues waiting for it may proceed).
	OnChange func()
}

// NewIndex returns an empty index.
func NewIndex() *Index { return &Index{clusters: map[string][]string{}, seen: map[string]bool{}} }

// Unknown returns the first of names the index has not seen yet (after a manager start, the
// check controller may not have caught up): placement waits rather than guess.
func (x *Index) Unknown(names []kueue.AdmissionCheckReference) (kueue.AdmissionCheckReference, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, n := range names {
		if !x.seen[string(n)] {
			return n, true
		}
	}
	return "", false
}

// Clusters returns the workers, in preference order, of the MultiKueue checks among names,
// and whether any of the names is a MultiKueue check.
func (x *Index) Clusters(names []kueue.AdmissionCheckReference) ([]string, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	var out []string
	found := false
	for _, n := range names {
		cs, ok := x.clusters[string(n)]
		if !ok {
			continue
		}
		found = true
		for _, c := range cs {
			if !slices.Contains(out, c) {
				out = append(out, c)
			}
		}
	}
	return out, found
}

// IsMultiKueue reports whether a check name is a MultiKueue check.
func (x *Index) IsMultiKueue(name kueue.AdmissionCheckReference) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	_, ok := x.clusters[string(name)]
	return ok
}

func (x *Index) set(name string, clusters []string) {
	x.mu.Lock()
	x.clusters[name] = clusters
	x.seen[name] = true
	x.mu.Unlock()
	x.changed()
}

// remove forgets a check's workers; seen says whether the check still exists (as a
// non-MultiKueue check) or is gone.
func (x *Index) remove(name string, seen bool) {
	x.mu.Lock()
	delete(x.clusters, name)
	if seen {
		x.seen[name] = true
	} else {
		delete(x.seen, name)
	}
	x.mu.Unlock()
	x.changed()
}

func (x *Index) changed() {
	if x.OnChange != nil {
		x.OnChange()
	}
}

// Controller reconciles MultiKueue AdmissionChecks.
type Controller struct {
	Client client.Client
	Index  *Index
}

// SetupWithManager registers the controller; a MultiKueueConfig change reaches the checks that
// name it.
func (c *Controller) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("admissionchecks").
		For(&kueue.AdmissionCheck{}).
		Watches(&kueue.MultiKueueConfig{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			list := &kueue.AdmissionCheckList{}
			if err := c.Client.List(ctx, list); err != nil {
				return nil
			}
			var out []reconcile.Request
			for _, ac := range list.Items {
				if p := ac.Spec.Parameters; p != nil && p.Kind == "MultiKueueConfig" && p.Name == o.GetName() {
					out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: ac.Name}})
				}
			}
			return out
		})).
		Complete(c)
}

// Reconcile syncs one AdmissionCheck.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	ac := &kueue.AdmissionCheck{}
	if err := c.Client.Get(ctx, req.NamespacedName, ac); err != nil {
		if apierrors.IsNotFound(err) {
			c.Index.remove(req.Name, false)
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, err
	}
	if ac.Spec.ControllerName != kueue.MultiKueueControllerName {
		c.Index.remove(ac.Name, true)
		return reconcile.Result{}, nil
	}
	cond := metav1.Condition{Type: kueue.AdmissionCheckActive, Status: metav1.ConditionTrue, Reason: ReasonActive, ObservedGeneration: ac.Generation}
	clusters, problem, reason, err := c.clusters(ctx, ac)
	if err != nil {
		return reconcile.Result{}, err
	}
	if problem != "" {
		c.Index.set(ac.Name, nil)
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, reason, problem
	} else {
		c.Index.set(ac.Name, clusters)
		cond.Message = fmt.Sprintf("Dispatching to %v, in that order of preference", clusters)
	}
	if cur := meta.FindStatusCondition(ac.Status.Conditions, cond.Type); cur != nil && cur.Status == cond.Status && cur.Message == cond.Message && cur.ObservedGeneration == cond.ObservedGeneration {
		return reconcile.Result{}, nil
	}
	orig := ac.DeepCopy()
	meta.SetStatusCondition(&ac.Status.Conditions, cond)
	return reconcile.Result{}, client.IgnoreNotFound(c.Client.Status().Patch(ctx, ac, client.MergeFrom(orig)))
}

func (c *Controller) clusters(ctx context.Context, ac *kueue.AdmissionCheck) (clusters []string, problem, reason string, err error) {
	p := ac.Spec.Parameters
	if p == nil || p.Kind != "MultiKueueConfig" || (p.APIGroup != "" && p.APIGroup != kueue.GroupVersion.Group) {
		return nil, "spec.parameters must reference a MultiKueueConfig (apiGroup kueue.x-k8s.io, kind MultiKueueConfig)", ReasonBadParameters, nil
	}
	cfg := &kueue.MultiKueueConfig{}
	if err := c.Client.Get(ctx, types.NamespacedName{Name: p.Name}, cfg); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Sprintf("MultiKueueConfig %s (spec.parameters.name) doesn't exist; create it with the worker clusters to dispatch to", p.Name), ReasonMultiKueueConfigMissing, nil
		}
		return nil, "", "", err
	}
	return slices.Clone(cfg.Spec.Clusters), "", "", nil
}

// Names lists the MultiKueue checks, sorted (tests and metrics).
func (x *Index) Names() []string {
	x.mu.Lock()
	defer x.mu.Unlock()
	out := make([]string, 0, len(x.clusters))
	for n := range x.clusters {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
