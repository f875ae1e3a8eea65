package metrics

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	fleetq "github.com/fleetq/fleetq/api/fleetq/v1alpha1"
	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/internal/engine"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// series renders the metric families named by prefix as "name{labels} value" lines, sorted.
func series(t *testing.T, prefix string) []string {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	for _, c := range Collectors() {
		reg.MustRegister(c)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range families {
		if !strings.HasPrefix(f.GetName(), prefix) {
			continue
		}
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue() + float64(m.GetHistogram().GetSampleCount())
			out = append(out, f.GetName()+"{"+strings.Join(labels, ",")+"} "+strconv.FormatFloat(v, 'g', -1, 64))
		}
	}
	return out
}

func reset() {
	for _, c := range Collectors() {
		switch v := c.(type) {
		case *prometheus.GaugeVec:
			v.Reset()
		case *prometheus.CounterVec:
			v.Reset()
		case *prometheus.HistogramVec:
			v.Reset()
		}
	}
	lost.mu.Lock()
	lost.since = map[string]time.Time{}
	lost.mu.Unlock()
	published.Lock()
	published.series = map[string]map[quotaSeries]bool{}
	published.Unlock()
}

func gpuQueue() *kueue.ClusterQueue {
	return &kueue.ClusterQueue{
		ObjectMeta: metav1.ObjectMeta{Name: "research"},
		Spec: kueue.ClusterQueueSpec{CohortName: "ai", ResourceGroups: []kueue.ResourceGroup{{
			CoveredResources: []corev1.ResourceName{"cpu", "nvidia.com/gpu"},
			Flavors: []kueue.FlavorQuotas{{Name: "a100", Resources: []kueue.ResourceQuota{
				{Name: "cpu", NominalQuota: resource.MustParse("96")},
				{Name: "nvidia.com/gpu", NominalQuota: resource.MustParse("16"), BorrowingLimit: ptr.To(resource.MustParse("8"))},
			}}},
		}}},
	}
}

func active(ok bool) *kueue.ClusterQueueStatus {
	s := metav1.ConditionTrue
	if !ok {
		s = metav1.ConditionFalse
	}
	return &kueue.ClusterQueueStatus{Conditions: []metav1.Condition{{Type: kueue.ClusterQueueActive, Status: s}}}
}

func TestClusterQueue(t *testing.T) {
	usage := []engine.FlavorUsage{{Name: "a100", Resources: []engine.ResourceUsage{{Name: "cpu", Total: 1500}, {Name: "nvidia.com/gpu", Total: 4}}}}
	cases := map[string]struct {
		cq     *kueue.ClusterQueue
		status *kueue.ClusterQueueStatus
		st     engine.ClusterQueueStatus
		want   []string
	}{
		"active queue with usage": {
			cq: gpuQueue(), status: active(true), st: engine.ClusterQueueStatus{AdmittedWorkloads: 2, Usage: usage},
			want: []string{
				"kueue_admitted_active_workloads{cluster_queue=research} 1",
				"kueue_cluster_queue_borrowing_limit{cluster_queue=research,cohort=ai,flavor=a100,resource=nvidia.com/gpu} 8",
				"kueue_cluster_queue_nominal_quota{cluster_queue=research,cohort=ai,flavor=a100,resource=cpu} 96",
				"kueue_cluster_queue_nominal_quota{cluster_queue=research,cohort=ai,flavor=a100,resource=nvidia.com/gpu} 16",
				"kueue_cluster_queue_resource_reservation{cluster_queue=research,cohort=ai,flavor=a100,resource=cpu} 1.5",
				"kueue_cluster_queue_resource_reservation{cluster_queue=research,cohort=ai,flavor=a100,resource=nvidia.com/gpu} 4",
				"kueue_cluster_queue_resource_usage{cluster_queue=research,cohort=ai,flavor=a100,resource=cpu} 1.5",
				"kueue_cluster_queue_resource_usage{cluster_queue=research,cohort=ai,flavor=a100,resource=nvidia.com/gpu} 4",
				"kueue_cluster_queue_status{cluster_queue=research,status=active} 1",
				"kueue_cluster_queue_status{cluster_queue=research,status=pending} 0",
				"kueue_cluster_queue_status{cluster_queue=research,status=terminating} 0",
				"kueue_pending_workloads{cluster_queue=research,status=active} 3",
				"kueue_pending_workloads{cluster_queue=research,status=inadmissible} 5",
				"kueue_reserving_active_workloads{cluster_queue=research} 2",
			},
		},
		"inactive queue without usage": {
			cq: gpuQueue(), status: active(false),
			want: []string{
				"kueue_admitted_active_workloads{cluster_queue=research} 1",
				"kueue_cluster_queue_borrowing_limit{cluster_queue=research,cohort=ai,flavor=a100,resource=nvidia.com/gpu} 8",
				"kueue_cluster_queue_nominal_quota{cluster_queue=research,cohort=ai,flavor=a100,resource=cpu} 96",
				"kueue_cluster_queue_nominal_quota{cluster_queue=research,cohort=ai,flavor=a100,resource=nvidia.com/gpu} 16",
				"kueue_cluster_queue_status{cluster_queue=research,status=active} 0",
				"kueue_cluster_queue_status{cluster_queue=research,status=pending} 1",
				"kueue_cluster_queue_status{cluster_queue=research,status=terminating} 0",
				"kueue_pending_workloads{cluster_queue=research,status=active} 3",
				"kueue_pending_workloads{cluster_queue=research,status=inadmissible} 5",
				"kueue_reserving_active_workloads{cluster_queue=research} 0",
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			reset()
			// A previous status with another flavor's usage must not linger.
			ClusterQueue(gpuQueue(), active(true), engine.ClusterQueueStatus{Usage: []engine.FlavorUsage{{Name: "l4", Resources: []engine.ResourceUsage{{Name: "cpu", Total: 1000}}}}}, 0, 0, 0)
			ClusterQueue(tc.cq, tc.status, tc.st, 1, 3, 5)
			if diff := cmp.Diff(tc.want, series(t, "kueue_")); diff != "" {
				t.Errorf("series (-want +got):\n%s", diff)
			}
			ForgetClusterQueue("research")
			if got := series(t, "kueue_"); len(got) != 0 {
				t.Errorf("after ForgetClusterQueue: %v", got)
			}
		})
	}
}

