package jobs

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/config"
	"github.com/fleetq/fleetq/internal/integration"
	"github.com/fleetq/fleetq/internal/workload"
)

// Webhook defaults and validates the jobs of one kind: managed jobs are created suspended, and a
// pending job cannot be unsuspended (or moved to another queue while running) behind the
// scheduler's back.
type Webhook struct {
	Adapter integration.Adapter
	// Integrations tells jobs another integrated job owns; those are left alone.
	Integrations *integration.Registry
	// Client reads from the manager's cache; APIReader confirms with the API server when the
	// cache may lag (the manager's own unsuspend right after admission).
	Client    client.Reader
	APIReader client.Reader
	Config    *config.Configuration
}

var queueLabelPath = field.NewPath("metadata", "labels").Key(kueue.QueueNameLabel)

// MutatePath and ValidatePath are where the webhook server serves a kind's hooks (named as
// controller-runtime's builder names them: /mutate-batch-v1-job).
func MutatePath(a integration.Adapter) string   { return "/mutate-" + hookSuffix(a) }
func ValidatePath(a integration.Adapter) string { return "/validate-" + hookSuffix(a) }

func hookSuffix(a integration.Adapter) string {
	gvk := a.GVK()
	group := strings.ReplaceAll(gvk.Group, ".", "-")
	if group == "" {
		group = "core"
	}
	return group + "-" + gvk.Version + "-" + strings.ToLower(gvk.Kind)
}

// Mutating serves Default as an admission handler.
func (w *Webhook) Mutating() admission.Handler {
	return admission.HandlerFunc(func(ctx context.Context, req admission.Request) admission.Response {
		obj, err := w.decode(req.Object.Raw)
		if err != nil {
			return admission.Errored(http.StatusBadRequest, err)
		}
		if err := w.Default(admission.NewContextWithRequest(ctx, req), obj); err != nil {
			return admission.Errored(http.StatusInternalServerError, err)
		}
		out, err := json.Marshal(obj)
		if err != nil {
			return admission.Errored(http.StatusInternalServerError, err)
		}
		return admission.PatchResponseFromRaw(req.Object.Raw, out)
	})
}

// Validating serves ValidateCreate and ValidateUpdate as an admission handler.
func (w *Webhook) Validating() admission.Handler {
	return admission.HandlerFunc(func(ctx context.Context, req admission.Request) admission.Response {
		var err error
		switch req.Operation {
		case admissionv1.Create:
			var obj client.Object
			if obj, err = w.decode(req.Object.Raw); err == nil {
				err = w.ValidateCreate(ctx, obj)
			}
		case admissionv1.Update:
			var obj, old client.Object
			if obj, err = w.decode(req.Object.Raw); err == nil {
				if old, err = w.decode(req.OldObject.Raw); err == nil {
					err = w.ValidateUpdate(ctx, old, obj)
				}
			}
		}
		if err != nil {
			if st, ok := err.(apierrors.APIStatus); ok {
				return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Allowed: false, Result: ptrStatus(st.Status())}}
			}
			return admission.Denied(err.Error())
		}
		return admission.Allowed("")
	})
}

func ptrStatus(s metav1.Status) *metav1.Status { return &s }

func (w *Webhook) decode(raw []byte) (client.Object, error) {
	obj := w.Adapter.New()
	if err := json.Unmarshal(raw, obj); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", w.Adapter.GVK().Kind, err)
	}
	return obj, nil
}

