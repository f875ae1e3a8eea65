// Package bench measures fleetq side by side with Kueue v0.17 on the lab: it brings up the clusters a
// scenario describes, installs one system (fleetq's built manager and agents, or Kueue with
// MultiKueue), submits the scenario's jobs with its own client, records each workload's life from
// watches (created → quota reserved → admitted → running on a worker → finished), reads the API
// servers' request counts and the manager's CPU and memory, and turns N runs per system into a
// markdown table, a CSV and PNG plots.
package bench

import (
	"fmt"
	"math"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/fleetq/fleetq/e2e/lab"
)

// Topology says whether a scenario runs on one cluster or dispatches to workers.
type Topology string

const (
	// SingleCluster runs the jobs in the management cluster itself (no workers).
	SingleCluster Topology = "single"
	// MultiCluster dispatches every job from the management cluster to worker clusters.
	MultiCluster Topology = "multi"
)

// Scenario is one benchmark, read from a small YAML file under e2e/bench/scenarios.
type Scenario struct {
	// Name identifies the scenario in file names and tables.
	Name string `json:"name"`
	// Description is one line for the report.
	Description string `json:"description,omitempty"`
	// Topology is single or multi.
	Topology Topology `json:"topology"`
	// Management lists the management cluster's node pools (single-cluster scenarios run jobs there).
	Management []Pool `json:"management,omitempty"`
	// Workers are the worker clusters of a multi-cluster scenario.
	Workers []Worker `json:"workers,omitempty"`
	// Flavors are the ResourceFlavors, each selecting one kind of node.
	Flavors []Flavor `json:"flavors"`
	// Queues describe the ClusterQueues (cohorts × queues per cohort), one team namespace and
	// LocalQueue per ClusterQueue.
	Queues Queues `json:"queues"`
	// Classes are the kinds of jobs submitted.
	Classes []Class `json:"classes"`
	// Waves submit the jobs: each wave starts after its delay and submits its count of jobs.
	Waves []Wave `json:"waves"`
	// Mode apiserver runs every cluster as etcd and kube-apiserver only: nodes are registered
	// objects (agents report their capacity as if real) and no pod ever runs, so a run measures
	// the dispatcher alone at a size the machine could not run as pods. It needs Probes, since no
	// workload finishes. Default: full (jobs run on fake nodes).
	Mode lab.Mode `json:"mode,omitempty"`
	// Probes, when set, measures issue 19's scale figures instead of waiting for every job to
	// finish: Probes ClusterQueues more, in no cohort and with no load, are created; once the
	// load is queued and reservations stop changing, one job is submitted to each probe queue in
	// turn and the time until its quota is reserved recorded; the last probe is submitted as the
	// manager restarts (restart → first admission).
	Probes int `json:"probes,omitempty"`
	// Chain, when set, measures issue 5's figure instead of waiting for every job to finish: with
	// quota for one job at a time, the running job is deleted Chain times and the time until the
	// next Job is unsuspended is recorded.
	Chain int `json:"chain,omitempty"`
	// Timeout bounds one run from the first submission until every workload finished.
	Timeout metav1.Duration `json:"timeout"`
}

// Worker is one worker cluster and its node pools.
type Worker struct {
	Name  string `json:"name"`
	Pools []Pool `json:"pools"`
}

// Pool is a group of identical fake nodes.
type Pool struct {
	// Type is cpu, a100 or l4: the lab's node shapes.
	Type  string `json:"type"`
	Count int    `json:"count"`
}

// Flavor is a ResourceFlavor matching one pool type.
type Flavor struct {
	Name string `json:"name"`
	// PoolType is the Pool.Type whose nodes the flavor selects.
	PoolType string `json:"poolType"`
}

