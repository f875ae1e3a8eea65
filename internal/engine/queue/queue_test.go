package queue

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetq/fleetq/internal/engine"
)

func wl(key, cq string, prio int32, ts int64) *engine.Workload {
	return &engine.Workload{Key: key, ClusterQueue: cq, Priority: prio, Timestamp: ts}
}

func popAll(m *Manager, cq string) []string {
	var out []string
	for w := m.Pop(cq); w != nil; w = m.Pop(cq) {
		out = append(out, w.Key)
	}
	return out
}

func TestOrder(t *testing.T) {
	cases := map[string]struct {
		add  []*engine.Workload
		want []string
	}{
		"priority first": {
			add:  []*engine.Workload{wl("ns/low", "q", 1, 1), wl("ns/high", "q", 10, 5)},
			want: []string{"ns/high", "ns/low"},
		},
		"then timestamp": {
			add:  []*engine.Workload{wl("ns/late", "q", 0, 9), wl("ns/early", "q", 0, 3)},
			want: []string{"ns/early", "ns/late"},
		},
		"then key": {
			add:  []*engine.Workload{wl("ns/b", "q", 0, 1), wl("ns/a", "q", 0, 1)},
			want: []string{"ns/a", "ns/b"},
		},
		"update replaces": {
			add:  []*engine.Workload{wl("ns/a", "q", 0, 1), wl("ns/b", "q", 0, 2), wl("ns/a", "q", 0, 3)},
			want: []string{"ns/b", "ns/a"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			m := New()
			for _, w := range tc.add {
				m.Add(w)
			}
			if diff := cmp.Diff(tc.want, popAll(m, "q")); diff != "" {
				t.Errorf("pop order (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParkWakeDelete(t *testing.T) {
	m := New()
	m.Add(wl("ns/a", "q1", 0, 1))
	m.Add(wl("ns/b", "q1", 0, 2))
	m.Add(wl("ns/c", "q2", 0, 1))
	a := m.Pop("q1")
	m.Park(a)
	if diff := cmp.Diff([]string{"q1", "q2"}, m.ClusterQueues()); diff != "" {
		t.Errorf("ClusterQueues (-want +got):\n%s", diff)
	}
	if active, parked := m.Len("q1"); active != 1 || parked != 1 {
		t.Errorf("Len(q1) = %d, %d; want 1, 1", active, parked)
	}
	if got := m.Position("ns/a"); got != -1 {
		t.Errorf("Position(parked) = %d, want -1", got)
	}
	if !m.Delete("ns/b") {
		t.Errorf("Delete(ns/b) = false")
	}
	if diff := cmp.Diff([]string{"q2"}, m.ClusterQueues()); diff != "" {
		t.Errorf("ClusterQueues after delete (-want +got):\n%s", diff)
	}
	if n := m.Wake("q1", "unknown"); n != 1 {
		t.Errorf("Wake = %d, want 1", n)
	}
	if diff := cmp.Diff([]string{"ns/a"}, popAll(m, "q1")); diff != "" {
		t.Errorf("after wake (-want +got):\n%s", diff)
	}
	if m.Delete("ns/a") {
		t.Errorf("Delete of a popped workload = true")
	}
}
