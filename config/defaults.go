package config

import (
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	fleetq "github.com/fleetq/fleetq/api/fleetq/v1alpha1"
)

// Defaults, documented in one place so the README and the chart can quote them.
const (
	DefaultNamespace            = "fleetq-system"
	DefaultQPS          float32 = 50
	DefaultBurst        int32   = 100
	DefaultManagerLease         = "fleetq-manager"
	DefaultAgentLease           = "fleetq-agent"
	DefaultMetricsAddr          = ":8080"
	DefaultHealthAddr           = ":8081"
	DefaultWebhookPort  int32   = 9443
	DefaultWebhookSvc           = "fleetq-webhook-service"
	DefaultOrigin               = "multikueue"
	FrameworkBatchJob           = "batch/job"
	// AtMostOnce and AtLeastOnce are the values of multiCluster.lostWorkerPolicy.
	AtMostOnce  = "AtMostOnce"
	AtLeastOnce = "AtLeastOnce"

	// FenceSuspend and FenceKeepRunning are the values of the agent's fencingPolicy, which it
	// reports as its CapacityReport's status.fencingPolicy.
	FenceSuspend     = fleetq.FencingPolicySuspend
	FenceKeepRunning = fleetq.FencingPolicyKeepRunning
)

// Default durations.
var (
	DefaultLeaseDuration        = 15 * time.Second
	DefaultRenewDeadline        = 10 * time.Second
	DefaultRetryPeriod          = 2 * time.Second
	DefaultCertValidity         = 90 * 24 * time.Hour
	DefaultGCInterval           = time.Minute
	DefaultWorkerLostTimeout    = 5 * time.Minute
	DefaultFenceTimeout         = 2 * time.Minute
	DefaultLeaseRenewInterval   = 15 * time.Second
	DefaultProbeInterval        = 10 * time.Second
	DefaultCapacityResyncPeriod = 30 * time.Second
)

// Fair-sharing preemption strategies, as Kueue names them.
const (
	LessThanOrEqualToFinalShare = "LessThanOrEqualToFinalShare"
	LessThanInitialShare        = "LessThanInitialShare"
)

// SetDefaults fills every unset field of c.
func (c *Configuration) SetDefaults() {
	if c.APIVersion == "" {
		c.APIVersion = APIVersion
	}
	if c.Kind == "" {
		c.Kind = KindConfiguration
	}
	if c.Namespace == "" {
		c.Namespace = DefaultNamespace
	}
	c.ClientConnection.setDefaults()
	c.LeaderElection.setDefaults(DefaultManagerLease)
	if c.Metrics.BindAddress == "" {
		c.Metrics.BindAddress = DefaultMetricsAddr
	}
	if c.Health.BindAddress == "" {
		c.Health.BindAddress = DefaultHealthAddr
	}
	w := &c.Webhook
	if w.Port == nil {
		w.Port = ptr.To(DefaultWebhookPort)
	}
	if w.ServiceName == "" && w.URL == "" {
		w.ServiceName = DefaultWebhookSvc
	}
	setDuration(&w.CertValidity, DefaultCertValidity)
	if c.ManagedJobsNamespaceSelector == nil {
		c.ManagedJobsNamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
			Key:      "kubernetes.io/metadata.name",
			Operator: metav1.LabelSelectorOpNotIn,
			Values:   []string{"kube-system", c.Namespace},
		}}}
	}
	if len(c.Integrations.Frameworks) == 0 {
		c.Integrations.Frameworks = slices.Clone(DefaultFrameworks)
	}
	r := &c.RequeuingStrategy
	if r.BackoffBaseSeconds == nil {
		r.BackoffBaseSeconds = ptr.To[int32](60)
	}
	if r.BackoffMaxSeconds == nil {
		r.BackoffMaxSeconds = ptr.To[int32](3600)
	}
	if c.FairSharing.Enable && len(c.FairSharing.PreemptionStrategies) == 0 {
		c.FairSharing.PreemptionStrategies = []string{LessThanOrEqualToFinalShare, LessThanInitialShare}
	}
	m := &c.MultiCluster
	if m.Origin == "" {
		m.Origin = DefaultOrigin
	}
	setDuration(&m.GCInterval, DefaultGCInterval)
	setDuration(&m.WorkerLostTimeout, DefaultWorkerLostTimeout)
	if m.LostWorkerPolicy == "" {
		m.LostWorkerPolicy = AtMostOnce
	}
	setDuration(&m.FenceTimeout, DefaultFenceTimeout)
	setDuration(&m.LeaseRenewInterval, DefaultLeaseRenewInterval)
	setDuration(&m.ProbeInterval, DefaultProbeInterval)
	m.WorkerClientConnection.setDefaults()
	if m.ClusterAPINamespace == "" {
		m.ClusterAPINamespace = c.Namespace
	}
	if m.AgentNamespace == "" {
		m.AgentNamespace = c.Namespace
	}
}

// SetDefaults fills every unset field of c.
func (c *AgentConfiguration) SetDefaults() {
	if c.APIVersion == "" {
		c.APIVersion = APIVersion
	}
	if c.Kind == "" {
		c.Kind = KindAgentConfiguration
	}
	if c.Namespace == "" {
		c.Namespace = DefaultNamespace
	}
	c.ClientConnection.setDefaults()
	c.LeaderElection.setDefaults(DefaultAgentLease)
	if len(c.Integrations.Frameworks) == 0 {
		c.Integrations.Frameworks = slices.Clone(DefaultFrameworks)
	}
	if c.Metrics.BindAddress == "" {
		c.Metrics.BindAddress = DefaultMetricsAddr
	}
	if c.Health.BindAddress == "" {
		c.Health.BindAddress = DefaultHealthAddr
	}
	setDuration(&c.CapacityResyncPeriod, DefaultCapacityResyncPeriod)
	if c.FencingPolicy == "" {
		c.FencingPolicy = FenceSuspend
	}
	if c.Origin == "" {
		c.Origin = DefaultOrigin
	}
}

func (c *ClientConnection) setDefaults() {
	if c.QPS == nil {
		c.QPS = ptr.To(DefaultQPS)
	}
	if c.Burst == nil {
		c.Burst = ptr.To(DefaultBurst)
	}
}

func (l *LeaderElection) setDefaults(lease string) {
	if l.Enabled == nil {
		l.Enabled = ptr.To(true)
	}
	if l.LeaseName == "" {
		l.LeaseName = lease
	}
	setDuration(&l.LeaseDuration, DefaultLeaseDuration)
	setDuration(&l.RenewDeadline, DefaultRenewDeadline)
	setDuration(&l.RetryPeriod, DefaultRetryPeriod)
}

func setDuration(d **metav1.Duration, def time.Duration) {
	if *d == nil {
		*d = &metav1.Duration{Duration: def}
	}
}
