package scheduler

import (
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Metrics of the local scheduler, served on the agent's metrics endpoint: what it admitted and
// evicted, how many copies wait, whether it is fenced, and what a pass costs.
var (
	admissionsTotal = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "fleetq_agent_admissions_total",
		Help: "Copies the agent admitted on its cluster's nodes.",
	})
	evictionsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fleetq_agent_evictions_total",
		Help: "Copies the agent evicted, by reason (Preempted, Fenced).",
	}, []string{"reason"})
	copiesGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "fleetq_agent_copies",
		Help: "Copies the agent handles, by phase (pending, admitted, evicting) after the last pass.",
	}, []string{"phase"})
	fencedGauge = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "fleetq_agent_fenced",
		Help: "1 while the manager's lease is expired and the agent admits nothing.",
	})
	unfencedGauge = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "fleetq_agent_unfenced_copies",
		Help: "Copies the agent handles while the manager's lease does not exist, so nothing would fence them if the manager were lost; 0 in a healthy fleet.",
	})
	passSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "fleetq_agent_pass_duration_seconds",
		Help:    "Time of one scheduler pass over all copies, writes included.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 14),
	})
)

func init() {
	ctrlmetrics.Registry.MustRegister(admissionsTotal, evictionsTotal, copiesGauge, fencedGauge, unfencedGauge, passSeconds)
}
