package admission

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"

	fleetq "github.com/fleetq/fleetq/api/fleetq/v1alpha1"
	"github.com/fleetq/fleetq/internal/engine/nodefit"
	"github.com/fleetq/fleetq/worker/capacity"
)

const gpu corev1.ResourceName = "nvidia.com/gpu"

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// gpuNode is an 8-GPU node with used GPUs already taken by pods.
func gpuNode(name string, used int64) capacity.Node {
	return capacity.Node{
		Name:        name,
		Labels:      map[string]string{"gpu": "a100"},
		Allocatable: capacity.Amounts{corev1.ResourceCPU: 96000, gpu: 8},
		Used:        capacity.Amounts{gpu: used},
	}
}

// copyBuilder builds planner copies; tests state only what matters to them.
type copyBuilder struct{ c Copy }

func makeCopy(key string) *copyBuilder {
	return &copyBuilder{Copy{Key: key, CreatedAt: t0, Held: map[string]capacity.Amounts{}, Bound: map[string]map[string]int32{}, Missing: map[string]int32{}}}
}

func (b *copyBuilder) prio(p int32) *copyBuilder { b.c.Priority = p; return b }
func (b *copyBuilder) created(d time.Duration) *copyBuilder {
	b.c.CreatedAt = t0.Add(d)
	return b
}
func (b *copyBuilder) preempts() *copyBuilder {
	b.c.Policy = fleetq.LocalPreemptionLowerPriority
	return b
}

// gpus adds the pod set "main" of count pods of n GPUs each.
func (b *copyBuilder) gpus(count int32, n int64) *copyBuilder {
	b.c.PodSets = append(b.c.PodSets, nodefit.PodSet{Name: "main", Count: count, Requests: map[corev1.ResourceName]int64{gpu: n}})
	return b
}

// admitted marks the copy admitted at t0+d.
func (b *copyBuilder) admitted(d time.Duration) *copyBuilder {
	b.c.Phase, b.c.AdmittedAt = Admitted, t0.Add(d)
	return b
}

func (b *copyBuilder) evicting() *copyBuilder { b.c.Phase = Evicting; return b }

// runs records count bound pods of pod set "main" on node (already counted in the node's Used).
func (b *copyBuilder) runs(node string, count int32) *copyBuilder {
	ps := b.c.PodSets[0]
	if b.c.Bound["main"] == nil {
		b.c.Bound["main"] = map[string]int32{}
	}
	b.c.Bound["main"][node] += count
	if b.c.Held[node] == nil {
		b.c.Held[node] = capacity.Amounts{}
	}
	b.c.Held[node].AddScaled(ps.Requests, int64(count))
	return b
}

// missing says count pods of "main" are admitted but not bound, planned on node ("" = not remembered).
func (b *copyBuilder) missing(count int32, node string) *copyBuilder {
	b.c.Missing["main"] = count
	if node != "" {
		b.c.Planned = []nodefit.Placement{{PodSet: "main", Nodes: []nodefit.NodeCount{{Node: node, Count: count}}}}
	}
	return b
}

func (b *copyBuilder) obj() Copy { return b.c }

// outcome is a plan read the way tests state it.
type outcome struct {
	Admit    map[string]string // key → "node:count,..."
	Evict    map[string]string // victim → preemptor
	Pending  map[string]string
	Reserved map[string]capacity.Amounts
}

func read(p Plan) outcome {
	o := outcome{Admit: map[string]string{}, Evict: map[string]string{}, Pending: p.Pending, Reserved: p.Reserved}
	for _, a := range p.Admit {
		s := ""
		for _, pl := range a.Placements {
			for _, nc := range pl.Nodes {
				if s != "" {
					s += ","
				}
				s += fmt.Sprintf("%s:%d", nc.Node, nc.Count)
			}
		}
		o.Admit[a.Key] = s
	}
	for _, e := range p.Evict {
		o.Evict[e.Key] = e.Preemptor
	}
	return o
}

