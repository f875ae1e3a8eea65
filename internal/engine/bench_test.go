package engine_test

import (
	"fmt"
	"math/rand"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/fleetq/fleetq/internal/engine"
	. "github.com/fleetq/fleetq/internal/engine/enginetest"
	"github.com/fleetq/fleetq/internal/engine/queue"
)

// benchWorld is a deterministic cluster: cqs queues in cohorts cohorts, two flavors of cpu and
// memory, and pending workloads whose total demand is about twice the total quota, so a cycle
// both admits (about half) and rejects (and parks) a lot.
func benchWorld(pending, cqs, cohorts int, reclaim bool) (engine.Input, []engine.Workload) {
	r := rand.New(rand.NewSource(int64(pending*7 + cqs)))
	perQueue := max(1, pending/cqs)
	// Mean request is 2.5 pods × 2.5 cpu; quota per flavor covers a quarter of the demand.
	cpuPerFlavor := max(4, perQueue*25/4/4)
	in := engine.Input{Flavors: []engine.ResourceFlavor{
		MakeFlavor("on-demand").NodeLabel("capacity", "on-demand").Obj(),
		MakeFlavor("spot").NodeLabel("capacity", "spot").Obj(),
	}}
	for i := 0; i < cqs; i++ {
		cq := MakeClusterQueue(fmt.Sprintf("cq-%04d", i)).Cohort(fmt.Sprintf("cohort-%d", i%cohorts)).ResourceGroup(
			MakeFlavorQuotas("on-demand").Resource("cpu", fmt.Sprint(cpuPerFlavor)).Resource("memory", fmt.Sprintf("%dGi", 4*cpuPerFlavor)).Obj(),
			MakeFlavorQuotas("spot").Resource("cpu", fmt.Sprint(cpuPerFlavor)).Resource("memory", fmt.Sprintf("%dGi", 4*cpuPerFlavor)).Obj(),
		)
		if reclaim {
			cq.ReclaimWithinCohort(engine.PreemptLowerPriority).WithinClusterQueue(engine.PreemptLowerPriority)
			// Priority-0 work already holds half of the on-demand quota: preemption candidates.
			for k := 0; k < cpuPerFlavor/4; k++ {
				in.Admitted = append(in.Admitted, MakeWorkload(fmt.Sprintf("ns-%d/running-%d", i, k), fmt.Sprintf("cq-%04d", i)).
					Request(1, "cpu", "2", "memory", "4Gi").AdmittedIn("on-demand", int64(k)).Obj())
			}
		}
		in.ClusterQueues = append(in.ClusterQueues, cq.Obj())
	}
	var ws []engine.Workload
	for i := 0; i < pending; i++ {
		cq := r.Intn(cqs)
		ws = append(ws, MakeWorkload(fmt.Sprintf("ns-%d/w-%06d", cq, i), fmt.Sprintf("cq-%04d", cq)).
			Priority(int32(r.Intn(10))).Timestamp(int64(i)).
			Request(int32(1+r.Intn(4)), "cpu", fmt.Sprint(1+r.Intn(4)), "memory", fmt.Sprintf("%dGi", 1+r.Intn(8))).Obj())
	}
	return in, ws
}

func fillQueues(ws []engine.Workload) *queue.Manager {
	q := queue.New()
	for i := range ws {
		q.Add(&ws[i])
	}
	return q
}

// BenchmarkCycle times one admission cycle from full queues. The snapshot is built outside the
// timer because the manager maintains it incrementally; the cycle's private copy of usage is
// inside. Filling the queues is outside too (they are also maintained incrementally).
func BenchmarkCycle(b *testing.B) { benchmarkCycle(b, false) }

// BenchmarkCyclePreempting is BenchmarkCycle where priority-0 work already holds half of each
// queue's on-demand quota and every queue may preempt lower priorities, in the queue and by
// reclaiming in the cohort: every head that does not fit runs a victim search.
func BenchmarkCyclePreempting(b *testing.B) { benchmarkCycle(b, true) }

