package engine

import (
	"container/heap"
	"fmt"
	"strings"
)

// Queues is what a cycle needs from the pending queues; queue.Manager implements it. The cycle
// pops heads, and every workload it pops it either admits (gone from the queue), requeues, or
// parks until a requeue trigger.
type Queues interface {
	// ClusterQueues lists the queues with workloads ready to pop, sorted.
	ClusterQueues() []string
	// Pop removes and returns the queue's head, or nil.
	Pop(clusterQueue string) *Workload
	// Requeue puts a popped workload back in its queue.
	Requeue(w *Workload)
	// Park keeps a popped workload aside until its queue is woken.
	Park(w *Workload)
}

// FairSharingStrategy is a rule deciding whether a fair-sharing preemption is justified.
type FairSharingStrategy string

const (
	// LessThanOrEqualToFinalShare: preempt if the preemptor's queue share with the workload stays
	// at or below the target queue's share without the victim.
	LessThanOrEqualToFinalShare FairSharingStrategy = "LessThanOrEqualToFinalShare"
	// LessThanInitialShare: preempt if the preemptor's queue share with the workload is below the
	// target queue's share before the preemption.
	LessThanInitialShare FairSharingStrategy = "LessThanInitialShare"
)

// FairSharingOptions turn fair sharing on: heads are ordered by dominant resource share and
// cohort preemption is judged by share, trying Strategies in order (Kueue's default when empty:
// LessThanOrEqualToFinalShare, then LessThanInitialShare).
type FairSharingOptions struct {
	Strategies []FairSharingStrategy
}

// Options tune a cycle.
type Options struct {
	FairSharing *FairSharingOptions
	// Place, when set, is asked before an admission is committed whether the workload has
	// somewhere to run (multi-cluster dispatch: a worker with room for all its pods). When it
	// says no, the queue's later flavors that fit quota outright are tried in turn (a flavor
	// with quota but no room must not hold a job that another flavor can run now); when none
	// has room, the workload stays pending with the reasons (NoPlacement) and takes no quota.
	Place func(w *Workload, a *Admission) (ok bool, reason string)
	// PlaceAfter, when set, is asked before a preemption is committed whether the preemptor
	// would have somewhere to run once its victims are gone. When it says no, nothing is
	// preempted and the workload waits with NoPlacement: victims whose eviction makes quota
	// but no room where the preemptor can run would be admitted again in the room they left,
	// and preempted again, over and over.
	PlaceAfter func(w *Workload, a *Admission, victims []*Workload) (ok bool, reason string)
	// Shielded, when set, says why an admitted workload may not be chosen by any preemption in
	// this cycle ("" when it may): dispatch shields those whose worker it cannot reach, since
	// their eviction cannot land until the worker answers (their quota stays held meanwhile)
	// and what runs there may already have finished unseen. Their usage counts as usual.
	Shielded func(w *Workload) (why string)
}

// Run performs one admission cycle over the snapshot and the pending queues and returns its
// decisions in the order they were taken. The snapshot is not modified; the queues are (see
// Queues). The manager applies the decisions, then records admissions and evictions in the
// snapshot as they land.
func Run(s *Snapshot, q Queues, opts Options) []Decision {
	c := &cycle{
		s:          s,
		q:          q,
		opts:       opts,
		acc:        accounting{s: s, usage: append([]int64(nil), s.usage...)},
		fut:        accounting{s: s, usage: append([]int64(nil), s.usage...)},
		evicting:   map[string]bool{},
		version:    make([]int, len(s.nodes)),
		blocked:    map[string]bool{},
		preempting: map[string]bool{},
	}
	c.evictingIn = s.evictingByTree()
	c.cands = map[*clusterQueue]*queueCandidates{}
	for _, list := range c.evictingIn {
		for _, a := range list {
			c.fut.addAll(a.cq.node, a.usage, -1)
		}
	}
	// 1. Get heads: the first workload of every queue that can be nominated.
	for _, name := range q.ClusterQueues() {
		c.pullHead(name)
	}
	// 2-4. Take the best head across queues, admit or preempt with exact re-accounting, and
	// replace it with the next workload of its queue.
	for c.heads.Len() > 0 {
		e := heap.Pop(&c.heads).(*entry)
		if e.version != c.version[e.cq.node.path[0].id] {
			// Usage in its cohort tree changed since it was nominated: nominate again, and
			// if it got worse than another head, let that one go first.
			c.nominate(e)
			if e.asg.mode == noFit {
				c.reject(e.w, e.cq, e.asg.reason, e.asg.message)
				c.pullHead(e.cq.spec.Name)
				continue
			}
			if c.heads.Len() > 0 && c.heads.less(c.heads.items[0], e) {
				heap.Push(&c.heads, e)
				continue
			}
		}
		c.process(e)
	}
	// 5. Requeue what stays at the head of its queue (preemptors, blocked StrictFIFO heads);
	// parked workloads were set aside on the way, admitted ones are gone from the queues.
	for _, w := range c.requeue {
		q.Requeue(w)
	}
	return c.decisions
}