// Queues describes the ClusterQueues: Cohorts × PerCohort queues, each with NominalShare of every
// flavor's capacity (the sum of its nodes' allocatable) and BorrowingShare more when its cohort has
// room.
type Queues struct {
	Cohorts   int `json:"cohorts"`
	PerCohort int `json:"perCohort"`
	// NominalShare of each flavor's capacity per ClusterQueue (1/(Cohorts×PerCohort) splits it).
	NominalShare float64 `json:"nominalShare"`
	// BorrowingShare of each flavor's capacity a queue may borrow; 0 means no borrowing limit.
	BorrowingShare float64 `json:"borrowingShare,omitempty"`
	// ReclaimWithinCohort and WithinClusterQueue are the preemption policies (Never, LowerPriority, Any).
	ReclaimWithinCohort string `json:"reclaimWithinCohort,omitempty"`
	WithinClusterQueue  string `json:"withinClusterQueue,omitempty"`
}

// Class is a kind of job: its pods, requests and run time on the fake nodes.
type Class struct {
	Name string `json:"name"`
	// Pods is the job's parallelism and completions.
	Pods int32 `json:"pods"`
	// Requests per pod (cpu, memory, nvidia.com/gpu).
	Requests corev1.ResourceList `json:"requests"`
	// RunTime is how long each pod runs on a fake node.
	RunTime metav1.Duration `json:"runTime"`
	// Priority of the job's workload (a WorkloadPriorityClass of that value is created).
	Priority int32 `json:"priority,omitempty"`
}

// Wave is a batch of submissions.
type Wave struct {
	// After is how long after the run's start the wave begins.
	After metav1.Duration `json:"after,omitempty"`
	// Count is how many jobs the wave submits at full size; Scale multiplies it.
	Count int `json:"count"`
	// Classes are the class names, cycled through in order.
	Classes []string `json:"classes"`
	// Queues limit the wave to these queue indexes (0-based over all ClusterQueues); empty means
	// every queue, round robin.
	Queues []int `json:"queues,omitempty"`
	// Rate caps submissions per second (0: as fast as the client allows, a burst). Scale
	// multiplies it with Count, so a steady wave lasts Count/Rate seconds at any scale.
	Rate float64 `json:"rate,omitempty"`
}

// LoadScenario reads and checks a scenario file.
func LoadScenario(path string) (*Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("scenario %s: %w", path, err)
	}
	s := &Scenario{}
	if err := yaml.UnmarshalStrict(data, s); err != nil {
		return nil, fmt.Errorf("scenario %s: %w", path, err)
	}
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("scenario %s: %w", path, err)
	}
	return s, nil
}

