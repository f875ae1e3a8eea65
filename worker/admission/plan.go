// Package admission decides, for the copies of workloads the manager dispatched to this worker,
// which to admit now, which to keep pending (and why, with numbers), and which lower-priority copies
// to evict so that a copy allowed to preempt fits. It is pure: the agent's scheduler gives it the
// nodes and copies it read and applies the Plan it returns.
//
// One plan, in order:
//  1. Free now = each schedulable node's allocatable minus its non-terminal pods, minus the pods that
//     admitted copies still expect there (admitted, not bound yet: the agent "assumes" them, at the
//     nodes it planned, so two copies admitted back to back never take the same room).
//  2. Free in future = free now plus what evicted copies still hold: it is being released.
//  3. Pending copies by priority (highest first), then age: a copy that fits on free now (nodefit:
//     all pods or none) is admitted and its placement deducted. One that fits only in the future
//     waits, and its placement is deducted from both, so later copies cannot take the room it waits
//     for. One that fits in neither may preempt, if its policy allows: the fewest lower-priority
//     admitted copies (lowest priority first, then most recently admitted, and any not needed put
//     back) whose removal makes it fit; it never preempts when it would still not fit.
package admission

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	fleetq "github.com/fleetq/fleetq/api/fleetq/v1alpha1"
	"github.com/fleetq/fleetq/internal/engine/nodefit"
	"github.com/fleetq/fleetq/worker/capacity"
)

// Phase is where a copy stands from the agent's point of view.
type Phase int

const (
	// Pending copies are waiting to be admitted.
	Pending Phase = iota
	// Admitted copies run (or are starting) on the nodes.
	Admitted
	// Evicting copies were evicted by the agent; their pods may still hold room.
	Evicting
)

// Copy is a copied workload as the planner needs it.
type Copy struct {
	// Key is namespace/name.
	Key      string
	Priority int32
	Policy   fleetq.LocalPreemptionPolicy
	// CreatedAt orders pending copies of equal priority (oldest first).
	CreatedAt time.Time
	// AdmittedAt orders victims of equal priority (most recent first).
	AdmittedAt time.Time
	Phase      Phase
	// PodSets are the copy's pods with their scheduling constraints.
	PodSets []nodefit.PodSet
	// Held is, per node, what the copy's non-terminal bound pods request.
	Held map[string]capacity.Amounts
	// Bound counts, per pod set and node, the copy's non-terminal bound pods.
	Bound map[string]map[string]int32
	// Missing counts, per pod set, the pods an admitted copy still expects to be bound.
	Missing map[string]int32
	// Planned is where the agent placed the copy's pods when it admitted it, if it remembers.
	Planned []nodefit.Placement
}

// Input is what a plan is made from.
type Input struct {
	// Cluster names the worker in messages.
	Cluster string
	// Nodes are every node with Used charged with all non-terminal bound pods.
	Nodes  []capacity.Node
	Copies []Copy
}

// Admission admits a pending copy with the placement nodefit found.
type Admission struct {
	Key        string
	Placements []nodefit.Placement
}

// Eviction evicts an admitted copy for a preemptor.
type Eviction struct {
	Key       string
	Preemptor string
	Message   string
}

// Plan is what the agent applies.
type Plan struct {
	Admit []Admission
	Evict []Eviction
	// Pending maps every pending copy that is not admitted to why.
	Pending map[string]string
	// Reserved is, per node, what admitted copies (including those this plan admits) still expect
	// to bind there: the report deducts it from free.
	Reserved map[string]capacity.Amounts
}

// state is the working accounting of one plan over the schedulable nodes.
type state struct {
	nodes  []capacity.Node // schedulable, by name
	index  map[string]int
	now    []capacity.Amounts
	future []capacity.Amounts
	// diverged is set once future holds more than now (evicted pods still hold room), so plans
	// without evictions under way fit each pending copy once, not twice.
	diverged bool
	// misfits remembers, until free now changes, the pod sets that did not fit it: the many
	// identical copies of a job array are judged once per change, not once each.
	misfits map[string]nodefit.Result
}

// addNow changes free now by sign × amounts per node.
func (s *state) addNow(perNode map[string]capacity.Amounts, sign int64) {
	if len(perNode) == 0 {
		return
	}
	add(s.now, s.index, perNode, sign)
	clear(s.misfits)
}

