// Package config holds the versioned configuration files of fleetq-manager and fleetq-agent: their
// types, defaults, validation and loading. A file that fails validation is refused with every bad field
// named, so a typo never silently falls back to a default.
package config

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/ptr"

	"github.com/fleetq/fleetq/internal/integration/generic"
)

// APIVersion is the apiVersion every fleetq configuration file declares.
const APIVersion = "config.fleetq.dev/v1alpha1"

// Kinds of configuration files: one for the manager, one for the agent.
const (
	KindConfiguration      = "Configuration"
	KindAgentConfiguration = "AgentConfiguration"
)

// Configuration is fleetq-manager's configuration file.
type Configuration struct {
	metav1.TypeMeta `json:",inline"`

	// Namespace is where the manager runs, keeps its leader-election lease and reads worker kubeconfig
	// Secrets; it never reads Secrets elsewhere.
	Namespace string `json:"namespace,omitempty"`

	// ClientConnection sizes the one rate limiter shared by every client the manager uses against the
	// management cluster (default per-kind limits throttle dispatch to ~1 workload/s).
	ClientConnection ClientConnection `json:"clientConnection,omitempty"`

	// LeaderElection makes sure two managers never admit at once.
	LeaderElection LeaderElection `json:"leaderElection,omitempty"`

	// Metrics is where Prometheus scrapes the manager.
	Metrics Endpoint `json:"metrics,omitempty"`

	// Health serves /healthz and /readyz.
	Health Endpoint `json:"health,omitempty"`

	// Profiling serves Go's net/http/pprof profiles (CPU, heap, allocations) for finding where the
	// manager spends its time; off unless set, since whoever reaches the port sees its internals.
	Profiling Endpoint `json:"profiling,omitempty"`

	// Webhook configures the admission webhook server and how the API server reaches it.
	Webhook Webhook `json:"webhook,omitempty"`

	// ManageJobsWithoutQueueName suspends Jobs that carry no kueue.x-k8s.io/queue-name label (in the
	// namespaces ManagedJobsNamespaceSelector selects) so nothing bypasses quota.
	ManageJobsWithoutQueueName bool `json:"manageJobsWithoutQueueName,omitempty"`

	// ManagedJobsNamespaceSelector limits ManageJobsWithoutQueueName and DefaultLocalQueue to some
	// namespaces; system namespaces are excluded by default.
	ManagedJobsNamespaceSelector *metav1.LabelSelector `json:"managedJobsNamespaceSelector,omitempty"`

	// DefaultLocalQueue, when set, is the LocalQueue name given to managed Jobs that have no
	// queue-name label, if a LocalQueue of that name exists in the Job's namespace.
	DefaultLocalQueue string `json:"defaultLocalQueue,omitempty"`

	// Integrations lists the job kinds the manager manages.
	Integrations Integrations `json:"integrations,omitempty"`

	// RequeuingStrategy is the backoff applied to a workload evicted for a cause that may repeat
	// (rejected or lost by its worker, pods not ready) before it queues again; a preempted
	// workload queues again at once, behind the workloads that waited.
	RequeuingStrategy RequeuingStrategy `json:"requeuingStrategy,omitempty"`

	// FairSharing turns on dominant-resource-share ordering and preemption between ClusterQueues of a
	// cohort.
	FairSharing FairSharing `json:"fairSharing,omitempty"`

	// MultiCluster configures dispatch to worker clusters.
	MultiCluster MultiCluster `json:"multiCluster,omitempty"`
}

// ClientConnection is the rate limit of one cluster's clients, shared by all of them.
type ClientConnection struct {
	// QPS is the sustained requests per second.
	QPS *float32 `json:"qps,omitempty"`
	// Burst is the number of requests allowed above QPS for a short time.
	Burst *int32 `json:"burst,omitempty"`
}

// LeaderElection configures the lease that elects the one active manager.
type LeaderElection struct {
	// Enabled turns leader election on; only single-replica development setups turn it off.
	Enabled *bool `json:"enabled,omitempty"`
	// LeaseName is the name of the coordination.k8s.io Lease in Namespace.
	LeaseName string `json:"leaseName,omitempty"`
	// LeaseDuration is how long a non-leader waits before taking over a lease that stopped renewing.
	LeaseDuration *metav1.Duration `json:"leaseDuration,omitempty"`
	// RenewDeadline is how long the leader keeps trying to renew before it steps down.
	RenewDeadline *metav1.Duration `json:"renewDeadline,omitempty"`
	// RetryPeriod is the interval between attempts to take or renew the lease.
	RetryPeriod *metav1.Duration `json:"retryPeriod,omitempty"`
}