// Validate reports the first inconsistency of the scenario.
func (s *Scenario) Validate() error {
	if s.Name == "" {
		return fmt.Errorf("no name")
	}
	switch s.Topology {
	case SingleCluster:
		if len(s.Management) == 0 {
			return fmt.Errorf("scenario %q: a single-cluster scenario needs management pools", s.Name)
		}
	case MultiCluster:
		if len(s.Workers) == 0 {
			return fmt.Errorf("scenario %q: a multi-cluster scenario needs workers", s.Name)
		}
	default:
		return fmt.Errorf("scenario %q: topology %q is neither single nor multi", s.Name, s.Topology)
	}
	pools := map[string]bool{}
	for _, p := range s.allPools() {
		if _, err := poolNode(p.Type); err != nil {
			return fmt.Errorf("scenario %q: %w", s.Name, err)
		}
		pools[p.Type] = true
	}
	for _, f := range s.Flavors {
		if !pools[f.PoolType] {
			return fmt.Errorf("scenario %q: flavor %q selects pool type %q, which no cluster has", s.Name, f.Name, f.PoolType)
		}
	}
	if s.Queues.Cohorts < 1 || s.Queues.PerCohort < 1 || s.Queues.NominalShare <= 0 {
		return fmt.Errorf("scenario %q: queues need cohorts, perCohort and nominalShare", s.Name)
	}
	classes := map[string]bool{}
	for _, c := range s.Classes {
		if c.Pods < 1 || c.RunTime.Duration <= 0 {
			return fmt.Errorf("scenario %q: class %q needs pods and runTime", s.Name, c.Name)
		}
		classes[c.Name] = true
	}
	if len(s.Waves) == 0 {
		return fmt.Errorf("scenario %q: no waves", s.Name)
	}
	for i, w := range s.Waves {
		for _, c := range w.Classes {
			if !classes[c] {
				return fmt.Errorf("scenario %q: wave %d: unknown class %q", s.Name, i, c)
			}
		}
		if w.Rate < 0 {
			return fmt.Errorf("scenario %q: wave %d: rate %g is negative; 0 submits the wave in a burst", s.Name, i, w.Rate)
		}
		for _, q := range w.Queues {
			if q < 0 || q >= s.QueueCount() {
				return fmt.Errorf("scenario %q: wave %d: queue index %d out of range", s.Name, i, q)
			}
		}
	}
	if s.Timeout.Duration <= 0 {
		return fmt.Errorf("scenario %q: no timeout", s.Name)
	}
	switch {
	case s.Mode != "" && s.Mode != lab.ModeFull && s.Mode != lab.ModeAPIServer:
		return fmt.Errorf("scenario %q: mode %q is neither %s nor %s", s.Name, s.Mode, lab.ModeFull, lab.ModeAPIServer)
	case s.Mode == lab.ModeAPIServer && s.Probes == 0:
		return fmt.Errorf("scenario %q: mode %s runs no pod, so no job finishes: set probes to measure how long a job waits", s.Name, s.Mode)
	case s.Probes == 1:
		return fmt.Errorf("scenario %q: probes 1: one probe queue times an admission while the manager runs and another after it restarts; set probes to 2 or more", s.Name)
	case s.Probes > 0 && s.Chain > 0:
		return fmt.Errorf("scenario %q: probes and chain measure different things; set one", s.Name)
	case s.Probes > 0 && !s.probeFits():
		return fmt.Errorf("scenario %q: a probe queue's quota (nominalShare %g of each flavor's capacity) fits no %q job in any flavor; raise nominalShare or add nodes",
			s.Name, s.Queues.NominalShare, s.Waves[0].Classes[0])
	}
	return nil
}

// probeFits says whether one job of the first wave's first class fits a queue's nominal quota in
// some flavor: the probes measure admissions, which need quota for one job.
func (s *Scenario) probeFits() bool {
	if len(s.Waves[0].Classes) == 0 {
		return false
	}
	c := s.class(s.Waves[0].Classes[0])
	for _, f := range s.Flavors {
		capa, fits := s.FlavorCapacity(f), true
		for name, q := range c.Requests {
			total := q.DeepCopy()
			for range c.Pods - 1 {
				total.Add(q)
			}
			quota, ok := capa[name]
			if !ok {
				fits = false
				break
			}
			if nominal := share(quota, s.Queues.NominalShare); nominal.Cmp(total) < 0 {
				fits = false
			}
		}
		if fits {
			return true
		}
	}
	return false
}

// queueTotal counts every ClusterQueue a run creates: the load's and the probes'.
func (s *Scenario) queueTotal() int { return s.QueueCount() + s.Probes }

// isProbe says whether queue i is a probe queue (no cohort, no load).
func (s *Scenario) isProbe(i int) bool { return i >= s.QueueCount() }

// QueueCount is the number of ClusterQueues (and teams).
func (s *Scenario) QueueCount() int { return s.Queues.Cohorts * s.Queues.PerCohort }

// Jobs is how many jobs a run submits at the given scale.
func (s *Scenario) Jobs(scale float64) int {
	n := 0
	for _, w := range s.Waves {
		n += scaled(w.Count, scale)
	}
	return n
}

