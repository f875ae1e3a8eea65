package scheduler

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	fleetq "github.com/fleetq/fleetq/api/fleetq/v1alpha1"
	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/internal/integration"
	"github.com/fleetq/fleetq/internal/integration/batchjob"
	podintegration "github.com/fleetq/fleetq/internal/integration/pod"
	"github.com/fleetq/fleetq/worker/capacity"
	"github.com/fleetq/fleetq/worker/fencing"
)

const (
	origin  = "mgr"
	agentNS = "fleetq-system"
	gpu     = corev1.ResourceName("nvidia.com/gpu")
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(kueue.AddToScheme(s))
	return s
}

func node(name string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"gpu": "a100"}},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("96"), corev1.ResourcePods: resource.MustParse("110"), gpu: resource.MustParse("8"),
		}},
	}
}

func flavor() *kueue.ResourceFlavor {
	return &kueue.ResourceFlavor{
		ObjectMeta: metav1.ObjectMeta{Name: "a100", Labels: map[string]string{fleetq.OriginLabel: origin}},
		Spec:       kueue.ResourceFlavorSpec{NodeLabels: map[string]string{"gpu": "a100"}},
	}
}

func podTemplate(gpus int64) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		NodeSelector: map[string]string{"gpu": "a100"},
		Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{gpu: *resource.NewQuantity(gpus, resource.DecimalSI)},
		}}},
	}}
}

// copyOf makes a copied Job and its Workload as dispatch creates them; labels nil makes a user's own.
func copyOf(name string, gpus int64, priority int32, policy fleetq.LocalPreemptionPolicy, labels map[string]string) (*batchv1.Job, *kueue.Workload) {
	uid := types.UID("job-uid-" + name)
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: name, UID: uid, Labels: labels},
		Spec:       batchv1.JobSpec{Suspend: ptr.To(true), Parallelism: ptr.To[int32](1), Completions: ptr.To[int32](1), Template: podTemplate(gpus)},
	}
	wl := &kueue.Workload{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "team", Name: name, UID: types.UID("wl-uid-" + name), Labels: labels, CreationTimestamp: metav1.NewTime(t0),
			Annotations: map[string]string{
				fleetq.OriginClusterQueueAnnotation: "cq",
				fleetq.LocalPreemptionAnnotation:    string(policy),
				fleetq.OriginUIDAnnotation:          "origin-uid-" + name,
				fleetq.PodSetFlavorsAnnotation:      `{"main":{"nvidia.com/gpu":"a100"}}`,
			},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: name, UID: uid, Controller: ptr.To(true)}},
		},
		Spec: kueue.WorkloadSpec{Priority: ptr.To(priority), PodSets: []kueue.PodSet{{Name: "main", Count: 1, Template: podTemplate(gpus)}}},
	}
	return job, wl
}

func mine() map[string]string { return map[string]string{fleetq.OriginLabel: origin} }

// runningPod is a copy's pod bound to a node, labelled as the manager labels the templates it starts.
func runningPod(job *batchv1.Job, nodeName string, gpus int64) *corev1.Pod {
	labels := map[string]string{fleetq.WorkloadUIDLabel: "origin-uid-" + job.Name, fleetq.PodSetLabel: "main"}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: job.Namespace, Name: job.Name + "-pod", Labels: labels},
		Spec:       corev1.PodSpec{NodeName: nodeName, Containers: podTemplate(gpus).Spec.Containers},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning},
	}
}

func lease(renew time.Time, seconds int32) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: agentNS, Name: fleetq.ManagerLeaseName(origin)},
		Spec:       coordinationv1.LeaseSpec{LeaseDurationSeconds: ptr.To(seconds), RenewTime: ptr.To(metav1.NewMicroTime(renew))},
	}
}

type published struct {
	Reserved map[string]capacity.Amounts
	Fenced   bool
}

type harness struct {
	t     *testing.T
	c     client.Client
	clock *clocktesting.FakeClock
	s     *Scheduler
	last  published
}

func newHarness(t *testing.T, objs ...client.Object) *harness {
	h := &harness{t: t, clock: clocktesting.NewFakeClock(t0)}
	h.c = fake.NewClientBuilder().WithScheme(scheme()).WithObjects(objs...).WithStatusSubresource(&kueue.Workload{}).Build()
	integrations, err := integration.NewRegistry(batchjob.Adapter{}, podintegration.Adapter{})
	if err != nil {
		t.Fatal(err)
	}
	h.s = &Scheduler{
		Client: h.c, Integrations: integrations, Clock: h.clock, Log: logr.Discard(), Recorder: events.NewFakeRecorder(100),
		ClusterName: "us-east", Origin: origin, Namespace: agentNS,
		Fence:   fencing.NewObserver(h.clock, fleetq.ManagerLeaseName(origin)),
		Publish: func(r map[string]capacity.Amounts, f bool) { h.last = published{r, f} },
	}
	return h
}

