package copies

import (
	"context"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/dispatch/registry"
	"github.com/fleetq/fleetq/internal/integration/batchjob"
	"github.com/fleetq/fleetq/manager/jobs"
)

// mirrorFixture is a dispatched, admitted Job here and its copy in worker w1.
type mirrorFixture struct {
	r      *Reconciler
	w      *registry.Worker
	wl     *kueue.Workload
	local  client.Client
	remote client.Client
	clock  *clocktesting.FakeClock
}

func newMirrorFixture(t *testing.T, copyConditions ...batchv1.JobCondition) *mirrorFixture {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	wl := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "job-train", UID: "wl-uid"}}
	wl.Status.Conditions = []metav1.Condition{{Type: kueue.WorkloadAdmitted, Status: metav1.ConditionTrue, Reason: "Admitted"}}
	here := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "train"},
		Spec:       batchv1.JobSpec{ManagedBy: ptr.To(jobs.ManagedByMultiKueue), Suspend: ptr.To(false)},
	}
	there := here.DeepCopy()
	there.Annotations = map[string]string{kueue.MultiKueueOriginUIDAnnotation: string(wl.UID)}
	there.Status = batchv1.JobStatus{Succeeded: 1, Conditions: copyConditions}
	local := fake.NewClientBuilder().WithScheme(s).WithObjects(here).WithStatusSubresource(&batchv1.Job{}).Build()
	remote := fake.NewClientBuilder().WithScheme(s).WithObjects(there).WithStatusSubresource(&batchv1.Job{}).Build()
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC))
	r := &Reconciler{Client: local, Clock: clk, MirrorInterval: time.Second, lastMirror: map[string]time.Time{}, endingSince: map[string]time.Time{}}
	return &mirrorFixture{r: r, w: &registry.Worker{Name: "w1", Client: remote}, wl: wl, local: local, remote: remote, clock: clk}
}

// pass runs one mirror pass over the job as it is here now and returns the job after it.
func (f *mirrorFixture) pass(t *testing.T) (reconcile.Result, *batchv1.Job) {
	t.Helper()
	ctx := context.Background()
	obj := &batchv1.Job{}
	if err := f.local.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "train"}, obj); err != nil {
		t.Fatal(err)
	}
	res, err := f.r.mirror(ctx, f.w, f.wl, &job{a: batchjob.Adapter{}, obj: obj}, reconcile.Result{})
	if err != nil {
		t.Fatalf("mirror: %v", err)
	}
	after := &batchv1.Job{}
	if err := f.local.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "train"}, after); err != nil {
		t.Fatal(err)
	}
	return res, after
}

func condition(typ batchv1.JobConditionType) batchv1.JobCondition {
	return batchv1.JobCondition{Type: typ, Status: corev1.ConditionTrue}
}

func TestAnEndingCopyIsMirroredWithItsFinishInOneWrite(t *testing.T) {
	f := newMirrorFixture(t, condition(batchv1.JobSuccessCriteriaMet))
	res, got := f.pass(t)
	if got.Status.Succeeded != 0 {
		t.Fatalf("the ending status was mirrored at once (succeeded %d); it should wait for the finish", got.Status.Succeeded)
	}
	if res.RequeueAfter <= 0 || res.RequeueAfter > EndingWait {
		t.Errorf("requeue after %v, want a look again within EndingWait (%v)", res.RequeueAfter, EndingWait)
	}

	// The worker's controller writes the finish: mirrored at once, both conditions in one write.
	ctx := context.Background()
	there := &batchv1.Job{}
	if err := f.remote.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "train"}, there); err != nil {
		t.Fatal(err)
	}
	there.Status.Conditions = append(there.Status.Conditions, condition(batchv1.JobComplete))
	if err := f.remote.Status().Update(ctx, there); err != nil {
		t.Fatal(err)
	}
	f.clock.Step(100 * time.Millisecond)
	if _, got = f.pass(t); len(got.Status.Conditions) != 2 || got.Status.Succeeded != 1 {
		t.Errorf("after the finish, mirrored status %+v, want succeeded 1 with SuccessCriteriaMet and Complete", got.Status)
	}
}

func TestAnEndingCopyThatDoesNotFinishIsMirroredAfterEndingWait(t *testing.T) {
	f := newMirrorFixture(t, condition(batchv1.JobSuccessCriteriaMet))
	if _, got := f.pass(t); got.Status.Succeeded != 0 {
		t.Fatalf("mirrored at once, want it held")
	}
	f.clock.Step(EndingWait - time.Millisecond)
	if _, got := f.pass(t); got.Status.Succeeded != 0 {
		t.Fatalf("mirrored before EndingWait, want it held")
	}
	f.clock.Step(time.Millisecond)
	if _, got := f.pass(t); got.Status.Succeeded != 1 {
		t.Errorf("not mirrored once EndingWait passed: a worker whose job controller lags would keep the status from users")
	}
}

func TestARunningCopyIsMirroredAtOnce(t *testing.T) {
	f := newMirrorFixture(t)
	if _, got := f.pass(t); got.Status.Succeeded != 1 {
		t.Errorf("a running copy's first status was not mirrored at once")
	}
}
