package fencing

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

var start = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// lease is the manager's Lease as written with the manager's clock, which may be far off the agent's.
func lease(renew time.Time, seconds int32) *coordinationv1.Lease {
	return &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{
		HolderIdentity:       ptr.To("fleetq-manager-0"),
		LeaseDurationSeconds: ptr.To(seconds),
		RenewTime:            ptr.To(metav1.NewMicroTime(renew)),
	}}
}

// step is one moment of a scenario: the agent's clock moves by after, then it reads the lease
// (unless keep) and checks its state.
type step struct {
	after time.Duration
	lease *coordinationv1.Lease
	keep  bool
	want  bool
}

func TestObserver(t *testing.T) {
	// The manager's clock is an hour behind the agent's: skew must not matter.
	mgr := start.Add(-time.Hour)
	cases := map[string][]step{
		"renewed in time: never fenced": {
			{lease: lease(mgr, 10)},
			{after: 9 * time.Second, lease: lease(mgr.Add(5*time.Second), 10)},
			{after: 9 * time.Second, lease: lease(mgr.Add(10*time.Second), 10)},
			{after: 9 * time.Second, lease: lease(mgr.Add(15*time.Second), 10)},
		},
		"fenced exactly one duration after the last renewal seen": {
			{lease: lease(mgr, 10)},
			{after: 4 * time.Second, lease: lease(mgr.Add(4*time.Second), 10)},
			{after: 9 * time.Second, keep: true},
			{after: time.Second, keep: true, want: true},
		},
		"the same renewTime read again is no renewal": {
			{lease: lease(mgr, 10)},
			{after: 6 * time.Second, lease: lease(mgr, 10)},
			{after: 4 * time.Second, lease: lease(mgr, 10), want: true},
		},
		"a renewTime far in the future (skew) still only counts as a renewal": {
			{lease: lease(start.Add(24*time.Hour), 10)},
			{after: 10 * time.Second, lease: lease(start.Add(24*time.Hour), 10), want: true},
		},
		"a renewal after fencing lifts it": {
			{lease: lease(mgr, 5)},
			{after: 5 * time.Second, keep: true, want: true},
			{after: time.Minute, lease: lease(mgr.Add(time.Minute), 5)},
		},
		"no lease: never fenced": {
			{},
			{after: time.Hour, keep: true},
		},
		"a lease that disappears no longer fences": {
			{lease: lease(mgr, 5)},
			{after: 10 * time.Second, keep: true, want: true},
			{},
		},
		"a lease without duration never fences": {
			{lease: &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{RenewTime: ptr.To(metav1.NewMicroTime(mgr))}}},
			{after: time.Hour, keep: true},
		},
		"a longer duration written by the manager applies at once": {
			{lease: lease(mgr, 5)},
			{after: 4 * time.Second, lease: lease(mgr, 60)},
			{after: 50 * time.Second, keep: true},
			{after: 10 * time.Second, keep: true, want: true},
		},
		"a new holder with the same renewTime counts as a renewal": {
			{lease: lease(mgr, 10)},
			{after: 8 * time.Second, lease: func() *coordinationv1.Lease {
				l := lease(mgr, 10)
				l.Spec.HolderIdentity = ptr.To("fleetq-manager-1")
				return l
			}()},
			{after: 8 * time.Second, keep: true},
		},
	}
	for name, steps := range cases {
		t.Run(name, func(t *testing.T) {
			clk := clocktesting.NewFakePassiveClock(start)
			o := NewObserver(clk, "fleetq-manager-multikueue")
			var got, want []bool
			for _, s := range steps {
				clk.SetTime(clk.Now().Add(s.after))
				if !s.keep {
					o.Observe(s.lease)
				}
				got = append(got, o.State().Fenced)
				want = append(want, s.want)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("fenced per step (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStateDeadlineAndMessage(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(start)
	o := NewObserver(clk, "fleetq-manager-x")
	o.Observe(lease(start.Add(-time.Hour), 30))
	clk.SetTime(start.Add(10 * time.Second))
	got := o.State()
	want := State{Deadline: start.Add(30 * time.Second), Message: "lease fleetq-manager-x renewal seen 10s ago (fence after 30s)"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("before the deadline (-want +got):\n%s", diff)
	}
	clk.SetTime(start.Add(45 * time.Second))
	got = o.State()
	want = State{Fenced: true, Deadline: start.Add(30 * time.Second),
		Message: "the manager did not renew lease fleetq-manager-x for 45s (its leaseDurationSeconds), as measured by the agent's clock"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("after the deadline (-want +got):\n%s", diff)
	}
}

func TestNoLeaseIsReported(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC))
	o := NewObserver(clk, "fleetq-manager-multikueue")
	if st := o.State(); !st.NoLease || st.Fenced {
		t.Errorf("before any lease: %+v, want NoLease and not fenced", st)
	}
	o.Observe(&coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{RenewTime: ptr.To(metav1.NewMicroTime(clk.Now())), LeaseDurationSeconds: ptr.To[int32](5)}})
	if o.State().NoLease {
		t.Errorf("a lease that exists reads as missing")
	}
	o.Observe(nil)
	if !o.State().NoLease {
		t.Errorf("a deleted lease does not read as missing")
	}
}