func (h *harness) pass() {
	h.t.Helper()
	if _, err := h.s.Reconcile(context.Background(), reconcile.Request{}); err != nil {
		h.t.Fatalf("pass: %v", err)
	}
}

// state reads a copy as "suspended=<bool> <type>=<status>/<reason> ...", for the conditions that matter.
func (h *harness) state(name string) string {
	h.t.Helper()
	wl := &kueue.Workload{}
	if err := h.c.Get(context.Background(), types.NamespacedName{Namespace: "team", Name: name}, wl); err != nil {
		h.t.Fatal(err)
	}
	job := &batchv1.Job{}
	if err := h.c.Get(context.Background(), types.NamespacedName{Namespace: "team", Name: name}, job); err != nil {
		h.t.Fatal(err)
	}
	out := "suspended=" + map[bool]string{true: "true", false: "false"}[ptr.Deref(job.Spec.Suspend, false)]
	for _, typ := range []string{kueue.WorkloadQuotaReserved, kueue.WorkloadAdmitted, kueue.WorkloadEvicted, kueue.WorkloadPreempted, kueue.WorkloadFinished} {
		if c := meta.FindStatusCondition(wl.Status.Conditions, typ); c != nil {
			out += " " + typ + "=" + string(c.Status) + "/" + c.Reason
		}
	}
	if wl.Status.Admission != nil {
		out += " admission"
	}
	return out
}

func (h *harness) message(name, typ string) string {
	wl := &kueue.Workload{}
	if err := h.c.Get(context.Background(), types.NamespacedName{Namespace: "team", Name: name}, wl); err != nil {
		h.t.Fatal(err)
	}
	if c := meta.FindStatusCondition(wl.Status.Conditions, typ); c != nil {
		return c.Message
	}
	return ""
}

func (h *harness) woken() bool {
	select {
	case <-h.s.wake:
		return true
	default:
		return false
	}
}

func expect[T any](t *testing.T, what string, want, got T) {
	t.Helper()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s (-want +got):\n%s", what, diff)
	}
}

func TestAdmitsWhatFitsAndLeavesUsersJobsAlone(t *testing.T) {
	fitsJob, fits := copyOf("fits", 8, 0, "", mine())
	bigJob, big := copyOf("big", 8, 0, "", mine())
	big.CreationTimestamp = metav1.NewTime(t0.Add(time.Second))
	// Started by mistake (not by the agent): it must be stopped, not left to run without room.
	bigJob.Spec.Suspend = ptr.To(false)
	userJob, userWL := copyOf("users", 1, 0, "", nil)
	userJob.Spec.Suspend = ptr.To(false)
	otherJob, otherWL := copyOf("other", 1, 0, "", map[string]string{fleetq.OriginLabel: "another-manager"})
	h := newHarness(t, node("n0"), flavor(), fitsJob, fits, bigJob, big, userJob, userWL, otherJob, otherWL)

	h.pass()
	expect(t, "fits", "suspended=false QuotaReserved=True/Admitted Admitted=True/Admitted admission", h.state("fits"))
	expect(t, "big", "suspended=true QuotaReserved=False/Pending", h.state("big"))
	expect(t, "big's reason", `no node has room: largest node fit 0 of 8 nvidia.com/gpu`, h.message("big", kueue.WorkloadQuotaReserved))
	expect(t, "fits' admission names its nodes", "Admitted by fleetq-agent in cluster us-east on [n0×1]", h.message("fits", kueue.WorkloadQuotaReserved))
	for evs := h.s.Recorder.(*events.FakeRecorder).Events; len(evs) > 0; {
		if e := <-evs; strings.HasPrefix(e, "Normal "+fleetq.AdmittedReason) {
			t.Errorf("a routine admission recorded event %q; want none (its nodes are in the condition)", e)
		}
	}
	expect(t, "users' own copy", "suspended=false", h.state("users"))
	expect(t, "another manager's copy", "suspended=true", h.state("other"))
	expect(t, "published reservation", published{Reserved: map[string]capacity.Amounts{"n0": {gpu: 8, corev1.ResourcePods: 1}}}, h.last)

	wl := &kueue.Workload{}
	if err := h.c.Get(context.Background(), client.ObjectKeyFromObject(fits), wl); err != nil {
		t.Fatal(err)
	}
	want := &kueue.Admission{ClusterQueue: "cq", PodSetAssignments: []kueue.PodSetAssignment{{
		Name: "main", Count: ptr.To[int32](1),
		Flavors:       map[corev1.ResourceName]kueue.ResourceFlavorReference{gpu: "a100"},
		ResourceUsage: corev1.ResourceList{gpu: resource.MustParse("8")},
	}}}
	if diff := cmp.Diff(want, wl.Status.Admission, cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })); diff != "" {
		t.Errorf("admission (-want +got):\n%s", diff)
	}

	// Its pod binds: the room is now held by the pod, not reserved, and still not free for big.
	if err := h.c.Create(context.Background(), runningPod(fitsJob, "n0", 8)); err != nil {
		t.Fatal(err)
	}
	h.pass()
	expect(t, "big after fits' pod bound", "suspended=true QuotaReserved=False/Pending", h.state("big"))
	expect(t, "published reservation once bound", published{Reserved: map[string]capacity.Amounts{}}, h.last)

	// The Job finishes: Finished is mirrored, the pod is gone, and big gets the node.
	job := &batchv1.Job{}
	_ = h.c.Get(context.Background(), client.ObjectKeyFromObject(fitsJob), job)
	job.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
	if err := h.c.Status().Update(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	if err := h.c.Delete(context.Background(), runningPod(fitsJob, "n0", 8)); err != nil {
		t.Fatal(err)
	}
	h.pass()
	expect(t, "fits finished", "suspended=false QuotaReserved=True/Admitted Admitted=True/Admitted Finished=True/Succeeded admission", h.state("fits"))
	expect(t, "big admitted", "suspended=false QuotaReserved=True/Admitted Admitted=True/Admitted admission", h.state("big"))
}

