package registry

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	fleetq "github.com/fleetq/fleetq/api/fleetq/v1alpha1"
	kueue "github.com/fleetq/fleetq/api/v1beta2"
)

func TestCapacityIsPublishedAtMostOncePerIntervalButAFenceAtOnce(t *testing.T) {
	ctx := context.Background()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{kueue.AddToScheme, fleetq.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	report := &fleetq.CapacityReport{ObjectMeta: metav1.ObjectMeta{Namespace: "fleetq-system", Name: "us-east"}}
	report.Status = fleetq.CapacityReportStatus{ClusterName: "us-east", Revision: 1}
	worker := fake.NewClientBuilder().WithScheme(scheme).WithObjects(report).WithStatusSubresource(report).Build()
	mgmt := fake.NewClientBuilder().WithScheme(scheme).WithObjects(&kueue.MultiKueueCluster{ObjectMeta: metav1.ObjectMeta{Name: "us-east"}}).Build()
	clk := clocktesting.NewFakeClock(time.Unix(10000, 0))
	r := New(Options{Clock: clk})
	r.workers["us-east"] = &entry{worker: &Worker{Name: "us-east", Client: worker}, health: Health{Active: true, Reason: ReasonActive}}
	ctrl := &Controller{Client: mgmt, Registry: r}

	// publish moves the worker's report to a revision, publishes, and returns the published
	// summary and how long a held-back change waits.
	publish := func(rev int64, fenced bool) (CapacitySummary, time.Duration) {
		t.Helper()
		cr := &fleetq.CapacityReport{}
		if err := worker.Get(ctx, client.ObjectKeyFromObject(report), cr); err != nil {
			t.Fatal(err)
		}
		cr.Status.Revision, cr.Status.Fenced = rev, fenced
		if err := worker.Status().Update(ctx, cr); err != nil {
			t.Fatal(err)
		}
		mkc := &kueue.MultiKueueCluster{}
		if err := mgmt.Get(ctx, client.ObjectKey{Name: "us-east"}, mkc); err != nil {
			t.Fatal(err)
		}
		wait, err := ctrl.publishCapacity(ctx, mkc)
		if err != nil {
			t.Fatal(err)
		}
		if err := mgmt.Get(ctx, client.ObjectKey{Name: "us-east"}, mkc); err != nil {
			t.Fatal(err)
		}
		var got CapacitySummary
		if err := json.Unmarshal([]byte(mkc.Annotations[CapacityAnnotation]), &got); err != nil {
			t.Fatalf("capacity annotation %q: %v", mkc.Annotations[CapacityAnnotation], err)
		}
		return got, wait
	}

	if got, wait := publish(1, false); got.Revision != 1 || wait != 0 {
		t.Fatalf("first report: published revision %d, wait %v; want 1 at once", got.Revision, wait)
	}
	clk.Step(time.Second)
	if got, wait := publish(2, false); got.Revision != 1 || wait != PublishInterval-time.Second {
		t.Fatalf("a change 1 s later: published revision %d, wait %v; want 1 kept, the change written in %v", got.Revision, wait, PublishInterval-time.Second)
	}
	if got, wait := publish(3, true); got.Revision != 3 || !got.Fenced || wait != 0 {
		t.Fatalf("a fence: published %+v, wait %v; want revision 3 fenced at once: users must see a worker that takes nothing", got, wait)
	}
	clk.Step(PublishInterval)
	if got, wait := publish(4, true); got.Revision != 4 || wait != 0 {
		t.Fatalf("a change PublishInterval after the last write: published revision %d, wait %v; want 4 at once", got.Revision, wait)
	}
}
