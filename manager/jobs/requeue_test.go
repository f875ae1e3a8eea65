package jobs

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/config"
	"github.com/fleetq/fleetq/internal/workload"
)

// TestRequeue checks which evictions wait out the backoff: a preempted workload queues again
// at once (and is not counted towards backoffLimitCount); a rejected one backs off.
func TestRequeue(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	cases := map[string]struct {
		reason      string
		count       int32 // requeues before this one
		limit       *int32
		wantAt      time.Duration // 0: no backoff
		wantCount   int32
		wantActive  bool
		wantMessage string
	}{
		"preempted: at once":                 {reason: kueue.WorkloadEvictedByPreemption, wantActive: true, wantMessage: "Queued again: preempted"},
		"preempted again: at once, no count": {reason: kueue.WorkloadEvictedByPreemption, count: 3, limit: ptr.To[int32](3), wantCount: 3, wantActive: true, wantMessage: "Queued again: preempted"},
		"ClusterQueue stopped: at once":      {reason: kueue.WorkloadEvictedByClusterQueueStopped, wantActive: true, wantMessage: "Queued again: preempted"},
		"rejected by the worker: backoff":    {reason: kueue.WorkloadEvictedByAdmissionCheck, wantAt: 60 * time.Second, wantCount: 1, wantActive: true, wantMessage: "Queued again after 1m0s of backoff (eviction 1): preempted"},
		"rejected a third time: doubled":     {reason: kueue.WorkloadEvictedByAdmissionCheck, count: 2, wantAt: 240 * time.Second, wantCount: 3, wantActive: true, wantMessage: "Queued again after 4m0s of backoff (eviction 3): preempted"},
		"pods not ready over the limit":      {reason: kueue.WorkloadEvictedByPodsReadyTimeout, count: 2, limit: ptr.To[int32](2), wantCount: 0, wantActive: false, wantMessage: "Evicted 3 times, more than requeuingStrategy.backoffLimitCount (2); set spec.active: true to try again"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			wl := &kueue.Workload{
				ObjectMeta: metav1.ObjectMeta{Namespace: "research", Name: "job-train-1", ResourceVersion: "1"},
				Status: kueue.WorkloadStatus{
					Admission: &kueue.Admission{ClusterQueue: "research-cq"},
					Conditions: []metav1.Condition{
						{Type: kueue.WorkloadQuotaReserved, Status: metav1.ConditionTrue, Reason: "QuotaReserved"},
						{Type: kueue.WorkloadEvicted, Status: metav1.ConditionTrue, Reason: tc.reason, Message: "preempted"},
					},
				},
			}
			if tc.count > 0 {
				wl.Status.RequeueState = &kueue.RequeueState{Count: ptr.To(tc.count)}
			}
			s := runtime.NewScheme()
			_ = clientgoscheme.AddToScheme(s)
			_ = kueue.AddToScheme(s)
			c := fake.NewClientBuilder().WithScheme(s).WithObjects(wl).WithStatusSubresource(wl).Build()
			rq := config.RequeuingStrategy{BackoffBaseSeconds: ptr.To[int32](60), BackoffMaxSeconds: ptr.To[int32](3600), BackoffLimitCount: tc.limit}

			if err := Requeue(context.Background(), c, clocktesting.NewFakePassiveClock(now), rq, wl.DeepCopy()); err != nil {
				t.Fatalf("Requeue: %v", err)
			}
			got := &kueue.Workload{}
			if err := c.Get(context.Background(), client.ObjectKeyFromObject(wl), got); err != nil {
				t.Fatal(err)
			}
			if got.Status.Admission != nil || workload.HasQuotaReservation(got) {
				t.Errorf("reservation not released: admission %v", got.Status.Admission)
			}
			if active := workload.IsActive(got); active != tc.wantActive {
				t.Errorf("active = %v, want %v", active, tc.wantActive)
			}
			cond := meta.FindStatusCondition(got.Status.Conditions, kueue.WorkloadRequeued)
			if cond == nil || cond.Message != tc.wantMessage {
				t.Fatalf("Requeued condition = %+v, want message %q", cond, tc.wantMessage)
			}
			at := workload.RequeueAt(got)
			switch {
			case tc.wantAt == 0 && !at.IsZero() && at.After(now):
				t.Errorf("requeueAt = %s, want no backoff", at)
			case tc.wantAt != 0 && !at.Equal(now.Add(tc.wantAt)):
				t.Errorf("requeueAt = %s, want now+%s", at, tc.wantAt)
			}
			if tc.wantActive {
				count := int32(0)
				if got.Status.RequeueState != nil {
					count = ptr.Deref(got.Status.RequeueState.Count, 0)
				}
				if count != tc.wantCount {
					t.Errorf("requeueState.count = %d, want %d", count, tc.wantCount)
				}
			}
		})
	}
}