type cycle struct {
	s    *Snapshot
	q    Queues
	opts Options
	// acc is usage now: admitted (evicting included) plus this cycle's admissions and reservations.
	acc accounting
	// fut is acc without the workloads being evicted: what preemption searches work on.
	fut accounting
	// evicting names the victims this cycle chose.
	evicting map[string]bool
	// evictingIn lists, per tree root node id, the workloads being evicted (sorted by key).
	evictingIn map[int][]*admittedWorkload
	// cands caches each queue's preemption candidates for the cycle.
	cands map[*clusterQueue]*queueCandidates
	// heldBuf, csBuf and mergeBuf are scratch for the victim search.
	heldBuf  []int64
	csBuf    candidateSet
	mergeBuf listHeap
	version  []int // per tree root node id
	blocked  map[string]bool
	// preempting marks the queues with a workload preempting, or waiting for evictions, in
	// this cycle.
	preempting map[string]bool
	heads      entryHeap
	decisions  []Decision
	// requeue holds popped workloads that go back to their queue once the cycle is over, so
	// that the cycle does not pop them again.
	requeue []*Workload
}

// entry is a queue head nominated for admission.
type entry struct {
	w  *Workload
	cq *clusterQueue
	// demand is resolved once; nominations reuse it.
	demand  []podDemand
	asg     assignment
	version int
	shares  []float64
	fair    bool
}

// pullHead nominates the next workload of a queue, deciding at once on those that cannot be
// admitted at all (more usage in this cycle can only make that worse).
func (c *cycle) pullHead(name string) {
	for !c.blocked[name] {
		w := c.q.Pop(name)
		if w == nil {
			return
		}
		cq, ok := c.s.cqs[name]
		if !ok {
			c.decide(Decision{Kind: Pending, Workload: w.Key, ClusterQueue: name, Reason: ClusterQueueNotFound,
				Message: fmt.Sprintf("clusterqueue %s not found", name), Parked: true})
			c.q.Park(w)
			continue
		}
		if cq.inactive != "" {
			c.decide(Decision{Kind: Pending, Workload: w.Key, ClusterQueue: name, Reason: ClusterQueueInactive,
				Message: fmt.Sprintf("clusterqueue %s is inactive: %s", name, cq.message), Parked: true})
			c.q.Park(w)
			continue
		}
		demand, reason, msg := resolve(w, cq)
		if msg != "" {
			c.reject(w, cq, reason, msg)
			continue
		}
		e := &entry{w: w, cq: cq, demand: demand, fair: c.opts.FairSharing != nil}
		c.nominate(e)
		if e.asg.mode == noFit {
			c.reject(e.w, cq, e.asg.reason, e.asg.message)
			continue
		}
		heap.Push(&c.heads, e)
		return
	}
}

func (c *cycle) nominate(e *entry) {
	e.asg = c.assign(e.w, e.cq, e.demand, nil)
	e.version = c.version[e.cq.node.path[0].id]
	if e.fair {
		e.shares = e.shares[:0]
		n := e.cq.node
		c.acc.addAll(n, e.asg.amounts, 1)
		for _, p := range n.path[1:] {
			e.shares = append(e.shares, c.acc.share(p))
		}
		c.acc.addAll(n, e.asg.amounts, -1)
	}
}

