package workload

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
)

func TestNameFor(t *testing.T) {
	cases := map[string]struct {
		kind, name string
		uid        string
		wantPrefix string
	}{
		"short":       {kind: "Job", name: "train-abc", uid: "u1", wantPrefix: "job-train-abc-"},
		"another uid": {kind: "Job", name: "train-abc", uid: "u2", wantPrefix: "job-train-abc-"},
		"long name":   {kind: "Job", name: strings.Repeat("a", 300), uid: "u1", wantPrefix: "job-aaaa"},
	}
	seen := map[string]string{}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := NameFor(tc.kind, tc.name, types.UID(tc.uid))
			if !strings.HasPrefix(got, tc.wantPrefix) || len(got) > 253 {
				t.Errorf("NameFor = %q (len %d), want prefix %q and at most 253 chars", got, len(got), tc.wantPrefix)
			}
			if other, dup := seen[got]; dup {
				t.Errorf("NameFor gave %q for both %q and %q", got, other, name)
			}
			seen[got] = name
		})
	}
}

func TestSetConditionReportsChanges(t *testing.T) {
	wl := &kueue.Workload{}
	now := time.Unix(100, 0)
	if !SetCondition(wl, kueue.WorkloadQuotaReserved, metav1.ConditionFalse, "Pending", "waiting", now) {
		t.Fatal("first set: want changed")
	}
	if SetCondition(wl, kueue.WorkloadQuotaReserved, metav1.ConditionFalse, "Pending", "waiting", now.Add(time.Minute)) {
		t.Error("same condition again: want unchanged")
	}
	if !SetCondition(wl, kueue.WorkloadQuotaReserved, metav1.ConditionFalse, "Pending", "other", now) {
		t.Error("new message: want changed")
	}
}

func TestQueueTime(t *testing.T) {
	created := metav1.NewTime(time.Unix(100, 0))
	requeued := metav1.NewTime(time.Unix(200, 0))
	cases := map[string]struct {
		conds []metav1.Condition
		want  time.Time
	}{
		"never evicted": {want: created.Time},
		"requeued":      {conds: []metav1.Condition{{Type: kueue.WorkloadRequeued, Status: metav1.ConditionTrue, LastTransitionTime: requeued}}, want: requeued.Time},
		"not yet requeued": {
			conds: []metav1.Condition{{Type: kueue.WorkloadRequeued, Status: metav1.ConditionFalse, LastTransitionTime: requeued}}, want: created.Time,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			wl := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: created}, Status: kueue.WorkloadStatus{Conditions: tc.conds}}
			if got := QueueTime(wl); !got.Equal(tc.want) {
				t.Errorf("QueueTime = %v, want %v", got, tc.want)
			}
		})
	}
}
