package config

import (
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Validate returns every problem in c, each naming its field and what to do about it.
func (c *Configuration) Validate() field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateTypeMeta(c.TypeMeta, KindConfiguration)...)
	errs = append(errs, validateNamespace(c.Namespace, field.NewPath("namespace"))...)
	errs = append(errs, c.ClientConnection.validate(field.NewPath("clientConnection"))...)
	errs = append(errs, c.LeaderElection.validate(field.NewPath("leaderElection"))...)
	errs = append(errs, validateEndpoint(c.Metrics, field.NewPath("metrics", "bindAddress"))...)
	errs = append(errs, validateEndpoint(c.Health, field.NewPath("health", "bindAddress"))...)
	errs = append(errs, validateEndpoint(c.Profiling, field.NewPath("profiling", "bindAddress"))...)
	errs = append(errs, c.Webhook.validate(field.NewPath("webhook"))...)
	errs = append(errs, validateSelector(c.ManagedJobsNamespaceSelector, field.NewPath("managedJobsNamespaceSelector"))...)
	if c.DefaultLocalQueue != "" {
		for _, msg := range validation.IsDNS1123Subdomain(c.DefaultLocalQueue) {
			errs = append(errs, field.Invalid(field.NewPath("defaultLocalQueue"), c.DefaultLocalQueue, msg))
		}
	}
	errs = append(errs, c.Integrations.validate(field.NewPath("integrations"))...)
	errs = append(errs, c.RequeuingStrategy.validate(field.NewPath("requeuingStrategy"))...)
	strategies := []string{LessThanOrEqualToFinalShare, LessThanInitialShare}
	for i, s := range c.FairSharing.PreemptionStrategies {
		if !slices.Contains(strategies, s) {
			errs = append(errs, field.NotSupported(field.NewPath("fairSharing", "preemptionStrategies").Index(i), s, strategies))
		}
	}
	errs = append(errs, c.MultiCluster.validate(field.NewPath("multiCluster"))...)
	errs = append(errs, c.validateFailover()...)
	return errs
}

// validateFailover checks that a manager fail-over ends before the workers fence: the standby
// takes the leader lease only once it expires (leaseDuration, then up to one retryPeriod), then
// renews the fencing Lease at the next leaseRenewInterval. A fenceTimeout shorter than that
// suspends every dispatched job in the fleet each time the leading manager dies.
func (c *Configuration) validateFailover() field.ErrorList {
	le, m := c.LeaderElection, c.MultiCluster
	if le.Enabled != nil && !*le.Enabled || le.LeaseDuration == nil || le.RetryPeriod == nil || m.FenceTimeout == nil || m.LeaseRenewInterval == nil {
		return nil
	}
	need := le.LeaseDuration.Duration + le.RetryPeriod.Duration + m.LeaseRenewInterval.Duration
	if m.FenceTimeout.Duration > need {
		return nil
	}
	return field.ErrorList{field.Invalid(field.NewPath("multiCluster", "fenceTimeout"), m.FenceTimeout.Duration.String(),
		fmt.Sprintf("must exceed leaderElection.leaseDuration + leaderElection.retryPeriod + multiCluster.leaseRenewInterval (%s): a standby manager renews the workers' fencing Lease only after it takes over, so every worker would fence, suspending all its jobs, on each manager fail-over; raise fenceTimeout (and workerLostTimeout with it) or shorten the leader election", need))}
}

