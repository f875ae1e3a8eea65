// Package placement chooses the worker cluster an admitted workload runs on, from the workers'
// latest capacity reports minus the placements already made but not yet visible in a report. It
// is pure bookkeeping (no API calls): the scheduler asks it before committing an admission, so
// quota is never reserved for a workload no worker has room for, and every decision comes with
// a sentence per cluster saying why it was or was not chosen.
package placement

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	fleetq "github.com/fleetq/fleetq/api/fleetq/v1alpha1"
	"github.com/fleetq/fleetq/internal/engine"
	"github.com/fleetq/fleetq/internal/engine/nodefit"
)

// Book holds what placement decides on. It is safe for concurrent use.
type Book struct {
	mu      sync.Mutex
	reports map[string]*report
	// assumed are placements made since the worker's report last accounted them.
	assumed map[string]*assumption
	// silent holds workers whose agent left a copy untouched, with the update time of their
	// report then; a report written after it shows the agent is back.
	silent map[string]time.Time
	// refused holds, per workload, the workers that would not take its copy and until when
	// they are not tried again for it.
	refused map[string]map[string]refusal
}

type refusal struct {
	until time.Time
	why   string
}

// BatchJob is the integration of batch/v1 Jobs, which every agent runs.
const BatchJob = "batch/job"

type report struct {
	revision int64
	updated  time.Time
	fenced   bool
	nodes    []node
	flavors  map[string]bool
	// kinds are the integrations the worker's agent runs.
	kinds []string
	// keepRunning: its agent leaves running copies alone while fenced.
	keepRunning bool
}

type node struct {
	name    string
	flavors []string
	free    map[corev1.ResourceName]int64
	alloc   map[corev1.ResourceName]int64
}

type assumption struct {
	cluster string
	// take is what the placement takes from each node.
	take map[string]map[corev1.ResourceName]int64
	// admittedAt, once the worker admitted the copy, is when (worker clock); a report updated
	// strictly after it counts the copy and the assumption ends (both are whole seconds, so a
	// report of the same second may predate the admission).
	admittedAt time.Time
}

// NewBook returns an empty book.
func NewBook() *Book {
	return &Book{reports: map[string]*report{}, assumed: map[string]*assumption{}, silent: map[string]time.Time{}, refused: map[string]map[string]refusal{}}
}

// SetReport records a worker's capacity report; older revisions are ignored. Assumptions the
// report already accounts for end.
func (b *Book) SetReport(cluster string, cr *fleetq.CapacityReport) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if cur, ok := b.reports[cluster]; ok && cur.revision > cr.Status.Revision {
		return
	}
	r := &report{revision: cr.Status.Revision, updated: cr.Status.UpdateTime.Time, fenced: cr.Status.Fenced, flavors: map[string]bool{}, kinds: cr.Status.Kinds,
		keepRunning: cr.Status.FencingPolicy == fleetq.FencingPolicyKeepRunning}
	if len(r.kinds) == 0 {
		r.kinds = []string{BatchJob} // agents that do not say ran batch/v1 Jobs only
	}
	for _, f := range cr.Status.Flavors {
		r.flavors[f.Name] = true
	}
	for _, n := range cr.Status.Nodes {
		if n.Unschedulable {
			continue
		}
		nd := node{name: n.Name, flavors: n.Flavors, free: map[corev1.ResourceName]int64{}, alloc: map[corev1.ResourceName]int64{}}
		for res, q := range n.Free {
			nd.free[res] = engine.Amount(res, q)
		}
		for res, q := range n.Allocatable {
			nd.alloc[res] = engine.Amount(res, q)
		}
		r.nodes = append(r.nodes, nd)
	}
	b.reports[cluster] = r
	if t, ok := b.silent[cluster]; ok && r.updated.After(t) {
		delete(b.silent, cluster)
	}
	for key, a := range b.assumed {
		if a.cluster == cluster && !a.admittedAt.IsZero() && r.updated.After(a.admittedAt) {
			delete(b.assumed, key)
		}
	}
}

// RemoveCluster forgets a worker's report and its assumptions.
func (b *Book) RemoveCluster(cluster string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.reports, cluster)
	delete(b.silent, cluster)
	for key, a := range b.assumed {
		if a.cluster == cluster {
			delete(b.assumed, key)
		}
	}
}