// fitNow fits pod sets on free now, answering known misfits from memory.
func (s *state) fitNow(podSets []nodefit.PodSet) nodefit.Result {
	key, err := json.Marshal(podSets)
	if err != nil {
		return s.fit(s.now, podSets)
	}
	if r, ok := s.misfits[string(key)]; ok {
		return r
	}
	r := s.fit(s.now, podSets)
	if !r.Fits {
		s.misfits[string(key)] = r
	}
	return r
}

func newState(nodes []capacity.Node) *state {
	s := &state{index: map[string]int{}, misfits: map[string]nodefit.Result{}}
	for i := range nodes {
		n := nodes[i]
		if n.Unschedulable {
			continue
		}
		s.index[n.Name] = len(s.nodes)
		s.nodes = append(s.nodes, n)
		s.now = append(s.now, n.Free(nil))
		s.future = append(s.future, n.Free(nil))
	}
	return s
}

// add changes free amounts by sign × amounts per node; nodes that are not schedulable are skipped.
func add(free []capacity.Amounts, index map[string]int, perNode map[string]capacity.Amounts, sign int64) {
	for name, a := range perNode {
		i, ok := index[name]
		if !ok {
			continue
		}
		free[i].AddScaled(a, sign)
	}
}

func (s *state) fit(free []capacity.Amounts, podSets []nodefit.PodSet) nodefit.Result {
	nodes := make([]nodefit.Node, len(s.nodes))
	for i := range s.nodes {
		nodes[i] = nodefit.Node{Name: s.nodes[i].Name, Labels: s.nodes[i].Labels, Taints: s.nodes[i].Taints, Free: free[i]}
	}
	return nodefit.Fit(nodes, podSets)
}

func clone(free []capacity.Amounts) []capacity.Amounts {
	out := make([]capacity.Amounts, len(free))
	for i := range free {
		out[i] = free[i].Clone()
	}
	return out
}

// perNode turns a placement into amounts per node.
func perNode(podSets []nodefit.PodSet, placements []nodefit.Placement) map[string]capacity.Amounts {
	out := map[string]capacity.Amounts{}
	for _, pl := range placements {
		ps := findPodSet(podSets, pl.PodSet)
		if ps == nil {
			continue
		}
		for _, nc := range pl.Nodes {
			if out[nc.Node] == nil {
				out[nc.Node] = capacity.Amounts{}
			}
			out[nc.Node].AddScaled(ps.Requests, int64(nc.Count))
		}
	}
	return out
}

func findPodSet(podSets []nodefit.PodSet, name string) *nodefit.PodSet {
	for i := range podSets {
		if podSets[i].Name == name {
			return &podSets[i]
		}
	}
	return nil
}

