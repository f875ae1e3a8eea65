package placement

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleetq "github.com/fleetq/fleetq/api/fleetq/v1alpha1"
	"github.com/fleetq/fleetq/internal/engine"
)

const gpu corev1.ResourceName = "nvidia.com/gpu"

// gpuReport is a report of n nodes of one flavor, each with the given free GPUs (of 8, or of
// what is free when more) and a CPU of 96 used per GPU in use.
func gpuReport(revision int64, updated time.Time, flavor string, free ...int64) *fleetq.CapacityReport {
	cr := &fleetq.CapacityReport{Status: fleetq.CapacityReportStatus{Revision: revision, UpdateTime: metav1.NewTime(updated)}}
	cr.Status.Flavors = []fleetq.FlavorCapacity{{Name: flavor, Nodes: int32(len(free))}}
	for i, f := range free {
		cr.Status.Nodes = append(cr.Status.Nodes, fleetq.NodeCapacity{
			Name:        flavor + "-" + string(rune('a'+i)),
			Flavors:     []string{flavor},
			Free:        corev1.ResourceList{gpu: *resource.NewQuantity(f, resource.DecimalSI), corev1.ResourceCPU: *resource.NewQuantity(96-(max(f, 8)-f), resource.DecimalSI)},
			Allocatable: corev1.ResourceList{gpu: *resource.NewQuantity(max(f, 8), resource.DecimalSI), corev1.ResourceCPU: resource.MustParse("96")},
		})
	}
	return cr
}

func gpuRequest(key, flavor string, pods int32, perPod int64, candidates ...Candidate) Request {
	return Request{
		Key:     key,
		PodSets: []engine.PodSet{{Name: "main", Count: pods, Requests: map[corev1.ResourceName]int64{gpu: perPod, corev1.ResourceCPU: 1000}}},
		Admission: &engine.Admission{PodSets: []engine.PodSetAssignment{{
			Name: "main", Count: pods, Flavors: map[corev1.ResourceName]string{gpu: flavor, corev1.ResourceCPU: flavor},
		}}},
		Candidates: candidates,
	}
}

func usable(names ...string) []Candidate {
	var out []Candidate
	for _, n := range names {
		out = append(out, Candidate{Cluster: n, Usable: true})
	}
	return out
}

func TestPlace(t *testing.T) {
	t0 := time.Unix(1000, 0)
	cases := map[string]struct {
		reports     map[string]*fleetq.CapacityReport
		req         Request
		wantCluster string
		wantWhy     []string
	}{
		"first cluster in order that fits": {
			reports:     map[string]*fleetq.CapacityReport{"us-east": gpuReport(1, t0, "a100", 8, 8), "us-west": gpuReport(1, t0, "a100", 8)},
			req:         gpuRequest("ns/a", "a100", 2, 4, usable("us-east", "us-west")...),
			wantCluster: "us-east",
			wantWhy:     []string{"us-east: chosen (fits on 1 node(s))"},
		},
		"skips a cluster without the flavor": {
			reports:     map[string]*fleetq.CapacityReport{"eu-west": gpuReport(1, t0, "l4", 4, 4), "us-east": gpuReport(1, t0, "a100", 8)},
			req:         gpuRequest("ns/a", "a100", 1, 8, usable("eu-west", "us-east")...),
			wantCluster: "us-east",
			wantWhy:     []string{"eu-west: flavor a100 absent", "us-east: chosen"},
		},
		"a gang that fits no node": {
			reports: map[string]*fleetq.CapacityReport{"us-east": gpuReport(1, t0, "a100", 8, 8)},
			req:     gpuRequest("ns/a", "a100", 1, 9, usable("us-east")...),
			wantWhy: []string{"no worker has room", "us-east: pod set \"main\"", "nvidia.com/gpu"},
		},
		"total is enough but no node has room for the gang": {
			reports: map[string]*fleetq.CapacityReport{"us-east": gpuReport(1, t0, "a100", 3, 3, 3)},
			req:     gpuRequest("ns/a", "a100", 2, 4, usable("us-east")...),
			wantWhy: []string{"us-east: pod set \"main\""},
		},
		"unusable and unreported clusters say why": {
			reports: map[string]*fleetq.CapacityReport{"us-east": gpuReport(1, t0, "a100", 8)},
			req: gpuRequest("ns/a", "a100", 1, 1,
				Candidate{Cluster: "us-west", Why: "not connected: ClientConnectionFailed"},
				Candidate{Cluster: "ap-south", Usable: true},
				Candidate{Cluster: "us-east", Usable: true}),
			wantCluster: "us-east",
			wantWhy:     []string{"us-west: not connected: ClientConnectionFailed", "ap-south: no capacity report yet"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			b := NewBook()
			for c, r := range tc.reports {
				b.SetReport(c, r)
			}
			d, ok := b.Place(tc.req)
			if ok != (tc.wantCluster != "") || d.Cluster != tc.wantCluster {
				t.Fatalf("Place = %q, %v (%s); want %q", d.Cluster, ok, d.Explanation, tc.wantCluster)
			}
			for _, w := range tc.wantWhy {
				if !strings.Contains(d.Explanation, w) {
					t.Errorf("explanation %q lacks %q", d.Explanation, w)
				}
			}
		})
	}
}

