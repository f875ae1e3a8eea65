package drain

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
)

func admitted(conditions ...metav1.Condition) *kueue.Workload {
	wl := &kueue.Workload{
		ObjectMeta: metav1.ObjectMeta{Namespace: "research", Name: "job-a"},
		Spec:       kueue.WorkloadSpec{QueueName: "research-queue"},
		Status: kueue.WorkloadStatus{
			Admission:  &kueue.Admission{ClusterQueue: "research-cq"},
			Conditions: append([]metav1.Condition{{Type: kueue.WorkloadQuotaReserved, Status: metav1.ConditionTrue}}, conditions...),
		},
	}
	return wl
}

func cq(policy kueue.StopPolicy) *kueue.ClusterQueue {
	return &kueue.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: "research-cq"}, Spec: kueue.ClusterQueueSpec{StopPolicy: ptr.To(policy)}}
}

func lq(policy kueue.StopPolicy) *kueue.LocalQueue {
	return &kueue.LocalQueue{ObjectMeta: metav1.ObjectMeta{Namespace: "research", Name: "research-queue"}, Spec: kueue.LocalQueueSpec{StopPolicy: ptr.To(policy)}}
}

func TestCause(t *testing.T) {
	pending := admitted()
	pending.Status.Admission = nil
	pending.Status.Conditions = nil
	cases := []struct {
		name       string
		wl         *kueue.Workload
		cq         *kueue.ClusterQueue
		lq         *kueue.LocalQueue
		wantReason string
		wantIn     string
	}{
		{name: "running queues", wl: admitted(), cq: cq(kueue.None), lq: lq(kueue.None)},
		{name: "no stop policy", wl: admitted(), cq: &kueue.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: "research-cq"}}},
		{name: "Hold keeps admitted work", wl: admitted(), cq: cq(kueue.Hold), lq: lq(kueue.Hold)},
		{name: "queues gone", wl: admitted()},
		{name: "ClusterQueue drains", wl: admitted(), cq: cq(kueue.HoldAndDrain), lq: lq(kueue.None),
			wantReason: kueue.WorkloadEvictedByClusterQueueStopped, wantIn: "ClusterQueue research-cq is stopped (spec.stopPolicy: HoldAndDrain)"},
		{name: "LocalQueue drains", wl: admitted(), cq: cq(kueue.Hold), lq: lq(kueue.HoldAndDrain),
			wantReason: kueue.WorkloadEvictedByLocalQueueStopped, wantIn: "kubectl fleetq resume localqueue research-queue -n research"},
		{name: "both drain: the ClusterQueue is named", wl: admitted(), cq: cq(kueue.HoldAndDrain), lq: lq(kueue.HoldAndDrain),
			wantReason: kueue.WorkloadEvictedByClusterQueueStopped, wantIn: "kubectl fleetq resume clusterqueue research-cq"},
		{name: "pending workload", wl: pending, cq: cq(kueue.HoldAndDrain)},
		{name: "finished workload", wl: admitted(metav1.Condition{Type: kueue.WorkloadFinished, Status: metav1.ConditionTrue}), cq: cq(kueue.HoldAndDrain)},
		{name: "already evicted", wl: admitted(metav1.Condition{Type: kueue.WorkloadEvicted, Status: metav1.ConditionTrue, Reason: kueue.WorkloadEvictedByPreemption}), cq: cq(kueue.HoldAndDrain)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			reason, msg, ok := Cause(tc.wl, tc.cq, tc.lq)
			if ok != (tc.wantReason != "") || reason != tc.wantReason {
				t.Fatalf("Cause = %q, %q, %t; want reason %q", reason, msg, ok, tc.wantReason)
			}
			if !strings.Contains(msg, tc.wantIn) {
				t.Errorf("message %q does not say %q", msg, tc.wantIn)
			}
		})
	}
}