// Make computes the plan.
func Make(in Input) Plan {
	s := newState(in.Nodes)
	plan := Plan{Pending: map[string]string{}, Reserved: map[string]capacity.Amounts{}}
	copies := make([]*Copy, len(in.Copies))
	for i := range in.Copies {
		copies[i] = &in.Copies[i]
	}

	// 1. Admitted copies keep the room of the pods they still expect.
	admitted := filter(copies, Admitted)
	sort.Slice(admitted, func(i, j int) bool {
		return earlier(admitted[i].AdmittedAt, admitted[j].AdmittedAt, admitted[i].Key, admitted[j].Key)
	})
	reservations := map[string]map[string]capacity.Amounts{}
	for _, c := range admitted {
		r := s.reserveMissing(c)
		reservations[c.Key] = r
		s.addNow(r, -1)
		add(s.future, s.index, r, -1)
	}

	// 2. Evicted copies release what they hold.
	evicting := filter(copies, Evicting)
	for _, c := range evicting {
		add(s.future, s.index, c.Held, +1)
		s.diverged = s.diverged || len(c.Held) > 0
	}

	// 3. Pending copies, highest priority first.
	pending := filter(copies, Pending)
	sort.Slice(pending, func(i, j int) bool {
		a, b := pending[i], pending[j]
		if a.Priority != b.Priority {
			return a.Priority > b.Priority
		}
		return earlier(a.CreatedAt, b.CreatedAt, a.Key, b.Key)
	})
	evicted := map[string]bool{}
	for _, c := range evicting {
		evicted[c.Key] = true
	}
	for _, p := range pending {
		now := s.fitNow(p.PodSets)
		if now.Fits {
			use := perNode(p.PodSets, now.Placements)
			s.addNow(use, -1)
			add(s.future, s.index, use, -1)
			plan.Admit = append(plan.Admit, Admission{Key: p.Key, Placements: now.Placements})
			reservations[p.Key] = use
			continue
		}
		if !s.diverged {
			// Nothing is being released: the future is now, and p does not fit there.
		} else if future := s.fit(s.future, p.PodSets); future.Fits {
			s.hold(perNode(p.PodSets, future.Placements))
			plan.Pending[p.Key] = fmt.Sprintf("waiting for the pods of evicted workloads to stop (%s); %s", keys(evictingCopies(copies, evicted), 5), noRoom(now.Reason, p.PodSets))
			continue
		}
		victims, placements := s.victims(p, admitted, evicted, reservations)
		if victims == nil {
			plan.Pending[p.Key] = noRoom(now.Reason, p.PodSets)
			continue
		}
		for _, v := range victims {
			evicted[v.Key] = true
			add(s.future, s.index, v.Held, +1)
			s.diverged = s.diverged || len(v.Held) > 0
			// Its pods not yet bound will never come.
			s.addNow(reservations[v.Key], +1)
			add(s.future, s.index, reservations[v.Key], +1)
			delete(reservations, v.Key)
			plan.Evict = append(plan.Evict, Eviction{Key: v.Key, Preemptor: p.Key, Message: fmt.Sprintf(
				"Preempted in cluster %s by %s (priority %d) to make room for it on the nodes; this workload's priority is %d",
				in.Cluster, p.Key, p.Priority, v.Priority)})
		}
		s.hold(perNode(p.PodSets, placements))
		plan.Pending[p.Key] = fmt.Sprintf("preempting %s (lower priority) to make room; admitted once their pods are gone", keys(victims, 5))
	}
	for _, r := range reservations {
		for node, a := range r {
			if plan.Reserved[node] == nil {
				plan.Reserved[node] = capacity.Amounts{}
			}
			plan.Reserved[node].Add(a)
		}
	}
	return plan
}

// hold deducts a waiting copy's future placement from now and future.
func (s *state) hold(use map[string]capacity.Amounts) {
	s.addNow(use, -1)
	add(s.future, s.index, use, -1)
}

// reserveMissing places the pods an admitted copy still expects: where the agent planned them when
// it admitted the copy, less those already bound there; the rest (or all, after a restart) where
// nodefit puts them now.
func (s *state) reserveMissing(c *Copy) map[string]capacity.Amounts {
	out := map[string]capacity.Amounts{}
	for _, ps := range c.PodSets {
		missing := c.Missing[ps.Name]
		if missing <= 0 {
			continue
		}
		var overflow []nodefit.NodeCount
		for _, pl := range c.Planned {
			if pl.PodSet != ps.Name {
				continue
			}
			for _, nc := range pl.Nodes {
				i, ok := s.index[nc.Node]
				if !ok {
					continue
				}
				want := min(missing, nc.Count-c.Bound[ps.Name][nc.Node])
				// The kube-scheduler binds pods where it likes: another copy's pod may hold
				// the room this one was planned on. A reservation kept on a full node is
				// clamped away in the capacity report, which would then promise room that
				// is taken, so the pods that no longer fit there are fitted again below.
				n := min(want, podsFitting(s.now[i], out[nc.Node], ps.Requests))
				if n > 0 {
					reserve(out, nc.Node, ps.Requests, n)
					missing -= n
				}
				if want > n {
					overflow = append(overflow, nodefit.NodeCount{Node: nc.Node, Count: want - n})
				}
			}
		}
		if missing <= 0 {
			continue
		}
		rest := ps
		rest.Count = missing
		free := clone(s.now)
		add(free, s.index, out, -1)
		if r := s.fit(free, []nodefit.PodSet{rest}); r.Fits {
			for node, a := range perNode([]nodefit.PodSet{rest}, r.Placements) {
				if out[node] == nil {
					out[node] = capacity.Amounts{}
				}
				out[node].Add(a)
			}
			continue
		}
		// No room anywhere: the pods still come, so their room stays reserved where planned.
		for _, nc := range overflow {
			reserve(out, nc.Node, ps.Requests, nc.Count)
		}
	}
	return out
}

