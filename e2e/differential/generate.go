package differential

import (
	"fmt"
	"math/rand/v2"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
)

// Generate makes the scenario of a seed: the same seed always gives the same scenario. Sizes are
// small on purpose (quotas of a few cores, workloads of one to six), so that a handful of
// Workloads already contend for quota, borrow and preempt.
func Generate(seed uint64) *Scenario {
	g := &generator{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	s := &Scenario{Seed: seed, FairSharing: g.chance(0.2)}
	for i := range 1 + g.r.IntN(3) {
		s.Flavors = append(s.Flavors, fmt.Sprintf("f%d", i))
	}
	s.Resources = []corev1.ResourceName{corev1.ResourceCPU}
	if g.chance(0.3) {
		s.Resources = append(s.Resources, corev1.ResourceMemory)
	}
	g.priorities(s)
	g.topology(s)
	g.steps(s)
	return s
}

type generator struct {
	r *rand.Rand
}

func (g *generator) chance(p float64) bool { return g.r.Float64() < p }

func pick[T any](g *generator, xs ...T) T { return xs[g.r.IntN(len(xs))] }

func (g *generator) priorities(s *Scenario) {
	values := []int32{-10, 0, 100, 1000}
	g.r.Shuffle(len(values), func(i, j int) { values[i], values[j] = values[j], values[i] })
	n := 2 + g.r.IntN(2)
	if g.chance(0.15) {
		n = 0
	}
	for i := range n {
		s.Priorities = append(s.Priorities, Priority{Name: fmt.Sprintf("p%d", i), Value: values[i]})
	}
}

// topology makes the cohorts and queues: one flat cohort, a tree of cohort objects (with or
// without quota of their own), two independent cohorts, or a cohort beside queues in none.
func (g *generator) topology(s *Scenario) {
	n := 2 + g.r.IntN(4)
	if g.chance(0.15) {
		n = 6 + g.r.IntN(15)
	}
	var cohortOf func(i int) string
	switch g.r.IntN(4) {
	case 0:
		cohortOf = func(int) string { return "c0" }
		if g.chance(0.3) {
			s.Cohorts = append(s.Cohorts, g.cohort(s, "c0", ""))
		}
	case 1:
		s.Cohorts = append(s.Cohorts, g.cohort(s, "root", ""), g.cohort(s, "c0", "root"), g.cohort(s, "c1", "root"))
		cohortOf = func(i int) string { return pick(g, "c0", "c1", "root") }
	case 2:
		cohortOf = func(i int) string { return fmt.Sprintf("c%d", i%2) }
	default:
		cohortOf = func(i int) string {
			if g.chance(0.3) {
				return ""
			}
			return "c0"
		}
	}
	for i := range n {
		s.Queues = append(s.Queues, g.queue(s, fmt.Sprintf("q%d", i), cohortOf(i)))
	}
}

// cohort is a Cohort object; a tree's cohorts sometimes hold quota of their own.
func (g *generator) cohort(s *Scenario, name, parent string) Cohort {
	c := Cohort{Name: name, Parent: parent}
	if g.chance(0.4) {
		for _, f := range s.Flavors {
			if g.chance(0.6) {
				c.Quotas = append(c.Quotas, g.quota(s, f, parent != "", 0, 4))
			}
		}
	}
	if s.FairSharing && g.chance(0.5) {
		c.Weight = ptr.To(pick(g, 0.5, 1, 2, 3))
	}
	return c
}

// quota of one flavor: nominal in [lo, hi] per resource (memory in GiB, twice the cores); limits
// only where a cohort exists to borrow from or lend to.
func (g *generator) quota(s *Scenario, flavor string, inCohort bool, lo, hi int) Quota {
	q := Quota{Flavor: flavor, Nominal: map[string]int64{}}
	nominal := int64(lo + g.r.IntN(hi-lo+1))
	borrow, lend := inCohort && g.chance(0.3), inCohort && g.chance(0.3)
	borrowing, lending := int64(g.r.IntN(5)), int64(0)
	if nominal > 0 {
		lending = int64(g.r.IntN(int(nominal) + 1))
	}
	for _, r := range s.Resources {
		scale := int64(1)
		if r == corev1.ResourceMemory {
			scale = 2
		}
		q.Nominal[string(r)] = nominal * scale
		if borrow {
			if q.Borrowing == nil {
				q.Borrowing = map[string]int64{}
			}
			q.Borrowing[string(r)] = borrowing * scale
		}
		if lend {
			if q.Lending == nil {
				q.Lending = map[string]int64{}
			}
			q.Lending[string(r)] = lending * scale
		}
	}
	return q
}

func (g *generator) queue(s *Scenario, name, cohort string) Queue {
	q := Queue{
		Name:        name,
		Cohort:      cohort,
		Strategy:    pick(g, kueue.BestEffortFIFO, kueue.BestEffortFIFO, kueue.StrictFIFO),
		WithinQueue: pick(g, kueue.PreemptionPolicyNever, kueue.PreemptionPolicyLowerPriority, kueue.PreemptionPolicyLowerPriority, kueue.PreemptionPolicyLowerOrNewerEqualPriority),
		Reclaim:     kueue.PreemptionPolicyNever,
	}
	flavors := slices.Clone(s.Flavors)
	g.r.Shuffle(len(flavors), func(i, j int) { flavors[i], flavors[j] = flavors[j], flavors[i] })
	flavors = flavors[:1+g.r.IntN(len(flavors))]
	for _, f := range flavors {
		q.Quotas = append(q.Quotas, g.quota(s, f, cohort != "", 0, 6))
	}
	if cohort != "" {
		q.Reclaim = pick(g, kueue.PreemptionPolicyNever, kueue.PreemptionPolicyLowerPriority, kueue.PreemptionPolicyAny, kueue.PreemptionPolicyAny)
		if q.Reclaim != kueue.PreemptionPolicyNever && g.chance(0.25) {
			q.BorrowPolicy = string(kueue.BorrowWithinCohortPolicyLowerPriority)
			if len(s.Priorities) > 0 && g.chance(0.5) {
				q.BorrowMaxPrio = ptr.To(pick(g, s.Priorities...).Value)
			}
		}
	}
	if len(flavors) > 1 && g.chance(0.4) {
		q.WhenCanBorrow = pick(g, kueue.MayStopSearch, kueue.TryNextFlavor)
		q.WhenCanPreempt = pick(g, kueue.MayStopSearch, kueue.TryNextFlavor)
	}
	if s.FairSharing && g.chance(0.5) {
		q.Weight = ptr.To(pick(g, 0.5, 1, 2, 3))
	}
	return q
}

// steps: a first burst of Workloads, then creates, finishes, deletes and quota edits.
func (g *generator) steps(s *Scenario) {
	next := 0
	create := func(n int) Step {
		st := Step{Kind: Create}
		for range n {
			st.Workloads = append(st.Workloads, g.workload(s, fmt.Sprintf("w%d", next)))
			next++
		}
		return st
	}
	s.Steps = append(s.Steps, create(2+g.r.IntN(3)))
	for range 4 + g.r.IntN(9) {
		switch x := g.r.Float64(); {
		case x < 0.5:
			s.Steps = append(s.Steps, create(1+g.r.IntN(3)))
		case x < 0.75:
			s.Steps = append(s.Steps, Step{Kind: Finish, Pick: g.r.IntN(100)})
		case x < 0.88:
			s.Steps = append(s.Steps, Step{Kind: Delete, Pick: g.r.IntN(100)})
		default:
			q := pick(g, s.Queues...)
			quota := pick(g, q.Quotas...)
			s.Steps = append(s.Steps, Step{Kind: EditQuota, Queue: q.Name, Flavor: quota.Flavor, Nominal: g.nominal(s, quota)})
		}
	}
}

// nominal is an edited nominal quota, never below the lending limit (Kueue rejects that).
func (g *generator) nominal(s *Scenario, q Quota) map[string]int64 {
	cores := int64(g.r.IntN(9))
	out := map[string]int64{}
	for _, r := range s.Resources {
		scale := int64(1)
		if r == corev1.ResourceMemory {
			scale = 2
		}
		out[string(r)] = max(cores*scale, q.Lending[string(r)])
	}
	return out
}

func (g *generator) workload(s *Scenario, name string) Workload {
	w := Workload{Name: name, Queue: pick(g, s.Queues...).Name}
	if len(s.Priorities) > 0 && g.chance(0.7) {
		w.Priority = pick(g, s.Priorities...).Name
	}
	podsets := 1
	if g.chance(0.2) {
		podsets = 2
	}
	for i := range podsets {
		ps := PodSet{Name: fmt.Sprintf("ps%d", i), Count: int32(1 + g.r.IntN(3)), Requests: map[string]int64{}}
		cpu := int64(1 + g.r.IntN(2))
		for _, r := range s.Resources {
			ps.Requests[string(r)] = cpu
			if r == corev1.ResourceMemory {
				ps.Requests[string(r)] = int64(1 + g.r.IntN(4))
			}
		}
		w.PodSets = append(w.PodSets, ps)
	}
	return w
}