// Validate returns every problem in c, each naming its field and what to do about it.
func (c *AgentConfiguration) Validate() field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateTypeMeta(c.TypeMeta, KindAgentConfiguration)...)
	if c.ClusterName == "" {
		errs = append(errs, field.Required(field.NewPath("clusterName"), "set it to the worker's name on the manager (its MultiKueueCluster or Cluster API Cluster)"))
	} else {
		for _, msg := range validation.IsDNS1123Subdomain(c.ClusterName) {
			errs = append(errs, field.Invalid(field.NewPath("clusterName"), c.ClusterName, msg))
		}
	}
	errs = append(errs, validateNamespace(c.Namespace, field.NewPath("namespace"))...)
	errs = append(errs, c.ClientConnection.validate(field.NewPath("clientConnection"))...)
	errs = append(errs, c.LeaderElection.validate(field.NewPath("leaderElection"))...)
	errs = append(errs, validateEndpoint(c.Metrics, field.NewPath("metrics", "bindAddress"))...)
	errs = append(errs, validateEndpoint(c.Health, field.NewPath("health", "bindAddress"))...)
	errs = append(errs, validatePositive(c.CapacityResyncPeriod, field.NewPath("capacityResyncPeriod"))...)
	if c.FencingPolicy != FenceSuspend && c.FencingPolicy != FenceKeepRunning {
		errs = append(errs, field.NotSupported(field.NewPath("fencingPolicy"), c.FencingPolicy, []string{FenceSuspend, FenceKeepRunning}))
	}
	errs = append(errs, validateOrigin(c.Origin, field.NewPath("origin"))...)
	errs = append(errs, c.Integrations.validate(field.NewPath("integrations"))...)
	return errs
}

// KnownFrameworks are the integrations fleetq ships, by Kueue's names (internal/integration/
// builtin implements exactly these).
var KnownFrameworks = []string{
	FrameworkBatchJob,
	"kubeflow.org/pytorchjob", "kubeflow.org/tfjob", "kubeflow.org/xgboostjob", "kubeflow.org/paddlejob", "kubeflow.org/mpijob",
	"ray.io/rayjob", "ray.io/raycluster",
	FrameworkPod,
}

// FrameworkPod is the integration of plain Pods, opt-in as in Kueue: its webhook sees every Pod
// that names a queue.
const FrameworkPod = "pod"

// DefaultFrameworks are integrated when integrations.frameworks is empty: every known one but
// plain Pods; a kind whose CRD a cluster does not serve is left out there.
var DefaultFrameworks = slices.DeleteFunc(slices.Clone(KnownFrameworks), func(f string) bool { return f == FrameworkPod })

func (in Integrations) validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, f := range in.Frameworks {
		switch {
		case !slices.Contains(KnownFrameworks, f):
			errs = append(errs, field.NotSupported(path.Child("frameworks").Index(i), f, KnownFrameworks))
		case seen[f]:
			errs = append(errs, field.Duplicate(path.Child("frameworks").Index(i), f))
		}
		seen[f] = true
	}
	kinds := map[string]bool{}
	for i, g := range in.Generic {
		gp := path.Child("generic").Index(i)
		errs = append(errs, g.Validate(gp)...)
		name := g.Framework()
		switch {
		case seen[name]:
			errs = append(errs, field.Invalid(gp, name, fmt.Sprintf("kind %s is already integrated by framework %s of integrations.frameworks; list the frameworks without it to integrate the kind with this description instead", g.Kind, name)))
		case kinds[name]:
			errs = append(errs, field.Duplicate(gp, name))
		}
		kinds[name] = true
	}
	return errs
}

func validateTypeMeta(tm metav1.TypeMeta, kind string) field.ErrorList {
	var errs field.ErrorList
	if tm.APIVersion != APIVersion {
		errs = append(errs, field.NotSupported(field.NewPath("apiVersion"), tm.APIVersion, []string{APIVersion}))
	}
	if tm.Kind != kind {
		errs = append(errs, field.NotSupported(field.NewPath("kind"), tm.Kind, []string{kind}))
	}
	return errs
}

func validateNamespace(ns string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(ns) {
		errs = append(errs, field.Invalid(p, ns, msg))
	}
	return errs
}

func (c ClientConnection) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if c.QPS != nil && *c.QPS <= 0 {
		errs = append(errs, field.Invalid(p.Child("qps"), *c.QPS, "must be greater than 0; raise it (default 50)"))
	}
	if c.Burst != nil && *c.Burst < 1 {
		errs = append(errs, field.Invalid(p.Child("burst"), *c.Burst, "must be at least 1; raise it (default 100)"))
	}
	if c.QPS != nil && c.Burst != nil && *c.Burst >= 1 && float32(*c.Burst) < *c.QPS {
		errs = append(errs, field.Invalid(p.Child("burst"), *c.Burst, fmt.Sprintf("must be at least qps (%g); raise burst or lower qps", *c.QPS)))
	}
	return errs
}