func TestAssumptionsKeepBackToBackPlacementsApart(t *testing.T) {
	t0 := time.Unix(1000, 0)
	b := eastAndWest(t0)
	var got []string
	for _, key := range []string{"ns/a", "ns/b", "ns/c"} {
		d, ok := b.Place(gpuRequest(key, "a100", 1, 8, usable("us-east", "us-west")...))
		if ok {
			got = append(got, d.Cluster)
		} else {
			got = append(got, "none")
		}
	}
	if diff := cmp.Diff([]string{"us-east", "us-west", "none"}, got); diff != "" {
		t.Fatalf("placements (-want +got):\n%s", diff)
	}
	// The worker admits ns/a at t1; a report from before t1 still needs the assumption...
	t1 := t0.Add(time.Second)
	b.Admitted("ns/a", t1)
	b.SetReport("us-east", gpuReport(2, t0, "a100", 8))
	if _, ok := b.Place(gpuRequest("ns/d", "a100", 1, 8, usable("us-east")...)); ok {
		t.Fatal("a report older than the admission does not count the copy; us-east must still look full")
	}
	// ...and one written after t1 that shows the node full ends it.
	b.SetReport("us-east", gpuReport(3, t1.Add(time.Second), "a100", 0))
	if _, ok := b.Place(gpuRequest("ns/e", "a100", 1, 8, usable("us-east")...)); ok {
		t.Fatal("the node is full by the new report")
	}
	b.SetReport("us-east", gpuReport(4, t1.Add(2*time.Second), "a100", 8))
	if d, ok := b.Place(gpuRequest("ns/f", "a100", 1, 8, usable("us-east")...)); !ok {
		t.Fatalf("after ns/a's copy is accounted and gone, us-east has room: %s", d.Explanation)
	}
}

func TestAssumedCopyAdmittedElsewhereStillTakesRoom(t *testing.T) {
	t0 := time.Unix(1000, 0)
	b := NewBook()
	b.SetReport("us-east", gpuReport(1, t0, "a100", 2, 8))
	// Best fit: x1 and x2 fill node a100-a, x3 goes to a100-b.
	for _, key := range []string{"ns/x1", "ns/x2", "ns/x3"} {
		if d, ok := b.Place(gpuRequest(key, "a100", 1, 1, usable("us-east")...)); !ok {
			t.Fatalf("%s: %s", key, d.Explanation)
		}
	}
	// x3's copy reached the agent first, which fitted it on a100-a; x1 and x2 are still coming.
	t1 := t0.Add(time.Second)
	b.Admitted("ns/x3", t1)
	b.SetReport("us-east", gpuReport(2, t1.Add(time.Second), "a100", 1, 8))
	// 10 GPUs, 3 taken: 7 free, so no node has 8 (a100-a's one free GPU is x1's or x2's).
	if d, ok := b.Place(gpuRequest("ns/big", "a100", 1, 8, usable("us-east")...)); ok {
		t.Fatalf("placed an 8-GPU pod where 7 GPUs are free: %s", d.Explanation)
	}
	if d, ok := b.Place(gpuRequest("ns/seven", "a100", 1, 7, usable("us-east")...)); !ok {
		t.Fatalf("7 GPUs are free on a100-b: %s", d.Explanation)
	}
}