// Default suspends a new managed job, gives it the default LocalQueue when configured, and marks
// jobs of multi-cluster queues as managed by dispatch.
func (w *Webhook) Default(ctx context.Context, obj client.Object) error {
	req, err := admission.RequestFromContext(ctx)
	if err == nil && req.Operation != admissionv1.Create {
		return nil
	}
	if _, ok := obj.GetLabels()[kueue.QueueNameLabel]; !ok && (w.Config.DefaultLocalQueue != "" || w.Config.ManageJobsWithoutQueueName) {
		selected, err := w.namespaceSelected(ctx, obj.GetNamespace())
		if err != nil {
			return err
		}
		if !selected {
			return nil
		}
		if w.Config.DefaultLocalQueue != "" {
			lq := &kueue.LocalQueue{}
			err := w.Client.Get(ctx, types.NamespacedName{Namespace: obj.GetNamespace(), Name: w.Config.DefaultLocalQueue}, lq)
			if err == nil {
				l := obj.GetLabels()
				if l == nil {
					l = map[string]string{}
				}
				l[kueue.QueueNameLabel] = lq.Name
				obj.SetLabels(l)
			} else if !apierrors.IsNotFound(err) {
				return err
			}
		}
	}
	if !Managed(obj, w.Config, w.Integrations) {
		return nil
	}
	w.Adapter.SetSuspended(obj, true)
	if w.Adapter.ManagedBy(obj) == "" {
		multi, err := w.dispatched(ctx, obj.GetNamespace(), obj.GetLabels()[kueue.QueueNameLabel])
		if err != nil {
			return err
		}
		if multi {
			w.Adapter.SetManagedBy(obj, ManagedByMultiKueue)
		}
	}
	return nil
}

func (w *Webhook) namespaceSelected(ctx context.Context, namespace string) (bool, error) {
	sel, err := metav1.LabelSelectorAsSelector(w.Config.ManagedJobsNamespaceSelector)
	if err != nil {
		return false, err
	}
	ns := &corev1.Namespace{}
	if err := w.Client.Get(ctx, types.NamespacedName{Name: namespace}, ns); err != nil {
		return false, fmt.Errorf("namespace %s: %w", namespace, err)
	}
	return sel.Matches(labels.Set(ns.Labels)), nil
}

// dispatched reports whether the LocalQueue's ClusterQueue sends its workloads to worker
// clusters (it has a MultiKueue admission check).
func (w *Webhook) dispatched(ctx context.Context, namespace, queueName string) (bool, error) {
	if queueName == "" {
		return false, nil
	}
	lq := &kueue.LocalQueue{}
	if err := w.Client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: queueName}, lq); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return MultiCluster(ctx, w.Client, lq.Spec.ClusterQueue)
}

// MultiCluster reports whether a ClusterQueue sends its workloads to worker clusters (it has an
// admission check whose controller is MultiKueue's); a missing ClusterQueue does not.
func MultiCluster(ctx context.Context, c client.Reader, name kueue.ClusterQueueReference) (bool, error) {
	cq := &kueue.ClusterQueue{}
	if err := c.Get(ctx, types.NamespacedName{Name: string(name)}, cq); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	if cq.Spec.AdmissionChecksStrategy == nil {
		return false, nil
	}
	for _, rule := range cq.Spec.AdmissionChecksStrategy.AdmissionChecks {
		ac := &kueue.AdmissionCheck{}
		if err := c.Get(ctx, types.NamespacedName{Name: string(rule.Name)}, ac); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return false, err
		}
		if ac.Spec.ControllerName == kueue.MultiKueueControllerName {
			return true, nil
		}
	}
	return false, nil
}

// ValidateCreate checks the labels a job joins a queue with and what its pod sets ask for.
func (w *Webhook) ValidateCreate(ctx context.Context, obj client.Object) error {
	if _, _, owned := w.Integrations.Owner(obj); owned {
		return nil
	}
	errs := w.validateLabels(ctx, obj)
	if g, ok := w.Adapter.(integration.Grouper); ok && Managed(obj, w.Config, w.Integrations) {
		if _, _, err := g.Group(obj); err != nil {
			if fe, ok := err.(*field.Error); ok {
				errs = append(errs, fe)
			} else {
				errs = append(errs, field.Invalid(field.NewPath("metadata"), "", err.Error()))
			}
		}
	}
	if Managed(obj, w.Config, w.Integrations) {
		if _, err := w.Adapter.PodSets(obj); err != nil {
			errs = append(errs, field.Invalid(field.NewPath("spec"), "", err.Error()))
		}
	}
	return errs.ToAggregate()
}

