package bench

import (
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/e2e/lab"
)

// newDirect is a Direct as Install leaves it, without the namespaces.
func newDirect(s *Scenario) *Direct {
	return &Direct{slots: directSlots(s), turns: map[string][]int64{}}
}

func TestDirectSpreadsABurstByCapacityAndNeverPastIt(t *testing.T) {
	s, err := LoadScenario(filepath.Join("scenarios", "multi-burst.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	s = s.Scaled(0.2)
	d := newDirect(s)
	gpus := map[string]int{}
	for _, sl := range d.slots {
		q := sl.capacity[lab.GPUResource]
		gpus[sl.cluster] += int(q.Value()) * sl.pool.Count
	}
	total := 0
	for _, n := range gpus {
		total += n
	}
	subs := plan(s)[0]
	got := map[string]int{}
	for _, sub := range subs {
		job := jobFor(sub)
		cluster, err := d.Place(sub, job)
		if err != nil {
			t.Fatal(err)
		}
		got[cluster]++
	}
	for cluster, n := range gpus {
		share := float64(len(subs)) * float64(n) / float64(total)
		if math.Abs(float64(got[cluster])-share) > 1 || got[cluster] > n {
			t.Errorf("%s got %d jobs, want its share %.1f of %d (it has %d GPUs); all: %v", cluster, got[cluster], share, len(subs), n, got)
		}
	}
}

func TestDirectJobCarriesItsFlavorsNodeSelectorNotTheQueue(t *testing.T) {
	s := &Scenario{Name: "a100 only", Topology: MultiCluster,
		Workers: []Worker{{Name: "us-east", Pools: []Pool{{Type: "a100", Count: 2}}}},
		Flavors: []Flavor{{Name: "a100-flavor", PoolType: "a100"}}}
	d := newDirect(s)
	c := Class{Name: "gpu", Pods: 1, Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), lab.GPUResource: resource.MustParse("1")}, Priority: 100}
	sub := submission{index: 3, class: c, queue: 0}
	job := jobFor(sub)
	cluster, err := d.Place(sub, job)
	if err != nil {
		t.Fatal(err)
	}
	if cluster != "us-east" {
		t.Errorf("cluster = %q, want us-east", cluster)
	}
	if _, ok := job.Labels[kueue.QueueNameLabel]; ok {
		t.Errorf("job keeps the queue label %v: no queue exists where it is created", job.Labels)
	}
	if _, ok := job.Labels[kueue.PriorityClassLabel]; ok {
		t.Errorf("job keeps the priority class label %v", job.Labels)
	}
	spec := job.Spec.Template.Spec
	if spec.NodeSelector[lab.PoolLabel] != "a100" {
		t.Errorf("node selector = %v, want %s=a100", spec.NodeSelector, lab.PoolLabel)
	}
	// The A100 nodes are tainted: without the flavor's toleration the pods would never bind.
	if len(spec.Tolerations) != 1 || spec.Tolerations[0].Key != string(lab.GPUResource) {
		t.Errorf("tolerations = %v, want the a100 flavor's toleration of the %s taint", spec.Tolerations, lab.GPUResource)
	}
}

func TestDirectRefusesAClassNoPoolFits(t *testing.T) {
	s := &Scenario{Name: "small", Topology: MultiCluster,
		Workers: []Worker{{Name: "w", Pools: []Pool{{Type: "l4", Count: 1}}}},
		Flavors: []Flavor{{Name: "l4-flavor", PoolType: "l4"}}}
	d := newDirect(s)
	huge := Class{Name: "huge", Pods: 1, Requests: corev1.ResourceList{lab.GPUResource: resource.MustParse("16")}}
	sub := submission{class: huge}
	_, err := d.Place(sub, jobFor(sub))
	if err == nil || !strings.Contains(err.Error(), `class "huge"`) {
		t.Errorf("err = %v, want one naming the class no pool fits", err)
	}
}

