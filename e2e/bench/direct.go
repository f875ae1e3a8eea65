package bench

import (
	"context"
	"fmt"
	"sync"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/e2e/framework"
	"github.com/fleetq/fleetq/e2e/lab"
)

// DirectName is the ceiling system's name in reports.
const DirectName = "direct"

// Direct is the lab's ceiling: no dispatcher at all. The load generator creates each job straight
// in a cluster that runs jobs (the workers, or the management cluster of a single-cluster
// scenario), with its flavor's node selector and tolerations, as a user who knew where room is
// would. Jobs are spread over every cluster and node pool a class fits, in proportion to the
// pool's capacity of the scenario's main resource (smooth weighted round robin, so a burst that
// fits lands where it fits). With no queue there is no admission, no priority and no preemption:
// what it measures is how fast the lab's own control planes take and run the jobs.
type Direct struct {
	mu    sync.Mutex
	slots []slot
	// turns keeps the weighted round robin's state per class.
	turns map[string][]int64
}

// slot is one node pool of one cluster that a job may be created for.
type slot struct {
	cluster string
	pool    Pool
	flavor  Flavor
	// weight is the pool's capacity of the main resource, in milli-units.
	weight int64
	// capacity is one of the pool's nodes' allocatable, to tell which classes fit it.
	capacity corev1.ResourceList
}

// Placer is a system whose jobs the load generator creates where they run, not on the management
// cluster: it picks each job's cluster and adjusts the job for it.
type Placer interface {
	// Place returns the cluster a submission's job is created in, having adjusted the job.
	Place(sub submission, job *batchv1.Job) (string, error)
}

func (d *Direct) Name() string    { return DirectName }
func (d *Direct) Version() string { return "direct (jobs created where they run, no queueing)" }

// CRDs: none, the clusters run nothing but their control planes.
func (d *Direct) CRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) { return nil, nil }

// Processes: none; the figures of the kube-apiservers are still read.
func (d *Direct) Processes() []Proc { return nil }

// Role: every client is the bench's own.
func (d *Direct) Role(lab.Role, string) string { return "" }

func (d *Direct) Stop(context.Context) error { return nil }

// Install creates the team namespaces in every cluster that runs jobs and works out the slots.
func (d *Direct) Install(ctx context.Context, env *framework.Environment, s *Scenario, _ string) error {
	d.slots, d.turns = directSlots(s), map[string][]int64{}
	if len(d.slots) == 0 {
		return fmt.Errorf("direct: scenario %q has no node pool of any flavor", s.Name)
	}
	for _, cluster := range runClusterNames(s) {
		var objs []client.Object
		for i := range s.QueueCount() {
			objs = append(objs, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: TeamNamespace(i)}})
		}
		if err := createAll(ctx, env.Cluster(cluster).Client(), cluster, objs); err != nil {
			return err
		}
	}
	return nil
}

// runClusterNames are the clusters where a scenario's jobs run.
func runClusterNames(s *Scenario) []string {
	if s.Topology == SingleCluster {
		return []string{ManagementCluster}
	}
	var out []string
	for _, w := range s.Workers {
		out = append(out, w.Name)
	}
	return out
}

// directSlots lists every pool of a cluster that runs jobs and that a flavor selects, in the
// scenario's order.
func directSlots(s *Scenario) []slot {
	pools := map[string][]Pool{ManagementCluster: s.Management}
	for _, w := range s.Workers {
		pools[w.Name] = w.Pools
	}
	res := s.mainResource()
	var out []slot
	for _, cluster := range runClusterNames(s) {
		for _, p := range pools[cluster] {
			for _, f := range s.Flavors {
				if f.PoolType != p.Type {
					continue
				}
				n, _ := poolNode(p.Type)
				q := n.Capacity[res]
				out = append(out, slot{cluster: cluster, pool: p, flavor: f, weight: q.MilliValue() * int64(p.Count), capacity: n.Capacity})
			}
		}
	}
	return out
}

// fits says whether one pod of the requests fits one node of the slot's pool.
func (sl slot) fits(requests corev1.ResourceList) bool {
	for name, q := range requests {
		c, ok := sl.capacity[name]
		if !ok || c.Cmp(q) < 0 {
			return false
		}
	}
	return true
}

// Place picks the next slot the class fits by smooth weighted round robin (each slot's credit grows
// by its weight every turn; the richest is chosen and pays the total), drops the queue labels and
// sets the slot's flavor's node selector and tolerations.
func (d *Direct) Place(sub submission, job *batchv1.Job) (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	credit := d.turns[sub.class.Name]
	if credit == nil {
		credit = make([]int64, len(d.slots))
		d.turns[sub.class.Name] = credit
	}
	best, total := -1, int64(0)
	for i, sl := range d.slots {
		if !sl.fits(sub.class.Requests) {
			continue
		}
		credit[i] += sl.weight
		total += sl.weight
		if best < 0 || credit[i] > credit[best] {
			best = i
		}
	}
	if best < 0 {
		return "", fmt.Errorf("direct: no node pool of the scenario fits a pod of class %q (requests %v)", sub.class.Name, sub.class.Requests)
	}
	credit[best] -= total
	sl := d.slots[best]
	delete(job.Labels, kueue.QueueNameLabel)
	delete(job.Labels, kueue.PriorityClassLabel)
	rf := resourceFlavor(sl.flavor)
	spec := &job.Spec.Template.Spec
	if spec.NodeSelector == nil {
		spec.NodeSelector = map[string]string{}
	}
	for k, v := range rf.Spec.NodeLabels {
		spec.NodeSelector[k] = v
	}
	spec.Tolerations = append(spec.Tolerations, rf.Spec.Tolerations...)
	return sl.cluster, nil
}
