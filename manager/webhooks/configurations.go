package webhooks

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/config"
)

// Names of the webhook configurations the manager keeps up to date.
const (
	MutatingConfigurationName   = "fleetq-mutating-webhook-configuration"
	ValidatingConfigurationName = "fleetq-validating-webhook-configuration"
)

// Paths the webhook server serves (controller-runtime's naming for the builder).
const (
	MutateClusterQueuePath  = "/mutate-kueue-x-k8s-io-v1beta2-clusterqueue"
	ValidateClusterQueue    = "/validate-kueue-x-k8s-io-v1beta2-clusterqueue"
	ValidateCohortPath      = "/validate-kueue-x-k8s-io-v1beta2-cohort"
	ValidateFlavorPath      = "/validate-kueue-x-k8s-io-v1beta2-resourceflavor"
	webhookTimeoutSeconds   = 10
	kueueGroup              = "kueue.x-k8s.io"
	kueueVersion            = "v1beta2"
	createUpdate            = "CreateUpdate"
	createOnly              = "Create"
	failClosed              = admissionregistrationv1.Fail
	sideEffectsNone         = admissionregistrationv1.SideEffectClassNone
	admissionReviewVersion1 = "v1"
)

type hook struct {
	name, path, group, version, resource, ops string
	jobs                                      bool
	// pods marks the plain Pods' hooks: they see only Pods that name a queue, whatever the
	// configuration says of jobs without one, so the manager being down never blocks other Pods
	// (a Job's, a controller's, kube-system's).
	pods bool
}

var (
	mutating = []hook{
		{name: "mclusterqueue.fleetq.dev", path: MutateClusterQueuePath, group: kueueGroup, version: kueueVersion, resource: "clusterqueues", ops: createUpdate},
	}
	validating = []hook{
		{name: "vclusterqueue.fleetq.dev", path: ValidateClusterQueue, group: kueueGroup, version: kueueVersion, resource: "clusterqueues", ops: createUpdate},
		{name: "vcohort.fleetq.dev", path: ValidateCohortPath, group: kueueGroup, version: kueueVersion, resource: "cohorts", ops: createUpdate},
		{name: "vresourceflavor.fleetq.dev", path: ValidateFlavorPath, group: kueueGroup, version: kueueVersion, resource: "resourceflavors", ops: createUpdate},
	}
)

// JobKind is one integrated kind of job whose objects the job webhooks see.
type JobKind struct {
	// Kind names the webhooks (mjob.fleetq.dev, mpytorchjob.fleetq.dev).
	Kind                     string
	Group, Version, Resource string
	// MutatePath and ValidatePath are where the webhook server serves the kind's hooks.
	MutatePath, ValidatePath string
}

// Configurations returns the webhook configurations for cfg, trusting caBundle: by URL when
// cfg.Webhook.URL is set (the lab), by Service otherwise. Job webhooks (one pair per integrated
// kind) see only jobs that name a queue, unless the configuration also manages jobs without one.
// self is the manager's own user name, when known: the job validating webhooks pass over its
// updates (see ownUpdates).
func Configurations(cfg *config.Configuration, caBundle []byte, kinds []JobKind, self string) (*admissionregistrationv1.MutatingWebhookConfiguration, *admissionregistrationv1.ValidatingWebhookConfiguration) {
	mutating, validating := slices.Clone(mutating), slices.Clone(validating)
	for i := len(kinds) - 1; i >= 0; i-- {
		k, name := kinds[i], strings.ToLower(kinds[i].Kind)+".fleetq.dev"
		pods := k.Group == "" && k.Resource == "pods"
		mutating = slices.Insert(mutating, 0, hook{name: "m" + name, path: k.MutatePath, group: k.Group, version: k.Version, resource: k.Resource, ops: createOnly, jobs: true, pods: pods})
		validating = slices.Insert(validating, 0, hook{name: "v" + name, path: k.ValidatePath, group: k.Group, version: k.Version, resource: k.Resource, ops: createUpdate, jobs: true, pods: pods})
	}
	m := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: MutatingConfigurationName}}
	for _, h := range mutating {
		m.Webhooks = append(m.Webhooks, admissionregistrationv1.MutatingWebhook{
			Name:                    h.name,
			ClientConfig:            clientConfig(cfg, h.path, caBundle),
			Rules:                   rules(h),
			FailurePolicy:           ptr.To(failClosed),
			SideEffects:             ptr.To(sideEffectsNone),
			AdmissionReviewVersions: []string{admissionReviewVersion1},
			TimeoutSeconds:          ptr.To[int32](webhookTimeoutSeconds),
			ObjectSelector:          objectSelector(cfg, h),
			NamespaceSelector:       namespaceSelector(cfg, h),
			ReinvocationPolicy:      ptr.To(admissionregistrationv1.NeverReinvocationPolicy),
		})
	}
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: ValidatingConfigurationName}}
	for _, h := range validating {
		v.Webhooks = append(v.Webhooks, admissionregistrationv1.ValidatingWebhook{
			Name:                    h.name,
			ClientConfig:            clientConfig(cfg, h.path, caBundle),
			Rules:                   rules(h),
			FailurePolicy:           ptr.To(failClosed),
			SideEffects:             ptr.To(sideEffectsNone),
			AdmissionReviewVersions: []string{admissionReviewVersion1},
			TimeoutSeconds:          ptr.To[int32](webhookTimeoutSeconds),
			ObjectSelector:          objectSelector(cfg, h),
			NamespaceSelector:       namespaceSelector(cfg, h),
			MatchConditions:         ownUpdates(h, self),
		})
	}
	return m, v
}