// TestAQueueMovedToAnotherCohortLeavesNoSeriesBehind: a pass drops the series of the last pass
// that it does not set again, here all those labelled with the old cohort, and touches no other
// queue's.
func TestAQueueMovedToAnotherCohortLeavesNoSeriesBehind(t *testing.T) {
	reset()
	other := gpuQueue()
	other.Name = "inference"
	ClusterQueue(other, active(true), engine.ClusterQueueStatus{}, 0, 0, 0)
	ClusterQueue(gpuQueue(), active(true), engine.ClusterQueueStatus{}, 0, 0, 0)
	moved := gpuQueue()
	moved.Spec.CohortName = "platform"
	ClusterQueue(moved, active(true), engine.ClusterQueueStatus{}, 0, 0, 0)
	var research, inference []string
	for _, s := range series(t, "kueue_cluster_queue_nominal_quota") {
		switch {
		case strings.Contains(s, "cluster_queue=research"):
			research = append(research, s)
		case strings.Contains(s, "cluster_queue=inference"):
			inference = append(inference, s)
		}
	}
	want := []string{
		"kueue_cluster_queue_nominal_quota{cluster_queue=research,cohort=platform,flavor=a100,resource=cpu} 96",
		"kueue_cluster_queue_nominal_quota{cluster_queue=research,cohort=platform,flavor=a100,resource=nvidia.com/gpu} 16",
	}
	if diff := cmp.Diff(want, research); diff != "" {
		t.Errorf("research's quota series (-want +got):\n%s", diff)
	}
	if len(inference) != 2 {
		t.Errorf("inference's quota series %v; want its two, untouched", inference)
	}
}

func TestTerminatingQueue(t *testing.T) {
	reset()
	cq := gpuQueue()
	cq.DeletionTimestamp = &metav1.Time{Time: t0}
	ClusterQueue(cq, active(false), engine.ClusterQueueStatus{}, 0, 0, 0)
	if got := testutil.ToFloat64(clusterQueueStatus.WithLabelValues("research", StatusTerminating)); got != 1 {
		t.Errorf("terminating = %v, want 1", got)
	}
}

func reservedWorkload(conds ...metav1.Condition) *kueue.Workload {
	return &kueue.Workload{
		ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: "ns", CreationTimestamp: metav1.Time{Time: t0}},
		Status: kueue.WorkloadStatus{
			Admission:       &kueue.Admission{ClusterQueue: "research"},
			Conditions:      conds,
			AdmissionChecks: []kueue.AdmissionCheckState{{Name: "dispatch", State: kueue.CheckStatePending}},
		},
	}
}