func (w *Webhook) validateLabels(ctx context.Context, obj client.Object) field.ErrorList {
	var errs field.ErrorList
	if q, ok := obj.GetLabels()[kueue.QueueNameLabel]; ok {
		for _, msg := range validation.IsDNS1123Subdomain(q) {
			errs = append(errs, field.Invalid(queueLabelPath, q, msg+"; name a LocalQueue of this namespace"))
		}
	}
	if name, ok := obj.GetLabels()[kueue.PriorityClassLabel]; ok {
		p := field.NewPath("metadata", "labels").Key(kueue.PriorityClassLabel)
		err := w.Client.Get(ctx, types.NamespacedName{Name: name}, &kueue.WorkloadPriorityClass{})
		switch {
		case apierrors.IsNotFound(err):
			errs = append(errs, field.NotFound(p, name+" (WorkloadPriorityClass; create it or fix the label: kubectl get workloadpriorityclasses)"))
		case err != nil:
			errs = append(errs, field.InternalError(p, err))
		}
	}
	return errs
}

// ValidateUpdate keeps a managed job from starting before admission and from leaving its queue
// while it runs.
func (w *Webhook) ValidateUpdate(ctx context.Context, old, obj client.Object) error {
	if !Managed(old, w.Config, w.Integrations) && !Managed(obj, w.Config, w.Integrations) {
		return nil
	}
	var errs field.ErrorList
	oldQ, newQ := old.GetLabels()[kueue.QueueNameLabel], obj.GetLabels()[kueue.QueueNameLabel]
	running := !w.Adapter.Suspended(old)
	if oldQ != newQ && running {
		errs = append(errs, field.Forbidden(queueLabelPath, fmt.Sprintf("cannot change from %q to %q while the job runs; suspend it first, or delete and re-create it", oldQ, newQ)))
	}
	if newQ != oldQ && newQ != "" {
		errs = append(errs, w.validateLabels(ctx, obj)...)
	}
	errs = append(errs, w.validateGroup(old, obj)...)
	shape, err := w.validateAdmittedShape(ctx, old, obj)
	if err != nil {
		return err
	}
	errs = append(errs, shape...)
	if w.Adapter.Suspended(old) && !w.Adapter.Suspended(obj) {
		admitted, err := w.admitted(ctx, obj)
		if err != nil {
			return err
		}
		if !admitted {
			suspend := strings.Split(w.Adapter.Fields().Suspend, ".")
			errs = append(errs, field.Forbidden(field.NewPath(suspend[0], suspend[1:]...), fmt.Sprintf(
				"the job waits in LocalQueue %q for quota; fleetq unsuspends it when its workload is admitted (kubectl -n %s get workloads)", newQ, obj.GetNamespace())))
		}
	}
	return errs.ToAggregate()
}

// validateGroup keeps a member in its group, at the group's size: the group's Workload was
// made for its members, and quota was reserved for that many.
func (w *Webhook) validateGroup(old, obj client.Object) field.ErrorList {
	g, ok := w.Adapter.(integration.Grouper)
	if !ok || !Grouped(w.Adapter, old) {
		return nil
	}
	oldName, oldSize, _ := g.Group(old)
	name, size, _ := g.Group(obj)
	if name == oldName && size == oldSize {
		return nil
	}
	return field.ErrorList{field.Forbidden(field.NewPath("metadata", "labels").Key(g.GroupLabel()), fmt.Sprintf(
		"a member of group %q (size %d) cannot leave it or change its size (to group %q, size %d); delete the %s and create it again", oldName, oldSize, name, size, w.Adapter.GVK().Kind))}
}

