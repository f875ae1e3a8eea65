// Package cache is the manager's in-memory view of everything admission depends on: flavors,
// ClusterQueues, cohorts, LocalQueues and the workloads that hold quota. Controllers feed it from
// informer events; the scheduler takes engine snapshots from it and records the admissions it
// makes before the API server confirms them ("assumed"), so a workload is never admitted twice.
package cache

import (
	"fmt"
	"sort"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/internal/engine"
)

// Cache holds the admission state. All methods are safe for concurrent use.
type Cache struct {
	mu sync.Mutex

	flavors     map[string]engine.ResourceFlavor
	cqs         map[string]*clusterQueue
	cohorts     map[string]engine.Cohort
	localQueues map[string]*localQueue // by namespace/name

	// admitted holds every workload with a quota reservation, confirmed or assumed.
	admitted map[string]*admittedWorkload
	// OnChange, when set, hears which ClusterQueue and LocalQueue (namespace/name) had their
	// held quota change, so their status is recomputed; it must not block.
	OnChange func(clusterQueue, localQueue string)

	// snap is rebuilt lazily when flavors, queues or cohorts change, and kept current
	// incrementally as workloads are admitted and released.
	snap *engine.Snapshot
}

type clusterQueue struct {
	spec      engine.ClusterQueue
	selector  labels.Selector // nil selects nothing
	checks    []kueue.AdmissionCheckReference
	selectErr error
}

type localQueue struct {
	clusterQueue string
	stopped      bool
}

type admittedWorkload struct {
	wl         engine.Workload
	localQueue string // namespace/name
	assumed    bool
	// admitted is true once every admission check passed (the Admitted condition).
	admitted bool
}

// New returns an empty cache.
func New() *Cache {
	return &Cache{
		flavors:     map[string]engine.ResourceFlavor{},
		cqs:         map[string]*clusterQueue{},
		cohorts:     map[string]engine.Cohort{},
		localQueues: map[string]*localQueue{},
		admitted:    map[string]*admittedWorkload{},
	}
}

// AddOrUpdateFlavor records a ResourceFlavor and returns the ClusterQueues whose parked
// workloads it may unblock.
func (c *Cache) AddOrUpdateFlavor(rf *kueue.ResourceFlavor) []string {
	return c.structural(engine.Event{Kind: engine.FlavorChanged, Name: rf.Name}, func() {
		c.flavors[rf.Name] = Flavor(rf)
	})
}

// DeleteFlavor forgets a ResourceFlavor; queues naming it become inactive.
func (c *Cache) DeleteFlavor(name string) []string {
	return c.structural(engine.Event{Kind: engine.FlavorChanged, Name: name}, func() {
		delete(c.flavors, name)
	})
}

// AddOrUpdateClusterQueue records a ClusterQueue.
func (c *Cache) AddOrUpdateClusterQueue(cq *kueue.ClusterQueue) []string {
	entry := &clusterQueue{spec: ClusterQueue(cq)}
	if s := cq.Spec.NamespaceSelector; s != nil {
		entry.selector, entry.selectErr = metav1.LabelSelectorAsSelector(s)
	}
	if acs := cq.Spec.AdmissionChecksStrategy; acs != nil {
		for _, rule := range acs.AdmissionChecks {
			entry.checks = append(entry.checks, rule.Name)
		}
	}
	return c.structural(engine.Event{Kind: engine.ClusterQueueChanged, Name: cq.Name}, func() {
		c.cqs[cq.Name] = entry
	})
}

// DeleteClusterQueue forgets a ClusterQueue.
func (c *Cache) DeleteClusterQueue(name string) []string {
	return c.structural(engine.Event{Kind: engine.ClusterQueueChanged, Name: name}, func() {
		delete(c.cqs, name)
	})
}

// AddOrUpdateCohort records a Cohort.
func (c *Cache) AddOrUpdateCohort(co *kueue.Cohort) []string {
	return c.structural(engine.Event{Kind: engine.CohortChanged, Name: co.Name}, func() {
		c.cohorts[co.Name] = Cohort(co)
	})
}