// Admitted tells the book the worker admitted a workload's copy at t (worker clock): the next
// report written after t accounts for it.
func (b *Book) Admitted(key string, t time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	a, ok := b.assumed[key]
	if !ok {
		return
	}
	a.admittedAt = t
	if r, ok := b.reports[a.cluster]; ok && r.updated.After(t) {
		delete(b.assumed, key)
	}
}

// Silent takes a worker out of placement because its agent left a copy untouched (no verdict)
// for too long: a worker whose agent is down would otherwise take every workload whose
// placement its stale report allows. The next report the agent writes puts it back.
func (b *Book) Silent(cluster string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if r, ok := b.reports[cluster]; ok {
		b.silent[cluster] = r.updated
	}
}

// Refused takes a worker out of one workload's placement until a time, because the worker's API
// server would not take the workload's copy (a quota, a policy or an object of the same name
// there): placing it there again at once would only fail the same way.
func (b *Book) Refused(key, cluster string, until time.Time, why string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.refused[key] == nil {
		b.refused[key] = map[string]refusal{}
	}
	b.refused[key][cluster] = refusal{until: until, why: why}
}

// Release forgets everything the book holds for a workload that is gone or finished.
func (b *Book) Release(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.assumed, key)
	delete(b.refused, key)
}

// Forget ends a workload's assumption (placement undone, copy gone).
func (b *Book) Forget(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.assumed, key)
}

// Candidate is a worker a workload may go to, in preference order.
type Candidate struct {
	Cluster string
	// Usable is false when the worker is not connected; Why says why.
	Usable bool
	Why    string
	// AwaitReport is set for a worker that connected moments ago (or, when not Usable, is
	// connecting for the first time): while its capacity report has not been read, or still
	// says its agent is fenced, placement waits for it rather than pass it over for the next in
	// preference order (after a manager restart every pending job would otherwise go to
	// whichever worker's report came, or unfenced, first).
	AwaitReport bool
}

// KeepsRunningWhenFenced reports whether the worker's agent, by its last report, keeps its
// copies running while fenced (fencingPolicy KeepRunning): they are not stopped by losing the
// manager, so they must not be placed elsewhere meanwhile.
func (b *Book) KeepsRunningWhenFenced(cluster string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	r, ok := b.reports[cluster]
	return ok && r.keepRunning
}

// Request is a workload to place: its pod sets and the flavors its admission assigned.
type Request struct {
	Key string
	// Framework is the integration of the workload's job ("batch/job"); "" for a workload with
	// no job, which any worker may take.
	Framework  string
	PodSets    []engine.PodSet
	Admission  *engine.Admission
	Candidates []Candidate
	// Now is when the placement is made; workers' refusals of this workload expire against it.
	Now time.Time
}

// Decision is where a workload goes, or why nowhere.
type Decision struct {
	Cluster string
	// Explanation has one clause per candidate, e.g.
	// "us-east: chosen (fits on 2 nodes, score 0.88); eu-west: flavor a100-flavor absent".
	Explanation string
}

// Place picks the first candidate, in the MultiKueueConfig's preference order, where the whole
// workload fits now on nodes of its assigned flavors; within that cluster nodefit places pods
// best-fit, which keeps large free blocks for later gangs. On success the placement is assumed
// until the worker's report shows it.
func (b *Book) Place(req Request) (Decision, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	dec, res, ok := b.choose(req, b.freeNodes)
	if ok {
		b.assumed[req.Key] = &assumption{cluster: dec.Cluster, take: taken(res, req)}
	}
	return dec, ok
}

// Freed is a running workload a preemption would evict: where it runs, and its pod sets and
// flavors, whose room its pods give back.
type Freed struct {
	Cluster   string
	PodSets   []engine.PodSet
	Admission *engine.Admission
}

// PlaceAfter says whether the workload would fit on some candidate, as Place chooses, once the
// freed workloads' pods are gone; it assumes nothing. The scheduler asks it before preempting:
// victims whose room is in the wrong worker, or scattered over nodes, free quota the preemptor
// cannot use.
func (b *Book) PlaceAfter(req Request, freed []Freed) (Decision, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	dec, _, ok := b.choose(req, func(cluster string, r *report) []node {
		nodes := b.freeNodes(cluster, r)
		for _, f := range freed {
			if f.Cluster == cluster {
				giveBack(nodes, f)
			}
		}
		return nodes
	})
	return dec, ok
}