// reject records a workload that cannot be admitted now. BestEffortFIFO parks it until a
// requeue trigger; StrictFIFO keeps it at the head and blocks the queue for this cycle.
func (c *cycle) reject(w *Workload, cq *clusterQueue, reason PendingReason, msg string) {
	strict := cq.spec.QueueingStrategy == StrictFIFO
	c.decide(Decision{Kind: Pending, Workload: w.Key, ClusterQueue: cq.spec.Name, Reason: reason, Message: msg, Parked: !strict})
	if strict {
		c.requeue = append(c.requeue, w)
		c.blocked[cq.spec.Name] = true
		return
	}
	c.q.Park(w)
}

func (c *cycle) process(e *entry) {
	name := e.cq.spec.Name
	adm := e.asg.admission(e.cq)
	if e.asg.mode == fits {
		c.admit(e, adm, e.asg.borrows)
		return
	}
	if c.preempting[name] && e.cq.spec.QueueingStrategy != StrictFIFO {
		// One preemptor per queue at a time: the rest of the queue that cannot fit outright
		// waits, without a new message, until the preemptor's evictions land (they wake the
		// queue). Preempting for them now would evict jobs that may finish meanwhile.
		c.q.Park(e.w)
		c.pullHead(name)
		return
	}
	victims, waitFor, ok := c.findVictims(e.w, e.cq, e.asg.amounts, false)
	switch {
	case !ok:
		c.reject(e.w, e.cq, InsufficientQuota, e.asg.short.prefix+c.acc.quotaMessage(e.cq, e.asg.short.fr, e.asg.short.total)+"; preemption cannot free enough quota"+c.shieldedHint(e.cq))
		c.pullHead(name)
		return
	case len(victims) > 0:
		if ok, why := c.roomAfter(e.w, adm, victims); !ok {
			c.unplaced(e, adm, fmt.Sprintf("preempting %d workload(s) would free quota, but no worker would then have room: %s", len(victims), why))
			return
		}
		root := e.cq.node.path[0].id
		for _, v := range victims {
			a := c.s.admitted[v.Key]
			c.evicting[v.Key] = true
			c.evictingIn[root] = append(c.evictingIn[root], a)
			c.forget(a)
			c.fut.addAll(a.cq.node, a.usage, -1)
		}
		c.preempting[name] = true
		c.decide(Decision{Kind: Preempt, Workload: e.w.Key, ClusterQueue: name, Admission: adm,
			Borrows: c.fut.borrows(e.cq.node, e.asg.amounts), Victims: victims})
		c.requeue = append(c.requeue, e.w)
	case waitFor > 0:
		c.preempting[name] = true
		c.decide(Decision{Kind: Pending, Workload: e.w.Key, ClusterQueue: name, Admission: adm, Reason: WaitingForEvictions,
			Message: fmt.Sprintf("%s%s; waiting for %d workload(s) already being evicted to release quota",
				e.asg.short.prefix, c.acc.quotaMessage(e.cq, e.asg.short.fr, e.asg.short.total), waitFor),
			Parked: e.cq.spec.QueueingStrategy != StrictFIFO})
		if e.cq.spec.QueueingStrategy == StrictFIFO {
			c.requeue = append(c.requeue, e.w)
		} else {
			c.q.Park(e.w)
		}
	default:
		// Usage changed under the nomination and it fits outright now.
		c.admit(e, adm, c.acc.borrows(e.cq.node, e.asg.amounts))
		return
	}
	// The preemptor reserves its quota for the rest of the cycle (victims still count too), so
	// nothing admitted meanwhile can take the room it is making.
	c.charge(e)
	if e.cq.spec.QueueingStrategy == StrictFIFO {
		c.blocked[name] = true
		return
	}
	c.pullHead(name)
}

// roomAfter asks Options.PlaceAfter whether the preemptor has somewhere to run once the victims
// are gone; without the hook, quota is all that counts.
func (c *cycle) roomAfter(w *Workload, adm *Admission, victims []Victim) (bool, string) {
	if c.opts.PlaceAfter == nil {
		return true, ""
	}
	ws := make([]*Workload, len(victims))
	for i, v := range victims {
		ws[i] = &c.s.admitted[v.Key].wl
	}
	return c.opts.PlaceAfter(w, adm, ws)
}

