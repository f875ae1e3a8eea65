package engine_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetq/fleetq/internal/engine"
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