func TestPreemptsTheLowerPriorityCopyThenAdmitsOnceItsPodsAreGone(t *testing.T) {
	lowJob, low := copyOf("low", 8, 1, "", mine())
	highJob, high := copyOf("high", 8, 10, fleetq.LocalPreemptionLowerPriority, mine())
	high.CreationTimestamp = metav1.NewTime(t0.Add(time.Minute))
	h := newHarness(t, node("n0"), flavor(), lowJob, low)
	h.pass()
	if err := h.c.Create(context.Background(), runningPod(lowJob, "n0", 8)); err != nil {
		t.Fatal(err)
	}
	for _, o := range []client.Object{highJob, high} {
		if err := h.c.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}

	h.pass()
	expect(t, "low", "suspended=true QuotaReserved=True/Admitted Admitted=True/Admitted Evicted=True/Preempted Preempted=True/InClusterQueue admission", h.state("low"))
	expect(t, "low's message", "Preempted in cluster us-east by team/high (priority 10) to make room for it on the nodes; this workload's priority is 1",
		h.message("low", kueue.WorkloadPreempted))
	expect(t, "high", "suspended=true QuotaReserved=False/Pending", h.state("high"))

	// While the victim's pod is still there, another pass neither admits nor picks new victims.
	h.pass()
	expect(t, "high waits", "waiting for the pods of evicted workloads to stop (team/low); no node has room: largest node fit 0 of 8 nvidia.com/gpu",
		h.message("high", kueue.WorkloadQuotaReserved))

	if err := h.c.Delete(context.Background(), runningPod(lowJob, "n0", 8)); err != nil {
		t.Fatal(err)
	}
	h.pass()
	expect(t, "high admitted", "suspended=false QuotaReserved=True/Admitted Admitted=True/Admitted admission", h.state("high"))
	expect(t, "low released", "suspended=true QuotaReserved=False/Pending Admitted=False/NoReservation Evicted=True/Preempted Preempted=True/InClusterQueue", h.state("low"))
	h.pass()
	expect(t, "low is never admitted again", "suspended=true QuotaReserved=False/Pending Admitted=False/NoReservation Evicted=True/Preempted Preempted=True/InClusterQueue", h.state("low"))
}