func (l LeaderElection) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if l.Enabled != nil && !*l.Enabled {
		return nil
	}
	if l.LeaseName != "" {
		for _, msg := range validation.IsDNS1123Subdomain(l.LeaseName) {
			errs = append(errs, field.Invalid(p.Child("leaseName"), l.LeaseName, msg))
		}
	}
	errs = append(errs, validatePositive(l.LeaseDuration, p.Child("leaseDuration"))...)
	errs = append(errs, validatePositive(l.RenewDeadline, p.Child("renewDeadline"))...)
	errs = append(errs, validatePositive(l.RetryPeriod, p.Child("retryPeriod"))...)
	if l.LeaseDuration != nil && l.RenewDeadline != nil && l.RenewDeadline.Duration >= l.LeaseDuration.Duration {
		errs = append(errs, field.Invalid(p.Child("renewDeadline"), l.RenewDeadline.Duration.String(),
			fmt.Sprintf("must be shorter than leaseDuration (%s), or two managers could both believe they lead", l.LeaseDuration.Duration)))
	}
	if l.RenewDeadline != nil && l.RetryPeriod != nil && l.RetryPeriod.Duration >= l.RenewDeadline.Duration {
		errs = append(errs, field.Invalid(p.Child("retryPeriod"), l.RetryPeriod.Duration.String(),
			fmt.Sprintf("must be shorter than renewDeadline (%s)", l.RenewDeadline.Duration)))
	}
	return errs
}

func validateEndpoint(e Endpoint, p *field.Path) field.ErrorList {
	if e.BindAddress == "" || e.BindAddress == "0" {
		return nil
	}
	_, port, err := net.SplitHostPort(e.BindAddress)
	if err != nil {
		return field.ErrorList{field.Invalid(p, e.BindAddress, `must be host:port, ":port", or "0" to disable`)}
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return field.ErrorList{field.Invalid(p, e.BindAddress, "port must be a number from 0 to 65535")}
	}
	return nil
}

func (w Webhook) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if w.Port != nil && (*w.Port < 1 || *w.Port > 65535) {
		errs = append(errs, field.Invalid(p.Child("port"), *w.Port, "must be from 1 to 65535"))
	}
	if w.URL != "" {
		u, err := url.Parse(w.URL)
		switch {
		case err != nil:
			errs = append(errs, field.Invalid(p.Child("url"), w.URL, err.Error()))
		case u.Scheme != "https" || u.Host == "":
			errs = append(errs, field.Invalid(p.Child("url"), w.URL, "must be an https:// URL with a host, e.g. https://127.0.0.1:9443"))
		}
		if w.ServiceName != "" {
			errs = append(errs, field.Forbidden(p.Child("serviceName"), "set either url (out-of-cluster) or serviceName (in-cluster), not both"))
		}
	} else if w.ServiceName != "" {
		for _, msg := range validation.IsDNS1035Label(w.ServiceName) {
			errs = append(errs, field.Invalid(p.Child("serviceName"), w.ServiceName, msg))
		}
	}
	if w.CertValidity != nil && w.CertValidity.Duration < time.Hour {
		errs = append(errs, field.Invalid(p.Child("certValidity"), w.CertValidity.Duration.String(), "must be at least 1h"))
	}
	return errs
}

func (r RequeuingStrategy) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if r.BackoffBaseSeconds != nil && *r.BackoffBaseSeconds < 0 {
		errs = append(errs, field.Invalid(p.Child("backoffBaseSeconds"), *r.BackoffBaseSeconds, "must not be negative"))
	}
	if r.BackoffMaxSeconds != nil && *r.BackoffMaxSeconds < 0 {
		errs = append(errs, field.Invalid(p.Child("backoffMaxSeconds"), *r.BackoffMaxSeconds, "must not be negative"))
	}
	if r.BackoffBaseSeconds != nil && r.BackoffMaxSeconds != nil && *r.BackoffMaxSeconds < *r.BackoffBaseSeconds {
		errs = append(errs, field.Invalid(p.Child("backoffMaxSeconds"), *r.BackoffMaxSeconds,
			fmt.Sprintf("must be at least backoffBaseSeconds (%d)", *r.BackoffBaseSeconds)))
	}
	if r.BackoffLimitCount != nil && *r.BackoffLimitCount < 0 {
		errs = append(errs, field.Invalid(p.Child("backoffLimitCount"), *r.BackoffLimitCount, "must not be negative; leave it unset to requeue forever"))
	}
	return errs
}