// giveBack adds a freed workload's pods back to the nodes they most likely hold: for each pod,
// the first node of its flavors that uses at least its requests (a report says what each node
// has free, not which pods hold it), never above the node's allocatable.
func giveBack(nodes []node, f Freed) {
	for _, ps := range f.PodSets {
		flavors := flavorsOf(f.Admission, ps.Name)
		for range ps.Count {
			i := slices.IndexFunc(nodes, func(n node) bool { return hasAll(n.flavors, flavors) && holds(n, ps.Requests) })
			if i < 0 {
				continue
			}
			for res, v := range ps.Requests {
				nodes[i].free[res] = min(nodes[i].free[res]+v, nodes[i].alloc[res])
			}
		}
	}
}

// holds says whether a node uses at least the requests (allocatable minus free).
func holds(n node, reqs map[corev1.ResourceName]int64) bool {
	for res, v := range reqs {
		if v > 0 && n.alloc[res]-n.free[res] < v {
			return false
		}
	}
	return true
}

// choose picks the first candidate, in preference order, whose nodes (as nodesOf gives them) fit
// the whole workload, with the sentence per candidate that says why or why not.
func (b *Book) choose(req Request, nodesOf func(cluster string, r *report) []node) (Decision, nodefit.Result, bool) {
	var clauses []string
	chosen := ""
	var chosenFit nodefit.Result
	// waitFor ends the search at a worker placement waits for (AwaitReport), saying why.
	waitFor := func(cluster, why string) (Decision, nodefit.Result, bool) {
		clauses = append(clauses, cluster+": "+why)
		return Decision{Explanation: "waiting for a worker's capacity report: " + strings.Join(clauses, "; ")}, nodefit.Result{}, false
	}
	for _, c := range req.Candidates {
		if chosen != "" {
			break
		}
		if !c.Usable && c.AwaitReport {
			return waitFor(c.Cluster, c.Why+"; waiting for it before trying the next worker")
		}
		if !c.Usable {
			clauses = append(clauses, fmt.Sprintf("%s: %s", c.Cluster, c.Why))
			continue
		}
		r, ok := b.reports[c.Cluster]
		if !ok && c.AwaitReport {
			return waitFor(c.Cluster, "connected, its capacity report not read yet; waiting for it before trying the next worker")
		}
		if !ok {
			clauses = append(clauses, fmt.Sprintf("%s: no capacity report yet (is fleetq-agent running there?)", c.Cluster))
			continue
		}
		if r.fenced && c.AwaitReport {
			// Most likely fenced while this manager restarted: it unfences once it sees the
			// manager's lease renewed, seconds from now.
			return waitFor(c.Cluster, "connected, its agent still fenced from before; waiting for it to see this manager's lease")
		}
		if r.fenced {
			clauses = append(clauses, fmt.Sprintf("%s: agent fenced (lost contact with this manager)", c.Cluster))
			continue
		}
		if _, silent := b.silent[c.Cluster]; silent {
			clauses = append(clauses, fmt.Sprintf("%s: its agent left a copy untouched and has not reported since %s (is fleetq-agent running there?)",
				c.Cluster, r.updated.UTC().Format(time.RFC3339)))
			continue
		}
		if req.Framework != "" && !slices.Contains(r.kinds, req.Framework) {
			clauses = append(clauses, fmt.Sprintf("%s: does not run %s (its agent runs %s; install the kind's CRD and operator there and list it in the agent's integrations)",
				c.Cluster, req.Framework, strings.Join(r.kinds, ", ")))
			continue
		}
		if rf, ok := b.refused[req.Key][c.Cluster]; ok {
			if req.Now.Before(rf.until) {
				clauses = append(clauses, fmt.Sprintf("%s: refused this workload's copy (%s); tried again after %s", c.Cluster, rf.why, rf.until.UTC().Format(time.RFC3339)))
				continue
			}
			delete(b.refused[req.Key], c.Cluster)
		}
		res, why := fit(nodesOf(c.Cluster, r), r, req)
		if !res.Fits {
			clauses = append(clauses, fmt.Sprintf("%s: %s", c.Cluster, why))
			continue
		}
		chosen, chosenFit = c.Cluster, res
		clauses = append(clauses, fmt.Sprintf("%s: chosen (fits on %d node(s))", c.Cluster, countNodes(res)))
	}
	if chosen == "" {
		return Decision{Explanation: "no worker has room: " + strings.Join(clauses, "; ")}, nodefit.Result{}, false
	}
	return Decision{Cluster: chosen, Explanation: strings.Join(clauses, "; ")}, chosenFit, true
}