// cycleShape is one world of the cycle benchmarks.
type cycleShape struct{ pending, cqs, cohorts int }

// cycleShapes are a grid in 10 cohorts, and issue 19's scale scenario (20k pending over 500
// queues in 20 cohorts).
func cycleShapes() []cycleShape {
	var out []cycleShape
	for _, pending := range []int{1_000, 10_000, 100_000} {
		for _, cqs := range []int{100, 1_000} {
			out = append(out, cycleShape{pending, cqs, 10})
		}
	}
	return append(out, cycleShape{20_000, 500, 20})
}

func benchmarkCycle(b *testing.B, reclaim bool) {
	for _, shape := range cycleShapes() {
		b.Run(fmt.Sprintf("pending=%s/cqs=%s/cohorts=%d", short(shape.pending), short(shape.cqs), shape.cohorts), func(b *testing.B) {
			in, ws := benchWorld(shape.pending, shape.cqs, shape.cohorts, reclaim)
			snap := engine.NewSnapshot(in)
			admitted, preemptions := 0, 0
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				q := fillQueues(ws)
				b.StartTimer()
				for _, d := range engine.Run(snap, q, engine.Options{}) {
					switch d.Kind {
					case engine.Admit:
						admitted++
					case engine.Preempt:
						preemptions++
					}
				}
			}
			b.ReportMetric(float64(admitted)/float64(b.N), "admitted/op")
			if reclaim {
				b.ReportMetric(float64(preemptions)/float64(b.N), "preemptions/op")
			}
			if admitted > 0 {
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(admitted), "ns/admission")
			}
		})
	}
}

// BenchmarkPreemption times the victim search of one preemptor over 1k admitted candidates, in
// its own queue and by reclaiming from a borrowing queue of its cohort.
func BenchmarkPreemption(b *testing.B) {
	for _, mode := range []string{"within", "reclaim"} {
		b.Run(fmt.Sprintf("candidates=1k/%s", mode), func(b *testing.B) {
			r := rand.New(rand.NewSource(1))
			in := engine.Input{Flavors: []engine.ResourceFlavor{MakeFlavor("f").Obj()}}
			victimQueue := "a"
			if mode == "within" {
				in.ClusterQueues = []engine.ClusterQueue{
					MakeClusterQueue("a").ResourceGroup(MakeFlavorQuotas("f").Resource("cpu", "1000").Obj()).WithinClusterQueue(engine.PreemptLowerPriority).Obj(),
				}
			} else {
				victimQueue = "b"
				in.ClusterQueues = []engine.ClusterQueue{
					MakeClusterQueue("a").Cohort("c").ResourceGroup(MakeFlavorQuotas("f").Resource("cpu", "500").Obj()).ReclaimWithinCohort(engine.PreemptAny).Obj(),
					MakeClusterQueue("b").Cohort("c").ResourceGroup(MakeFlavorQuotas("f").Resource("cpu", "500").Obj()).Obj(),
				}
			}
			for i := 0; i < 1000; i++ {
				in.Admitted = append(in.Admitted, MakeWorkload(fmt.Sprintf("ns/v-%04d", i), victimQueue).Priority(int32(r.Intn(5))).
					Request(1, "cpu", "1").AdmittedIn("f", int64(r.Intn(100000))).Obj())
			}
			snap := engine.NewSnapshot(in)
			preemptor := MakeWorkload("ns/preemptor", "a").Priority(100).Request(8, "cpu", "1").Obj()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				q := queue.New()
				w := preemptor
				q.Add(&w)
				ds := engine.Run(snap, q, engine.Options{})
				if len(ds) != 1 || ds[0].Kind != engine.Preempt || len(ds[0].Victims) != 8 {
					b.Fatalf("unexpected decisions: %+v", ds)
				}
			}
		})
	}
}

func short(n int) string {
	switch {
	case n >= 1000 && n%1000 == 0:
		return fmt.Sprintf("%dk", n/1000)
	default:
		return fmt.Sprint(n)
	}
}

var _ = corev1.ResourceCPU
