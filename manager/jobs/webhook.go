package jobs

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	admissionv1 "k8s.io/api/admission/v1"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/config"
	"github.com/fleetq/fleetq/internal/workload"
)

// Webhook defaults and validates Jobs: managed Jobs are created suspended, and a pending Job
// cannot be unsuspended (or moved to another queue while running) behind the scheduler's back.
type Webhook struct {
	// Client reads from the manager's cache; APIReader confirms with the API server when the
	// cache may lag (the manager's own unsuspend right after admission).
	Client    client.Reader
	APIReader client.Reader
	Config    *config.Configuration
}

var queueLabelPath = field.NewPath("metadata", "labels").Key(kueue.QueueNameLabel)

// Default suspends a new managed Job, gives it the default LocalQueue when configured, and marks
// Jobs of multi-cluster queues as managed by dispatch.
func (w *Webhook) Default(ctx context.Context, job *batchv1.Job) error {
	req, err := admission.RequestFromContext(ctx)
	if err == nil && req.Operation != admissionv1.Create {
		return nil
	}
	if _, ok := job.Labels[kueue.QueueNameLabel]; !ok && (w.Config.DefaultLocalQueue != "" || w.Config.ManageJobsWithoutQueueName) {
		selected, err := w.namespaceSelected(ctx, job.Namespace)
		if err != nil {
			return err
		}
		if !selected {
			return nil
		}
		if w.Config.DefaultLocalQueue != "" {
			lq := &kueue.LocalQueue{}
			err := w.Client.Get(ctx, types.NamespacedName{Namespace: job.Namespace, Name: w.Config.DefaultLocalQueue}, lq)
			if err == nil {
				if job.Labels == nil {
					job.Labels = map[string]string{}
				}
				job.Labels[kueue.QueueNameLabel] = lq.Name
			} else if !apierrors.IsNotFound(err) {
				return err
			}
		}
	}
	if !Managed(job, w.Config) {
		return nil
	}
	job.Spec.Suspend = ptr.To(true)
	if job.Spec.ManagedBy == nil {
		multi, err := w.dispatched(ctx, job.Namespace, job.Labels[kueue.QueueNameLabel])
		if err != nil {
			return err
		}
		if multi {
			job.Spec.ManagedBy = ptr.To(ManagedByMultiKueue)
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
	cq := &kueue.ClusterQueue{}
	if err := w.Client.Get(ctx, types.NamespacedName{Name: string(lq.Spec.ClusterQueue)}, cq); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	if cq.Spec.AdmissionChecksStrategy == nil {
		return false, nil
	}
	for _, rule := range cq.Spec.AdmissionChecksStrategy.AdmissionChecks {
		ac := &kueue.AdmissionCheck{}
		if err := w.Client.Get(ctx, types.NamespacedName{Name: string(rule.Name)}, ac); err != nil {
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

// ValidateCreate checks the labels a Job joins a queue with.
func (w *Webhook) ValidateCreate(ctx context.Context, job *batchv1.Job) (admission.Warnings, error) {
	return nil, w.validateLabels(ctx, job).ToAggregate()
}

func (w *Webhook) validateLabels(ctx context.Context, job *batchv1.Job) field.ErrorList {
	var errs field.ErrorList
	if q, ok := job.Labels[kueue.QueueNameLabel]; ok {
		for _, msg := range validation.IsDNS1123Subdomain(q) {
			errs = append(errs, field.Invalid(queueLabelPath, q, msg+"; name a LocalQueue of this namespace"))
		}
	}
	if name, ok := job.Labels[kueue.PriorityClassLabel]; ok {
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

// ValidateUpdate keeps a managed Job from starting before admission and from leaving its queue
// while it runs.
func (w *Webhook) ValidateUpdate(ctx context.Context, old, job *batchv1.Job) (admission.Warnings, error) {
	if !Managed(old, w.Config) && !Managed(job, w.Config) {
		return nil, nil
	}
	var errs field.ErrorList
	oldQ, newQ := old.Labels[kueue.QueueNameLabel], job.Labels[kueue.QueueNameLabel]
	running := !ptr.Deref(old.Spec.Suspend, false)
	if oldQ != newQ && running {
		errs = append(errs, field.Forbidden(queueLabelPath, fmt.Sprintf("cannot change from %q to %q while the job runs; suspend it first, or delete and re-create it", oldQ, newQ)))
	}
	if newQ != oldQ && newQ != "" {
		errs = append(errs, w.validateLabels(ctx, job)...)
	}
	if ptr.Deref(old.Spec.Suspend, false) && !ptr.Deref(job.Spec.Suspend, false) {
		admitted, err := w.admitted(ctx, job)
		if err != nil {
			return nil, err
		}
		if !admitted {
			errs = append(errs, field.Forbidden(field.NewPath("spec", "suspend"), fmt.Sprintf(
				"the job waits in LocalQueue %q for quota; fleetq unsuspends it when its workload is admitted (kubectl -n %s get workloads)", newQ, job.Namespace)))
		}
	}
	return nil, errs.ToAggregate()
}

// admitted reports whether the job's workload is admitted, asking the API server when the
// cache does not (yet) say so.
func (w *Webhook) admitted(ctx context.Context, job *batchv1.Job) (bool, error) {
	key := types.NamespacedName{Namespace: job.Namespace, Name: workload.NameFor("Job", job.Name, job.UID)}
	for _, r := range []client.Reader{w.Client, w.APIReader} {
		if r == nil {
			continue
		}
		wl := &kueue.Workload{}
		if err := r.Get(ctx, key, wl); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return false, err
		}
		if workload.IsAdmitted(wl) && !workload.IsEvicted(wl) {
			return true, nil
		}
	}
	return false, nil
}

// ValidateDelete allows every deletion; deleting a Job releases its quota.
func (w *Webhook) ValidateDelete(context.Context, *batchv1.Job) (admission.Warnings, error) {
	return nil, nil
}
