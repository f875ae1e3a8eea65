package report

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	fleetq "github.com/fleetq/fleetq/api/fleetq/v1alpha1"
	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/worker/capacity"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

const gpu = corev1.ResourceName("nvidia.com/gpu")

// seen is what one step observes: whether it wrote, the report's revision, update time and free
// GPUs, and when the publisher asks to run again.
type seen struct {
	Wrote      bool
	Revision   int64
	UpdateTime time.Time
	FreeGPUs   int64
	Fenced     bool
	Requeue    time.Duration
}

func TestPublisher(t *testing.T) {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(kueue.AddToScheme(s))
	utilruntime.Must(fleetq.AddToScheme(s))
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n0", Labels: map[string]string{"gpu": "a100"}},
		Status:     corev1.NodeStatus{Allocatable: corev1.ResourceList{gpu: resource.MustParse("8"), corev1.ResourcePods: resource.MustParse("110")}},
	}
	flavor := &kueue.ResourceFlavor{
		ObjectMeta: metav1.ObjectMeta{Name: "a100", Labels: map[string]string{fleetq.OriginLabel: "mgr"}},
		Spec:       kueue.ResourceFlavorSpec{NodeLabels: map[string]string{"gpu": "a100"}},
	}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(node, flavor).Build()
	clk := clocktesting.NewFakePassiveClock(t0)
	p := &Publisher{
		Client: c, APIReader: c, Clock: clk, Log: logr.Discard(),
		ClusterName: "us-east", Namespace: "fleetq-system", Origin: "mgr",
		MinInterval: time.Second, Resync: time.Minute,
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "p"},
		Spec: corev1.PodSpec{NodeName: "n0", Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{gpu: resource.MustParse("3")},
		}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	steps := []struct {
		name   string
		after  time.Duration // since t0
		change func()
		want   seen
	}{
		{name: "nothing before the scheduler's first pass", want: seen{}},
		{name: "first publication creates the report", change: func() { p.Set(nil, false) },
			want: seen{Wrote: true, Revision: 1, UpdateTime: at(0), FreeGPUs: 8, Requeue: time.Minute}},
		{name: "no change, no write", after: 10 * time.Second,
			want: seen{Revision: 1, UpdateTime: at(0), FreeGPUs: 8, Requeue: 50 * time.Second}},
		{name: "a pod binds: new revision", after: 20 * time.Second, change: func() { mustCreate(t, c, pod) },
			want: seen{Wrote: true, Revision: 2, UpdateTime: at(20 * time.Second), FreeGPUs: 5, Requeue: time.Minute}},
		{name: "a reservation within the debounce interval waits", after: 20*time.Second + 400*time.Millisecond,
			change: func() { p.Set(map[string]capacity.Amounts{"n0": {gpu: 2}}, false) },
			want:   seen{Revision: 2, UpdateTime: at(20 * time.Second), FreeGPUs: 5, Requeue: 600 * time.Millisecond}},
		{name: "then it is written", after: 21 * time.Second,
			want: seen{Wrote: true, Revision: 3, UpdateTime: at(21 * time.Second), FreeGPUs: 3, Requeue: time.Minute}},
		{name: "the periodic refresh rewrites the time, not the revision", after: 81 * time.Second,
			want: seen{Wrote: true, Revision: 3, UpdateTime: at(81 * time.Second), FreeGPUs: 3, Requeue: time.Minute}},
		{name: "fencing is a change", after: 90 * time.Second, change: func() { p.Set(nil, true) },
			want: seen{Wrote: true, Revision: 4, UpdateTime: at(90 * time.Second), FreeGPUs: 5, Fenced: true, Requeue: time.Minute}},
	}
	for _, step := range steps {
		clk.SetTime(t0.Add(step.after))
		if step.change != nil {
			step.change()
		}
		before := p.Writes()
		res, err := p.Reconcile(context.Background(), reconcile.Request{})
		if err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		got := seen{Wrote: p.Writes() > before, Requeue: res.RequeueAfter}
		r := &fleetq.CapacityReport{}
		if err := c.Get(context.Background(), types.NamespacedName{Namespace: "fleetq-system", Name: "us-east"}, r); err == nil {
			got.Revision, got.UpdateTime, got.Fenced = r.Status.Revision, r.Status.UpdateTime.UTC(), r.Status.Fenced
			for _, n := range r.Status.Nodes {
				q := n.Free[gpu]
				got.FreeGPUs = q.Value()
			}
		}
		if diff := cmp.Diff(step.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", step.name, diff)
		}
	}
}

func mustCreate(t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	if err := c.Create(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
}