// Scaled returns a copy with node pools and wave counts multiplied by scale (at least one of
// each), so a smoke run keeps the scenario's shape at a fraction of its size. A probe scenario
// keeps its nodes and scales its cohorts instead.
func (s *Scenario) Scaled(scale float64) *Scenario {
	out := *s
	scalePools := func(in []Pool) []Pool {
		ps := make([]Pool, len(in))
		for i, p := range in {
			ps[i] = Pool{Type: p.Type, Count: scaled(p.Count, scale)}
		}
		return ps
	}
	out.Management = scalePools(s.Management)
	out.Workers = make([]Worker, len(s.Workers))
	for i, w := range s.Workers {
		out.Workers[i] = Worker{Name: w.Name, Pools: scalePools(w.Pools)}
	}
	if s.Chain > 0 {
		// A chain measures one deletion after another: its size is its chain, not a load.
		out.Management, out.Workers = s.Management, s.Workers
		return &out
	}
	if s.Probes > 0 {
		// A probe scenario's size is its queued load: the queues shrink with it (each keeps its
		// share of the nodes, which stay, so a queue's quota still fits a job).
		out.Management, out.Workers = s.Management, s.Workers
		out.Queues.Cohorts = scaled(s.Queues.Cohorts, scale)
	}
	out.Waves = make([]Wave, len(s.Waves))
	for i, w := range s.Waves {
		w.Count = scaled(w.Count, scale)
		w.Rate *= scale
		out.Waves[i] = w
	}
	return &out
}

func scaled(n int, scale float64) int {
	return max(1, int(math.Round(float64(n)*scale)))
}

func (s *Scenario) allPools() []Pool {
	ps := append([]Pool(nil), s.Management...)
	for _, w := range s.Workers {
		ps = append(ps, w.Pools...)
	}
	return ps
}

// class returns the named class.
func (s *Scenario) class(name string) Class {
	for _, c := range s.Classes {
		if c.Name == name {
			return c
		}
	}
	panic("bench: unknown class " + name) // Validate rules this out.
}

// FlavorCapacity is the sum of allocatable of the nodes a flavor selects, over the clusters that run
// jobs (management in single-cluster scenarios, every worker otherwise).
func (s *Scenario) FlavorCapacity(f Flavor) corev1.ResourceList {
	pools := s.Management
	if s.Topology == MultiCluster {
		pools = nil
		for _, w := range s.Workers {
			pools = append(pools, w.Pools...)
		}
	}
	return poolsCapacity(pools, f.PoolType)
}

// WorkerCapacity is the allocatable of one worker's nodes of a pool type.
func WorkerCapacity(w Worker, poolType string) corev1.ResourceList {
	return poolsCapacity(w.Pools, poolType)
}

func poolsCapacity(pools []Pool, poolType string) corev1.ResourceList {
	total := corev1.ResourceList{}
	for _, p := range pools {
		if p.Type != poolType {
			continue
		}
		n, _ := poolNode(p.Type)
		for name, q := range n.Capacity {
			if name == corev1.ResourcePods || name == corev1.ResourceEphemeralStorage {
				continue // no scenario's job asks for them: they are not queued
			}
			sum := total[name]
			for range p.Count {
				sum.Add(q)
			}
			total[name] = sum
		}
	}
	return total
}

// share multiplies a quantity by f, rounding down to whole units (milli-units for cpu).
func share(q resource.Quantity, f float64) resource.Quantity {
	if q.Format == resource.BinarySI {
		gi := float64(q.Value()) * f / (1 << 30)
		return *resource.NewQuantity(int64(math.Floor(gi))*(1<<30), resource.BinarySI)
	}
	return *resource.NewMilliQuantity(int64(math.Floor(float64(q.MilliValue())*f/1000))*1000, resource.DecimalSI)
}

// runWindow is how long a run may still take after the last wave started.
func (s *Scenario) lastWave() time.Duration {
	var d time.Duration
	for _, w := range s.Waves {
		d = max(d, w.After.Duration)
	}
	return d
}
