// Package webhooks holds the manager's admission webhooks for the kueue.x-k8s.io objects: the
// defaults and the rules that need more than the object itself (other objects, or Go-level
// validation richer than CEL), with messages that name the field and the fix. Rules a CRD can
// check alone live in the CRDs as CEL, so they hold even when the manager is down.
package webhooks

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
)

// Limits Kueue enforces on a ClusterQueue's size.
const (
	maxFlavors            = 256
	maxCoveredResources   = 256
	maxFlavorResourcesPer = 512
)

// ClusterQueueWebhook normalises the tutorial's cohort alias and checks what CEL cannot.
type ClusterQueueWebhook struct {
	Client client.Reader
}

// Default copies spec.cohort (the alias the tutorial writes) into spec.cohortName, so every
// reader, kubectl's columns included, sees the cohort in Kueue's field.
func (w *ClusterQueueWebhook) Default(_ context.Context, cq *kueue.ClusterQueue) error {
	if cq.Spec.CohortName == "" && cq.Spec.Cohort != "" {
		cq.Spec.CohortName = cq.Spec.Cohort
	}
	return nil
}

// ValidateCreate validates a new ClusterQueue.
func (w *ClusterQueueWebhook) ValidateCreate(ctx context.Context, cq *kueue.ClusterQueue) (admission.Warnings, error) {
	return w.warnings(ctx, cq), validateClusterQueue(cq).ToAggregate()
}

// ValidateUpdate validates an edited ClusterQueue.
func (w *ClusterQueueWebhook) ValidateUpdate(ctx context.Context, _, cq *kueue.ClusterQueue) (admission.Warnings, error) {
	return w.warnings(ctx, cq), validateClusterQueue(cq).ToAggregate()
}

// ValidateDelete allows deletion; the finalizer keeps the queue until its workloads finish.
func (w *ClusterQueueWebhook) ValidateDelete(context.Context, *kueue.ClusterQueue) (admission.Warnings, error) {
	return nil, nil
}

func validateClusterQueue(cq *kueue.ClusterQueue) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	if s := cq.Spec.NamespaceSelector; s != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(s, metav1validation.LabelSelectorValidationOptions{}, spec.Child("namespaceSelector"))...)
	}
	flavors := sets.New[kueue.ResourceFlavorReference]()
	resources := 0
	for gi, g := range cq.Spec.ResourceGroups {
		gp := spec.Child("resourceGroups").Index(gi)
		resources += len(g.CoveredResources)
		if n := len(g.Flavors) * len(g.CoveredResources); n > maxFlavorResourcesPer {
			errs = append(errs, field.TooMany(gp.Child("flavors"), n, maxFlavorResourcesPer))
		}
		for fi, f := range g.Flavors {
			flavors.Insert(f.Name)
			for _, msg := range validation.IsDNS1123Subdomain(string(f.Name)) {
				errs = append(errs, field.Invalid(gp.Child("flavors").Index(fi).Child("name"), f.Name, msg))
			}
		}
	}
	if flavors.Len() > maxFlavors {
		errs = append(errs, field.TooMany(spec.Child("resourceGroups"), flavors.Len(), maxFlavors))
	}
	if resources > maxCoveredResources {
		errs = append(errs, field.TooMany(spec.Child("resourceGroups"), resources, maxCoveredResources))
	}
	if s := cq.Spec.AdmissionChecksStrategy; s != nil {
		for i, rule := range s.AdmissionChecks {
			for j, f := range rule.OnFlavors {
				if !flavors.Has(f) {
					errs = append(errs, field.NotSupported(spec.Child("admissionChecksStrategy", "admissionChecks").Index(i).Child("onFlavors").Index(j), f, sets.List(flavors)))
				}
			}
		}
	}
	return errs
}

// warnings tell, without refusing, about objects the queue names that do not exist yet: a
// platform team often applies queues before flavors.
func (w *ClusterQueueWebhook) warnings(ctx context.Context, cq *kueue.ClusterQueue) admission.Warnings {
	var out admission.Warnings
	seen := sets.New[kueue.ResourceFlavorReference]()
	for _, g := range cq.Spec.ResourceGroups {
		for _, f := range g.Flavors {
			if seen.Has(f.Name) {
				continue
			}
			seen.Insert(f.Name)
			err := w.Client.Get(ctx, types.NamespacedName{Name: string(f.Name)}, &kueue.ResourceFlavor{})
			if apierrors.IsNotFound(err) {
				out = append(out, fmt.Sprintf("ResourceFlavor %q does not exist; ClusterQueue %s stays inactive until it is created", f.Name, cq.Name))
			}
		}
	}
	return out
}

