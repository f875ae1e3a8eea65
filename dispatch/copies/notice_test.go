package copies

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/dispatch/registry"
)

// noticeFixture is a workload dispatched to w1 whose copy there has no verdict yet.
func noticeFixture(t *testing.T) (*Reconciler, client.Client, *kueue.Workload, *clocktesting.FakeClock) {
	t.Helper()
	s := runtime.NewScheme()
	if err := kueue.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	wl := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "job-train"}}
	wl.Status.AdmissionChecks = []kueue.AdmissionCheckState{{Name: "mk", State: kueue.CheckStatePending, Message: "Dispatching to worker w1. Placement: room"}}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(wl).WithStatusSubresource(&kueue.Workload{}).Build()
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC))
	r := &Reconciler{Client: c, Clock: clk, RejectAfter: time.Minute, WorkerLostTimeout: 5 * time.Minute}
	r.pendingSince, r.lastMirror, r.unregistered = map[string]time.Time{}, map[string]time.Time{}, map[string]time.Time{}
	return r, c, wl, clk
}

// followed runs follow on the workload as stored, with the copy's QuotaReserved condition (nil:
// no verdict), and returns the check's message after it and the requeue.
func followed(t *testing.T, r *Reconciler, c client.Client, wl *kueue.Workload, verdict *metav1.Condition) (string, time.Duration) {
	t.Helper()
	ctx := context.Background()
	cur := &kueue.Workload{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(wl), cur); err != nil {
		t.Fatal(err)
	}
	remote := &kueue.Workload{}
	if verdict != nil {
		remote.Status.Conditions = []metav1.Condition{*verdict}
	}
	res, err := r.follow(ctx, cur, "mk", &registry.Worker{Name: "w1"}, remote)
	if err != nil {
		t.Fatalf("follow: %v", err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(wl), cur); err != nil {
		t.Fatal(err)
	}
	return cur.Status.AdmissionChecks[0].Message, res.RequeueAfter
}

// TestTheCheckSaysACopyWaitsForItsAgentOnlyAfterPendingNoticeAfter: a copy with no verdict keeps
// the dispatch message (no status write) until PendingNoticeAfter; an agent's reason for not
// starting it is shown after RefusalNoticeAfter.
func TestTheCheckSaysACopyWaitsForItsAgentOnlyAfterPendingNoticeAfter(t *testing.T) {
	r, c, wl, clk := noticeFixture(t)
	msg, requeue := followed(t, r, c, wl, nil)
	if msg != "Dispatching to worker w1. Placement: room" || requeue <= PendingNoticeAfter-time.Second || requeue > PendingNoticeAfter+time.Second {
		t.Fatalf("at once: message %q, requeue %v; want the dispatch message kept and a look again at PendingNoticeAfter", msg, requeue)
	}
	clk.Step(PendingNoticeAfter / 2)
	if msg, _ := followed(t, r, c, wl, nil); msg != "Dispatching to worker w1. Placement: room" {
		t.Fatalf("half way: message %q; want no write yet", msg)
	}
	clk.Step(PendingNoticeAfter / 2)
	if msg, _ := followed(t, r, c, wl, nil); msg != "Dispatched to worker w1, waiting for its agent to start it" {
		t.Fatalf("after PendingNoticeAfter: message %q", msg)
	}

	r, c, wl, clk = noticeFixture(t)
	refused := &metav1.Condition{Type: kueue.WorkloadQuotaReserved, Status: metav1.ConditionFalse, Reason: "Pending", Message: "no node has room"}
	followed(t, r, c, wl, refused)
	clk.Step(RefusalNoticeAfter)
	if msg, _ := followed(t, r, c, wl, refused); msg != "Dispatched to worker w1, which cannot start it yet: no node has room" {
		t.Fatalf("after RefusalNoticeAfter: message %q; want the agent's reason", msg)
	}
}
