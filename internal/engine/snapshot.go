package engine

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Input is everything a snapshot is built from; the manager's adapter and the worker agent fill it.
type Input struct {
	Flavors       []ResourceFlavor
	ClusterQueues []ClusterQueue
	Cohorts       []Cohort
	// Admitted are the workloads holding quota (Admission set), including those being evicted.
	Admitted []Workload
}

// InactiveReason says why a ClusterQueue admits nothing; the status controller shows it as is.
type InactiveReason string

const (
	// FlavorNotFound: the queue names a ResourceFlavor that does not exist.
	FlavorNotFound InactiveReason = "FlavorNotFound"
	// InvalidResourceGroups: covered resources and flavor resources disagree.
	InvalidResourceGroups InactiveReason = "InvalidResourceGroups"
	// CohortCycle: the queue's cohort is in, or under, a cycle of parent references.
	CohortCycle InactiveReason = "CohortCycle"
	// Stopped: stopPolicy Hold or HoldAndDrain.
	Stopped InactiveReason = "Stopped"
)

// Snapshot is the indexed, validated state the cycle decides on: flavors, the cohort tree with
// its quotas, and the usage of admitted workloads accounted up the tree. The manager keeps one up
// to date with AddAdmitted, Remove and SetEvicting as workloads change, and rebuilds it with
// NewSnapshot when a flavor, queue or cohort changes. A cycle never modifies it.
type Snapshot struct {
	flavors map[string]*ResourceFlavor

	// Every (flavor, resource) pair any quota mentions has a dense index, so usage is a flat array.
	frs     []flavorResource
	frIndex map[flavorResource]int
	// frRes maps an fr to its resource's index in resNames (fair sharing sums over flavors).
	frRes    []int
	resNames []corev1.ResourceName

	nodes   []*node
	cqs     map[string]*clusterQueue
	cqNames []string
	cohorts map[string]*node
	// trees lists the queues of each cohort tree by root node id, sorted by name.
	trees map[int][]*clusterQueue

	// usage[node.id*len(frs)+fr] is the node's usage; see quota.go for what a cohort's usage means.
	usage    []int64
	admitted map[string]*admittedWorkload
	// evicting indexes the admitted workloads whose eviction is under way.
	evicting map[string]*admittedWorkload
	orphans  map[string]string
	// building defers ordering admitted workloads to one sort at the end of NewSnapshot.
	building bool
}

type flavorResource struct {
	flavor   string
	resource corev1.ResourceName
}

// node is a ClusterQueue or a cohort in the quota tree. The per-fr slices are static for the
// snapshot's life; only usage changes.
type node struct {
	id     int
	name   string
	cq     *clusterQueue // nil for cohorts
	parent *node
	// path runs from the tree's root to this node, inclusive.
	path     []*node
	children []*node
	weight   float64

	nominal     []int64
	quota       []int64 // nominal plus what children lend (subtree quota)
	guaranteed  []int64 // the part of quota kept from the parent by lendingLimit
	borrowLimit []int64 // -1: unlimited
	lendLimit   []int64 // -1: unlimited
}

type clusterQueue struct {
	spec     ClusterQueue
	node     *node
	groups   []flavorGroup
	groupOf  map[corev1.ResourceName]int
	inactive InactiveReason
	message  string
	admitted map[string]*admittedWorkload
	// ordered holds the same workloads in preemption-candidate order, kept sorted as workloads
	// come and go so that a cycle never sorts them.
	ordered []*admittedWorkload
}

type flavorGroup struct {
	resources []corev1.ResourceName
	flavors   []groupFlavor
}

type groupFlavor struct {
	name   string
	flavor *ResourceFlavor
	fr     []int // fr index per group resource
}

type admittedWorkload struct {
	wl       Workload
	cq       *clusterQueue
	usage    []frAmount
	evicting bool
}

type frAmount struct {
	fr  int
	amt int64
}