// Endpoint is a listening address; "0" disables it.
type Endpoint struct {
	// BindAddress is host:port, ":port", or "0" to disable.
	BindAddress string `json:"bindAddress,omitempty"`
}

// Webhook configures the webhook server. The manager generates and rotates its own serving
// certificate and keeps the webhook configurations' caBundle in sync, so no cert-manager is needed.
type Webhook struct {
	// Port the webhook server listens on.
	Port *int32 `json:"port,omitempty"`
	// Host the webhook server binds to; empty means all interfaces.
	Host string `json:"host,omitempty"`
	// CertDir holds the generated serving certificate and key.
	CertDir string `json:"certDir,omitempty"`
	// ServiceName is the Service in Namespace in front of the webhook server (in-cluster installs).
	ServiceName string `json:"serviceName,omitempty"`
	// URL, when set, is the base URL the API server calls instead of a Service (out-of-cluster runs,
	// such as the local lab). Its host must be covered by the serving certificate.
	URL string `json:"url,omitempty"`
	// CertValidity is how long a generated serving certificate lasts; it is renewed at two thirds.
	CertValidity *metav1.Duration `json:"certValidity,omitempty"`
}

// Integrations lists managed job frameworks.
type Integrations struct {
	// Frameworks are the job kinds managed, by Kueue's names (batch/job, ...).
	Frameworks []string `json:"frameworks,omitempty"`
	// Generic integrates kinds fleetq has no built-in adapter for (JobSet, a team's own CRD),
	// each described by paths in its schema; a fleetq addition to Kueue's configuration. The
	// paths are checked against the CRD at start-up.
	Generic []generic.Spec `json:"generic,omitempty"`
}

// RequeuingStrategy sets the exponential backoff before an evicted workload queues again.
type RequeuingStrategy struct {
	// BackoffBaseSeconds is the first delay; each further eviction doubles it.
	BackoffBaseSeconds *int32 `json:"backoffBaseSeconds,omitempty"`
	// BackoffMaxSeconds caps the delay.
	BackoffMaxSeconds *int32 `json:"backoffMaxSeconds,omitempty"`
	// BackoffLimitCount, when set, deactivates a workload after that many requeues instead of
	// requeuing it forever.
	BackoffLimitCount *int32 `json:"backoffLimitCount,omitempty"`
}

// FairSharing configures dominant-resource-share fair sharing.
type FairSharing struct {
	// Enable turns fair sharing on.
	Enable bool `json:"enable,omitempty"`
	// PreemptionStrategies are tried in order when a ClusterQueue preempts within its cohort under
	// fair sharing: LessThanOrEqualToFinalShare, LessThanInitialShare.
	PreemptionStrategies []string `json:"preemptionStrategies,omitempty"`
}

