package engine

import (
	"fmt"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

// FuzzCycle drives random snapshots through random event sequences (new workloads, cycles,
// finished workloads, completed evictions) and checks after every cycle that:
//   - decisions are deterministic: the same snapshot and queues give the same decisions;
//   - every admission fits where it was taken, and no queue or cohort ever exceeds its limits;
//   - every victim is one the policies expose, and every victim set is minimal: without the
//     victims the preemptor fits, and returning any one of them breaks the fit;
//   - each examined workload gets exactly one decision.
//
// Run it with: go test -run XXX -fuzz FuzzCycle ./internal/engine/
func FuzzCycle(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("fleetq admission engine seed: cohorts, borrowing and preemption"))
	f.Add([]byte{1, 3, 2, 5, 7, 9, 200, 13, 0, 0, 4, 4, 4, 4, 77, 1, 2, 3, 250, 251, 252, 1, 1, 1, 1, 1, 1, 1, 1})
	f.Fuzz(runFuzzBody)
}

func runFuzzBody(t *testing.T, data []byte) {
	src := &byteSource{data: data}
	in, opts := randomInput(src)
	snap := NewSnapshot(in)
	if v := snap.LimitViolations(); len(v) > 0 {
		t.Fatalf("empty snapshot violates limits: %v", v)
	}
	q := newTestQueues()
	var ts int64
	pending := map[string]Workload{}
	for step := 0; step < 40 && !src.done(); step++ {
		switch op := src.intn(6); {
		case op <= 2:
			ts++
			w := randomWorkload(src, in, ts)
			pending[w.Key] = w
			q.add(w)
		case op == 3:
			cycleAndCheck(t, snap, q, opts, pending, ts)
		case op == 4:
			keys := admittedKeys(snap, false)
			if len(keys) > 0 {
				cq, _ := snap.Remove(keys[src.intn(len(keys))])
				q.wake(snap.AffectedQueues(Event{Kind: QuotaFreed, Name: cq}))
			}
		default:
			for _, k := range admittedKeys(snap, true) {
				cq, _ := snap.Remove(k)
				q.wake(snap.AffectedQueues(Event{Kind: QuotaFreed, Name: cq}))
			}
		}
	}
	cycleAndCheck(t, snap, q, opts, pending, ts)
}