// validateAdmittedShape refuses growing a pod set of a job whose workload holds quota, or
// changing its pods' resources: quota and placement were decided for the admitted shape, and
// the job must never run more pods than were admitted. Shrinking is allowed (fewer pods fit).
func (w *Webhook) validateAdmittedShape(ctx context.Context, old, obj client.Object) (field.ErrorList, error) {
	if Grouped(w.Adapter, obj) {
		return nil, nil // a member's pod set is the group's; the group controller keeps its size
	}
	oldSets, err := w.Adapter.PodSets(old)
	if err != nil {
		return nil, nil
	}
	newSets, err := w.Adapter.PodSets(obj)
	if err != nil {
		return nil, nil // the kind's own validation says what is wrong
	}
	if integration.PodSetsEqual(oldSets, newSets) {
		return nil, nil
	}
	wl, err := w.workload(ctx, obj, workload.HasQuotaReservation)
	if err != nil || wl == nil || !workload.HasQuotaReservation(wl) || workload.IsFinished(wl) {
		return nil, err
	}
	admitted := map[kueue.PodSetReference]int32{}
	for _, ps := range wl.Spec.PodSets {
		admitted[ps.Name] = ps.Count
	}
	if wl.Status.Admission != nil {
		for _, psa := range wl.Status.Admission.PodSetAssignments {
			if psa.Count != nil {
				admitted[psa.Name] = *psa.Count
			}
		}
	}
	fix := fmt.Sprintf("its quota is reserved for the admitted shape (workload %s); delete the job and create it again at the new size", wl.Name)
	var errs field.ErrorList
	for _, ns := range newSets {
		path, what := field.NewPath("spec"), fmt.Sprintf("pod set %q", ns.Name)
		if w.Adapter.Fields().Size != "" && len(newSets) == 1 {
			parts := strings.Split(w.Adapter.Fields().Size, ".")
			path, what = field.NewPath(parts[0], parts[1:]...), "the job"
		}
		if n, ok := admitted[ns.Name]; !ok || ns.Count > n {
			errs = append(errs, field.Forbidden(path, fmt.Sprintf("%s cannot grow to %d pods while admitted with %d: %s", what, ns.Count, n, fix)))
		}
		for _, os := range oldSets {
			if os.Name == ns.Name && !equality.Semantic.DeepEqual(podResources(os.Template.Spec), podResources(ns.Template.Spec)) {
				errs = append(errs, field.Forbidden(field.NewPath("spec"), fmt.Sprintf("pod set %q: the pods' resources cannot change while admitted: %s", ns.Name, fix)))
			}
		}
	}
	return errs, nil
}

// podResources are the resources a pod spec's containers ask for, in order.
func podResources(spec corev1.PodSpec) []corev1.ResourceRequirements {
	var out []corev1.ResourceRequirements
	for _, cs := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for _, c := range cs {
			out = append(out, c.Resources)
		}
	}
	return append(out, corev1.ResourceRequirements{Requests: spec.Overhead})
}

// workload reads the job's Workload from the cache and, unless it already shows what want
// asks, from the API server too (the cache may lag the manager's own writes); the last one read,
// or nil when there is none.
func (w *Webhook) workload(ctx context.Context, obj client.Object, want func(*kueue.Workload) bool) (*kueue.Workload, error) {
	key := types.NamespacedName{Namespace: obj.GetNamespace(), Name: WorkloadName(w.Adapter, obj)}
	var found *kueue.Workload
	for _, r := range []client.Reader{w.Client, w.APIReader} {
		if r == nil {
			continue
		}
		wl := &kueue.Workload{}
		if err := r.Get(ctx, key, wl); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, err
		}
		if found = wl; want(wl) {
			break
		}
	}
	return found, nil
}

// admitted reports whether the job's workload is admitted, asking the API server when the
// cache does not (yet) say so.
func (w *Webhook) admitted(ctx context.Context, obj client.Object) (bool, error) {
	isAdmitted := func(wl *kueue.Workload) bool { return workload.IsAdmitted(wl) && !workload.IsEvicted(wl) }
	wl, err := w.workload(ctx, obj, isAdmitted)
	return wl != nil && isAdmitted(wl), err
}