func TestAdmissionFlow(t *testing.T) {
	reset()
	AdmissionAttempts([]engine.Decision{{Kind: engine.Admit}, {Kind: engine.Pending}, {Kind: engine.Preempt}, {Kind: engine.Admit}})
	reserved := metav1.Condition{Type: kueue.WorkloadQuotaReserved, Status: metav1.ConditionTrue, LastTransitionTime: metav1.Time{Time: t0.Add(10 * time.Second)}}
	wl := reservedWorkload(reserved)
	QuotaReserved(wl, t0.Add(10*time.Second))
	Dispatched("us-east", wl, t0.Add(12*time.Second))
	Admitted(wl, t0.Add(12*time.Second))
	Dispatched("us-east", &kueue.Workload{}, t0) // no reservation: nothing
	// A workload admitted in the reservation write (no checks) counts as admitted at once.
	direct := reservedWorkload(reserved, metav1.Condition{Type: kueue.WorkloadAdmitted, Status: metav1.ConditionTrue})
	direct.Status.Admission.ClusterQueue = "cpu"
	QuotaReserved(direct, t0.Add(time.Second))
	QuotaReserved(&kueue.Workload{}, t0) // no admission: nothing
	Evicted(wl, kueue.WorkloadEvictedByPreemption)
	Evicted(&kueue.Workload{}, kueue.WorkloadEvictedByPreemption) // held no quota: nothing
	DispatchRejected("us-east", RejectedNotStarted)

	want := []string{
		"fleetq_dispatch_latency_seconds{cluster=us-east} 1",
		"fleetq_dispatch_rejections_total{cluster=us-east,reason=NotStarted} 1",
		"kueue_admission_attempts_total{result=inadmissible} 2",
		"kueue_admission_attempts_total{result=success} 2",
		"kueue_admission_wait_time_seconds{cluster_queue=cpu} 1",
		"kueue_admission_wait_time_seconds{cluster_queue=research} 1",
		"kueue_admitted_workloads_total{cluster_queue=cpu} 1",
		"kueue_admitted_workloads_total{cluster_queue=research} 1",
		"kueue_evicted_workloads_total{cluster_queue=research,reason=Preempted} 1",
		"kueue_quota_reserved_wait_time_seconds{cluster_queue=cpu} 1",
		"kueue_quota_reserved_wait_time_seconds{cluster_queue=research} 1",
		"kueue_quota_reserved_workloads_total{cluster_queue=cpu} 1",
		"kueue_quota_reserved_workloads_total{cluster_queue=research} 1",
	}
	if diff := cmp.Diff(want, append(series(t, "fleetq_dispatch"), series(t, "kueue_")...)); diff != "" {
		t.Errorf("series (-want +got):\n%s", diff)
	}
	if got := testutil.ToFloat64(prometheusSum(dispatchLatency, "us-east")); got != 2 {
		t.Errorf("dispatch latency sum = %v s, want 2 (reserved at +10s, started at +12s)", got)
	}
}

// prometheusSum exposes a histogram's sum as a gauge, for testutil.ToFloat64.
func prometheusSum(h *prometheus.HistogramVec, label string) prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "sum"})
	reg := prometheus.NewRegistry()
	reg.MustRegister(h)
	families, _ := reg.Gather()
	for _, f := range families {
		for _, m := range f.GetMetric() {
			if m.GetLabel()[0].GetValue() == label {
				g.Set(m.GetHistogram().GetSampleSum())
			}
		}
	}
	return g
}

func TestWorkers(t *testing.T) {
	reset()
	WorkerActive("us-east", true)
	WorkerActive("eu-west", false)
	outage := t0.Add(time.Minute)
	WorkerLost("eu-west", outage)
	WorkerLost("eu-west", outage) // a second workload of the same outage
	WorkerLost("eu-west", outage.Add(time.Hour))
	Capacity("us-east", &fleetq.CapacityReport{Status: fleetq.CapacityReportStatus{Flavors: []fleetq.FlavorCapacity{{
		Name:        "a100",
		Allocatable: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("16"), "cpu": resource.MustParse("192")},
		Free:        corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("12")},
	}}}})
	want := []string{
		"fleetq_dispatch_rejections_total{cluster=eu-west,reason=WorkerLost} 3",
		"fleetq_worker_active{cluster=eu-west} 0",
		"fleetq_worker_active{cluster=us-east} 1",
		"fleetq_worker_allocatable_capacity{cluster=us-east,flavor=a100,resource=cpu} 192",
		"fleetq_worker_allocatable_capacity{cluster=us-east,flavor=a100,resource=nvidia.com/gpu} 16",
		"fleetq_worker_free_capacity{cluster=us-east,flavor=a100,resource=cpu} 0",
		"fleetq_worker_free_capacity{cluster=us-east,flavor=a100,resource=nvidia.com/gpu} 12",
		"fleetq_workers_lost_total{cluster=eu-west} 2",
	}
	if diff := cmp.Diff(want, append(series(t, "fleetq_dispatch"), series(t, "fleetq_worker")...)); diff != "" {
		t.Errorf("series (-want +got):\n%s", diff)
	}
	// A new report replaces the flavors of the previous one.
	Capacity("us-east", &fleetq.CapacityReport{Status: fleetq.CapacityReportStatus{Flavors: []fleetq.FlavorCapacity{{
		Name: "l4", Allocatable: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("4")},
	}}}})
	ForgetWorker("eu-west")
	want = []string{
		"fleetq_worker_active{cluster=us-east} 1",
		"fleetq_worker_allocatable_capacity{cluster=us-east,flavor=l4,resource=nvidia.com/gpu} 4",
		"fleetq_worker_free_capacity{cluster=us-east,flavor=l4,resource=nvidia.com/gpu} 0",
		"fleetq_workers_lost_total{cluster=eu-west} 2",
	}
	if diff := cmp.Diff(want, series(t, "fleetq_worker")); diff != "" {
		t.Errorf("after a new report and ForgetWorker (-want +got):\n%s", diff)
	}
	WorkerLost("eu-west", outage.Add(time.Hour)) // forgotten: a re-registered worker's outage counts
	if got := testutil.ToFloat64(workersLost.WithLabelValues("eu-west")); got != 3 {
		t.Errorf("workers lost = %v, want 3", got)
	}
}