func TestReportComparesFleetqWithKueueAndTheCeiling(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	s := func(d float64) time.Time { return t0.Add(time.Duration(d * float64(time.Second))) }
	run := func(system string, running float64) *RunResult {
		return &RunResult{Scenario: "burst", System: system, Start: t0, End: s(20), Finished: true,
			Records: []Record{{Submitted: s(0), Running: s(running), Finished: s(running + 1), Amount: 1}}}
	}
	rep := &Report{Scenarios: []*Scenario{{Name: "burst"}},
		// Results in an order the columns must not follow.
		Results: []*RunResult{run(DirectName, 2), run("kueue", 12), run("fleetq", 3)}}
	md := rep.Markdown()
	header := "| figure | fleetq | kueue | direct | fleetq advantage over Kueue (× ; >1 = fleetq better) | fleetq / direct (the ceiling) |"
	if !strings.Contains(md, header) {
		t.Fatalf("no header %q in:\n%s", header, md)
	}
	var row string
	for _, l := range strings.Split(md, "\n") {
		if strings.HasPrefix(l, "| submit→running p50 ") {
			row = l
		}
	}
	// Kueue took 12 s, fleetq 3 s (4× better), direct 2 s (fleetq at 1.5× the ceiling).
	if !strings.HasSuffix(row, " 4.00× | 1.50 (+1.00 s) |") {
		t.Errorf("submit→running p50 row = %q, want Kueue's ratio 4.00× then fleetq / direct 1.50, 1 s more", row)
	}
}

func TestOfCeiling(t *testing.T) {
	rate, latency := figureDef{Name: "dispatched/s (running)", Unit: "1/s"}, figureDef{Name: "submit→running p95", Unit: "s"}
	cases := map[string]struct {
		fd             figureDef
		fleetq, direct Spread
		want           string
	}{
		"ratio":                  {rate, Spread{Median: 3, N: 1}, Spread{Median: 2, N: 1}, "1.50"},
		"a time with its excess": {latency, Spread{Median: 2.5, N: 1}, Spread{Median: 2, N: 1}, "1.25 (+0.50 s)"},
		"a time below direct's":  {latency, Spread{Median: 1.5, N: 1}, Spread{Median: 2, N: 1}, "0.75 (-0.50 s)"},
		"fleetq timed out":       {rate, Spread{Median: 3, N: 1, LowerBound: true}, Spread{Median: 2, N: 1}, "≥ 1.50"},
		"a time, timed out":      {latency, Spread{Median: 3, N: 1, LowerBound: true}, Spread{Median: 2, N: 1}, "≥ 1.50 (≥ +1.00 s)"},
		"direct timed out":       {rate, Spread{Median: 3, N: 1}, Spread{Median: 2, N: 1, LowerBound: true}, "?"},
		"direct not measured":    {rate, Spread{Median: 3, N: 1}, Spread{}, ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := ofCeiling(tc.fd, tc.fleetq, tc.direct); got != tc.want {
				t.Errorf("ofCeiling = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestDirectRunHasNoManagerFigures(t *testing.T) {
	t0 := time.Unix(1000, 0)
	r := &RunResult{System: DirectName, Start: t0, End: t0.Add(5 * time.Second), Finished: true,
		Records:  []Record{{Submitted: t0, Running: t0.Add(time.Second), Finished: t0.Add(2 * time.Second), Amount: 1}},
		Audit:    map[string]AuditCounts{ManagementCluster: {"other": {"create": 1}}, "us-east": {"other": {"create": 1}}},
		Requests: map[string]RequestCounts{"us-east": {"post": 1}}}
	got := Compute(r)
	for _, name := range []string{"manager writes/wl (management)", "agent writes/wl (workers)", "mean quota utilisation"} {
		if v, ok := got[name]; ok {
			t.Errorf("%s = %v: direct has no manager, agent or quota", name, v)
		}
	}
	if got["all clients writes/wl (apiserver_request_total, all clusters)"] != 1 {
		t.Errorf("all clients writes/wl = %v, want 1: the API servers' own count stays", got["all clients writes/wl (apiserver_request_total, all clusters)"])
	}
}

func TestReportListsEachWebhooksCallsAndWait(t *testing.T) {
	r := &RunResult{System: "fleetq", Records: make([]Record, 4),
		Webhooks: map[string]Webhooks{ManagementCluster: {"mjob.fleetq.dev CREATE": {Calls: 4, Seconds: 0.1}, "vjob.fleetq.dev UPDATE": {Calls: 2, Seconds: 0.01}}}}
	got := webhooksTable("fleetq", r)
	for _, row := range []string{
		"| management | mjob.fleetq.dev CREATE | 4 | 1.00 | 25.0 |",
		"| management | vjob.fleetq.dev UPDATE | 2 | 0.50 | 5.0 |",
	} {
		if !strings.Contains(got, row) {
			t.Errorf("no row %q in:\n%s", row, got)
		}
	}
	if webhooksTable(DirectName, &RunResult{}) != "" {
		t.Errorf("a run without webhook calls gets a table")
	}
}
