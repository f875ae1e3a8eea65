package engine_test

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetq/fleetq/internal/engine"
	. "github.com/fleetq/fleetq/internal/engine/enginetest"
)

func TestPlaceHook(t *testing.T) {
	admitF := map[string]string{"main/cpu": "f"}
	refuse := func(keys ...string) func(w *engine.Workload, a *engine.Admission) (bool, string) {
		return func(w *engine.Workload, _ *engine.Admission) (bool, string) {
			for _, k := range keys {
				if w.Key == k {
					return false, "no worker has room: us-east: largest node fit 4 of 8 nvidia.com/gpu"
				}
			}
			return true, ""
		}
	}
	cases := map[string]struct {
		queue   engine.ClusterQueue
		pending []engine.Workload
		place   func(w *engine.Workload, a *engine.Admission) (bool, string)
		want    []summary
	}{
		"a workload with nowhere to run takes no quota; the next one gets it": {
			queue:   cpuQueue("a", "", "4"),
			pending: []engine.Workload{cpuJob("ns/big", "a", "4").Timestamp(1).Obj(), cpuJob("ns/next", "a", "4").Timestamp(2).Obj()},
			place:   refuse("ns/big"),
			want: []summary{
				{Kind: engine.Pending, Key: "ns/big", Reason: engine.NoPlacement, Parked: true,
					Message: "no worker has room: us-east: largest node fit 4 of 8 nvidia.com/gpu"},
				{Kind: engine.Admit, Key: "ns/next", Flavors: admitF},
			},
		},
		"StrictFIFO keeps the unplaceable head and blocks the queue": {
			queue:   engine.ClusterQueue{Name: "a", QueueingStrategy: engine.StrictFIFO, ResourceGroups: cpuQueue("a", "", "4").ResourceGroups},
			pending: []engine.Workload{cpuJob("ns/big", "a", "4").Timestamp(1).Obj(), cpuJob("ns/next", "a", "4").Timestamp(2).Obj()},
			place:   refuse("ns/big"),
			want: []summary{{Kind: engine.Pending, Key: "ns/big", Reason: engine.NoPlacement,
				Message: "no worker has room: us-east: largest node fit 4 of 8 nvidia.com/gpu"}},
		},
		"placement is asked only for workloads that fit quota": {
			queue:   cpuQueue("a", "", "4"),
			pending: []engine.Workload{cpuJob("ns/huge", "a", "5").Obj()},
			place: func(w *engine.Workload, _ *engine.Admission) (bool, string) {
				t.Errorf("Place called for %s, which does not fit quota", w.Key)
				return true, ""
			},
			want: []summary{{Kind: engine.Pending, Key: "ns/huge", Reason: engine.InsufficientQuota, Parked: true,
				Message: "insufficient quota for cpu in flavor f: requests 5, available 4 (nominal 4, used 0)"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ds, _, _ := runCycle(engine.Input{Flavors: []engine.ResourceFlavor{{Name: "f"}}, ClusterQueues: []engine.ClusterQueue{tc.queue}},
				tc.pending, engine.Options{Place: tc.place})
			if diff := cmp.Diff(tc.want, summarize(ds), cmpSummary); diff != "" {
				t.Errorf("decisions (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPlaceAfterHook(t *testing.T) {
	low := cpuJob("ns/low", "a", "4").Priority(0).Timestamp(1).AdmittedIn("f", 1).Obj()
	high := cpuJob("ns/high", "a", "4").Priority(10).Timestamp(2).Obj()
	within := func(s engine.QueueingStrategy) engine.ClusterQueue {
		return MakeClusterQueue("a").ResourceGroup(MakeFlavorQuotas("f").Resource("cpu", "4").Obj()).
			WithinClusterQueue(engine.PreemptLowerPriority).Strategy(s).Obj()
	}
	const why = "us-east: largest node fit 4 of 8 nvidia.com/gpu"
	cases := map[string]struct {
		queue engine.ClusterQueue
		room  bool
		want  []summary
	}{
		"a preemption that leaves no worker with room is not made": {
			queue: within(engine.BestEffortFIFO),
			want: []summary{{Kind: engine.Pending, Key: "ns/high", Reason: engine.NoPlacement, Parked: true,
				Message: "preempting 1 workload(s) would free quota, but no worker would then have room: " + why}},
		},
		"StrictFIFO keeps the head that could not preempt for room": {
			queue: within(engine.StrictFIFO),
			want: []summary{{Kind: engine.Pending, Key: "ns/high", Reason: engine.NoPlacement,
				Message: "preempting 1 workload(s) would free quota, but no worker would then have room: " + why}},
		},
		"a preemption that makes room is made": {
			queue: within(engine.BestEffortFIFO),
			room:  true,
			want:  []summary{{Kind: engine.Preempt, Key: "ns/high", Victims: []string{"ns/low"}, Reasons: []engine.PreemptionReason{engine.InClusterQueue}}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var asked [][]string
			opts := engine.Options{
				Place: func(*engine.Workload, *engine.Admission) (bool, string) { return true, "" },
				PlaceAfter: func(w *engine.Workload, a *engine.Admission, victims []*engine.Workload) (bool, string) {
					var keys []string
					for _, v := range victims {
						keys = append(keys, v.Key)
						if v.Admission == nil {
							t.Errorf("victim %s handed over without its admission", v.Key)
						}
					}
					asked = append(asked, append([]string{w.Key}, keys...))
					if a == nil || a.ClusterQueue != "a" {
						t.Errorf("PlaceAfter got admission %+v, want one in queue a", a)
					}
					return tc.room, why
				},
			}
			in := engine.Input{Flavors: []engine.ResourceFlavor{{Name: "f"}}, ClusterQueues: []engine.ClusterQueue{tc.queue}, Admitted: []engine.Workload{low}}
			ds, _, _ := runCycle(in, []engine.Workload{high}, opts)
			if diff := cmp.Diff(tc.want, summarize(ds), cmpSummary); diff != "" {
				t.Errorf("decisions (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([][]string{{"ns/high", "ns/low"}}, asked); diff != "" {
				t.Errorf("PlaceAfter calls (-want +got):\n%s", diff)
			}
		})
	}
}

func TestShieldedHook(t *testing.T) {
	queue := MakeClusterQueue("a").ResourceGroup(MakeFlavorQuotas("f").Resource("cpu", "4").Obj()).
		WithinClusterQueue(engine.PreemptLowerPriority).Obj()
	admitted := []engine.Workload{
		cpuJob("ns/older", "a", "2").Timestamp(1).AdmittedIn("f", 1).Obj(),
		cpuJob("ns/newer", "a", "2").Timestamp(2).AdmittedIn("f", 2).Obj(),
	}
	high := cpuJob("ns/high", "a", "2").Priority(10).Timestamp(3).Obj()
	cases := map[string]struct {
		shielded []string
		want     []summary
	}{
		"the most recently admitted goes first": {
			want: []summary{{Kind: engine.Preempt, Key: "ns/high", Victims: []string{"ns/newer"}, Reasons: []engine.PreemptionReason{engine.InClusterQueue}}},
		},
		"a shielded workload is passed over": {
			shielded: []string{"ns/newer"},
			want:     []summary{{Kind: engine.Preempt, Key: "ns/high", Victims: []string{"ns/older"}, Reasons: []engine.PreemptionReason{engine.InClusterQueue}}},
		},
		"with every candidate shielded nothing is preempted; their quota still counts": {
			shielded: []string{"ns/newer", "ns/older"},
			want: []summary{{Kind: engine.Pending, Key: "ns/high", Reason: engine.InsufficientQuota, Parked: true,
				Message: "insufficient quota for cpu in flavor f: requests 2, available 0 (nominal 4, used 4); preemption the policies allow cannot free enough quota; " +
					"2 admitted workload(s) are not preempted now (its worker us-east does not answer)"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			opts := engine.Options{Shielded: func(w *engine.Workload) string {
				if slices.Contains(tc.shielded, w.Key) {
					return "its worker us-east does not answer"
				}
				return ""
			}}
			in := engine.Input{Flavors: []engine.ResourceFlavor{{Name: "f"}}, ClusterQueues: []engine.ClusterQueue{queue}, Admitted: admitted}
			ds, _, _ := runCycle(in, []engine.Workload{high}, opts)
			if diff := cmp.Diff(tc.want, summarize(ds), cmpSummary); diff != "" {
				t.Errorf("decisions (-want +got):\n%s", diff)
			}
		})
	}
}

// A flavor with quota but no worker with room must not hold a job that a later flavor of its
// queue can run now.
func TestPlaceTriesTheNextFlavorWithRoom(t *testing.T) {
	twoFlavors := func(s engine.QueueingStrategy) engine.ClusterQueue {
		return MakeClusterQueue("a").ResourceGroup(
			MakeFlavorQuotas("a100").Resource("cpu", "4").Obj(),
			MakeFlavorQuotas("l4").Resource("cpu", "4").Obj(),
			MakeFlavorQuotas("h100").Resource("cpu", "1").Obj(),
		).Strategy(s).Obj()
	}
	// roomIn places a workload when every pod set got one of the flavors given, and says why
	// not per flavor otherwise; asked records the flavors each call was for.
	var asked []string
	roomIn := func(flavors ...string) func(w *engine.Workload, a *engine.Admission) (bool, string) {
		return func(w *engine.Workload, a *engine.Admission) (bool, string) {
			f := a.PodSets[0].Flavors["cpu"]
			asked = append(asked, w.Key+"@"+f)
			if slices.Contains(flavors, f) {
				return true, ""
			}
			return false, "no worker has room in " + f
		}
	}
	cases := map[string]struct {
		queue   engine.ClusterQueue
		pending []engine.Workload
		place   func(w *engine.Workload, a *engine.Admission) (bool, string)
		want    []summary
		asked   []string
	}{
		"the next flavor with quota and room is admitted": {
			queue:   twoFlavors(engine.BestEffortFIFO),
			pending: []engine.Workload{cpuJob("ns/job", "a", "2").Obj()},
			place:   roomIn("l4"),
			want:    []summary{{Kind: engine.Admit, Key: "ns/job", Flavors: map[string]string{"main/cpu": "l4"}}},
			asked:   []string{"ns/job@a100", "ns/job@l4"},
		},
		"flavors without quota for it are not asked": {
			queue:   twoFlavors(engine.BestEffortFIFO),
			pending: []engine.Workload{cpuJob("ns/job", "a", "2").Obj()},
			place:   roomIn("h100"),
			want: []summary{{Kind: engine.Pending, Key: "ns/job", Reason: engine.NoPlacement, Parked: true,
				Message: "no worker has room in a100; in flavor l4 instead: no worker has room in l4"}},
			asked: []string{"ns/job@a100", "ns/job@l4"},
		},
		"StrictFIFO also takes the next flavor": {
			queue:   twoFlavors(engine.StrictFIFO),
			pending: []engine.Workload{cpuJob("ns/job", "a", "2").Obj(), cpuJob("ns/next", "a", "2").Timestamp(2).Obj()},
			place:   roomIn("l4"),
			want: []summary{
				{Kind: engine.Admit, Key: "ns/job", Flavors: map[string]string{"main/cpu": "l4"}},
				{Kind: engine.Admit, Key: "ns/next", Flavors: map[string]string{"main/cpu": "l4"}},
			},
			asked: []string{"ns/job@a100", "ns/job@l4", "ns/next@a100", "ns/next@l4"},
		},
		"the next flavor's quota counts what this cycle admitted there": {
			queue:   twoFlavors(engine.BestEffortFIFO),
			pending: []engine.Workload{cpuJob("ns/one", "a", "3").Timestamp(1).Obj(), cpuJob("ns/two", "a", "3").Timestamp(2).Obj()},
			place:   roomIn("l4"),
			want: []summary{
				{Kind: engine.Admit, Key: "ns/one", Flavors: map[string]string{"main/cpu": "l4"}},
				{Kind: engine.Pending, Key: "ns/two", Reason: engine.NoPlacement, Parked: true, Message: "no worker has room in a100"},
			},
			asked: []string{"ns/one@a100", "ns/one@l4", "ns/two@a100"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			asked = nil
			in := engine.Input{Flavors: []engine.ResourceFlavor{{Name: "a100"}, {Name: "l4"}, {Name: "h100"}}, ClusterQueues: []engine.ClusterQueue{tc.queue}}
			ds, _, _ := runCycle(in, tc.pending, engine.Options{Place: tc.place})
			if diff := cmp.Diff(tc.want, summarize(ds), cmpSummary); diff != "" {
				t.Errorf("decisions (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.asked, asked); diff != "" {
				t.Errorf("Place calls (-want +got):\n%s", diff)
			}
		})
	}
}