// reserve adds n pods' requests to a node's reservation.
func reserve(out map[string]capacity.Amounts, node string, requests capacity.Amounts, n int32) {
	if out[node] == nil {
		out[node] = capacity.Amounts{}
	}
	out[node].AddScaled(requests, int64(n))
}

// podsFitting is how many pods of the requests fit in free, less what is reserved already.
func podsFitting(free, reserved, requests capacity.Amounts) int32 {
	n := int64(math.MaxInt32)
	for r, v := range requests {
		if v > 0 {
			n = min(n, max(0, (free[r]-reserved[r])/v))
		}
	}
	return int32(n)
}

// victims finds the fewest lower-priority admitted copies whose removal lets p fit in the future,
// and p's placement then; nil when p may not preempt or would still not fit.
func (s *state) victims(p *Copy, admitted []*Copy, evicted map[string]bool, reservations map[string]map[string]capacity.Amounts) ([]*Copy, []nodefit.Placement) {
	if p.Policy != fleetq.LocalPreemptionLowerPriority {
		return nil, nil
	}
	var candidates []*Copy
	for _, c := range admitted {
		if c.Priority < p.Priority && !evicted[c.Key] {
			candidates = append(candidates, c)
		}
	}
	sort.Slice(candidates, func(i, j int) bool {
		a, b := candidates[i], candidates[j]
		if a.Priority != b.Priority {
			return a.Priority < b.Priority
		}
		if !a.AdmittedAt.Equal(b.AdmittedAt) {
			return a.AdmittedAt.After(b.AdmittedAt)
		}
		return a.Key < b.Key
	})
	free := clone(s.future)
	release := func(free []capacity.Amounts, c *Copy, sign int64) {
		add(free, s.index, c.Held, sign)
		add(free, s.index, reservations[c.Key], sign)
	}
	// One fit with every candidate gone rules out, cheaply, a copy that could never fit.
	all := clone(free)
	for _, c := range candidates {
		release(all, c, +1)
	}
	if len(candidates) == 0 || !s.fit(all, p.PodSets).Fits {
		return nil, nil
	}
	var chosen []*Copy
	var fit nodefit.Result
	for _, c := range candidates {
		release(free, c, +1)
		chosen = append(chosen, c)
		if fit = s.fit(free, p.PodSets); fit.Fits {
			break
		}
	}
	if !fit.Fits {
		return nil, nil
	}
	// Put back the victims that are not needed, higher priority (added later) first; the last one
	// added is needed, or the search would have stopped before it.
	for i := len(chosen) - 2; i >= 0; i-- {
		trial := clone(free)
		release(trial, chosen[i], -1)
		if r := s.fit(trial, p.PodSets); r.Fits {
			free, fit = trial, r
			chosen = append(chosen[:i], chosen[i+1:]...)
		}
	}
	return chosen, fit.Placements
}

func filter(copies []*Copy, phase Phase) []*Copy {
	var out []*Copy
	for _, c := range copies {
		if c.Phase == phase {
			out = append(out, c)
		}
	}
	return out
}

func evictingCopies(copies []*Copy, evicted map[string]bool) []*Copy {
	var out []*Copy
	for _, c := range copies {
		if evicted[c.Key] {
			out = append(out, c)
		}
	}
	return out
}

func earlier(a, b time.Time, ka, kb string) bool {
	if !a.Equal(b) {
		return a.Before(b)
	}
	return ka < kb
}

// keys lists up to limit copy keys, sorted, and says how many more there are.
func keys(copies []*Copy, limit int) string {
	names := make([]string, 0, len(copies))
	for _, c := range copies {
		names = append(names, c.Key)
	}
	sort.Strings(names)
	if len(names) > limit {
		return strings.Join(names[:limit], ", ") + fmt.Sprintf(" and %d more", len(names)-limit)
	}
	return strings.Join(names, ", ")
}

// noRoom phrases nodefit's reason as a pending message; the pod set is named only when there are
// several.
func noRoom(reason string, podSets []nodefit.PodSet) string {
	if len(podSets) == 1 {
		reason = strings.TrimPrefix(reason, fmt.Sprintf("pod set %q: ", podSets[0].Name))
	}
	return "no node has room: " + reason
}