func admittedKeys(s *Snapshot, evicting bool) []string {
	var keys []string
	for k, a := range s.admitted {
		if a.evicting == evicting {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}

func cycleAndCheck(t *testing.T, snap *Snapshot, q *testQueues, opts Options, pending map[string]Workload, now int64) {
	t.Helper()
	twin := q.clone()
	got := Run(snap, q, opts)
	again := Run(snap, twin, opts)
	if diff := cmp.Diff(got, again); diff != "" {
		t.Fatalf("same snapshot and queues, different decisions (-first +second):\n%s", diff)
	}
	checkDecisions(t, snap, opts, got, pending)
	for _, d := range got {
		switch d.Kind {
		case Admit:
			w := pending[d.Workload]
			w.Admission = d.Admission
			w.AdmittedAt = now
			if err := snap.AddAdmitted(w); err != nil {
				t.Fatalf("AddAdmitted(%s): %v", d.Workload, err)
			}
			delete(pending, d.Workload)
		case Preempt:
			for _, v := range d.Victims {
				if err := snap.SetEvicting(v.Key); err != nil {
					t.Fatalf("SetEvicting(%s): %v", v.Key, err)
				}
			}
		}
	}
	if v := snap.LimitViolations(); len(v) > 0 {
		t.Fatalf("limits exceeded after cycle: %v\ndecisions: %+v", v, got)
	}
}

// checkDecisions replays a cycle's decisions on a fresh copy of the accounting, applying the
// same charges the cycle does (admissions, and the reservation of preemptors and of workloads
// waiting for evictions), and judges each decision against the state at that point.
func checkDecisions(t *testing.T, s *Snapshot, opts Options, ds []Decision, pending map[string]Workload) {
	t.Helper()
	r := &cycle{s: s, opts: opts, evicting: map[string]bool{},
		acc: accounting{s: s, usage: append([]int64(nil), s.usage...)},
		fut: accounting{s: s, usage: append([]int64(nil), s.usage...)}}
	for _, a := range s.evicting {
		r.fut.addAll(a.cq.node, a.usage, -1)
	}
	seen := map[string]bool{}
	for _, d := range ds {
		if seen[d.Workload] {
			t.Fatalf("workload %s decided twice in one cycle", d.Workload)
		}
		seen[d.Workload] = true
		if d.Kind == Pending && d.Reason != WaitingForEvictions {
			continue
		}
		cq := s.cqs[d.ClusterQueue]
		amounts := s.admissionUsage(d.Admission)
		w := pending[d.Workload]
		switch d.Kind {
		case Admit:
			if !r.acc.fits(cq.node, amounts, false) {
				t.Fatalf("admitted %s does not fit in %s", d.Workload, d.ClusterQueue)
			}
		case Preempt:
			checkVictims(t, r, &w, cq, amounts, d)
			for _, v := range d.Victims {
				r.evicting[v.Key] = true
				a := s.admitted[v.Key]
				r.fut.addAll(a.cq.node, a.usage, -1)
			}
		}
		r.acc.addAll(cq.node, amounts, 1)
		r.fut.addAll(cq.node, amounts, 1)
	}
}

func checkVictims(t *testing.T, r *cycle, w *Workload, cq *clusterQueue, amounts []frAmount, d Decision) {
	t.Helper()
	if len(d.Victims) == 0 {
		t.Fatalf("preemption of %s without victims", d.Workload)
	}
	p := cq.spec.Preemption
	root := cq.node.path[0]
	var victims []*admittedWorkload
	for _, v := range d.Victims {
		a, ok := r.s.admitted[v.Key]
		if !ok || a.evicting || r.evicting[v.Key] {
			t.Fatalf("%s: victim %s is not an admitted workload outside eviction", d.Workload, v.Key)
		}
		if a.cq.node.path[0] != root {
			t.Fatalf("%s: victim %s is outside the cohort tree", d.Workload, v.Key)
		}
		protected := ""
		switch v.Reason {
		case InClusterQueue:
			if a.cq != cq || !allowedWithin(p.WithinClusterQueue, w, &a.wl) {
				protected = "withinClusterQueue"
			}
		case InCohortReclamation, InCohortFairSharing, InCohortReclaimWhileBorrowing:
			switch {
			case a.cq == cq || !enabled(p.ReclaimWithinCohort):
				protected = "reclaimWithinCohort"
			case p.ReclaimWithinCohort == PreemptLowerPriority && a.wl.Priority >= w.Priority:
				protected = "reclaimWithinCohort LowerPriority"
			case !r.borrowingAny(a.cq, amounts):
				protected = "not borrowing"
			case v.Reason == InCohortFairSharing && r.opts.FairSharing == nil:
				protected = "fair sharing is off"
			case v.Reason == InCohortReclaimWhileBorrowing && (p.BorrowWithinCohort.Policy != BorrowWithinCohortLowerPriority ||
				a.wl.Priority >= w.Priority ||
				p.BorrowWithinCohort.MaxPriorityThreshold != nil && a.wl.Priority > *p.BorrowWithinCohort.MaxPriorityThreshold):
				protected = "borrowWithinCohort"
			}
		default:
			protected = "unknown reason " + string(v.Reason)
		}
		if protected != "" {
			t.Fatalf("%s (priority %d, queue %s) preempted %s (priority %d, queue %s) which %s protects",
				d.Workload, w.Priority, cq.spec.Name, v.Key, a.wl.Priority, a.cq.spec.Name, protected)
		}
		victims = append(victims, a)
	}
	// Without the victims (evictions under way are already gone in fut) the preemptor must fit,
	// and returning any one victim must break the fit.
	for _, a := range victims {
		r.fut.addAll(a.cq.node, a.usage, -1)
	}
	defer func() {
		for _, a := range victims {
			r.fut.addAll(a.cq.node, a.usage, 1)
		}
	}()
	if !r.fut.fits(cq.node, amounts, false) {
		t.Fatalf("%s does not fit even without its victims %v", d.Workload, d.Victims)
	}
	strict := !r.fut.borrows(cq.node, amounts)
	for _, a := range victims {
		r.fut.addAll(a.cq.node, a.usage, 1)
		stillFits := r.fut.fits(cq.node, amounts, strict)
		r.fut.addAll(a.cq.node, a.usage, -1)
		if stillFits {
			t.Fatalf("%s: victim set %v is not minimal: it fits without preempting %s", d.Workload, d.Victims, a.wl.Key)
		}
	}
}

// byteSource turns fuzz input into choices; once exhausted it answers 0.
type byteSource struct {
	data []byte
	pos  int
}

func (b *byteSource) done() bool { return b.pos >= len(b.data) }

func (b *byteSource) intn(n int) int {
	if n <= 1 || b.done() {
		return 0
	}
	v := int(b.data[b.pos])
	b.pos++
	return v % n
}

func (b *byteSource) chance(percent int) bool { return b.intn(100) < percent }

func randomInput(src *byteSource) (Input, Options) {
	in := Input{Flavors: []ResourceFlavor{
		{Name: "f0"},
		{Name: "f1", NodeTaints: []corev1.Taint{{Key: "spot", Effect: corev1.TaintEffectNoSchedule}},
			Tolerations: []corev1.Toleration{{Key: "spot", Operator: corev1.TolerationOpExists}}},
	}}
	var opts Options
	if src.chance(30) {
		opts.FairSharing = &FairSharingOptions{}
		if src.chance(30) {
			opts.FairSharing.Strategies = []FairSharingStrategy{LessThanInitialShare}
		}
	}
	cohorts := []string{"", "c0", "c1", "c2"}
	for i := 0; i < 3; i++ {
		if !src.chance(60) {
			continue
		}
		c := Cohort{Name: cohorts[i+1], Parent: cohorts[src.intn(len(cohorts))]}
		if src.chance(50) {
			c.ResourceGroups = randomGroups(src, true)
		}
		if src.chance(20) {
			c.FairSharing = &FairSharing{Weight: float64(src.intn(3))}
		}
		in.Cohorts = append(in.Cohorts, c)
	}
	policies := []PreemptionPolicy{PreemptNever, PreemptLowerPriority, PreemptLowerOrNewerEqualPriority}
	reclaims := []PreemptionPolicy{PreemptNever, PreemptLowerPriority, PreemptAny}
	fung := []FungibilityPolicy{"", MayStopSearch, TryNextFlavor}
	n := 2 + src.intn(4)
	for i := 0; i < n; i++ {
		cq := ClusterQueue{
			Name:             fmt.Sprintf("q%d", i),
			Cohort:           cohorts[src.intn(len(cohorts))],
			QueueingStrategy: []QueueingStrategy{BestEffortFIFO, StrictFIFO}[src.intn(2)],
			Preemption: Preemption{
				WithinClusterQueue:  policies[src.intn(3)],
				ReclaimWithinCohort: reclaims[src.intn(3)],
			},
			FlavorFungibility: FlavorFungibility{WhenCanBorrow: fung[src.intn(3)], WhenCanPreempt: fung[src.intn(3)]},
		}
		cq.ResourceGroups = randomGroups(src, cq.Cohort != "")
		if src.chance(30) {
			th := int32(src.intn(4))
			cq.Preemption.BorrowWithinCohort = BorrowWithinCohort{Policy: BorrowWithinCohortLowerPriority}
			if src.chance(50) {
				cq.Preemption.BorrowWithinCohort.MaxPriorityThreshold = &th
			}
		}
		if src.chance(20) {
			cq.FairSharing = &FairSharing{Weight: float64(src.intn(3))}
		}
		if src.chance(5) {
			cq.Stopped = true
		}
		in.ClusterQueues = append(in.ClusterQueues, cq)
	}
	return in, opts
}

func randomGroups(src *byteSource, limits bool) []ResourceGroup {
	covered := []corev1.ResourceName{corev1.ResourceCPU}
	if src.chance(40) {
		covered = append(covered, "example.com/gpu")
	}
	g := ResourceGroup{CoveredResources: covered}
	for _, f := range []string{"f0", "f1"}[:1+src.intn(2)] {
		fq := FlavorQuotas{Name: f}
		for _, r := range covered {
			unit := int64(1)
			if r == corev1.ResourceCPU {
				unit = 1000
			}
			q := ResourceQuota{Name: r, Nominal: int64(src.intn(9)) * unit}
			if limits && src.chance(40) {
				v := int64(src.intn(5)) * unit
				q.BorrowingLimit = &v
			}
			if limits && src.chance(30) {
				v := min(q.Nominal, int64(src.intn(9))*unit)
				q.LendingLimit = &v
			}
			fq.Resources = append(fq.Resources, q)
		}
		g.Flavors = append(g.Flavors, fq)
	}
	return []ResourceGroup{g}
}

func randomWorkload(src *byteSource, in Input, ts int64) Workload {
	w := Workload{
		Key:          fmt.Sprintf("ns/w%d", ts),
		ClusterQueue: fmt.Sprintf("q%d", src.intn(len(in.ClusterQueues)+1)),
		Priority:     int32(src.intn(4)),
		Timestamp:    ts,
	}
	for i := 0; i < 1+src.intn(2); i++ {
		ps := PodSet{Name: fmt.Sprintf("ps%d", i), Count: int32(1 + src.intn(3)),
			Requests: map[corev1.ResourceName]int64{corev1.ResourceCPU: int64(1+src.intn(4)) * 500}}
		if src.chance(30) {
			ps.Requests["example.com/gpu"] = int64(src.intn(3))
		}
		if src.chance(30) {
			ps.Tolerations = []corev1.Toleration{{Key: "spot", Operator: corev1.TolerationOpExists}}
		}
		w.PodSets = append(w.PodSets, ps)
	}
	return w
}

// testQueues is a minimal engine.Queues for tests inside the package (queue imports engine).
type testQueues struct {
	active map[string][]*Workload
	parked map[string][]*Workload
}

func newTestQueues() *testQueues {
	return &testQueues{active: map[string][]*Workload{}, parked: map[string][]*Workload{}}
}

func (q *testQueues) add(w Workload) { q.active[w.ClusterQueue] = append(q.active[w.ClusterQueue], &w) }

func (q *testQueues) clone() *testQueues {
	c := newTestQueues()
	for k, v := range q.active {
		for _, w := range v {
			cp := *w
			c.active[k] = append(c.active[k], &cp)
		}
	}
	for k, v := range q.parked {
		for _, w := range v {
			cp := *w
			c.parked[k] = append(c.parked[k], &cp)
		}
	}
	return c
}

func (q *testQueues) wake(names []string) {
	for _, n := range names {
		q.active[n] = append(q.active[n], q.parked[n]...)
		delete(q.parked, n)
	}
}

func (q *testQueues) ClusterQueues() []string {
	var out []string
	for k, v := range q.active {
		if len(v) > 0 {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

func (q *testQueues) Pop(cq string) *Workload {
	list := q.active[cq]
	if len(list) == 0 {
		return nil
	}
	sort.Slice(list, func(i, j int) bool { return workloadBefore(list[i], list[j]) })
	w := list[0]
	q.active[cq] = list[1:]
	return w
}

func (q *testQueues) Requeue(w *Workload) {
	q.active[w.ClusterQueue] = append(q.active[w.ClusterQueue], w)
}
func (q *testQueues) Park(w *Workload) {
	q.parked[w.ClusterQueue] = append(q.parked[w.ClusterQueue], w)
}
