// Package queue holds the pending workloads of every ClusterQueue: a heap per queue in the
// engine's queue order (priority, then timestamp, then key), plus the parked workloads that a
// BestEffortFIFO queue set aside as inadmissible until a requeue trigger wakes the queue.
// The manager and the agent keep one Manager up to date from workload events and hand it to
// engine.Run, which pops heads and requeues or parks what it does not admit.
package queue

import (
	"container/heap"
	"sort"

	"github.com/fleetq/fleetq/internal/engine"
)

// Manager is the set of pending queues. It is not safe for concurrent use: the caller serializes
// events and cycles, as the engine is single-threaded by design.
type Manager struct {
	queues map[string]*clusterQueue
	// where maps a workload key to the queue holding it.
	where map[string]*clusterQueue
}

type clusterQueue struct {
	name   string
	heap   workloadHeap
	parked map[string]*engine.Workload
}

// New returns an empty Manager.
func New() *Manager {
	return &Manager{queues: map[string]*clusterQueue{}, where: map[string]*clusterQueue{}}
}

func (m *Manager) queue(name string) *clusterQueue {
	q, ok := m.queues[name]
	if !ok {
		q = &clusterQueue{name: name, heap: workloadHeap{index: map[string]*item{}}, parked: map[string]*engine.Workload{}}
		m.queues[name] = q
	}
	return q
}

// Add queues a pending workload, or replaces it when its key is known: an edited workload is
// active again even if it was parked, since the edit may have made it admissible.
func (m *Manager) Add(w *engine.Workload) {
	m.Delete(w.Key)
	q := m.queue(w.ClusterQueue)
	heap.Push(&q.heap, w)
	m.where[w.Key] = q
}

// Delete forgets a workload (admitted elsewhere, deleted, or moved); it reports whether it was queued.
func (m *Manager) Delete(key string) bool {
	q, ok := m.where[key]
	if !ok {
		return false
	}
	delete(m.where, key)
	if _, parked := q.parked[key]; parked {
		delete(q.parked, key)
		return true
	}
	if it, ok := q.heap.index[key]; ok {
		heap.Remove(&q.heap, it.pos)
	}
	return true
}

// Wake returns the parked workloads of the named queues to their heaps; the caller passes the
// queues engine.Snapshot.AffectedQueues names for an event. It returns how many were woken.
func (m *Manager) Wake(clusterQueues ...string) int {
	n := 0
	for _, name := range clusterQueues {
		q, ok := m.queues[name]
		if !ok {
			continue
		}
		keys := make([]string, 0, len(q.parked))
		for k := range q.parked {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			heap.Push(&q.heap, q.parked[k])
			delete(q.parked, k)
			n++
		}
	}
	return n
}

// Len reports how many workloads a queue holds, active and parked (the status counts).
func (m *Manager) Len(clusterQueue string) (active, parked int) {
	q, ok := m.queues[clusterQueue]
	if !ok {
		return 0, 0
	}
	return q.heap.Len(), len(q.parked)
}

// Position reports a pending workload's 0-based rank in its queue's active heap order, or -1 when
// it is parked or unknown. It costs O(n) and exists for the visibility status, not cycles.
func (m *Manager) Position(key string) int {
	q, ok := m.where[key]
	if !ok {
		return -1
	}
	it, ok := q.heap.index[key]
	if !ok {
		return -1
	}
	rank := 0
	for _, other := range q.heap.items {
		if engine.WorkloadBefore(other.w, it.w) {
			rank++
		}
	}
	return rank
}

// ClusterQueues lists the queues with active workloads, sorted (engine.Queues).
func (m *Manager) ClusterQueues() []string {
	var out []string
	for name, q := range m.queues {
		if q.heap.Len() > 0 {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// Pop removes and returns a queue's head, or nil (engine.Queues).
func (m *Manager) Pop(clusterQueue string) *engine.Workload {
	q, ok := m.queues[clusterQueue]
	if !ok || q.heap.Len() == 0 {
		return nil
	}
	w := heap.Pop(&q.heap).(*engine.Workload)
	delete(m.where, w.Key)
	return w
}

// Requeue returns a popped workload to its queue's heap (engine.Queues).
func (m *Manager) Requeue(w *engine.Workload) { m.Add(w) }

// Park sets a popped workload aside until its queue is woken (engine.Queues).
func (m *Manager) Park(w *engine.Workload) {
	m.Delete(w.Key)
	q := m.queue(w.ClusterQueue)
	q.parked[w.Key] = w
	m.where[w.Key] = q
}

// workloadHeap is a binary heap in engine queue order. Each item knows its position, so removal
// by key is O(log n) and a swap touches no map.
type workloadHeap struct {
	items []*item
	index map[string]*item
}

type item struct {
	w   *engine.Workload
	pos int
}

func (h *workloadHeap) Len() int           { return len(h.items) }
func (h *workloadHeap) Less(i, j int) bool { return engine.WorkloadBefore(h.items[i].w, h.items[j].w) }
func (h *workloadHeap) Swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.items[i].pos = i
	h.items[j].pos = j
}
func (h *workloadHeap) Push(x any) {
	it := &item{w: x.(*engine.Workload), pos: len(h.items)}
	h.index[it.w.Key] = it
	h.items = append(h.items, it)
}
func (h *workloadHeap) Pop() any {
	old := h.items
	it := old[len(old)-1]
	old[len(old)-1] = nil
	h.items = old[:len(old)-1]
	delete(h.index, it.w.Key)
	return it.w
}