func TestOlderReportIgnoredAndForget(t *testing.T) {
	t0 := time.Unix(1000, 0)
	b := NewBook()
	b.SetReport("us-east", gpuReport(5, t0, "a100", 8))
	b.SetReport("us-east", gpuReport(4, t0, "a100", 0))
	if _, ok := b.Place(gpuRequest("ns/a", "a100", 1, 8, usable("us-east")...)); !ok {
		t.Fatal("an older revision must not replace a newer report")
	}
	if _, ok := b.Place(gpuRequest("ns/b", "a100", 1, 8, usable("us-east")...)); ok {
		t.Fatal("ns/a's assumption must hold the node")
	}
	b.Forget("ns/a")
	if _, ok := b.Place(gpuRequest("ns/b", "a100", 1, 8, usable("us-east")...)); !ok {
		t.Fatal("after Forget the node is free again")
	}
}

// eastAndWest is a book with two workers of one free 8-GPU A100 node each, reported at t0.
func eastAndWest(t0 time.Time) *Book {
	b := NewBook()
	b.SetReport("us-east", gpuReport(1, t0, "a100", 8))
	b.SetReport("us-west", gpuReport(1, t0, "a100", 8))
	return b
}

func TestSilentWorkerSkippedUntilItsAgentReportsAgain(t *testing.T) {
	t0 := time.Unix(1000, 0)
	b := eastAndWest(t0)
	b.Silent("us-east")
	d, ok := b.Place(gpuRequest("ns/a", "a100", 1, 8, usable("us-east", "us-west")...))
	if !ok || d.Cluster != "us-west" {
		t.Fatalf("a silent worker is skipped: got %q, %v (%s)", d.Cluster, ok, d.Explanation)
	}
	if !strings.Contains(d.Explanation, "us-east: its agent left a copy untouched and has not reported since 1970-01-01T00:16:40Z (is fleetq-agent running there?)") {
		t.Fatalf("explanation does not say why us-east was skipped: %s", d.Explanation)
	}
	b.Forget("ns/a")
	// A report with the same update time (a re-read of the old one) does not bring it back...
	b.SetReport("us-east", gpuReport(1, t0, "a100", 8))
	if d, _ := b.Place(gpuRequest("ns/b", "a100", 1, 8, usable("us-east")...)); d.Cluster != "" {
		t.Fatalf("the old report must not end the silence: placed on %s", d.Cluster)
	}
	// ...one the agent wrote after it does.
	b.SetReport("us-east", gpuReport(1, t0.Add(30*time.Second), "a100", 8))
	if d, ok := b.Place(gpuRequest("ns/c", "a100", 1, 8, usable("us-east")...)); !ok || d.Cluster != "us-east" {
		t.Fatalf("a fresh report puts us-east back: %s", d.Explanation)
	}
	// Silence is forgotten with the worker.
	b.Silent("us-east")
	b.RemoveCluster("us-east")
	b.SetReport("us-east", gpuReport(1, t0.Add(30*time.Second), "a100", 8))
	if _, ok := b.Place(gpuRequest("ns/d", "a100", 1, 8, usable("us-east")...)); !ok {
		t.Fatal("a removed and re-added worker starts without the old silence")
	}
}

func TestRefusingWorkerSkippedForThatWorkloadUntilTheRefusalExpires(t *testing.T) {
	t0 := time.Unix(1000, 0)
	b := eastAndWest(t0)
	b.Refused("ns/a", "us-east", t0.Add(5*time.Minute), `jobs.batch "a" is forbidden: exceeded quota: no-jobs`)
	req := func(key string, now time.Time) Request {
		r := gpuRequest(key, "a100", 1, 1, usable("us-east", "us-west")...)
		r.Now = now
		return r
	}
	d, ok := b.Place(req("ns/a", t0.Add(time.Minute)))
	if !ok || d.Cluster != "us-west" {
		t.Fatalf("the refusing worker is skipped for the workload: got %q, %v (%s)", d.Cluster, ok, d.Explanation)
	}
	want := `us-east: refused this workload's copy (jobs.batch "a" is forbidden: exceeded quota: no-jobs); tried again after 1970-01-01T00:21:40Z`
	if !strings.Contains(d.Explanation, want) {
		t.Fatalf("explanation does not say why us-east was skipped:\n got %s\nwant %s", d.Explanation, want)
	}
	b.Forget("ns/a") // evicted again: the refusal stays
	if d, _ := b.Place(req("ns/b", t0.Add(time.Minute))); d.Cluster != "us-east" {
		t.Fatalf("other workloads still go to us-east: %s", d.Explanation)
	}
	if d, _ := b.Place(req("ns/a", t0.Add(2*time.Minute))); d.Cluster != "us-west" {
		t.Fatalf("a forgotten placement keeps the refusal: %s", d.Explanation)
	}
	b.Forget("ns/a")
	if d, _ := b.Place(req("ns/a", t0.Add(5*time.Minute))); d.Cluster != "us-east" {
		t.Fatalf("after the refusal expires us-east is tried again: %s", d.Explanation)
	}
	b.Refused("ns/a", "us-east", t0.Add(time.Hour), "refused")
	b.Release("ns/a")
	if d, _ := b.Place(req("ns/a", t0.Add(6*time.Minute))); d.Cluster != "us-east" {
		t.Fatalf("a released workload keeps no refusal: %s", d.Explanation)
	}
}