// CohortWebhook refuses parent links that would close a cycle.
type CohortWebhook struct {
	Client client.Reader
}

// ValidateCreate validates a new Cohort.
func (w *CohortWebhook) ValidateCreate(ctx context.Context, c *kueue.Cohort) (admission.Warnings, error) {
	return nil, w.validate(ctx, c)
}

// ValidateUpdate validates an edited Cohort.
func (w *CohortWebhook) ValidateUpdate(ctx context.Context, _, c *kueue.Cohort) (admission.Warnings, error) {
	return nil, w.validate(ctx, c)
}

// ValidateDelete allows deletion; member queues keep an implicit cohort of the same name.
func (w *CohortWebhook) ValidateDelete(context.Context, *kueue.Cohort) (admission.Warnings, error) {
	return nil, nil
}

func (w *CohortWebhook) validate(ctx context.Context, c *kueue.Cohort) error {
	path := []string{c.Name}
	parent := string(c.Spec.ParentName)
	for parent != "" {
		path = append(path, parent)
		if parent == c.Name {
			return field.ErrorList{field.Invalid(field.NewPath("spec", "parentName"), c.Spec.ParentName,
				fmt.Sprintf("would make a cycle of cohorts (%s); choose a parent outside this cohort's subtree", strings.Join(path, " -> ")))}.ToAggregate()
		}
		if len(path) > 1000 {
			break
		}
		p := &kueue.Cohort{}
		if err := w.Client.Get(ctx, types.NamespacedName{Name: parent}, p); err != nil {
			if apierrors.IsNotFound(err) {
				return nil
			}
			return err
		}
		parent = string(p.Spec.ParentName)
	}
	return nil
}

// ResourceFlavorWebhook validates node labels and tolerations the way the API server validates
// them on pods, so a flavor never injects something a pod would refuse.
type ResourceFlavorWebhook struct{}

// ValidateCreate validates a new ResourceFlavor.
func (w *ResourceFlavorWebhook) ValidateCreate(_ context.Context, rf *kueue.ResourceFlavor) (admission.Warnings, error) {
	return nil, validateFlavor(rf).ToAggregate()
}

// ValidateUpdate validates an edited ResourceFlavor.
func (w *ResourceFlavorWebhook) ValidateUpdate(_ context.Context, _, rf *kueue.ResourceFlavor) (admission.Warnings, error) {
	return nil, validateFlavor(rf).ToAggregate()
}

// ValidateDelete allows deletion; the finalizer keeps a flavor while queues name it.
func (w *ResourceFlavorWebhook) ValidateDelete(context.Context, *kueue.ResourceFlavor) (admission.Warnings, error) {
	return nil, nil
}

func validateFlavor(rf *kueue.ResourceFlavor) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	for k, v := range rf.Spec.NodeLabels {
		for _, msg := range validation.IsQualifiedName(k) {
			errs = append(errs, field.Invalid(spec.Child("nodeLabels").Key(k), k, msg))
		}
		for _, msg := range validation.IsValidLabelValue(v) {
			errs = append(errs, field.Invalid(spec.Child("nodeLabels").Key(k), v, msg))
		}
	}
	for i, t := range rf.Spec.Tolerations {
		p := spec.Child("tolerations").Index(i)
		if t.Key != "" {
			for _, msg := range validation.IsQualifiedName(t.Key) {
				errs = append(errs, field.Invalid(p.Child("key"), t.Key, msg))
			}
		}
		if t.Operator != "" && t.Operator != corev1.TolerationOpExists && t.Operator != corev1.TolerationOpEqual {
			errs = append(errs, field.NotSupported(p.Child("operator"), t.Operator, []string{string(corev1.TolerationOpEqual), string(corev1.TolerationOpExists)}))
		}
	}
	return errs
}