// freeNodes is a report's nodes minus what assumed placements took.
func (b *Book) freeNodes(cluster string, r *report) []node {
	out := make([]node, len(r.nodes))
	for i, n := range r.nodes {
		out[i] = node{name: n.name, flavors: n.flavors, free: make(map[corev1.ResourceName]int64, len(n.free)), alloc: n.alloc}
		for res, v := range n.free {
			out[i].free[res] = v
		}
	}
	idx := make(map[string]int, len(out))
	for i, n := range out {
		idx[n.name] = i
	}
	for _, a := range b.assumed {
		if a.cluster != cluster {
			continue
		}
		for nodeName, take := range a.take {
			if i, ok := idx[nodeName]; ok {
				for res, v := range take {
					out[i].free[res] -= v
				}
			}
		}
	}
	carryDeficits(out)
	return out
}

// carryDeficits moves what assumptions took beyond a node's free room onto other nodes of the
// same flavors. An assumption names the nodes placement chose, but the agent fits each copy
// itself, in the order copies reach it: a copy admitted onto a node another copy was assumed on
// fills it in the report, and the room the still-assumed copy will really use is elsewhere. Left
// negative on the full node, that deficit would be room promised twice.
func carryDeficits(nodes []node) {
	for i := range nodes {
		for res, v := range nodes[i].free {
			if v >= 0 {
				continue
			}
			deficit := -v
			for j := range nodes {
				if deficit == 0 {
					break
				}
				if j == i || !slices.Equal(nodes[j].flavors, nodes[i].flavors) || nodes[j].free[res] <= 0 {
					continue
				}
				moved := min(deficit, nodes[j].free[res])
				nodes[j].free[res] -= moved
				deficit -= moved
			}
			nodes[i].free[res] = -deficit
		}
	}
}

// fit runs the gang fit on the nodes that carry every flavor the admission assigned to a pod set.
func fit(nodes []node, r *report, req Request) (nodefit.Result, string) {
	var sets []nodefit.PodSet
	cand := make([]nodefit.Node, len(nodes))
	for j, n := range nodes {
		cand[j] = nodefit.Node{Name: n.name, Labels: map[string]string{}, Free: n.free}
	}
	for i, ps := range req.PodSets {
		flavors := flavorsOf(req.Admission, ps.Name)
		for _, f := range flavors {
			if !r.flavors[f] {
				return nodefit.Result{}, fmt.Sprintf("flavor %s absent", f)
			}
		}
		// Pods of this set may only use nodes of all its flavors: a label per pod set says so.
		label := fmt.Sprintf("podset-%d", i)
		for j, n := range nodes {
			if hasAll(n.flavors, flavors) {
				cand[j].Labels[label] = "yes"
			}
		}
		sets = append(sets, nodefit.PodSet{Name: ps.Name, Count: ps.Count, Requests: ps.Requests, FlavorLabels: map[string]string{label: "yes"}})
	}
	res := nodefit.Fit(cand, sets)
	if !res.Fits {
		return res, res.Reason
	}
	return res, ""
}

func flavorsOf(a *engine.Admission, podSet string) []string {
	for i := range a.PodSets {
		if a.PodSets[i].Name == podSet {
			return a.PodSets[i].FlavorNames()
		}
	}
	return nil
}

func hasAll(have, want []string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}

func countNodes(res nodefit.Result) int {
	set := map[string]bool{}
	for _, p := range res.Placements {
		for _, n := range p.Nodes {
			set[n.Node] = true
		}
	}
	return len(set)
}

// taken is what a placement takes from each node.
func taken(res nodefit.Result, req Request) map[string]map[corev1.ResourceName]int64 {
	out := map[string]map[corev1.ResourceName]int64{}
	for i, p := range res.Placements {
		reqs := req.PodSets[i].Requests
		for _, nc := range p.Nodes {
			if out[nc.Node] == nil {
				out[nc.Node] = map[corev1.ResourceName]int64{}
			}
			for res, v := range reqs {
				out[nc.Node][res] += v * int64(nc.Count)
			}
		}
	}
	return out
}