func TestWorkerPlacesOnlyTheKindsItsAgentRuns(t *testing.T) {
	t0 := time.Unix(1000, 0)
	b := NewBook()
	east := gpuReport(1, t0, "a100", 8)
	east.Status.Kinds = []string{"batch/job", "kubeflow.org/pytorchjob"}
	b.SetReport("us-east", east)
	b.SetReport("us-west", gpuReport(1, t0, "a100", 8)) // an agent that does not say: batch Jobs only
	ray := gpuRequest("ns/ray", "a100", 1, 1, usable("us-east", "us-west")...)
	ray.Framework = "ray.io/rayjob"
	d, ok := b.Place(ray)
	if ok {
		t.Fatalf("a RayJob was placed on %s", d.Cluster)
	}
	for _, want := range []string{
		"us-east: does not run ray.io/rayjob (its agent runs batch/job, kubeflow.org/pytorchjob;",
		"us-west: does not run ray.io/rayjob (its agent runs batch/job;",
	} {
		if !strings.Contains(d.Explanation, want) {
			t.Errorf("explanation %q does not say %q", d.Explanation, want)
		}
	}
	pt := gpuRequest("ns/pt", "a100", 1, 1, usable("us-west", "us-east")...)
	pt.Framework = "kubeflow.org/pytorchjob"
	if d, ok := b.Place(pt); !ok || d.Cluster != "us-east" {
		t.Errorf("a PyTorchJob goes to the worker that runs it: %q %v (%s)", d.Cluster, ok, d.Explanation)
	}
	job := gpuRequest("ns/job", "a100", 1, 1, usable("us-west")...)
	job.Framework = BatchJob
	if d, ok := b.Place(job); !ok || d.Cluster != "us-west" {
		t.Errorf("a Job goes anywhere: %q %v (%s)", d.Cluster, ok, d.Explanation)
	}
}

func TestWorkerJustConnectedIsWaitedForNotPassedOver(t *testing.T) {
	t0 := time.Unix(1000, 0)
	b := NewBook()
	b.SetReport("us-west", gpuReport(1, t0, "a100", 8))
	// After a manager restart us-east is connected but its report not read yet.
	req := gpuRequest("ns/w", "a100", 1, 1, Candidate{Cluster: "us-east", Usable: true, AwaitReport: true}, Candidate{Cluster: "us-west", Usable: true})
	d, ok := b.Place(req)
	if ok {
		t.Fatalf("placed on %s while the preferred worker's report was on its way", d.Cluster)
	}
	if want := "us-east: connected, its capacity report not read yet"; !strings.Contains(d.Explanation, want) {
		t.Errorf("explanation %q does not say %q", d.Explanation, want)
	}
	b.SetReport("us-east", gpuReport(1, t0, "a100", 8))
	if d, ok := b.Place(req); !ok || d.Cluster != "us-east" {
		t.Errorf("once its report is read the preferred worker is chosen: %q %v (%s)", d.Cluster, ok, d.Explanation)
	}
	// Its agent still fenced from before this manager (re)started: waited for too.
	fenced := gpuReport(2, t0, "a100", 8)
	fenced.Status.Fenced = true
	b.SetReport("us-east", fenced)
	if d, ok := b.Place(gpuRequest("ns/v", "a100", 1, 1, req.Candidates...)); ok || !strings.Contains(d.Explanation, "us-east: connected, its agent still fenced from before") {
		t.Errorf("a just-connected worker whose agent is still fenced is waited for: %q %v (%s)", d.Cluster, ok, d.Explanation)
	}
	// Registered and still making its first connection: waited for as well.
	connecting := gpuRequest("ns/u", "a100", 1, 1, Candidate{Cluster: "eu-west", Why: "connecting", AwaitReport: true}, Candidate{Cluster: "us-west", Usable: true})
	if d, ok := b.Place(connecting); ok || !strings.Contains(d.Explanation, "eu-west: connecting; waiting for it") {
		t.Errorf("a worker making its first connection is waited for: %q %v (%s)", d.Cluster, ok, d.Explanation)
	}
	// Past the grace (the dispatcher no longer sets AwaitReport), a worker that never reports is passed over.
	silent := gpuRequest("ns/x", "a100", 1, 1, Candidate{Cluster: "eu-west", Usable: true}, Candidate{Cluster: "us-west", Usable: true})
	if d, ok := b.Place(silent); !ok || d.Cluster != "us-west" || !strings.Contains(d.Explanation, "eu-west: no capacity report yet") {
		t.Errorf("a worker with no report after the grace is passed over: %q %v (%s)", d.Cluster, ok, d.Explanation)
	}
}

