package bench

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/e2e/lab"
)

func TestCheckedInScenariosLoad(t *testing.T) {
	files, err := filepath.Glob("scenarios/*.yaml")
	if err != nil || len(files) < 4 {
		t.Fatalf("scenario files: %v, %v", files, err)
	}
	for _, f := range files {
		s, err := LoadScenario(f)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		spec := s.LabSpec()
		if err := spec.Default().Validate(); err != nil {
			t.Errorf("%s: lab spec: %v", f, err)
		}
	}
}

func TestScenarioShapes(t *testing.T) {
	cases := map[string]struct {
		file     string
		scale    float64
		jobs     int
		capacity float64
		queues   int
		rate     float64
	}{
		"single baseline":         {file: "single-baseline.yaml", scale: 1, jobs: 900, capacity: 768, queues: 30},
		"multi burst, full":       {file: "multi-burst.yaml", scale: 1, jobs: 1000, capacity: 1024, queues: 2},
		"multi burst, issue 6":    {file: "multi-burst.yaml", scale: 0.2, jobs: 200, capacity: 212, queues: 2},
		"multi pressure":          {file: "multi-pressure.yaml", scale: 1, jobs: 190, capacity: 192, queues: 3},
		"chain ignores the scale": {file: "single-chain.yaml", scale: 0.1, jobs: 21, capacity: 96, queues: 1},
		"multi steady":            {file: "multi-steady.yaml", scale: 1, jobs: 1050, capacity: 212, queues: 2, rate: 3.5},
		// A scaled steady wave keeps its 5 minutes: the rate shrinks with the count.
		"multi steady, scaled": {file: "multi-steady.yaml", scale: 0.1, jobs: 105, capacity: 20, queues: 2, rate: 0.35},
		"multi scale":          {file: "multi-scale.yaml", scale: 1, jobs: 21000, capacity: 1160, queues: 500},
		// A probe scenario keeps its nodes (each queue's quota still fits a job) and loses cohorts.
		"multi scale, scaled": {file: "multi-scale.yaml", scale: 0.1, jobs: 2100, capacity: 1160, queues: 50},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s, err := LoadScenario(filepath.Join("scenarios", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			s = s.Scaled(tc.scale)
			got := []float64{float64(s.Jobs(1)), s.capacity(), float64(s.QueueCount()), s.Waves[0].Rate}
			want := []float64{float64(tc.jobs), tc.capacity, float64(tc.queues), tc.rate}
			if diff := cmp.Diff(want, got, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
				t.Errorf("jobs, capacity, queues, first wave's rate (-want +got):\n%s", diff)
			}
		})
	}
}