func TestMake(t *testing.T) {
	cases := map[string]struct {
		nodes  []capacity.Node
		copies []Copy
		want   outcome
	}{
		"a copy that fits is admitted on the nodes nodefit picks": {
			nodes:  []capacity.Node{gpuNode("a", 2), gpuNode("b", 0)},
			copies: []Copy{makeCopy("ns/w").gpus(2, 4).obj()},
			want: outcome{
				// Best fit: the first pod fills a snugly, the second goes to b.
				Admit:    map[string]string{"ns/w": "a:1,b:1"},
				Reserved: map[string]capacity.Amounts{"a": {gpu: 4}, "b": {gpu: 4}},
			},
		},
		"a copy that does not fit stays pending with nodefit's numbers": {
			nodes:  []capacity.Node{gpuNode("a", 4), gpuNode("b", 4)},
			copies: []Copy{makeCopy("ns/w").gpus(1, 8).obj()},
			want: outcome{Pending: map[string]string{
				"ns/w": `no node has room: largest node fit 4 of 8 nvidia.com/gpu`,
			}},
		},
		"two copies back to back do not both take the same room": {
			nodes: []capacity.Node{gpuNode("a", 0)},
			copies: []Copy{
				makeCopy("ns/first").gpus(1, 8).obj(),
				makeCopy("ns/second").gpus(1, 8).created(time.Second).obj(),
			},
			want: outcome{
				Admit:    map[string]string{"ns/first": "a:1"},
				Pending:  map[string]string{"ns/second": `no node has room: largest node fit 0 of 8 nvidia.com/gpu`},
				Reserved: map[string]capacity.Amounts{"a": {gpu: 8}},
			},
		},
		"higher priority goes first, then the older copy": {
			nodes: []capacity.Node{gpuNode("a", 0)},
			copies: []Copy{
				makeCopy("ns/old-low").gpus(1, 8).obj(),
				makeCopy("ns/new-high").prio(5).gpus(1, 8).created(time.Hour).obj(),
			},
			want: outcome{
				Admit:    map[string]string{"ns/new-high": "a:1"},
				Pending:  map[string]string{"ns/old-low": `no node has room: largest node fit 0 of 8 nvidia.com/gpu`},
				Reserved: map[string]capacity.Amounts{"a": {gpu: 8}},
			},
		},
		"an admitted copy whose pods are not bound yet keeps the room it was planned on": {
			nodes: []capacity.Node{gpuNode("a", 0), gpuNode("b", 2)},
			copies: []Copy{
				makeCopy("ns/admitted").gpus(1, 8).admitted(0).missing(1, "a").obj(),
				makeCopy("ns/new").gpus(1, 8).obj(),
			},
			want: outcome{
				Pending:  map[string]string{"ns/new": `no node has room: largest node fit 6 of 8 nvidia.com/gpu`},
				Reserved: map[string]capacity.Amounts{"a": {gpu: 8}},
			},
		},
		"a copy whose planned node another copy's pod took keeps its room on a node that has it": {
			// second was planned on b, but the kube-scheduler bound its pod on a, where first's
			// pod was planned and not bound yet: first's pod will go to b, so b is not free.
			nodes: []capacity.Node{gpuNode("a", 8), gpuNode("b", 0)},
			copies: []Copy{
				makeCopy("ns/first").gpus(1, 8).admitted(0).missing(1, "a").obj(),
				makeCopy("ns/second").gpus(1, 8).admitted(time.Second).runs("a", 1).obj(),
				makeCopy("ns/new").gpus(1, 8).created(time.Minute).obj(),
			},
			want: outcome{
				Pending:  map[string]string{"ns/new": `no node has room: largest node fit 0 of 8 nvidia.com/gpu`},
				Reserved: map[string]capacity.Amounts{"b": {gpu: 8}},
			},
		},
		"a copy whose pods have no room anywhere keeps its reservation where it was planned": {
			nodes: []capacity.Node{gpuNode("a", 8)},
			copies: []Copy{
				makeCopy("ns/first").gpus(1, 8).admitted(0).missing(1, "a").obj(),
			},
			want: outcome{Reserved: map[string]capacity.Amounts{"a": {gpu: 8}}},
		},
		"after a restart, missing pods are placed by nodefit": {
			nodes: []capacity.Node{gpuNode("a", 4), gpuNode("b", 0)},
			copies: []Copy{
				makeCopy("ns/admitted").gpus(2, 4).admitted(0).runs("a", 1).missing(1, "").obj(),
				makeCopy("ns/new").gpus(1, 8).obj(),
			},
			want: outcome{
				Admit:    map[string]string{"ns/new": "b:1"},
				Reserved: map[string]capacity.Amounts{"a": {gpu: 4}, "b": {gpu: 8}},
			},
		},
		"bound pods of an admitted copy are not reserved twice": {
			nodes: []capacity.Node{gpuNode("a", 4)},
			copies: []Copy{
				makeCopy("ns/admitted").gpus(1, 4).admitted(0).runs("a", 1).missing(0, "a").obj(),
				makeCopy("ns/new").gpus(1, 4).obj(),
			},
			want: outcome{
				Admit:    map[string]string{"ns/new": "a:1"},
				Reserved: map[string]capacity.Amounts{"a": {gpu: 4}},
			},
		},
		"a planned pod bound elsewhere is reserved once": {
			nodes: []capacity.Node{gpuNode("a", 0), gpuNode("b", 4)},
			copies: []Copy{
				// Planned 2 on a; one pod landed on b instead, one is not bound yet.
				{Key: "ns/admitted", Phase: Admitted, PodSets: []nodefit.PodSet{{Name: "main", Count: 2, Requests: map[corev1.ResourceName]int64{gpu: 4}}},
					Held: map[string]capacity.Amounts{"b": {gpu: 4}}, Bound: map[string]map[string]int32{"main": {"b": 1}}, Missing: map[string]int32{"main": 1},
					Planned: []nodefit.Placement{{PodSet: "main", Nodes: []nodefit.NodeCount{{Node: "a", Count: 2}}}}},
			},
			want: outcome{Reserved: map[string]capacity.Amounts{"a": {gpu: 4}}},
		},
		"a higher-priority copy preempts exactly the lowest-priority copy it needs": {
			nodes: []capacity.Node{gpuNode("a", 8)},
			copies: []Copy{
				makeCopy("ns/low").prio(1).gpus(1, 4).admitted(0).runs("a", 1).obj(),
				makeCopy("ns/mid").prio(2).gpus(1, 4).admitted(0).runs("a", 1).obj(),
				makeCopy("ns/high").prio(10).preempts().gpus(1, 4).obj(),
			},
			want: outcome{
				Evict:   map[string]string{"ns/low": "ns/high"},
				Pending: map[string]string{"ns/high": "preempting ns/low (lower priority) to make room; admitted once their pods are gone"},
			},
		},
		"among equal priorities the most recently admitted copy goes first": {
			nodes: []capacity.Node{gpuNode("a", 8)},
			copies: []Copy{
				makeCopy("ns/older").gpus(1, 4).admitted(0).runs("a", 1).obj(),
				makeCopy("ns/newer").gpus(1, 4).admitted(time.Minute).runs("a", 1).obj(),
				makeCopy("ns/high").prio(10).preempts().gpus(1, 4).obj(),
			},
			want: outcome{
				Evict:   map[string]string{"ns/newer": "ns/high"},
				Pending: map[string]string{"ns/high": "preempting ns/newer (lower priority) to make room; admitted once their pods are gone"},
			},
		},
		"victims that turn out not to be needed are put back": {
			nodes: []capacity.Node{gpuNode("a", 8), gpuNode("b", 8)},
			copies: []Copy{
				// Taken first (lowest priority), but freeing 1 GPU on a does not help.
				makeCopy("ns/lowest").prio(1).gpus(1, 1).admitted(0).runs("a", 1).obj(),
				makeCopy("ns/other-a").prio(3).gpus(1, 7).admitted(0).runs("a", 1).obj(),
				makeCopy("ns/big-b").prio(2).gpus(1, 8).admitted(0).runs("b", 1).obj(),
				makeCopy("ns/high").prio(10).preempts().gpus(1, 8).obj(),
			},
			want: outcome{
				Evict:   map[string]string{"ns/big-b": "ns/high"},
				Pending: map[string]string{"ns/high": "preempting ns/big-b (lower priority) to make room; admitted once their pods are gone"},
			},
		},
		"a gang preempts on as many nodes as it needs": {
			nodes: []capacity.Node{gpuNode("a", 8), gpuNode("b", 8), gpuNode("c", 8)},
			copies: []Copy{
				makeCopy("ns/on-a").prio(1).gpus(1, 8).admitted(0).runs("a", 1).obj(),
				makeCopy("ns/on-b").prio(2).gpus(1, 8).admitted(0).runs("b", 1).obj(),
				makeCopy("ns/on-c").prio(3).gpus(1, 8).admitted(0).runs("c", 1).obj(),
				makeCopy("ns/gang").prio(10).preempts().gpus(2, 8).obj(),
			},
			want: outcome{
				Evict:   map[string]string{"ns/on-a": "ns/gang", "ns/on-b": "ns/gang"},
				Pending: map[string]string{"ns/gang": "preempting ns/on-a, ns/on-b (lower priority) to make room; admitted once their pods are gone"},
			},
		},
		"a victim's pods that are not bound yet free their reserved room": {
			nodes: []capacity.Node{gpuNode("a", 0)},
			copies: []Copy{
				makeCopy("ns/low").gpus(1, 8).admitted(0).missing(1, "a").obj(),
				makeCopy("ns/high").prio(10).preempts().gpus(1, 8).obj(),
			},
			want: outcome{
				Evict:   map[string]string{"ns/low": "ns/high"},
				Pending: map[string]string{"ns/high": "preempting ns/low (lower priority) to make room; admitted once their pods are gone"},
			},
		},
		"no preemption when the copy would still not fit": {
			nodes: []capacity.Node{gpuNode("a", 8)},
			copies: []Copy{
				makeCopy("ns/low").gpus(1, 8).admitted(0).runs("a", 1).obj(),
				makeCopy("ns/huge").prio(10).preempts().gpus(1, 16).obj(),
			},
			want: outcome{Pending: map[string]string{"ns/huge": `no node has room: largest node fit 0 of 16 nvidia.com/gpu`}},
		},
		"policy Never does not preempt": {
			nodes: []capacity.Node{gpuNode("a", 8)},
			copies: []Copy{
				makeCopy("ns/low").gpus(1, 8).admitted(0).runs("a", 1).obj(),
				makeCopy("ns/high").prio(10).gpus(1, 8).obj(),
			},
			want: outcome{Pending: map[string]string{"ns/high": `no node has room: largest node fit 0 of 8 nvidia.com/gpu`}},
		},
		"equal or higher priority is never preempted": {
			nodes: []capacity.Node{gpuNode("a", 8)},
			copies: []Copy{
				makeCopy("ns/same").prio(10).gpus(1, 8).admitted(0).runs("a", 1).obj(),
				makeCopy("ns/high").prio(10).preempts().gpus(1, 8).obj(),
			},
			want: outcome{Pending: map[string]string{"ns/high": `no node has room: largest node fit 0 of 8 nvidia.com/gpu`}},
		},
		"a preemptor waits for evictions under way without new victims, and holds that room": {
			nodes: []capacity.Node{gpuNode("a", 8), gpuNode("b", 4)},
			copies: []Copy{
				makeCopy("ns/victim").gpus(1, 8).evicting().runs("a", 1).obj(),
				makeCopy("ns/low").prio(0).gpus(1, 4).admitted(0).runs("b", 1).obj(),
				makeCopy("ns/high").prio(10).preempts().gpus(1, 8).obj(),
				makeCopy("ns/mid").prio(5).gpus(1, 8).obj(),
				makeCopy("ns/small").prio(0).gpus(1, 4).obj(),
			},
			want: outcome{
				Admit: map[string]string{"ns/small": "b:1"},
				// mid cannot take a (high holds it); small fits beside low on b.
				Pending: map[string]string{
					"ns/high": `waiting for the pods of evicted workloads to stop (ns/victim); no node has room: largest node fit 4 of 8 nvidia.com/gpu`,
					"ns/mid":  `no node has room: largest node fit 4 of 8 nvidia.com/gpu`,
				},
				Reserved: map[string]capacity.Amounts{"b": {gpu: 4}},
			},
		},
		"with several pod sets, the message names the one that does not fit": {
			nodes: []capacity.Node{gpuNode("a", 0)},
			copies: []Copy{{Key: "ns/multi", PodSets: []nodefit.PodSet{
				{Name: "driver", Count: 1, Requests: map[corev1.ResourceName]int64{gpu: 1}},
				{Name: "workers", Count: 2, Requests: map[corev1.ResourceName]int64{gpu: 4}},
			}}},
			// The workers take the node first (largest pods first); the driver is left out.
			want: outcome{Pending: map[string]string{"ns/multi": `no node has room: pod set "driver": only 0 of 1 pods fit at once on 1 eligible node(s)`}},
		},
		"unschedulable nodes take nothing": {
			nodes:  []capacity.Node{func() capacity.Node { n := gpuNode("a", 0); n.Unschedulable = true; return n }()},
			copies: []Copy{makeCopy("ns/w").gpus(1, 1).obj()},
			want:   outcome{Pending: map[string]string{"ns/w": `no node has room: no nodes`}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := read(Make(Input{Cluster: "us-east", Nodes: tc.nodes, Copies: tc.copies}))
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEvictionMessageNamesThePreemptor(t *testing.T) {
	p := Make(Input{Cluster: "us-east", Nodes: []capacity.Node{gpuNode("a", 8)}, Copies: []Copy{
		makeCopy("ns/low").prio(1).gpus(1, 8).admitted(0).runs("a", 1).obj(),
		makeCopy("ns/high").prio(100).preempts().gpus(1, 8).obj(),
	}})
	want := []Eviction{{Key: "ns/low", Preemptor: "ns/high",
		Message: "Preempted in cluster us-east by ns/high (priority 100) to make room for it on the nodes; this workload's priority is 1"}}
	if diff := cmp.Diff(want, p.Evict); diff != "" {
		t.Errorf("evictions (-want +got):\n%s", diff)
	}
}