// DeleteCohort forgets a Cohort; its queues keep an implicit cohort of that name.
func (c *Cache) DeleteCohort(name string) []string {
	return c.structural(engine.Event{Kind: engine.CohortChanged, Name: name}, func() {
		delete(c.cohorts, name)
	})
}

// structural applies a change to flavors, queues or cohorts and returns the queues affected
// before or after it (a queue can move between cohort trees).
func (c *Cache) structural(ev engine.Event, change func()) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	before := c.snapshotLocked().AffectedQueues(ev)
	change()
	c.snap = nil
	after := c.snapshotLocked().AffectedQueues(ev)
	return union(before, after)
}

// AddOrUpdateLocalQueue records which ClusterQueue a LocalQueue feeds.
func (c *Cache) AddOrUpdateLocalQueue(lq *kueue.LocalQueue) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.localQueues[lq.Namespace+"/"+lq.Name] = &localQueue{
		clusterQueue: string(lq.Spec.ClusterQueue),
		stopped:      lq.Spec.StopPolicy != nil && *lq.Spec.StopPolicy != kueue.None,
	}
}

// DeleteLocalQueue forgets a LocalQueue.
func (c *Cache) DeleteLocalQueue(namespace, name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.localQueues, namespace+"/"+name)
}

// Route is where a pending workload of a LocalQueue goes, or why it cannot queue.
type Route struct {
	ClusterQueue string
	// Checks are the admission checks the ClusterQueue requires.
	Checks []kueue.AdmissionCheckReference
	// Problem, when not empty, explains why the workload cannot queue; the workload stays
	// visible with it as its condition message.
	Problem string
}

// RouteFor resolves a workload's LocalQueue to its ClusterQueue, checking that both exist, that
// the LocalQueue is not stopped and that the ClusterQueue accepts the namespace.
func (c *Cache) RouteFor(namespace string, nsLabels map[string]string, queueName string) Route {
	c.mu.Lock()
	defer c.mu.Unlock()
	if queueName == "" {
		return Route{Problem: fmt.Sprintf("the workload names no LocalQueue; set the %s label on its job", kueue.QueueNameLabel)}
	}
	lq, ok := c.localQueues[namespace+"/"+queueName]
	if !ok {
		return Route{Problem: fmt.Sprintf("LocalQueue %s doesn't exist in namespace %s; create it, or fix the %s label (kubectl -n %s get localqueues)",
			queueName, namespace, kueue.QueueNameLabel, namespace)}
	}
	if lq.stopped {
		return Route{ClusterQueue: lq.clusterQueue, Problem: fmt.Sprintf("LocalQueue %s is stopped (spec.stopPolicy); set it to None to resume admission", queueName)}
	}
	cq, ok := c.cqs[lq.clusterQueue]
	if !ok {
		return Route{ClusterQueue: lq.clusterQueue, Problem: fmt.Sprintf("ClusterQueue %s doesn't exist; LocalQueue %s/%s points at it (kubectl get clusterqueues)",
			lq.clusterQueue, namespace, queueName)}
	}
	switch {
	case cq.selectErr != nil:
		return Route{ClusterQueue: lq.clusterQueue, Problem: fmt.Sprintf("ClusterQueue %s has an invalid namespaceSelector: %v", lq.clusterQueue, cq.selectErr)}
	case cq.selector == nil || !cq.selector.Matches(labels.Set(nsLabels)):
		return Route{ClusterQueue: lq.clusterQueue, Problem: fmt.Sprintf("namespace %s doesn't match the namespaceSelector of ClusterQueue %s; relabel the namespace or widen the selector ({} selects all)",
			namespace, lq.clusterQueue)}
	}
	return Route{ClusterQueue: lq.clusterQueue, Checks: cq.checks}
}