// MultiCluster configures the worker registry and dispatch.
type MultiCluster struct {
	// Origin is the value of the kueue.x-k8s.io/multikueue-origin label on every remote copy; garbage
	// collection only ever deletes objects carrying it.
	Origin string `json:"origin,omitempty"`
	// GCInterval is how often orphaned remote copies are collected; 0 disables periodic collection.
	GCInterval *metav1.Duration `json:"gcInterval,omitempty"`
	// WorkerLostTimeout is how long a worker may stay unreachable before its workloads are evicted
	// and dispatched elsewhere. It must exceed FenceTimeout.
	WorkerLostTimeout *metav1.Duration `json:"workerLostTimeout,omitempty"`
	// LostWorkerPolicy is what happens to the workloads of a worker that stays unreachable for
	// WorkerLostTimeout: AtMostOnce (the default) keeps them, and their quota, until the worker
	// answers and their copies are confirmed gone — a job never runs twice, even when the
	// worker's API server died while its nodes kept running; AtLeastOnce places them elsewhere,
	// trusting the agent to have fenced its copies (it cannot when its own API server is down).
	// A worker whose MultiKueueCluster is deleted counts as gone for good under both.
	LostWorkerPolicy string `json:"lostWorkerPolicy,omitempty"`
	// FenceTimeout is how long a worker's agent keeps copied jobs running after the manager stops
	// renewing its lease; the agent then suspends them, so no job runs twice during a partition.
	FenceTimeout *metav1.Duration `json:"fenceTimeout,omitempty"`
	// LeaseRenewInterval is how often the manager renews its lease in every worker.
	LeaseRenewInterval *metav1.Duration `json:"leaseRenewInterval,omitempty"`
	// ProbeInterval is how often an unhealthy worker is probed while it is disconnected.
	ProbeInterval *metav1.Duration `json:"probeInterval,omitempty"`
	// WorkerClientConnection is the rate limit shared by all clients of one worker cluster.
	WorkerClientConnection ClientConnection `json:"workerClientConnection,omitempty"`
	// ClusterAPISelector, when set, registers every Cluster API Cluster matching it as a worker, with
	// its <name>-kubeconfig Secret.
	ClusterAPISelector *metav1.LabelSelector `json:"clusterAPISelector,omitempty"`
	// ClusterAPINamespace limits Cluster API discovery to one namespace; empty means Namespace.
	ClusterAPINamespace string `json:"clusterAPINamespace,omitempty"`
	// AgentNamespace is where fleetq-agent runs in every worker: the manager renews its fencing
	// Lease there. Empty means Namespace.
	AgentNamespace string `json:"agentNamespace,omitempty"`
	// KubeconfigDir is the only directory a MultiKueueCluster with locationType Path may read
	// its kubeconfig from (an absolute path; files directly in it, no symlinks out). Empty
	// refuses locationType Path: otherwise anyone who may create a MultiKueueCluster could make
	// the manager read any file it can.
	KubeconfigDir string `json:"kubeconfigDir,omitempty"`
}

// AgentConfiguration is fleetq-agent's configuration file. The agent holds credentials for its own
// cluster only.
type AgentConfiguration struct {
	metav1.TypeMeta `json:",inline"`

	// ClusterName is the name the manager knows this worker by (its MultiKueueCluster or Cluster API
	// Cluster); it names the capacity report.
	ClusterName string `json:"clusterName,omitempty"`
	// Namespace is where the agent runs and publishes its capacity report.
	Namespace string `json:"namespace,omitempty"`
	// ClientConnection sizes the agent's one shared client rate limiter.
	ClientConnection ClientConnection `json:"clientConnection,omitempty"`
	// LeaderElection keeps a single active agent per cluster.
	LeaderElection LeaderElection `json:"leaderElection,omitempty"`
	// Metrics is where Prometheus scrapes the agent.
	Metrics Endpoint `json:"metrics,omitempty"`
	// Health serves /healthz and /readyz.
	Health Endpoint `json:"health,omitempty"`
	// CapacityResyncPeriod refreshes the capacity report even when no node or pod changed.
	CapacityResyncPeriod *metav1.Duration `json:"capacityResyncPeriod,omitempty"`
	// Origin must match the manager's MultiCluster.Origin: the agent only admits copies carrying it.
	Origin string `json:"origin,omitempty"`
	// Integrations lists the job kinds whose copies the agent runs; of those, it runs the kinds its
	// cluster serves (their CRD is installed) and reports them, so the manager places nothing else
	// there. List only kinds whose operator runs in the cluster.
	Integrations Integrations `json:"integrations,omitempty"`
	// FencingPolicy is what the agent does with running copies once the manager stopped renewing
	// its lease for fenceTimeout: Suspend them (the default; the manager may then place them
	// elsewhere under lostWorkerPolicy AtLeastOnce) or KeepRunning (Kueue's behaviour: jobs ride
	// out a management-cluster outage, and the manager never places them elsewhere while this
	// worker is unreachable, whatever its lostWorkerPolicy). Nothing new is admitted while fenced.
	FencingPolicy string `json:"fencingPolicy,omitempty"`
}

// RESTConfig copies base with this connection's rate limiter, which every client built from the
// copy shares: a process makes at most QPS requests per second to that cluster, whatever the
// number of kinds it touches (default per-kind limits throttled MultiKueue to ~1 workload/s).
func (c ClientConnection) RESTConfig(base *rest.Config, userAgent string) *rest.Config {
	rc := rest.CopyConfig(base)
	rc.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(ptr.Deref(c.QPS, DefaultQPS), int(ptr.Deref(c.Burst, DefaultBurst)))
	rc.UserAgent = userAgent
	return rc
}