func (m MultiCluster) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateOrigin(m.Origin, p.Child("origin"))...)
	if m.GCInterval != nil && m.GCInterval.Duration < 0 {
		errs = append(errs, field.Invalid(p.Child("gcInterval"), m.GCInterval.Duration.String(), "must not be negative; 0 disables periodic collection"))
	}
	errs = append(errs, validatePositive(m.WorkerLostTimeout, p.Child("workerLostTimeout"))...)
	if policies := []string{AtMostOnce, AtLeastOnce}; !slices.Contains(policies, m.LostWorkerPolicy) {
		errs = append(errs, field.NotSupported(p.Child("lostWorkerPolicy"), m.LostWorkerPolicy, policies))
	}
	errs = append(errs, validatePositive(m.FenceTimeout, p.Child("fenceTimeout"))...)
	errs = append(errs, validatePositive(m.LeaseRenewInterval, p.Child("leaseRenewInterval"))...)
	errs = append(errs, validatePositive(m.ProbeInterval, p.Child("probeInterval"))...)
	if m.FenceTimeout != nil && m.WorkerLostTimeout != nil && m.LeaseRenewInterval != nil {
		// An agent that restarts during a partition counts its first look at the lease as a
		// renewal, so a copy may run up to two fence timeouts (plus one renewal) after the last
		// real renewal; the manager must wait longer than that before placing it elsewhere.
		if need := 2*m.FenceTimeout.Duration + m.LeaseRenewInterval.Duration; m.WorkerLostTimeout.Duration <= need {
			errs = append(errs, field.Invalid(p.Child("workerLostTimeout"), m.WorkerLostTimeout.Duration.String(),
				fmt.Sprintf("must exceed 2 × fenceTimeout + leaseRenewInterval (%s), so a lost worker has stopped its copies before they run elsewhere; raise workerLostTimeout or lower fenceTimeout", need)))
		}
	}
	if m.LeaseRenewInterval != nil && m.FenceTimeout != nil && 2*m.LeaseRenewInterval.Duration > m.FenceTimeout.Duration {
		errs = append(errs, field.Invalid(p.Child("leaseRenewInterval"), m.LeaseRenewInterval.Duration.String(),
			fmt.Sprintf("must be at most half of fenceTimeout (%s), or one late renewal would stop healthy jobs", m.FenceTimeout.Duration)))
	}
	errs = append(errs, m.WorkerClientConnection.validate(p.Child("workerClientConnection"))...)
	errs = append(errs, validateSelector(m.ClusterAPISelector, p.Child("clusterAPISelector"))...)
	if m.ClusterAPINamespace != "" {
		errs = append(errs, validateNamespace(m.ClusterAPINamespace, p.Child("clusterAPINamespace"))...)
	}
	if m.AgentNamespace != "" {
		errs = append(errs, validateNamespace(m.AgentNamespace, p.Child("agentNamespace"))...)
	}
	if m.KubeconfigDir != "" && (!filepath.IsAbs(m.KubeconfigDir) || filepath.Clean(m.KubeconfigDir) == "/") {
		errs = append(errs, field.Invalid(p.Child("kubeconfigDir"), m.KubeconfigDir, "must be an absolute path to a directory that holds only worker kubeconfigs (such as /etc/fleetq/kubeconfigs), not / "))
	}
	return errs
}

func validatePositive(d *metav1.Duration, p *field.Path) field.ErrorList {
	if d != nil && d.Duration <= 0 {
		return field.ErrorList{field.Invalid(p, d.Duration.String(), "must be a positive duration such as 30s or 5m")}
	}
	return nil
}

func validateOrigin(origin string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsValidLabelValue(origin) {
		errs = append(errs, field.Invalid(p, origin, msg))
	}
	if origin == "" {
		errs = append(errs, field.Required(p, "remote copies are labelled with it"))
	}
	return errs
}

func validateSelector(s *metav1.LabelSelector, p *field.Path) field.ErrorList {
	if s == nil {
		return nil
	}
	return metavalidation.ValidateLabelSelector(s, metavalidation.LabelSelectorValidationOptions{}, p)
}