// RouteChecks returns the admission checks a ClusterQueue requires.
func (c *Cache) RouteChecks(clusterQueue string) []kueue.AdmissionCheckReference {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cq, ok := c.cqs[clusterQueue]; ok {
		return cq.checks
	}
	return nil
}

// AllChecks maps every ClusterQueue with admission checks to them (a copy: the scheduler reads
// it while the cache is locked for its cycle).
func (c *Cache) AllChecks() map[string][]kueue.AdmissionCheckReference {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string][]kueue.AdmissionCheckReference{}
	for name, cq := range c.cqs {
		if len(cq.checks) > 0 {
			out[name] = cq.checks
		}
	}
	return out
}

// LocalQueuesOf lists the LocalQueues (namespace/name) that feed a ClusterQueue.
func (c *Cache) LocalQueuesOf(clusterQueue string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for key, lq := range c.localQueues {
		if lq.clusterQueue == clusterQueue {
			out = append(out, key)
		}
	}
	sort.Strings(out)
	return out
}

// SetAdmitted records a workload that holds quota, as the API server shows it; admitted says
// whether all its admission checks passed. localQueue is namespace/name.
func (c *Cache) SetAdmitted(wl engine.Workload, localQueue string, admitted bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.admitted[wl.Key]; ok && !old.assumed && old.wl.Evicting == wl.Evicting && sameAdmission(old.wl.Admission, wl.Admission) {
		if old.admitted != admitted {
			old.admitted = admitted
			c.changed(old.wl.ClusterQueue, localQueue)
		}
		return nil
	}
	return c.setAdmittedLocked(wl, localQueue, false, admitted)
}

// Assume records an admission the scheduler decided before the API server confirms it.
func (c *Cache) Assume(wl engine.Workload, localQueue string, admitted bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.setAdmittedLocked(wl, localQueue, true, admitted)
}

func (c *Cache) setAdmittedLocked(wl engine.Workload, localQueue string, assumed, admitted bool) error {
	snap := c.snapshotLocked()
	if _, ok := c.admitted[wl.Key]; ok {
		snap.Remove(wl.Key)
	}
	c.admitted[wl.Key] = &admittedWorkload{wl: wl, localQueue: localQueue, assumed: assumed, admitted: admitted}
	c.changed(wl.ClusterQueue, localQueue)
	if err := snap.AddAdmitted(wl); err != nil {
		return fmt.Errorf("workload %s: %w", wl.Key, err)
	}
	if wl.Evicting {
		if err := snap.SetEvicting(wl.Key); err != nil {
			return fmt.Errorf("workload %s: %w", wl.Key, err)
		}
	}
	return nil
}

// SetEvicting marks an admitted workload whose eviction the scheduler started.
func (c *Cache) SetEvicting(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, ok := c.admitted[key]
	if !ok || a.wl.Evicting {
		return
	}
	a.wl.Evicting = true
	_ = c.snapshotLocked().SetEvicting(key)
}

// IsAssumed reports whether the workload's admission is still unconfirmed; its stale pending
// copy must not be queued again meanwhile.
func (c *Cache) IsAssumed(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, ok := c.admitted[key]
	return ok && a.assumed
}

// HasClusterQueue reports whether the cache knows a ClusterQueue (without building a snapshot).
func (c *Cache) HasClusterQueue(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.cqs[name]
	return ok
}

// HoldsQuota reports whether the workload holds (or is assumed to hold) quota.
func (c *Cache) HoldsQuota(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.admitted[key]
	return ok
}

// Release forgets a workload's quota (finished, deleted, evicted, or an assumption that failed)
// and returns the ClusterQueues whose parked workloads may now fit.
func (c *Cache) Release(key string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, ok := c.admitted[key]
	if !ok {
		return nil
	}
	delete(c.admitted, key)
	c.changed(a.wl.ClusterQueue, a.localQueue)
	snap := c.snapshotLocked()
	snap.Remove(key)
	return snap.AffectedQueues(engine.Event{Kind: engine.QuotaFreed, Name: a.wl.ClusterQueue})
}