func TestFencesOnItsOwnClock(t *testing.T) {
	jobA, a := copyOf("a", 4, 0, "", mine())
	// The manager's clock is a day off: only the agent's clock counts.
	h := newHarness(t, node("n0"), flavor(), jobA, a, lease(t0.Add(-24*time.Hour), 10))
	h.pass()
	expect(t, "admitted under a fresh lease", "suspended=false QuotaReserved=True/Admitted Admitted=True/Admitted admission", h.state("a"))

	h.clock.Step(9 * time.Second)
	expect(t, "timer before the deadline", false, h.woken())
	h.pass()
	expect(t, "not fenced at 9s", "suspended=false QuotaReserved=True/Admitted Admitted=True/Admitted admission", h.state("a"))

	h.clock.Step(time.Second)
	expect(t, "timer at the deadline", true, h.woken())
	h.pass()
	expect(t, "fenced at 10s", "suspended=true QuotaReserved=True/Admitted Admitted=True/Admitted Evicted=True/Fenced admission", h.state("a"))
	expect(t, "report told", true, h.last.Fenced)

	jobB, b := copyOf("b", 1, 0, "", mine())
	for _, o := range []client.Object{jobB, b} {
		if err := h.c.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
	h.pass()
	expect(t, "nothing admitted while fenced", "suspended=true QuotaReserved=False/Pending", h.state("b"))

	// A renewal lifts the fence for new copies; the fenced one stays evicted.
	l := &coordinationv1.Lease{}
	_ = h.c.Get(context.Background(), types.NamespacedName{Namespace: agentNS, Name: fleetq.ManagerLeaseName(origin)}, l)
	l.Spec.RenewTime = ptr.To(metav1.NewMicroTime(t0.Add(-24*time.Hour + 20*time.Second)))
	if err := h.c.Update(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	h.pass()
	expect(t, "b admitted after a renewal", "suspended=false QuotaReserved=True/Admitted Admitted=True/Admitted admission", h.state("b"))
	expect(t, "a stays fenced", "suspended=true QuotaReserved=False/Pending Admitted=False/NoReservation Evicted=True/Fenced", h.state("a"))
}

// groupCopy makes the Workload copy of pod group name as dispatch creates it (owned by none of
// its members, labelled with the group), and its members' gated Pod copies.
func groupCopy(name string, size int, gpus int64) (*kueue.Workload, []*corev1.Pod) {
	origin := "origin-uid-" + name
	wl := &kueue.Workload{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "team", Name: name, UID: types.UID("wl-uid-" + name), CreationTimestamp: metav1.NewTime(t0),
			Labels: map[string]string{fleetq.OriginLabel: "mgr", kueue.PodGroupNameLabel: name},
			Annotations: map[string]string{
				fleetq.OriginClusterQueueAnnotation: "cq",
				fleetq.OriginUIDAnnotation:          origin,
				fleetq.PodSetFlavorsAnnotation:      `{"role":{"nvidia.com/gpu":"a100"}}`,
			},
		},
		Spec: kueue.WorkloadSpec{PodSets: []kueue.PodSet{{Name: "role", Count: int32(size), Template: podTemplate(gpus)}}},
	}
	var pods []*corev1.Pod
	for i := range size {
		pods = append(pods, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: fmt.Sprintf("%s-%d", name, i), Labels: map[string]string{
				fleetq.OriginLabel: "mgr", kueue.PodGroupNameLabel: name, fleetq.WorkloadUIDLabel: origin, fleetq.PodSetLabel: "role",
			}},
			Spec: corev1.PodSpec{
				SchedulingGates: []corev1.PodSchedulingGate{{Name: podintegration.GateName}},
				NodeSelector:    map[string]string{"gpu": "a100"}, Containers: podTemplate(gpus).Spec.Containers,
			},
		})
	}
	return wl, pods
}

// gates says, member by member, whether each of a group's Pod copies is still gated ("-" once
// it is gone).
func (h *harness) gates(pods []*corev1.Pod) string {
	h.t.Helper()
	var out []string
	for _, p := range pods {
		cur := &corev1.Pod{}
		switch err := h.c.Get(context.Background(), client.ObjectKeyFromObject(p), cur); {
		case apierrors.IsNotFound(err):
			out = append(out, "-")
		case err != nil:
			h.t.Fatal(err)
		default:
			out = append(out, fmt.Sprint(podintegration.Adapter{}.Suspended(cur)))
		}
	}
	return strings.Join(out, " ")
}

func (h *harness) condition(name, typ string) string {
	h.t.Helper()
	wl := &kueue.Workload{}
	if err := h.c.Get(context.Background(), types.NamespacedName{Namespace: "team", Name: name}, wl); err != nil {
		h.t.Fatal(err)
	}
	if c := meta.FindStatusCondition(wl.Status.Conditions, typ); c != nil {
		return string(c.Status) + "/" + c.Reason
	}
	return ""
}