// NewSnapshot validates and indexes the input. Problems never fail the build: a queue with a
// bad spec is inactive with a reason (ClusterQueueStatus), and an admitted workload of an
// unknown queue is listed by Orphans.
func NewSnapshot(in Input) *Snapshot {
	s := &Snapshot{
		flavors:  make(map[string]*ResourceFlavor, len(in.Flavors)),
		frIndex:  map[flavorResource]int{},
		cqs:      make(map[string]*clusterQueue, len(in.ClusterQueues)),
		cohorts:  map[string]*node{},
		trees:    map[int][]*clusterQueue{},
		admitted: make(map[string]*admittedWorkload, len(in.Admitted)),
		evicting: map[string]*admittedWorkload{},
		orphans:  map[string]string{},
	}
	for i := range in.Flavors {
		f := in.Flavors[i]
		s.flavors[f.Name] = &f
	}
	s.indexFlavorResources(in)
	cohortSpecs := map[string]*Cohort{}
	for i := range in.Cohorts {
		c := in.Cohorts[i]
		cohortSpecs[c.Name] = &c
	}
	cyclic := findCohortCycles(in, cohortSpecs)
	s.buildCohorts(in, cohortSpecs, cyclic)
	s.buildClusterQueues(in, cyclic)
	s.computeQuotas()
	s.usage = make([]int64, len(s.nodes)*len(s.frs))
	s.building = true
	for _, w := range in.Admitted {
		if err := s.AddAdmitted(w); err != nil {
			s.orphans[w.Key] = err.Error()
		}
	}
	s.building = false
	for _, name := range s.cqNames {
		cq := s.cqs[name]
		sort.Slice(cq.ordered, func(i, j int) bool { return candidateBefore(cq.ordered[i], cq.ordered[j]) })
	}
	return s
}

func (s *Snapshot) indexFlavorResources(in Input) {
	seen := map[flavorResource]bool{}
	add := func(groups []ResourceGroup) {
		for _, g := range groups {
			for _, f := range g.Flavors {
				for _, r := range f.Resources {
					seen[flavorResource{f.Name, r.Name}] = true
				}
				for _, r := range g.CoveredResources {
					seen[flavorResource{f.Name, r}] = true
				}
			}
		}
	}
	for _, cq := range in.ClusterQueues {
		add(cq.ResourceGroups)
	}
	for _, c := range in.Cohorts {
		add(c.ResourceGroups)
	}
	for fr := range seen {
		s.frs = append(s.frs, fr)
	}
	sort.Slice(s.frs, func(i, j int) bool {
		if s.frs[i].flavor != s.frs[j].flavor {
			return s.frs[i].flavor < s.frs[j].flavor
		}
		return s.frs[i].resource < s.frs[j].resource
	})
	resIdx := map[corev1.ResourceName]int{}
	for i, fr := range s.frs {
		s.frIndex[fr] = i
		if _, ok := resIdx[fr.resource]; !ok {
			resIdx[fr.resource] = len(s.resNames)
			s.resNames = append(s.resNames, fr.resource)
		}
		s.frRes = append(s.frRes, resIdx[fr.resource])
	}
}

// findCohortCycles maps every cohort that is in, or hangs under, a parent cycle to a message
// naming the cycle.
func findCohortCycles(in Input, specs map[string]*Cohort) map[string]string {
	cyclic := map[string]string{}
	names := make([]string, 0, len(specs))
	for n := range specs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, start := range names {
		var chain []string
		pos := map[string]int{}
		cur := start
		for cur != "" {
			if msg, ok := cyclic[cur]; ok {
				for _, c := range chain {
					cyclic[c] = msg
				}
				break
			}
			if i, ok := pos[cur]; ok {
				loop := append(append([]string{}, chain[i:]...), cur)
				msg := fmt.Sprintf("cohort %q is in a cycle of parents: %s", cur, strings.Join(loop, " -> "))
				for _, c := range chain {
					cyclic[c] = msg
				}
				break
			}
			pos[cur] = len(chain)
			chain = append(chain, cur)
			spec, ok := specs[cur]
			if !ok {
				break
			}
			cur = spec.Parent
		}
	}
	return cyclic
}

func (s *Snapshot) newNode(name string, groups []ResourceGroup, fs *FairSharing) *node {
	n := len(s.frs)
	nd := &node{
		id:          len(s.nodes),
		name:        name,
		weight:      1,
		nominal:     make([]int64, n),
		quota:       make([]int64, n),
		guaranteed:  make([]int64, n),
		borrowLimit: make([]int64, n),
		lendLimit:   make([]int64, n),
	}
	if fs != nil {
		nd.weight = fs.Weight
	}
	for i := range nd.borrowLimit {
		nd.borrowLimit[i] = -1
		nd.lendLimit[i] = -1
	}
	for _, g := range groups {
		for _, f := range g.Flavors {
			for _, r := range f.Resources {
				i := s.frIndex[flavorResource{f.Name, r.Name}]
				nd.nominal[i] = max(0, r.Nominal)
				if r.BorrowingLimit != nil {
					nd.borrowLimit[i] = max(0, *r.BorrowingLimit)
				}
				if r.LendingLimit != nil {
					nd.lendLimit[i] = max(0, *r.LendingLimit)
				}
			}
		}
	}
	s.nodes = append(s.nodes, nd)
	return nd
}

