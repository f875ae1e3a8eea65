// Package metrics holds fleetq-manager's Prometheus metrics, served on the manager's metrics
// endpoint through controller-runtime's registry. Queue and admission metrics carry Kueue's names
// and labels where they mean the same thing, so Kueue's dashboards and alerts work unchanged;
// fleetq_* metrics describe the worker clusters: dispatch latency, rejections, health and capacity.
// Callers record with one call at the point where the event happens (see each function).
package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	fleetq "github.com/fleetq/fleetq/api/fleetq/v1alpha1"
	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/internal/engine"
	"github.com/fleetq/fleetq/internal/workload"
)

// Values of the status label of kueue_pending_workloads, as Kueue names them.
const (
	PendingActive       = "active"
	PendingInadmissible = "inadmissible"
)

// Values of the result label of kueue_admission_attempts_total, as Kueue names them.
const (
	AttemptSuccess      = "success"
	AttemptInadmissible = "inadmissible"
)

// Values of the status label of kueue_cluster_queue_status, as Kueue names them.
const (
	StatusPending     = "pending"
	StatusActive      = "active"
	StatusTerminating = "terminating"
)

// Reasons of fleetq_dispatch_rejections_total: why a workload placed on a worker was taken back.
const (
	// RejectedEvicted: the worker's agent evicted its copy (local preemption or fencing).
	RejectedEvicted = "EvictedByWorker"
	// RejectedNotStarted: the agent did not start the copy within the dispatch timeout.
	RejectedNotStarted = "NotStarted"
	// RejectedAgentSilent: the worker's agent wrote no verdict on the copy within workerLostTimeout.
	RejectedAgentSilent = "AgentSilent"
	// RejectedCopyRefused: the worker's API server refused the copy for the dispatch timeout.
	RejectedCopyRefused = "CopyRefused"
	// RejectedWorkerLost: the worker stayed unreachable longer than workerLostTimeout.
	RejectedWorkerLost = "WorkerLost"
)

// waitBuckets span half a second to about nine hours: queueing waits, not request latencies.
var waitBuckets = prometheus.ExponentialBuckets(0.5, 2, 16)