func TestAWorkerWhoseAgentKeepsRunningWhenFencedSaysSo(t *testing.T) {
	t0 := time.Unix(1000, 0)
	b := NewBook()
	keep := gpuReport(1, t0, "a100", 8)
	keep.Status.FencingPolicy = "KeepRunning"
	b.SetReport("us-east", keep)
	b.SetReport("us-west", gpuReport(1, t0, "a100", 8))
	if !b.KeepsRunningWhenFenced("us-east") {
		t.Error("us-east reports fencingPolicy KeepRunning")
	}
	if b.KeepsRunningWhenFenced("us-west") || b.KeepsRunningWhenFenced("eu-west") {
		t.Error("a report without the field (or no report) means Suspend")
	}
}

func TestPlaceAfterCountsOnlyTheRoomVictimsGiveBackWhereThePreemptorFits(t *testing.T) {
	t0 := time.Unix(1000, 0)
	freed := func(cluster string, pods int32, perPod int64) Freed {
		r := gpuRequest("ns/victim", "a100", pods, perPod)
		return Freed{Cluster: cluster, PodSets: r.PodSets, Admission: r.Admission}
	}
	cases := map[string]struct {
		freed       []Freed
		wantCluster string
		wantWhy     []string
	}{
		"a whole node freed in the second worker": {
			freed:       []Freed{freed("us-west", 1, 8)},
			wantCluster: "us-west",
			wantWhy:     []string{"us-east: pod set \"main\"", "us-west: chosen (fits on 1 node(s))"},
		},
		"half a node freed in a full worker frees no whole node": {
			freed:   []Freed{freed("us-west", 1, 4)},
			wantWhy: []string{"no worker has room", "us-east: pod set \"main\"", "us-west: pod set \"main\""},
		},
		"the freed half joins the free half of the same node": {
			freed:       []Freed{freed("us-east", 1, 4)},
			wantCluster: "us-east",
			wantWhy:     []string{"us-east: chosen (fits on 1 node(s))"},
		},
		"room freed in a worker that is not a candidate": {
			freed:   []Freed{freed("eu-west", 1, 8)},
			wantWhy: []string{"no worker has room"},
		},
		"two halves of one full node": {
			freed:       []Freed{freed("us-west", 1, 4), freed("us-west", 1, 4)},
			wantCluster: "us-west",
		},
		"nothing freed": {
			wantWhy: []string{"no worker has room"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			b := NewBook()
			b.SetReport("us-east", gpuReport(1, t0, "a100", 4, 0))
			b.SetReport("us-west", gpuReport(1, t0, "a100", 0, 0))
			b.SetReport("eu-west", gpuReport(1, t0, "a100", 0))
			dec, ok := b.PlaceAfter(gpuRequest("ns/preemptor", "a100", 1, 8, usable("us-east", "us-west")...), tc.freed)
			if ok != (tc.wantCluster != "") || dec.Cluster != tc.wantCluster {
				t.Fatalf("PlaceAfter = %q, %v (%s); want cluster %q", dec.Cluster, ok, dec.Explanation, tc.wantCluster)
			}
			for _, w := range tc.wantWhy {
				if !strings.Contains(dec.Explanation, w) {
					t.Errorf("explanation %q does not say %q", dec.Explanation, w)
				}
			}
			if len(b.assumed) != 0 {
				t.Errorf("PlaceAfter assumed a placement: %v", b.assumed)
			}
			// The probe left the book as it was: the preemptor does not fit now.
			if dec, ok := b.Place(gpuRequest("ns/preemptor", "a100", 1, 8, usable("us-east", "us-west")...)); ok {
				t.Errorf("Place after the probe chose %s; the freed room was written into the book", dec.Cluster)
			}
		})
	}
}