func (s *Snapshot) buildCohorts(in Input, specs map[string]*Cohort, cyclic map[string]string) {
	// Cohorts named only by a queue or as a parent are implicit roots without quota.
	names := map[string]bool{}
	for n, c := range specs {
		names[n] = true
		if c.Parent != "" {
			names[c.Parent] = true
		}
	}
	for _, cq := range in.ClusterQueues {
		if cq.Cohort != "" {
			names[cq.Cohort] = true
		}
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	for _, name := range sorted {
		if _, bad := cyclic[name]; bad {
			continue
		}
		var groups []ResourceGroup
		var fs *FairSharing
		if spec, ok := specs[name]; ok {
			groups, fs = spec.ResourceGroups, spec.FairSharing
		}
		s.cohorts[name] = s.newNode(name, groups, fs)
	}
	for _, name := range sorted {
		c, ok := s.cohorts[name]
		if !ok {
			continue
		}
		if spec, ok := specs[name]; ok && spec.Parent != "" {
			if p, ok := s.cohorts[spec.Parent]; ok {
				c.parent = p
				p.children = append(p.children, c)
			}
		}
	}
}

func (s *Snapshot) buildClusterQueues(in Input, cyclic map[string]string) {
	specs := append([]ClusterQueue(nil), in.ClusterQueues...)
	sort.Slice(specs, func(i, j int) bool { return specs[i].Name < specs[j].Name })
	for _, spec := range specs {
		if _, dup := s.cqs[spec.Name]; dup {
			continue
		}
		cq := &clusterQueue{spec: spec, groupOf: map[corev1.ResourceName]int{}, admitted: map[string]*admittedWorkload{}}
		cq.node = s.newNode(spec.Name, spec.ResourceGroups, spec.FairSharing)
		cq.node.cq = cq
		s.cqs[spec.Name] = cq
		s.cqNames = append(s.cqNames, spec.Name)
		if msg, bad := cyclic[spec.Cohort]; bad {
			cq.inactive, cq.message = CohortCycle, msg
		} else if p, ok := s.cohorts[spec.Cohort]; ok {
			cq.node.parent = p
			p.children = append(p.children, cq.node)
		}
		s.indexGroups(cq)
		if cq.inactive == "" && spec.Stopped {
			cq.inactive, cq.message = Stopped, fmt.Sprintf("clusterqueue %q is stopped (spec.stopPolicy); set it to None to admit again", spec.Name)
		}
	}
}

// indexGroups resolves a queue's resource groups and marks it inactive when they are unusable.
func (s *Snapshot) indexGroups(cq *clusterQueue) {
	fail := func(reason InactiveReason, format string, args ...any) {
		if cq.inactive == "" {
			cq.inactive, cq.message = reason, fmt.Sprintf(format, args...)
		}
	}
	for gi, g := range cq.spec.ResourceGroups {
		fg := flavorGroup{resources: g.CoveredResources}
		for _, r := range g.CoveredResources {
			if prev, dup := cq.groupOf[r]; dup {
				fail(InvalidResourceGroups, "resource %s is covered by resource groups %d and %d", r, prev, gi)
				continue
			}
			cq.groupOf[r] = gi
		}
		for _, f := range g.Flavors {
			gf := groupFlavor{name: f.Name, flavor: s.flavors[f.Name], fr: make([]int, len(g.CoveredResources))}
			if gf.flavor == nil {
				fail(FlavorNotFound, "flavor %q not found", f.Name)
			}
			listed := map[corev1.ResourceName]bool{}
			for _, r := range f.Resources {
				listed[r.Name] = true
			}
			for i, r := range g.CoveredResources {
				gf.fr[i] = s.frIndex[flavorResource{f.Name, r}]
				if !listed[r] {
					fail(InvalidResourceGroups, "flavor %q does not list covered resource %s", f.Name, r)
				}
			}
			if len(listed) != len(g.CoveredResources) {
				fail(InvalidResourceGroups, "flavor %q lists resources outside coveredResources", f.Name)
			}
			fg.flavors = append(fg.flavors, gf)
		}
		cq.groups = append(cq.groups, fg)
	}
}

// computeQuotas fills subtree quota and guaranteed amounts bottom-up and indexes the trees.
func (s *Snapshot) computeQuotas() {
	for _, n := range s.nodes {
		for p := n; p != nil; p = p.parent {
			n.path = append(n.path, p)
		}
		for i, j := 0, len(n.path)-1; i < j; i, j = i+1, j-1 {
			n.path[i], n.path[j] = n.path[j], n.path[i]
		}
	}
	order := append([]*node(nil), s.nodes...)
	sort.SliceStable(order, func(i, j int) bool { return len(order[i].path) > len(order[j].path) })
	for _, n := range order {
		for fr := range s.frs {
			q := n.nominal[fr]
			for _, c := range n.children {
				q += c.quota[fr] - c.guaranteed[fr]
			}
			n.quota[fr] = q
			if ll := n.lendLimit[fr]; ll >= 0 && n.parent != nil {
				n.guaranteed[fr] = max(0, q-ll)
			}
		}
	}
	for _, name := range s.cqNames {
		cq := s.cqs[name]
		root := cq.node.path[0].id
		s.trees[root] = append(s.trees[root], cq)
	}
}

// AddAdmitted accounts an admitted workload (or replaces one with the same key), e.g. when the
// manager sees a quota reservation it wrote or observed.
func (s *Snapshot) AddAdmitted(w Workload) error {
	if w.Admission == nil {
		return fmt.Errorf("workload %q: no admission", w.Key)
	}
	name := w.Admission.ClusterQueue
	if name == "" {
		name = w.ClusterQueue
	}
	cq, ok := s.cqs[name]
	if !ok {
		return fmt.Errorf("workload %q: clusterqueue %q not found", w.Key, name)
	}
	s.Remove(w.Key)
	a := &admittedWorkload{wl: w, cq: cq, evicting: w.Evicting, usage: s.admissionUsage(w.Admission)}
	s.admitted[w.Key] = a
	cq.admitted[w.Key] = a
	if s.building {
		cq.ordered = append(cq.ordered, a)
	} else {
		i := sort.Search(len(cq.ordered), func(i int) bool { return candidateBefore(a, cq.ordered[i]) })
		cq.ordered = append(cq.ordered, nil)
		copy(cq.ordered[i+1:], cq.ordered[i:])
		cq.ordered[i] = a
	}
	if a.evicting {
		s.evicting[w.Key] = a
	}
	acc := accounting{s: s, usage: s.usage}
	for _, u := range a.usage {
		acc.add(cq.node, u.fr, u.amt)
	}
	return nil
}

func (s *Snapshot) admissionUsage(adm *Admission) []frAmount {
	var out []frAmount
	for _, ps := range adm.PodSets {
		for r, amt := range ps.Usage {
			fr, ok := s.frIndex[flavorResource{ps.Flavors[r], r}]
			if !ok || amt == 0 {
				// Quota nobody holds cannot be exceeded; nothing to account.
				continue
			}
			out = mergeAmount(out, fr, amt)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].fr < out[j].fr })
	return out
}