var (
	pendingWorkloads = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kueue_pending_workloads",
		Help: "Pending workloads per ClusterQueue and status: active (in the queue's heap) or inadmissible (parked until something changes, or backing off after an eviction).",
	}, []string{"cluster_queue", "status"})
	reservingActive = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kueue_reserving_active_workloads",
		Help: "Workloads holding quota in the ClusterQueue (reserved, not finished).",
	}, []string{"cluster_queue"})
	admittedActive = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kueue_admitted_active_workloads",
		Help: "Workloads admitted (every admission check passed) and not finished in the ClusterQueue.",
	}, []string{"cluster_queue"})
	clusterQueueStatus = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kueue_cluster_queue_status",
		Help: "1 for the ClusterQueue's current status (pending: inactive, active, terminating), 0 for the others.",
	}, []string{"cluster_queue", "status"})
	resourceUsage = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kueue_cluster_queue_resource_usage",
		Help: "Quota the ClusterQueue's admitted workloads use, per flavor and resource (cpu in cores, memory in bytes).",
	}, []string{"cohort", "cluster_queue", "flavor", "resource"})
	resourceReservation = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kueue_cluster_queue_resource_reservation",
		Help: "Quota reserved by the ClusterQueue's workloads, per flavor and resource.",
	}, []string{"cohort", "cluster_queue", "flavor", "resource"})
	nominalQuota = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kueue_cluster_queue_nominal_quota",
		Help: "The ClusterQueue's nominal quota per flavor and resource.",
	}, []string{"cohort", "cluster_queue", "flavor", "resource"})
	borrowingLimit = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kueue_cluster_queue_borrowing_limit",
		Help: "The ClusterQueue's borrowing limit per flavor and resource, where one is set.",
	}, []string{"cohort", "cluster_queue", "flavor", "resource"})
	lendingLimit = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kueue_cluster_queue_lending_limit",
		Help: "The ClusterQueue's lending limit per flavor and resource, where one is set.",
	}, []string{"cohort", "cluster_queue", "flavor", "resource"})
	admissionAttempts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kueue_admission_attempts_total",
		Help: "Workloads the admission cycle considered, by result: success (quota reserved) or inadmissible (pending or preempting).",
	}, []string{"result"})
	quotaReservedTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kueue_quota_reserved_workloads_total",
		Help: "Quota reservations written, per ClusterQueue.",
	}, []string{"cluster_queue"})
	quotaReservedWait = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "kueue_quota_reserved_wait_time_seconds",
		Help:    "Time from a workload's creation or last requeue to its quota reservation.",
		Buckets: waitBuckets,
	}, []string{"cluster_queue"})
	admittedTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kueue_admitted_workloads_total",
		Help: "Workloads admitted (every admission check passed), per ClusterQueue.",
	}, []string{"cluster_queue"})
	admissionWait = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "kueue_admission_wait_time_seconds",
		Help:    "Time from a workload's creation or last requeue to its admission.",
		Buckets: waitBuckets,
	}, []string{"cluster_queue"})
	evictedTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kueue_evicted_workloads_total",
		Help: "Evictions of admitted workloads, per ClusterQueue and reason (Preempted, AdmissionCheck...).",
	}, []string{"cluster_queue", "reason"})

	dispatchLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "fleetq_dispatch_latency_seconds",
		Help:    "Time from quota reservation on the manager to the worker's agent starting the copy, per worker cluster.",
		Buckets: prometheus.ExponentialBuckets(0.05, 2, 14),
	}, []string{"cluster"})
	dispatchRejections = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fleetq_dispatch_rejections_total",
		Help: "Workloads taken back from a worker cluster to be placed again, by reason (EvictedByWorker, NotStarted, WorkerLost).",
	}, []string{"cluster", "reason"})
	workerActive = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "fleetq_worker_active",
		Help: "1 while the manager is connected to the worker cluster (its MultiKueueCluster is Active), 0 otherwise.",
	}, []string{"cluster"})
	workerFree = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "fleetq_worker_free_capacity",
		Help: "Free capacity the worker's agent last reported, per flavor and resource (schedulable nodes only).",
	}, []string{"cluster", "flavor", "resource"})
	workerAllocatable = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "fleetq_worker_allocatable_capacity",
		Help: "Allocatable capacity the worker's agent last reported, per flavor and resource.",
	}, []string{"cluster", "flavor", "resource"})
	workersLost = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fleetq_workers_lost_total",
		Help: "Outages of a worker cluster that lasted longer than workerLostTimeout (its workloads were placed elsewhere).",
	}, []string{"cluster"})
	leaseFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fleetq_lease_renew_failures_total",
		Help: "Fencing Lease renewals in a worker that failed: reason error (the worker's API server) or foreign_holder (another management cluster's manager with the same origin holds it).",
	}, []string{"cluster", "reason"})
)

// Reasons of fleetq_lease_renew_failures_total.
const (
	LeaseError         = "error"
	LeaseForeignHolder = "foreign_holder"
)

// LeaseRenewFailed counts a fencing Lease renewal that failed in a worker.
func LeaseRenewFailed(cluster, reason string) { leaseFailures.WithLabelValues(cluster, reason).Inc() }

// Collectors lists every metric of the package, for tests that register them elsewhere.
func Collectors() []prometheus.Collector {
	return []prometheus.Collector{
		pendingWorkloads, reservingActive, admittedActive, clusterQueueStatus,
		resourceUsage, resourceReservation, nominalQuota, borrowingLimit, lendingLimit,
		admissionAttempts, quotaReservedTotal, quotaReservedWait, admittedTotal, admissionWait, evictedTotal,
		dispatchLatency, dispatchRejections, workerActive, workerFree, workerAllocatable, workersLost, leaseFailures,
	}
}

func init() {
	ctrlmetrics.Registry.MustRegister(Collectors()...)
}

// AdmissionAttempts counts one cycle's decisions: an admission is a success, a workload left
// pending or waiting for its victims is inadmissible.
func AdmissionAttempts(decisions []engine.Decision) {
	for _, d := range decisions {
		switch d.Kind {
		case engine.Admit:
			admissionAttempts.WithLabelValues(AttemptSuccess).Inc()
		case engine.Pending, engine.Preempt:
			admissionAttempts.WithLabelValues(AttemptInadmissible).Inc()
		}
	}
}