func TestManagementQueuesShareCapacity(t *testing.T) {
	s, err := LoadScenario(filepath.Join("scenarios", "multi-burst.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cq *kueue.ClusterQueue
	for _, o := range managementObjects(s) {
		if c, ok := o.(*kueue.ClusterQueue); ok && c.Name == ClusterQueueName(0) {
			cq = c
		}
	}
	if cq == nil {
		t.Fatal("no cq-0")
	}
	got := map[string]string{}
	for _, g := range cq.Spec.ResourceGroups {
		for _, f := range g.Flavors {
			for _, r := range f.Resources {
				got[string(f.Name)+"/"+string(r.Name)] = r.NominalQuota.String()
			}
		}
	}
	want := map[string]string{
		"a100-flavor/cpu": "4608", "a100-flavor/memory": "36864Gi", "a100-flavor/nvidia.com/gpu": "384",
		"l4-flavor/cpu": "1536", "l4-flavor/memory": "6Gi", "l4-flavor/nvidia.com/gpu": "128",
	}
	// 64 L4 nodes × 192Gi = 12288Gi; half is 6144Gi.
	want["l4-flavor/memory"] = "6Ti"
	want["a100-flavor/memory"] = "36Ti"
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("cq-0 nominal quota (-want +got):\n%s", diff)
	}
	if cq.Spec.AdmissionChecksStrategy == nil || cq.Spec.AdmissionChecksStrategy.AdmissionChecks[0].Name != AdmissionCheckName {
		t.Errorf("a multi-cluster queue must carry the dispatch check: %+v", cq.Spec.AdmissionChecksStrategy)
	}
}

func TestKueueWorkerQueueOffersOnlyItsNodes(t *testing.T) {
	s, err := LoadScenario(filepath.Join("scenarios", "multi-burst.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range kueueWorkerObjects(s, s.Workers[2]) {
		cq, ok := o.(*kueue.ClusterQueue)
		if !ok {
			continue
		}
		if len(cq.Spec.ResourceGroups) != 1 || len(cq.Spec.ResourceGroups[0].Flavors) != 1 {
			t.Fatalf("eu-west's queue must offer one flavor: %+v", cq.Spec.ResourceGroups)
		}
		f := cq.Spec.ResourceGroups[0].Flavors[0]
		got := map[string]string{}
		for _, r := range f.Resources {
			got[string(r.Name)] = r.NominalQuota.String()
		}
		want := map[string]string{"cpu": "3072", "memory": "12Ti", "nvidia.com/gpu": "256"}
		if diff := cmp.Diff(want, got); diff != "" || f.Name != "l4-flavor" {
			t.Errorf("eu-west queue %s (-want +got):\n%s", f.Name, diff)
		}
	}
}

func TestShare(t *testing.T) {
	cases := map[string]struct {
		q    string
		f    float64
		want string
	}{
		"cpu rounds down to whole cpus": {q: "768", f: 0.0333, want: "25"},
		"memory rounds down to Gi":      {q: "3Ti", f: 0.0333, want: "102Gi"},
		"gpus":                          {q: "1024", f: 0.5, want: "512"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := share(resource.MustParse(tc.q), tc.f)
			if got.String() != tc.want {
				t.Errorf("share(%s, %g) = %s, want %s", tc.q, tc.f, got.String(), tc.want)
			}
		})
	}
}

func TestPercentileAndSpread(t *testing.T) {
	xs := []float64{5, 1, 4, 2, 3, 10, 9, 8, 7, 6}
	got := []float64{Percentile(xs, 50), Percentile(xs, 95), Percentile(xs, 99), Percentile(nil, 50)}
	if diff := cmp.Diff([]float64{5, 10, 10, 0}, got); diff != "" {
		t.Errorf("percentiles (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(Spread{Median: 2.5, Min: 1, Max: 4, N: 4}, SpreadOf([]float64{4, 1, 3, 2})); diff != "" {
		t.Errorf("spread (-want +got):\n%s", diff)
	}
}

func TestParseMetrics(t *testing.T) {
	metrics := `# HELP apiserver_request_total Counter of apiserver requests
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="namespace",subresource="",verb="LIST",version="v1"} 3
apiserver_request_total{code="201",component="apiserver",dry_run="",group="batch",resource="jobs",scope="namespace",subresource="",verb="POST",version="v1"} 10
apiserver_request_total{code="200",component="apiserver",dry_run="",group="batch",resource="jobs",scope="namespace",subresource="status",verb="PATCH",version="v1"} 7
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="namespace",subresource="",verb="WATCH",version="v1"} 2
apiserver_request_duration_seconds_bucket{verb="POST",le="0.1"} 99
apiserver_admission_webhook_admission_duration_seconds_bucket{name="mjob.fleetq.dev",operation="CREATE",rejected="false",type="admit",le="0.005"} 8
apiserver_admission_webhook_admission_duration_seconds_sum{name="mjob.fleetq.dev",operation="CREATE",rejected="false",type="admit"} 0.25
apiserver_admission_webhook_admission_duration_seconds_count{name="mjob.fleetq.dev",operation="CREATE",rejected="false",type="admit"} 10
apiserver_admission_webhook_admission_duration_seconds_sum{name="vjob.fleetq.dev",operation="CREATE",rejected="true",type="validating"} 0.05
apiserver_admission_webhook_admission_duration_seconds_count{name="vjob.fleetq.dev",operation="CREATE",rejected="true",type="validating"} 2
`
	m, err := parseMetrics(strings.NewReader(metrics))
	if err != nil {
		t.Fatal(err)
	}
	want := Webhooks{"mjob.fleetq.dev CREATE": {Calls: 10, Seconds: 0.25}, "vjob.fleetq.dev CREATE": {Calls: 2, Seconds: 0.05}}
	if diff := cmp.Diff(want, m.Webhooks, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
		t.Errorf("webhooks (-want +got):\n%s", diff)
	}
	got := m.Requests
	if diff := cmp.Diff(RequestCounts{"list": 3, "post": 10, "patch": 7, "watch": 2}, got); diff != "" {
		t.Errorf("counts (-want +got):\n%s", diff)
	}
	if got.Total() != 22 || got.Writes() != 17 {
		t.Errorf("total %g writes %g, want 22 and 17", got.Total(), got.Writes())
	}
}

func TestReadAuditCountsEachRequestOncePerRole(t *testing.T) {
	at := func(s string) string { return "2026-12-02T10:00:" + s + ".000000Z" }
	lines := []string{
		`{"stage":"ResponseComplete","verb":"create","userAgent":"fleetq-manager","requestReceivedTimestamp":"` + at("01") + `","objectRef":{"resource":"workloads"}}`,
		`{"stage":"ResponseComplete","verb":"patch","userAgent":"fleetq-manager","requestReceivedTimestamp":"` + at("02") + `","objectRef":{"resource":"workloads","subresource":"status"}}`,
		`{"stage":"ResponseStarted","verb":"watch","userAgent":"fleetq-manager","requestReceivedTimestamp":"` + at("02") + `","objectRef":{"resource":"jobs"}}`,
		`{"stage":"ResponseComplete","verb":"watch","userAgent":"fleetq-manager","requestReceivedTimestamp":"` + at("02") + `","objectRef":{"resource":"jobs"}}`,
		`{"stage":"ResponseComplete","verb":"update","userAgent":"kube-controller-manager/v1.37.2","requestReceivedTimestamp":"` + at("03") + `","objectRef":{"resource":"jobs","subresource":"status"}}`,
		`{"stage":"ResponseComplete","verb":"get","userAgent":"fleetq-agent","requestReceivedTimestamp":"` + at("04") + `","objectRef":{"resource":"leases"}}`,
		`{"stage":"ResponseComplete","verb":"create","userAgent":"fleetq-manager","requestReceivedTimestamp":"` + at("30") + `","objectRef":{"resource":"workloads"}}`,
	}
	path := filepath.Join(t.TempDir(), "audit.log")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	from, _ := time.Parse(time.RFC3339, "2026-12-02T10:00:00Z")
	f := &Fleetq{}
	counts, writes, err := readAudit(path, from, from.Add(10*time.Second), func(ua string) string { return f.Role(lab.RoleManagement, ua) })
	if err != nil {
		t.Fatal(err)
	}
	want := AuditCounts{
		"manager": {"create": 1, "patch": 1, "watch": 1},
		"other":   {"update": 1},
		"agent":   {"get": 1},
	}
	if diff := cmp.Diff(want, counts); diff != "" {
		t.Errorf("counts (-want +got):\n%s", diff)
	}
	wantWrites := ResourceWrites{"manager": {"create workloads": 1, "patch workloads/status": 1}, "other": {"update jobs/status": 1}}
	if diff := cmp.Diff(wantWrites, writes); diff != "" {
		t.Errorf("writes (-want +got):\n%s", diff)
	}
}

func TestKueueRoles(t *testing.T) {
	k := &Kueue{}
	cases := map[string]struct {
		cluster lab.Role
		ua      string
		want    string
	}{
		"kueue on the management cluster":  {lab.RoleManagement, "kueue/v0.17.0 (linux/amd64) abcd012", "manager"},
		"multikueue's clients on a worker": {lab.RoleWorker, "kueue-manager/v0.0.0 (linux/amd64) kubernetes/$Format", "manager"},
		"the worker's own kueue":           {lab.RoleWorker, "kueue/v0.17.0 (linux/amd64) abcd012", "agent"},
		"the job controller":               {lab.RoleWorker, "kube-controller-manager/v1.37.2", ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := k.Role(tc.cluster, tc.ua); got != tc.want {
				t.Errorf("Role(%s, %q) = %q, want %q", tc.cluster, tc.ua, got, tc.want)
			}
		})
	}
}

func TestComputeFigures(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	s := func(d float64) time.Time { return t0.Add(time.Duration(d * float64(time.Second))) }
	r := &RunResult{
		Start: t0, End: s(10), Finished: true, Capacity: 4,
		Records: []Record{
			{Submitted: s(0), Admitted: s(1), Running: s(2), Finished: s(6), Amount: 2, Holds: []Interval{{s(1), s(6)}}},
			{Submitted: s(0), Admitted: s(3), Running: s(4), Finished: s(10), Amount: 2, Evictions: 1, Holds: []Interval{{s(3), s(10)}}},
		},
		Audit: map[string]AuditCounts{
			ManagementCluster: {"manager": {"patch": 4, "get": 2}, "other": {"create": 2}},
			"us-east":         {"manager": {"create": 2}, "agent": {"patch": 6, "watch": 1}},
		},
		Requests:   map[string]RequestCounts{ManagementCluster: {"post": 2, "patch": 4, "get": 2}, "us-east": {"post": 2, "patch": 6}},
		Procs:      []ProcResult{{Role: "manager", CPUSeconds: 1.5, PeakRSSMiB: 80}, {Role: "agent", CPUSeconds: 0.5}},
		SubmitSpan: 3 * time.Second, BareSubmitSpan: 2 * time.Second,
		Webhooks: map[string]Webhooks{ManagementCluster: {"m CREATE": {Calls: 2, Seconds: 0.01}, "v CREATE": {Calls: 1, Seconds: 0.01}}, "us-east": {"m CREATE": {Calls: 1, Seconds: 0.01}}},
	}
	got := Compute(r)
	want := map[string]float64{
		"workloads": 2, "finished": 2, "evictions": 1,
		"admitted/s": 2.0 / 3, "dispatched/s (running)": 0.5,
		"time to admission p50": 1, "time to admission p95": 3, "time to admission p99": 3,
		"submit→running p50": 2, "submit→running p95": 4, "submit→running p99": 4,
		"makespan (first submit→last finished)": 10,
		"manager CPU": 1.5, "manager peak RSS": 80, "agents CPU (all workers)": 0.5,
		"manager requests/wl (management)": 3, "manager writes/wl (management)": 2,
		"manager requests/wl (workers)": 1, "manager writes/wl (workers)": 1,
		"agent requests/wl (workers)": 3.5, "agent writes/wl (workers)": 3,
		"all clients requests/wl (apiserver_request_total, all clusters)": 8,
		"all clients writes/wl (apiserver_request_total, all clusters)":   7,
		"manager writes/admitted wl":                                      2,
		"first wave's creates":                                            3, "first wave's creates, nothing installed": 2,
		"submission slowdown (creates / nothing installed)": 1.5,
		"admission webhook calls/wl (all clusters)":         2, "admission webhook time per call": 7.5,
		// Held: 2 of 4 at t=1,2 and t=6..9; 4 of 4 at t=3,4,5; none at t=0 and t=10 → 50% over 11 samples.
		"mean quota utilisation": 100 * (2*2 + 4*3 + 2*4) / 4.0 / 11,
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
		t.Errorf("figures (-want +got):\n%s", diff)
	}
}

func TestSubmissionIsTimedAgainstABareClusterOnlyForABurstOnTheManagementCluster(t *testing.T) {
	burst := &Scenario{Waves: []Wave{{Count: 10}}}
	steady := &Scenario{Waves: []Wave{{Count: 10, Rate: 2}}}
	chain := &Scenario{Chain: 3, Waves: []Wave{{Count: 4}}}
	cases := map[string]struct {
		s    *Scenario
		sys  System
		want bool
	}{
		"a burst to fleetq":          {burst, &Fleetq{}, true},
		"a burst to Kueue":           {burst, &Kueue{}, true},
		"a burst created in workers": {burst, &Direct{}, false},
		"a steady arrival":           {steady, &Fleetq{}, false},
		"a chain":                    {chain, &Fleetq{}, false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := measuresSubmission(tc.s, tc.sys); got != tc.want {
				t.Errorf("measuresSubmission = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestProbeScenarioValidation(t *testing.T) {
	cases := map[string]struct {
		change func(s *Scenario)
		want   string
	}{
		"as checked in":                 {func(*Scenario) {}, ""},
		"apiserver mode without probes": {func(s *Scenario) { s.Probes = 0 }, "runs no pod, so no job finishes: set probes"},
		"one probe":                     {func(s *Scenario) { s.Probes = 1 }, "set probes to 2 or more"},
		"probes and a chain":            {func(s *Scenario) { s.Chain = 3 }, "probes and chain measure different things"},
		"a quota too small for a job":   {func(s *Scenario) { s.Queues.NominalShare = 0.001 }, `fits no "gpu" job in any flavor; raise nominalShare or add nodes`},
		"an unknown mode":               {func(s *Scenario) { s.Mode = "pods" }, `mode "pods" is neither full nor apiserver`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s, err := LoadScenario(filepath.Join("scenarios", "multi-scale.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			tc.change(s)
			err = s.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("err = %v, want none", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("err = %v, want one saying %q", err, tc.want)
			}
		})
	}
}

func TestProbeQueuesHaveNoCohortAndATeamOfTheirOwn(t *testing.T) {
	s, err := LoadScenario(filepath.Join("scenarios", "multi-scale.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	s = s.Scaled(0.05) // 1 cohort × 25 queues, 6 probes
	cohorts, namespaces := map[string]string{}, 0
	for _, o := range managementObjects(s) {
		switch o := o.(type) {
		case *kueue.ClusterQueue:
			cohorts[o.Name] = string(o.Spec.CohortName)
		case *corev1.Namespace:
			namespaces++
		}
	}
	if len(cohorts) != 31 || namespaces != 31 {
		t.Fatalf("%d ClusterQueues and %d namespaces, want 25 + 6 probes of each", len(cohorts), namespaces)
	}
	if cohorts[ClusterQueueName(24)] != "cohort-0" || cohorts[ClusterQueueName(25)] != "" || cohorts[ClusterQueueName(30)] != "" {
		t.Errorf("cohorts %v: the load's queues share cohort-0, the probes (cq-25…cq-30) none", cohorts)
	}
	for _, sub := range plan(s)[0] {
		if s.isProbe(sub.queue) {
			t.Fatalf("the load submits to probe queue %d", sub.queue)
		}
	}
	recs := withoutProbes(s, []Record{{Key: "team-3/gpu-3", Queue: 3}, {Key: probeKey(25), Queue: 25}})
	if len(recs) != 1 || recs[0].Queue != 3 {
		t.Errorf("withoutProbes kept %v, want only the load's record", recs)
	}
}

func TestScaleFigures(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	r := &RunResult{Start: t0, End: t0.Add(time.Minute), Finished: true, Records: []Record{{Submitted: t0}},
		Scale: &ScaleResult{Settled: t0.Add(40 * time.Second), Reserved: 1000, Pending: 20000,
			Probes:  []time.Duration{300 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond},
			Restart: 8 * time.Second, RestartCreated: 5 * time.Second, RestartPeakRSSMiB: 150}}
	got := Compute(r)
	want := map[string]float64{
		"pending when settled": 20000, "load reserved (first submit→last reservation)": 40,
		"one job's quota, the load waiting elsewhere, p50": 0.2, "one job's quota, the load waiting elsewhere, max": 0.3,
		"manager restart→first admission": 8, "manager restart→webhook took the job": 5, "manager peak RSS after restart": 150,
	}
	for k, v := range want {
		if math.Abs(got[k]-v) > 1e-9 {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	// A restart probe that never got quota is measured as far as it waited: a lower bound.
	r.Scale.RestartTimedOut = true
	if _, lb := compute(r); !lb["manager restart→first admission"] {
		t.Errorf("a timed-out restart probe is not a lower bound")
	}
}

func TestScenarioRefusesANegativeRate(t *testing.T) {
	s, err := LoadScenario(filepath.Join("scenarios", "multi-steady.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	s.Waves[0].Rate = -1
	if err := s.Validate(); err == nil || !strings.Contains(err.Error(), "rate -1 is negative") {
		t.Errorf("err = %v, want one naming the negative rate", err)
	}
}

func TestTimedOutRunCountsWaitingWorkloadsAsLowerBounds(t *testing.T) {
	t0 := time.Unix(1000, 0)
	s := func(sec float64) time.Time { return t0.Add(time.Duration(sec * float64(time.Second))) }
	r := &RunResult{
		Start: t0, End: s(10), Finished: false,
		Records: []Record{
			{Submitted: s(0), Admitted: s(1), Running: s(2)},
			{Submitted: s(0), Admitted: s(4)},
			{Submitted: s(5)},
			{Submitted: s(0)},
		},
	}
	f, lb := compute(r)
	// Running: 2 done; censored 10 (never ran, submitted at 0), 5 (submitted at 5), 10.
	want := map[string]float64{
		"workloads": 4, "finished": 0, "evictions": 0,
		"admitted/s": 2.0 / 10, "dispatched/s (running)": 1.0 / 10,
		"time to admission p50": 4, "time to admission p95": 10, "time to admission p99": 10,
		"submit→running p50": 5, "submit→running p95": 10, "submit→running p99": 10,
		"manager requests/wl (management)": 0, "manager writes/wl (management)": 0,
		"all clients requests/wl (apiserver_request_total, all clusters)": 0,
		"all clients writes/wl (apiserver_request_total, all clusters)":   0,
		"manager writes/admitted wl":                                      0,
	}
	if diff := cmp.Diff(want, f); diff != "" {
		t.Errorf("figures (-want +got):\n%s", diff)
	}
	// Admission p50 is 4, below every censored wait (5, 10): exact. Everything at or above a
	// censored wait is a lower bound.
	wantLB := map[string]bool{
		"time to admission p95": true, "time to admission p99": true,
		"submit→running p50": true, "submit→running p95": true, "submit→running p99": true,
		// Costs so far only grow with the workloads still to come; per admitted workload is exact.
		"manager requests/wl (management)": true, "manager writes/wl (management)": true,
		"all clients requests/wl (apiserver_request_total, all clusters)": true,
		"all clients writes/wl (apiserver_request_total, all clusters)":   true,
	}
	if diff := cmp.Diff(wantLB, lb); diff != "" {
		t.Errorf("lower bounds (-want +got):\n%s", diff)
	}
	if got := formatSpread(Spread{Median: 10, N: 1, LowerBound: true}); got != "≥ 10.0" {
		t.Errorf("formatSpread = %q", got)
	}
	// A finished run has no lower bounds.
	r.Finished = true
	if _, lb := compute(r); len(lb) != 0 {
		t.Errorf("finished run: lower bounds %v", lb)
	}
}

func TestRatioSaysWhenFleetqIsBetter(t *testing.T) {
	cases := map[string]struct {
		better        int
		fleetq, kueue float64
		want          string
	}{
		"higher is better": {+1, 30, 10, "3.00×"},
		"lower is better":  {-1, 0.5, 1.5, "3.00×"},
		"worse":            {-1, 2, 1, "0.50×"},
		"informational":    {0, 1, 2, ""},
		// A system that timed out only bounds its latency from below.
		"kueue bound":  {-1, 2, 300, "≥ 150.00×"},
		"fleetq bound": {-1, 300, 600, "≤ 2.00×"},
		"both bound":   {-1, 300, 600, "?"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f, k := Spread{Median: tc.fleetq, N: 1}, Spread{Median: tc.kueue, N: 1}
			f.LowerBound = name == "fleetq bound" || name == "both bound"
			k.LowerBound = name == "kueue bound" || name == "both bound"
			got := ratio(figureDef{Better: tc.better}, f, k)
			if got != tc.want {
				t.Errorf("ratio = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestJobForIsTheSameForBothSystems(t *testing.T) {
	c := Class{Name: "gpu", Pods: 2, Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), lab.GPUResource: resource.MustParse("1")}, Priority: 100}
	c.RunTime.Duration = 30 * time.Second
	j := jobFor(submission{index: 7, class: c, queue: 1})
	got := []string{j.Namespace, j.Name, j.Labels[kueue.QueueNameLabel], j.Labels[kueue.PriorityClassLabel], j.Spec.Template.Annotations[lab.RunTimeAnnotation]}
	if diff := cmp.Diff([]string{"team-1", "gpu-7", LocalQueueName, "priority-100", "30s"}, got); diff != "" {
		t.Errorf("job (-want +got):\n%s", diff)
	}
	if j.Spec.Suspend != nil || j.Spec.ManagedBy != nil {
		t.Errorf("each system's webhook suspends the job and sets managedBy, not the bench")
	}
	if q := j.Spec.Template.Spec.Containers[0].Resources.Limits[lab.GPUResource]; q.Value() != 1 {
		t.Errorf("GPU limit = %v, want the request", q)
	}
}

func TestKueueWebhooksKeptAndCalledByURL(t *testing.T) {
	dir := t.TempDir()
	manifests := `apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  name: mutating-webhook-configuration
webhooks:
- name: mclusterqueue.kb.io
  admissionReviewVersions: [v1]
  sideEffects: None
  clientConfig:
    service: {name: webhook-service, namespace: system, path: /mutate-kueue-x-k8s-io-v1beta2-clusterqueue}
- name: mpod.kb.io
  admissionReviewVersions: [v1]
  sideEffects: None
  clientConfig:
    service: {name: webhook-service, namespace: system, path: /mutate--v1-pod}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: validating-webhook-configuration
webhooks:
- name: vjob.kb.io
  admissionReviewVersions: [v1]
  sideEffects: None
  clientConfig:
    service: {name: webhook-service, namespace: system, path: /validate-batch-v1-job}
`
	path := filepath.Join(dir, "config", "components", "webhook")
	if err := os.MkdirAll(path, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(path, "manifests.yaml"), []byte(manifests), 0o644); err != nil {
		t.Fatal(err)
	}
	objs, err := (&Kueue{ModuleDir: dir}).webhookConfigurations("https://127.0.0.1:9443", []byte("CA"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range objs {
		switch cfg := o.(type) {
		case *admissionv1.MutatingWebhookConfiguration:
			for _, h := range cfg.Webhooks {
				got = append(got, cfg.Name+" "+h.Name+" "+*h.ClientConfig.URL+" "+string(h.ClientConfig.CABundle))
			}
		case *admissionv1.ValidatingWebhookConfiguration:
			for _, h := range cfg.Webhooks {
				got = append(got, cfg.Name+" "+h.Name+" "+*h.ClientConfig.URL+" "+string(h.ClientConfig.CABundle))
			}
		}
	}
	want := []string{
		"kueue-mutating-webhook-configuration mclusterqueue.kb.io https://127.0.0.1:9443/mutate-kueue-x-k8s-io-v1beta2-clusterqueue CA",
		"kueue-validating-webhook-configuration vjob.kb.io https://127.0.0.1:9443/validate-batch-v1-job CA",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("webhooks (-want +got):\n%s", diff)
	}
}

func TestSettleWaitsForTheLoadQueuedAndReservationsSteady(t *testing.T) {
	quiet := func(string, ...any) {}
	t.Run("some reserved", func(t *testing.T) {
		rec := NewRecorder()
		now := time.Now()
		for i, reserved := range []bool{true, false, true} {
			r := rec.Expect(fmt.Sprintf("team-0/gpu-%d", i), "gpu", 0, 1)
			rec.Mark(r.Key, func(r *Record) {
				r.Queued = now
				if reserved {
					r.QuotaReserved = now
				}
			})
		}
		got, err := settle(context.Background(), rec, 3, 100*time.Millisecond, nil, quiet)
		if err != nil {
			t.Fatal(err)
		}
		if got.Reserved != 2 || got.Pending != 1 {
			t.Errorf("reserved %d, pending %d; want 2 and 1", got.Reserved, got.Pending)
		}
	})
	t.Run("nothing reserved", func(t *testing.T) {
		rec := NewRecorder()
		r := rec.Expect("team-0/gpu-0", "gpu", 0, 1)
		rec.Mark(r.Key, func(r *Record) { r.Queued = time.Now() })
		_, err := settle(context.Background(), rec, 1, 100*time.Millisecond, nil, quiet)
		if err == nil || !strings.Contains(err.Error(), "none of the 1 workloads got quota") {
			t.Errorf("err = %v, want one saying nothing got quota", err)
		}
	})
	t.Run("not all queued", func(t *testing.T) {
		rec := NewRecorder()
		rec.Expect("team-0/gpu-0", "gpu", 0, 1)
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		if _, err := settle(ctx, rec, 1, 100*time.Millisecond, nil, quiet); err == nil || !strings.Contains(err.Error(), "0 of 1 workloads queued") {
			t.Errorf("err = %v, want one saying the load is not queued", err)
		}
	})
}