// admit commits an admission, unless the placement hook finds nowhere to run it: then the
// workload waits (parked under BestEffortFIFO, blocking the queue under StrictFIFO) and its
// quota stays free for the rest of the cycle.
func (c *cycle) admit(e *entry, adm *Admission, borrows bool) {
	name := e.cq.spec.Name
	if c.opts.Place != nil {
		ok, why := c.opts.Place(e.w, adm)
		if !ok {
			var alt *Admission
			if alt, ok, why = c.placeInOtherFlavors(e, adm, why); !ok {
				c.unplaced(e, adm, why)
				return
			}
			adm, borrows = alt, e.asg.borrows
		}
	}
	c.charge(e)
	c.decide(Decision{Kind: Admit, Workload: e.w.Key, ClusterQueue: name, Admission: adm, Borrows: borrows})
	c.pullHead(name)
}

// placeInOtherFlavors looks for an admission in flavors other than those that had no room,
// one that fits quota outright, and asks the placement hook again, until one has room or no
// flavor is left; on success the entry's assignment is the new one. why gathers the reasons.
func (c *cycle) placeInOtherFlavors(e *entry, adm *Admission, why string) (*Admission, bool, string) {
	noRoom := map[string]bool{}
	for {
		for _, f := range adm.FlavorNames() {
			noRoom[f] = true
		}
		asg := c.assign(e.w, e.cq, e.demand, noRoom)
		if asg.mode != fits {
			return nil, false, why
		}
		adm = asg.admission(e.cq)
		ok, alsoWhy := c.opts.Place(e.w, adm)
		if ok {
			e.asg = asg
			return adm, true, ""
		}
		why += "; in flavor " + strings.Join(adm.FlavorNames(), ", ") + " instead: " + alsoWhy
	}
}

// unplaced leaves a workload pending with NoPlacement, taking no quota: parked under
// BestEffortFIFO (a capacity report wakes it), blocking its queue under StrictFIFO.
func (c *cycle) unplaced(e *entry, adm *Admission, msg string) {
	name := e.cq.spec.Name
	strict := e.cq.spec.QueueingStrategy == StrictFIFO
	c.decide(Decision{Kind: Pending, Workload: e.w.Key, ClusterQueue: name, Admission: adm, Reason: NoPlacement, Message: msg, Parked: !strict})
	if strict {
		c.requeue = append(c.requeue, e.w)
		c.blocked[name] = true
		return
	}
	c.q.Park(e.w)
	c.pullHead(name)
}

// charge adds an entry's usage to the cycle's accounting and invalidates its tree's nominations.
func (c *cycle) charge(e *entry) {
	c.acc.addAll(e.cq.node, e.asg.amounts, 1)
	c.fut.addAll(e.cq.node, e.asg.amounts, 1)
	c.version[e.cq.node.path[0].id]++
}

func (c *cycle) decide(d Decision) { c.decisions = append(c.decisions, d) }

// entryHeap orders heads across queues: without fair sharing, heads that fit without borrowing
// first; with it, lower dominant resource share along the cohort path first; then higher
// priority, earlier timestamp, and key for determinism.
type entryHeap struct{ items []*entry }

func (h *entryHeap) Len() int           { return len(h.items) }
func (h *entryHeap) Less(i, j int) bool { return h.less(h.items[i], h.items[j]) }
func (h *entryHeap) Swap(i, j int)      { h.items[i], h.items[j] = h.items[j], h.items[i] }
func (h *entryHeap) Push(x any)         { h.items = append(h.items, x.(*entry)) }
func (h *entryHeap) Pop() any {
	old := h.items
	e := old[len(old)-1]
	h.items = old[:len(old)-1]
	return e
}

func (h *entryHeap) less(a, b *entry) bool {
	if a.fair {
		n := min(len(a.shares), len(b.shares))
		for i := 0; i < n; i++ {
			if a.shares[i] != b.shares[i] {
				return a.shares[i] < b.shares[i]
			}
		}
	} else if a.asg.borrows != b.asg.borrows {
		return !a.asg.borrows
	}
	return workloadBefore(a.w, b.w)
}

// workloadBefore is queue order: higher priority, then earlier timestamp, then key.
func workloadBefore(a, b *Workload) bool {
	if a.Priority != b.Priority {
		return a.Priority > b.Priority
	}
	if a.Timestamp != b.Timestamp {
		return a.Timestamp < b.Timestamp
	}
	return a.Key < b.Key
}

// WorkloadBefore exposes queue order so the pending queues sort exactly as the cycle does.
func WorkloadBefore(a, b *Workload) bool { return workloadBefore(a, b) }