// QuotaReserved records a reservation written at now, and when the workload was admitted in
// the same write (no admission checks), its admission too.
func QuotaReserved(wl *kueue.Workload, now time.Time) {
	if wl.Status.Admission == nil {
		return
	}
	cq := string(wl.Status.Admission.ClusterQueue)
	wait := now.Sub(workload.QueueTime(wl)).Seconds()
	quotaReservedTotal.WithLabelValues(cq).Inc()
	quotaReservedWait.WithLabelValues(cq).Observe(wait)
	if workload.IsAdmitted(wl) {
		admittedTotal.WithLabelValues(cq).Inc()
		admissionWait.WithLabelValues(cq).Observe(wait)
	}
}

// Admitted records a workload whose last admission check passed at now, admitting it.
func Admitted(wl *kueue.Workload, now time.Time) {
	if wl.Status.Admission == nil {
		return
	}
	cq := string(wl.Status.Admission.ClusterQueue)
	admittedTotal.WithLabelValues(cq).Inc()
	admissionWait.WithLabelValues(cq).Observe(now.Sub(workload.QueueTime(wl)).Seconds())
}

// Evicted records the eviction, for reason, of a workload that held quota.
func Evicted(wl *kueue.Workload, reason string) {
	if wl.Status.Admission == nil {
		return
	}
	evictedTotal.WithLabelValues(string(wl.Status.Admission.ClusterQueue), reason).Inc()
}

// ClusterQueue publishes a queue's status figures: pending workloads (active and inadmissible),
// reserving and admitted ones, its status (from the computed status' Active condition), its usage
// and its quotas. The quota controller calls it each time it computes the queue's status.
func ClusterQueue(cq *kueue.ClusterQueue, want *kueue.ClusterQueueStatus, st engine.ClusterQueueStatus, admitted, active, inadmissible int) {
	name, cohort := cq.Name, string(cq.Spec.CohortName)
	pendingWorkloads.WithLabelValues(name, PendingActive).Set(float64(active))
	pendingWorkloads.WithLabelValues(name, PendingInadmissible).Set(float64(inadmissible))
	reservingActive.WithLabelValues(name).Set(float64(st.AdmittedWorkloads))
	admittedActive.WithLabelValues(name).Set(float64(admitted))
	status := StatusActive
	switch {
	case cq.DeletionTimestamp != nil:
		status = StatusTerminating
	case !meta.IsStatusConditionTrue(want.Conditions, kueue.ClusterQueueActive):
		status = StatusPending
	}
	for _, s := range []string{StatusPending, StatusActive, StatusTerminating} {
		clusterQueueStatus.WithLabelValues(name, s).Set(boolValue(s == status))
	}
	now := map[quotaSeries]bool{}
	set := func(g *prometheus.GaugeVec, flavor string, res corev1.ResourceName, v float64) {
		g.WithLabelValues(cohort, name, flavor, string(res)).Set(v)
		now[quotaSeries{g, cohort, flavor, string(res)}] = true
	}
	for _, f := range st.Usage {
		for _, r := range f.Resources {
			v := amount(r.Name, r.Total)
			set(resourceUsage, f.Name, r.Name, v)
			set(resourceReservation, f.Name, r.Name, v)
		}
	}
	for _, g := range cq.Spec.ResourceGroups {
		for _, f := range g.Flavors {
			for _, r := range f.Resources {
				set(nominalQuota, string(f.Name), r.Name, r.NominalQuota.AsApproximateFloat64())
				if r.BorrowingLimit != nil {
					set(borrowingLimit, string(f.Name), r.Name, r.BorrowingLimit.AsApproximateFloat64())
				}
				if r.LendingLimit != nil {
					set(lendingLimit, string(f.Name), r.Name, r.LendingLimit.AsApproximateFloat64())
				}
			}
		}
	}
	published.Lock()
	defer published.Unlock()
	for k := range published.series[name] {
		if !now[k] {
			k.vec.DeleteLabelValues(k.cohort, name, k.flavor, k.resource)
		}
	}
	published.series[name] = now
}

// quotaSeries is one usage or quota series of a ClusterQueue (whose name is the map's key).
type quotaSeries struct {
	vec                      *prometheus.GaugeVec
	cohort, flavor, resource string
}

