package workloads

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
)

func wl(name string, reserved bool) *kueue.Workload {
	w := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
	if reserved {
		w.Status.Conditions = []metav1.Condition{{Type: kueue.WorkloadQuotaReserved, Status: metav1.ConditionTrue}}
		w.Status.Admission = &kueue.Admission{ClusterQueue: "cq"}
	}
	return w
}

// TestReservationsOfTheInitialListComeFirst: after a restart, the workloads that hold quota are
// reconciled before those that wait, whatever their order in the list; a workload created later
// goes at the default priority, as controller-runtime's handler puts it; workloads sent back by
// a queue's change go behind them unless they hold quota.
func TestReservationsOfTheInitialListComeFirst(t *testing.T) {
	q := priorityqueue.New[reconcile.Request]("test")
	defer q.ShutDown()
	h := &reservationsFirst{}
	ctx := context.Background()
	for _, w := range []*kueue.Workload{wl("wait-1", false), wl("held-1", true), wl("wait-2", false), wl("held-2", true)} {
		h.Create(ctx, event.TypedCreateEvent[*kueue.Workload]{Object: w, IsInInitialList: true}, q)
	}
	h.Create(ctx, event.TypedCreateEvent[*kueue.Workload]{Object: wl("new", false)}, q)
	// Sent back by queues reaching the cache: the waiting one stays behind the reservations.
	h.Generic(ctx, event.TypedGenericEvent[*kueue.Workload]{Object: wl("wait-1", false)}, q)
	h.Generic(ctx, event.TypedGenericEvent[*kueue.Workload]{Object: wl("wait-3", false)}, q)
	h.Generic(ctx, event.TypedGenericEvent[*kueue.Workload]{Object: wl("held-2", true)}, q)
	var got []string
	prio := map[string]int{}
	for range 6 {
		req, p, _ := q.GetWithPriority()
		got = append(got, req.Name)
		prio[req.Name] = p
		q.Done(req)
	}
	first := map[string]bool{got[0]: true, got[1]: true, got[2]: true}
	if !first["held-1"] || !first["held-2"] || !first["new"] || prio["held-1"] != 0 || prio["wait-1"] >= 0 || prio["wait-3"] >= 0 {
		t.Errorf("order %v, priorities %v; want held-1, held-2 and new (default priority) before the waiting ones of the list", got, prio)
	}
}