// serviceAccountPrefix starts the user name of every service account.
const serviceAccountPrefix = "system:serviceaccount:"

// OwnUpdatesCondition names the match condition that keeps the manager's own job updates out
// of the job validating webhooks.
const OwnUpdatesCondition = "not-the-fleetq-managers-own-update"

// ownUpdates passes over the manager's own updates of a job (starting it, suspending it, its
// node selectors) in the job validating webhooks: they check what a user changes, the
// manager's changes are its own decisions, and a webhook call per dispatch cost the management
// API server a round trip and the dispatch its latency (a third of the webhook calls).
// Creates, and every other user's updates, are validated as before. Only an identity of the
// manager's own, a service account (as the chart installs it), is left out: a manager run with
// a person's or an admin's credentials (the lab, a laptop) shares them with users, whose updates
// must still be validated.
func ownUpdates(h hook, self string) []admissionregistrationv1.MatchCondition {
	if !h.jobs || !strings.HasPrefix(self, serviceAccountPrefix) {
		return nil
	}
	return []admissionregistrationv1.MatchCondition{{
		Name:       OwnUpdatesCondition,
		Expression: fmt.Sprintf("!(request.operation == 'UPDATE' && request.userInfo.username == %s)", strconv.Quote(self)),
	}}
}

// Self is the user name the API server knows client by (a SelfSubjectReview, as kubectl auth
// whoami asks).
func Self(ctx context.Context, c client.Client) (string, error) {
	review := &authenticationv1.SelfSubjectReview{}
	if err := c.Create(ctx, review); err != nil {
		return "", fmt.Errorf("asking the API server who the manager is (SelfSubjectReview): %w", err)
	}
	return review.Status.UserInfo.Username, nil
}

func clientConfig(cfg *config.Configuration, path string, caBundle []byte) admissionregistrationv1.WebhookClientConfig {
	if cfg.Webhook.URL != "" {
		u, _ := url.Parse(cfg.Webhook.URL) // validated with the configuration
		u.Path = path
		return admissionregistrationv1.WebhookClientConfig{URL: ptr.To(u.String()), CABundle: caBundle}
	}
	return admissionregistrationv1.WebhookClientConfig{
		Service:  &admissionregistrationv1.ServiceReference{Namespace: cfg.Namespace, Name: cfg.Webhook.ServiceName, Path: ptr.To(path), Port: ptr.To[int32](443)},
		CABundle: caBundle,
	}
}

func rules(h hook) []admissionregistrationv1.RuleWithOperations {
	ops := []admissionregistrationv1.OperationType{admissionregistrationv1.Create}
	if h.ops == createUpdate {
		ops = append(ops, admissionregistrationv1.Update)
	}
	return []admissionregistrationv1.RuleWithOperations{{
		Operations: ops,
		Rule: admissionregistrationv1.Rule{
			APIGroups:   []string{h.group},
			APIVersions: []string{h.version},
			Resources:   []string{h.resource},
			Scope:       ptr.To(admissionregistrationv1.AllScopes),
		},
	}}
}

// objectSelector limits the Job webhooks to Jobs naming a queue, so the manager being down
// never blocks Jobs it does not manage.
func objectSelector(cfg *config.Configuration, h hook) *metav1.LabelSelector {
	if !h.jobs || !h.pods && (cfg.ManageJobsWithoutQueueName || cfg.DefaultLocalQueue != "") {
		return &metav1.LabelSelector{}
	}
	return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
		Key: kueue.QueueNameLabel, Operator: metav1.LabelSelectorOpExists,
	}}}
}

// namespaceSelector keeps the manager's own namespace (and kube-system) out of the Job
// webhooks when it manages Jobs without a queue name.
func namespaceSelector(cfg *config.Configuration, h hook) *metav1.LabelSelector {
	if h.jobs && !h.pods && (cfg.ManageJobsWithoutQueueName || cfg.DefaultLocalQueue != "") && cfg.ManagedJobsNamespaceSelector != nil {
		return cfg.ManagedJobsNamespaceSelector.DeepCopy()
	}
	return &metav1.LabelSelector{}
}