// published holds the usage and quota series each ClusterQueue's last status pass set, so the
// next pass deletes just those that went away (a flavor or resource removed, the cohort
// changed). DeletePartialMatch scans every queue's series: with 500 queues, that scan on every
// pass was 7 % of the manager's CPU.
var published = struct {
	sync.Mutex
	series map[string]map[quotaSeries]bool
}{series: map[string]map[quotaSeries]bool{}}

// ForgetClusterQueue drops every series of a deleted ClusterQueue.
func ForgetClusterQueue(name string) {
	published.Lock()
	delete(published.series, name)
	published.Unlock()
	byQueue := prometheus.Labels{"cluster_queue": name}
	for _, g := range []*prometheus.GaugeVec{pendingWorkloads, reservingActive, admittedActive, clusterQueueStatus,
		resourceUsage, resourceReservation, nominalQuota, borrowingLimit, lendingLimit} {
		g.DeletePartialMatch(byQueue)
	}
}

// Dispatched records the time from a workload's quota reservation to a worker's agent starting
// its copy; the caller calls it once, when it has written the admission check Ready.
func Dispatched(cluster string, wl *kueue.Workload, now time.Time) {
	reserved := meta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadQuotaReserved)
	if reserved == nil || reserved.Status != "True" {
		return
	}
	dispatchLatency.WithLabelValues(cluster).Observe(now.Sub(reserved.LastTransitionTime.Time).Seconds())
}

// DispatchRejected records a workload taken back from a worker, with one of the Rejected* reasons.
func DispatchRejected(cluster, reason string) {
	dispatchRejections.WithLabelValues(cluster, reason).Inc()
}

// WorkerActive publishes whether the manager is connected to a worker.
func WorkerActive(cluster string, active bool) {
	workerActive.WithLabelValues(cluster).Set(boolValue(active))
}

// ForgetWorker drops every series of a worker that is no longer registered.
func ForgetWorker(cluster string) {
	byCluster := prometheus.Labels{"cluster": cluster}
	for _, g := range []*prometheus.GaugeVec{workerActive, workerFree, workerAllocatable} {
		g.DeletePartialMatch(byCluster)
	}
	lost.mu.Lock()
	delete(lost.since, cluster)
	lost.mu.Unlock()
}

// lost remembers the start of the last outage counted per worker: every workload of a lost
// worker reports it, and the outage counts once.
var lost = struct {
	mu    sync.Mutex
	since map[string]time.Time
}{since: map[string]time.Time{}}

// WorkerLost records a workload taken back from a worker unreachable since `since` for longer
// than workerLostTimeout: a WorkerLost rejection, and a lost worker once per outage however many
// workloads it takes back.
func WorkerLost(cluster string, since time.Time) {
	dispatchRejections.WithLabelValues(cluster, RejectedWorkerLost).Inc()
	lost.mu.Lock()
	defer lost.mu.Unlock()
	if prev, ok := lost.since[cluster]; ok && prev.Equal(since) {
		return
	}
	lost.since[cluster] = since
	workersLost.WithLabelValues(cluster).Inc()
}

// Capacity publishes a worker's capacity report: free and allocatable amounts per flavor and
// resource. A report replaces the worker's previous series (flavors may have gone).
func Capacity(cluster string, cr *fleetq.CapacityReport) {
	byCluster := prometheus.Labels{"cluster": cluster}
	workerFree.DeletePartialMatch(byCluster)
	workerAllocatable.DeletePartialMatch(byCluster)
	for _, f := range cr.Status.Flavors {
		for r, q := range f.Allocatable {
			workerAllocatable.WithLabelValues(cluster, f.Name, string(r)).Set(q.AsApproximateFloat64())
			free := f.Free[r]
			workerFree.WithLabelValues(cluster, f.Name, string(r)).Set(free.AsApproximateFloat64())
		}
	}
}

// amount converts an engine amount (milli-cpu, bytes, counts) to the unit Prometheus users expect.
func amount(name corev1.ResourceName, v int64) float64 {
	q := resource.MustParse(engine.FormatAmount(name, v))
	return q.AsApproximateFloat64()
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
