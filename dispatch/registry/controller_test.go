package registry

import (
	"context"
	"errors"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	fleetq "github.com/fleetq/fleetq/api/fleetq/v1alpha1"
	kueue "github.com/fleetq/fleetq/api/v1beta2"
)

func TestLeaseRenewalsShowAsTheFencingLeaseCondition(t *testing.T) {
	start := time.Unix(10000, 0)
	clk := clocktesting.NewFakeClock(start)
	var notified []string
	r := New(Options{Clock: clk, OnHealth: func(c string) { notified = append(notified, c) }})
	r.workers["us-east"] = &entry{health: Health{Active: true, Reason: ReasonActive, Message: "Connected", Since: start}}

	scheme := runtime.NewScheme()
	if err := kueue.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	mkc := &kueue.MultiKueueCluster{ObjectMeta: metav1.ObjectMeta{Name: "us-east", Generation: 1}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(mkc).WithStatusSubresource(mkc).Build()
	ctrl := &Controller{Client: c, Registry: r}
	condition := func() *metav1.Condition {
		t.Helper()
		got := &kueue.MultiKueueCluster{}
		if err := c.Get(context.Background(), client.ObjectKey{Name: "us-east"}, got); err != nil {
			t.Fatal(err)
		}
		h := r.workers["us-east"].health
		if err := ctrl.writeCondition(context.Background(), got, h); err != nil {
			t.Fatal(err)
		}
		if err := c.Get(context.Background(), client.ObjectKey{Name: "us-east"}, got); err != nil {
			t.Fatal(err)
		}
		if a := meta.FindStatusCondition(got.Status.Conditions, kueue.MultiKueueClusterActive); a == nil || a.Status != metav1.ConditionTrue {
			t.Fatalf("Active = %+v, want True beside the lease condition", a)
		}
		return meta.FindStatusCondition(got.Status.Conditions, fleetq.MultiKueueClusterFencingLease)
	}

	if cond := condition(); cond != nil {
		t.Fatalf("FencingLease before any renewal = %+v, want none", cond)
	}
	r.LeaseRenewal("us-east", "", nil)
	if cond := condition(); cond == nil || cond.Status != metav1.ConditionTrue || cond.Reason != ReasonLeaseRenewed {
		t.Fatalf("after a renewal FencingLease = %+v, want True Renewed", cond)
	}

	clk.Step(time.Minute)
	held := errors.New("lease fleetq-system/fleetq-manager-multikueue in worker us-east is held by another management cluster's manager")
	r.LeaseRenewal("us-east", ReasonLeaseHeldElsewhere, held)
	cond := condition()
	if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != ReasonLeaseHeldElsewhere || cond.Message != held.Error() {
		t.Fatalf("after a refused renewal FencingLease = %+v, want False %s with the error", cond, ReasonLeaseHeldElsewhere)
	}
	if !cond.LastTransitionTime.Time.Equal(start.Add(time.Minute)) {
		t.Errorf("lastTransitionTime = %v, want when renewals started to fail", cond.LastTransitionTime)
	}
	clk.Step(time.Minute)
	r.LeaseRenewal("us-east", ReasonLeaseHeldElsewhere, held)
	if cond := condition(); !cond.LastTransitionTime.Time.Equal(start.Add(time.Minute)) {
		t.Errorf("a repeated failure moved lastTransitionTime to %v", cond.LastTransitionTime)
	}
	if len(notified) != 2 {
		t.Errorf("health hook heard %d changes (%v), want 2: the first renewal and the first failure", len(notified), notified)
	}
	r.LeaseRenewal("gone", "", nil) // a worker removed meanwhile is ignored
}

func TestRemovingAWorkerTellsTheHealthHookOnce(t *testing.T) {
	var notified []string
	r := New(Options{OnHealth: func(c string) { notified = append(notified, c) }})
	r.workers["us-east"] = &entry{health: Health{Active: true, Reason: ReasonActive}}
	r.Remove("us-east")
	r.Remove("us-east") // the MultiKueueCluster controller removes again on the refresh it causes
	if r.Registered("us-east") {
		t.Errorf("us-east still registered after Remove")
	}
	if len(notified) != 1 || notified[0] != "us-east" {
		t.Errorf("health hook heard %v, want us-east once: its placed workloads learn it is gone", notified)
	}
}