// WithSnapshot runs f with the current snapshot under the cache lock: the scheduler's cycle
// and its assumptions see one consistent state.
func (c *Cache) WithSnapshot(f func(s *engine.Snapshot)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f(c.snapshotLocked())
}

// ClusterQueueStatus reads a queue's status figures, and how many of its reservations are
// fully admitted; ok is false for an unknown queue.
func (c *Cache) ClusterQueueStatus(name string) (st engine.ClusterQueueStatus, admitted int, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st, ok = c.snapshotLocked().ClusterQueueStatus(name)
	for _, a := range c.admitted {
		if a.admitted && a.wl.ClusterQueue == name {
			admitted++
		}
	}
	return st, admitted, ok
}

// CohortStatus reads a cohort's status figures.
func (c *Cache) CohortStatus(name string) (engine.CohortStatus, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.snapshotLocked().CohortStatus(name)
}

// LocalQueueUsage is what a LocalQueue's workloads hold.
type LocalQueueUsage struct {
	Reserving, Admitted int
	// Usage sums the admitted workloads' usage per flavor and resource.
	Usage map[string]map[corev1.ResourceName]int64
}

// LocalQueueUsage sums the quota held by the workloads of one LocalQueue (namespace/name).
func (c *Cache) LocalQueueUsage(localQueue string) LocalQueueUsage {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := LocalQueueUsage{Usage: map[string]map[corev1.ResourceName]int64{}}
	for _, a := range c.admitted {
		if a.localQueue != localQueue || a.wl.Admission == nil {
			continue
		}
		out.Reserving++
		if a.admitted {
			out.Admitted++
		}
		for _, ps := range a.wl.Admission.PodSets {
			for r, v := range ps.Usage {
				f := ps.Flavors[r]
				if out.Usage[f] == nil {
					out.Usage[f] = map[corev1.ResourceName]int64{}
				}
				out.Usage[f][r] += v
			}
		}
	}
	return out
}

func (c *Cache) changed(clusterQueue, localQueue string) {
	if c.OnChange != nil {
		c.OnChange(clusterQueue, localQueue)
	}
}

func (c *Cache) snapshotLocked() *engine.Snapshot {
	if c.snap != nil {
		return c.snap
	}
	in := engine.Input{
		Flavors:       make([]engine.ResourceFlavor, 0, len(c.flavors)),
		ClusterQueues: make([]engine.ClusterQueue, 0, len(c.cqs)),
		Cohorts:       make([]engine.Cohort, 0, len(c.cohorts)),
		Admitted:      make([]engine.Workload, 0, len(c.admitted)),
	}
	for _, f := range c.flavors {
		in.Flavors = append(in.Flavors, f)
	}
	for _, cq := range c.cqs {
		in.ClusterQueues = append(in.ClusterQueues, cq.spec)
	}
	for _, co := range c.cohorts {
		in.Cohorts = append(in.Cohorts, co)
	}
	for _, a := range c.admitted {
		in.Admitted = append(in.Admitted, a.wl)
	}
	c.snap = engine.NewSnapshot(in)
	return c.snap
}

func sameAdmission(a, b *engine.Admission) bool {
	if a == nil || b == nil {
		return a == b
	}
	if a.ClusterQueue != b.ClusterQueue || len(a.PodSets) != len(b.PodSets) {
		return false
	}
	for i := range a.PodSets {
		pa, pb := a.PodSets[i], b.PodSets[i]
		if pa.Name != pb.Name || pa.Count != pb.Count || len(pa.Usage) != len(pb.Usage) {
			return false
		}
		for r, v := range pa.Usage {
			if pb.Usage[r] != v || pa.Flavors[r] != pb.Flavors[r] {
				return false
			}
		}
	}
	return true
}

func union(a, b []string) []string {
	set := make(map[string]bool, len(a)+len(b))
	for _, s := range a {
		set[s] = true
	}
	for _, s := range b {
		set[s] = true
	}
	out := make([]string, 0, len(set))
	for s := range set {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}
