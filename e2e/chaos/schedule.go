// Package chaos runs fleetq's exactly-once and quota promises through faults: a fleet of jobs on
// the lab (a management cluster with two manager replicas, three workers), faults injected on a
// seeded schedule, and watchers that check the invariants continuously and at the end.
//
// The package splits what is pure from what drives the lab: Plan turns a seed into a fault
// schedule, the invariant checks read object lists, the report formats what was seen; Run (run.go)
// wires them to a lab that Fleet (fleet.go) sets up.
package chaos

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// Kind is a kind of fault; its value is how the report names it.
type Kind string

// The faults the suite injects. Pods slow to terminate is not scheduled: every pod of the chaos
// lab takes Fleet's termination delay to go, for the whole run.
const (
	KillManager     Kind = "kill -9 of the leading manager"
	KillAgent       Kind = "kill -9 of an agent"
	FreezeAPIServer Kind = "worker API server SIGSTOPped"
	StopAPIServer   Kind = "worker API server down past workerLostTimeout"
	Partition       Kind = "partition between manager and worker"
	RecreateCluster Kind = "MultiKueueCluster deleted and re-created"
	RotateSecret    Kind = "kubeconfig Secret rotated"
)

// Kinds lists every scheduled fault kind, in the report's order.
var Kinds = []Kind{KillManager, KillAgent, FreezeAPIServer, StopAPIServer, Partition, RecreateCluster, RotateSecret}

// Fault is one fault of a schedule: what, where, when (from the start of the run) and for how
// long before it is healed.
type Fault struct {
	Kind Kind
	// Target is the worker the fault hits; empty for a manager fault.
	Target string
	// At is when the fault starts, from the start of the run, if every earlier fault recovered
	// at once; a fault never starts before the previous one has recovered.
	At time.Duration
	// For is how long the fault lasts: the dead process stays dead, the API server frozen or
	// down, the partition cut, the MultiKueueCluster absent, the old connection open.
	For time.Duration
	// Gap is the quiet time after recovery before the next fault.
	Gap time.Duration
}

// String is the fault as the log and the report print it.
func (f Fault) String() string {
	s := string(f.Kind)
	if f.Target != "" {
		s += " (" + f.Target + ")"
	}
	return fmt.Sprintf("%s for %s", s, f.For.Round(100*time.Millisecond))
}

// Timings are the fleet's settings a schedule has to respect.
type Timings struct {
	// WorkerLostTimeout is the manager's multiCluster.workerLostTimeout: a worker API server
	// down "past" it stays down longer.
	WorkerLostTimeout time.Duration
	// Freeze is how long a frozen API server stays frozen (the issue asks for 30 s).
	Freeze time.Duration
}

// Plan returns the fault schedule of a run of at least the given length: whole rounds in which
// every kind occurs once, in an order, on targets and with durations drawn from seed, so the
// same seed gives the same schedule and even a short run meets every kind.
func Plan(seed uint64, length time.Duration, workers []string, t Timings) []Fault {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	between := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(rng.Int64N(int64(hi-lo)+1)) }
	var out []Fault
	var at time.Duration
	for at < length {
		order := append([]Kind(nil), Kinds...)
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for _, k := range order {
			f := Fault{Kind: k, At: at, Gap: between(5*time.Second, 15*time.Second)}
			if k != KillManager {
				f.Target = workers[rng.IntN(len(workers))]
			}
			switch k {
			case KillManager:
				f.For = between(2*time.Second, 8*time.Second)
			case KillAgent:
				f.For = between(2*time.Second, 6*time.Second)
			case FreezeAPIServer:
				f.For = t.Freeze
			case StopAPIServer:
				f.For = t.WorkerLostTimeout + between(5*time.Second, 15*time.Second)
			case Partition:
				f.For = between(10*time.Second, 40*time.Second)
			case RecreateCluster:
				f.For = between(3*time.Second, 20*time.Second)
			case RotateSecret:
				f.For = between(2*time.Second, 10*time.Second)
			}
			out = append(out, f)
			at += f.For + f.Gap
		}
	}
	return out
}

// Describe prints a schedule a line per fault, for the log of a run and to compare two seeds.
func Describe(plan []Fault) string {
	var b strings.Builder
	for i, f := range plan {
		fmt.Fprintf(&b, "%3d  +%-8s %s\n", i+1, f.At.Round(time.Second), f)
	}
	return b.String()
}