func mergeAmount(list []frAmount, fr int, amt int64) []frAmount {
	for i := range list {
		if list[i].fr == fr {
			list[i].amt += amt
			return list
		}
	}
	return append(list, frAmount{fr, amt})
}

// Remove releases a workload's quota (finished, deleted, or evicted and gone). It reports
// whether the workload was known, and its ClusterQueue for the QuotaFreed requeue trigger.
func (s *Snapshot) Remove(key string) (clusterQueue string, ok bool) {
	a, ok := s.admitted[key]
	if !ok {
		return "", false
	}
	acc := accounting{s: s, usage: s.usage}
	for _, u := range a.usage {
		acc.add(a.cq.node, u.fr, -u.amt)
	}
	delete(s.admitted, key)
	delete(s.evicting, key)
	delete(a.cq.admitted, key)
	list := a.cq.ordered
	for i := sort.Search(len(list), func(i int) bool { return !candidateBefore(list[i], a) }); i < len(list); i++ {
		if list[i] == a {
			copy(list[i:], list[i+1:])
			list[len(list)-1] = nil
			a.cq.ordered = list[:len(list)-1]
			break
		}
	}
	return a.cq.spec.Name, true
}

// SetEvicting records that a workload's eviction has started: its quota still counts until
// Remove, but it is no longer a preemption candidate.
func (s *Snapshot) SetEvicting(key string) error {
	a, ok := s.admitted[key]
	if !ok {
		return fmt.Errorf("workload %q: not admitted", key)
	}
	a.evicting = true
	a.wl.Evicting = true
	s.evicting[key] = a
	return nil
}

// evictingByTree groups the workloads being evicted by cohort tree root, sorted by key.
func (s *Snapshot) evictingByTree() map[int][]*admittedWorkload {
	out := map[int][]*admittedWorkload{}
	keys := make([]string, 0, len(s.evicting))
	for k := range s.evicting {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		a := s.evicting[k]
		root := a.cq.node.path[0].id
		out[root] = append(out[root], a)
	}
	return out
}

// Orphans lists admitted workloads that could not be accounted, with the reason; the manager
// logs them (they are usually admitted to a queue that was deleted).
func (s *Snapshot) Orphans() map[string]string {
	out := make(map[string]string, len(s.orphans))
	for k, v := range s.orphans {
		out[k] = v
	}
	return out
}

// ClusterQueueNames lists the queues in the snapshot, sorted.
func (s *Snapshot) ClusterQueueNames() []string {
	return append([]string(nil), s.cqNames...)
}