func TestStartsAGroupsMembersTogetherOnceEveryCopyIsHere(t *testing.T) {
	wl, pods := groupCopy("trainers", 3, 2)
	h := newHarness(t, node("n0"), flavor(), wl, pods[0], pods[1])

	h.pass()
	expect(t, "members with one copy missing", "true true -", h.gates(pods))
	expect(t, "why it waits", "waiting for the copies of group trainers's members: 2 of 3 Pods are here", h.message("trainers", kueue.WorkloadQuotaReserved))

	if err := h.c.Create(context.Background(), pods[2]); err != nil {
		t.Fatal(err)
	}
	h.pass()
	expect(t, "every member started at once", "false false false", h.gates(pods))
	expect(t, "admitted", "True/Admitted", h.condition("trainers", kueue.WorkloadAdmitted))
	expect(t, "published reservation", published{Reserved: map[string]capacity.Amounts{"n0": {gpu: 6, corev1.ResourcePods: 3}}}, h.last)

	// Two members end: the group has not, and still holds the room of the one that runs.
	for _, p := range pods[:2] {
		h.setPhase(p, corev1.PodSucceeded)
	}
	h.pass()
	expect(t, "not finished while a member runs", "", h.condition("trainers", kueue.WorkloadFinished))
	expect(t, "room of the member that has not bound", published{Reserved: map[string]capacity.Amounts{"n0": {gpu: 2, corev1.ResourcePods: 1}}}, h.last)

	h.setPhase(pods[2], corev1.PodFailed)
	h.pass()
	expect(t, "a failed member waits for its replacement", "", h.condition("trainers", kueue.WorkloadFinished))

	replacement := pods[2].DeepCopy()
	replacement.Name, replacement.ResourceVersion = "trainers-3", ""
	if err := h.c.Create(context.Background(), replacement); err != nil {
		t.Fatal(err)
	}
	h.pass()
	expect(t, "the replacement's copy starts in the admitted group", "false", h.gates([]*corev1.Pod{replacement}))
	h.setPhase(replacement, corev1.PodSucceeded)
	h.pass()
	expect(t, "finished once size members succeeded", "True/Succeeded", h.condition("trainers", kueue.WorkloadFinished))
	expect(t, "its message", "all 3 Pods of group trainers succeeded", h.message("trainers", kueue.WorkloadFinished))
}

func TestEndsAGroupWhoseMemberMustNotBeRetried(t *testing.T) {
	wl, pods := groupCopy("trainers", 2, 1)
	pods[1].Annotations = map[string]string{kueue.RetriableInGroupAnnotation: "false"}
	h := newHarness(t, node("n0"), flavor(), wl, pods[0], pods[1])
	h.pass()
	h.setPhase(pods[1], corev1.PodFailed)
	h.pass()
	expect(t, "not while the other member runs", "", h.condition("trainers", kueue.WorkloadFinished))
	h.setPhase(pods[0], corev1.PodSucceeded)
	h.pass()
	expect(t, "failed once none runs", "True/Failed", h.condition("trainers", kueue.WorkloadFinished))
	expect(t, "says why", "group trainers ended without succeeding: 1 of its 2 Pods succeeded, and trainers-1 says kueue.x-k8s.io/retriable-in-group: false",
		h.message("trainers", kueue.WorkloadFinished))
}

// setPhase sets a Pod copy's phase, as its kubelet would.
func (h *harness) setPhase(p *corev1.Pod, phase corev1.PodPhase) {
	h.t.Helper()
	cur := &corev1.Pod{}
	if err := h.c.Get(context.Background(), client.ObjectKeyFromObject(p), cur); err != nil {
		h.t.Fatal(err)
	}
	cur.Status.Phase = phase
	if err := h.c.Status().Update(context.Background(), cur); err != nil {
		h.t.Fatal(err)
	}
}

func TestStopsAnEvictedGroupByDeletingEveryStartedMember(t *testing.T) {
	wl, pods := groupCopy("trainers", 2, 4)
	h := newHarness(t, node("n0"), flavor(), wl, pods[0], pods[1])
	h.pass()
	expect(t, "started", "false false", h.gates(pods))

	cur := &kueue.Workload{}
	_ = h.c.Get(context.Background(), client.ObjectKeyFromObject(wl), cur)
	meta.SetStatusCondition(&cur.Status.Conditions, metav1.Condition{Type: kueue.WorkloadEvicted, Status: metav1.ConditionTrue, Reason: "Fenced", Message: "test"})
	if err := h.c.Status().Update(context.Background(), cur); err != nil {
		t.Fatal(err)
	}
	h.pass()
	expect(t, "a started Pod cannot be gated again: every member is deleted", "- -", h.gates(pods))
	h.pass()
	expect(t, "released once its members are gone", "False/Pending", h.condition("trainers", kueue.WorkloadQuotaReserved))
}
