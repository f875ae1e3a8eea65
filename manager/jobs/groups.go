package jobs

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/config"
	"github.com/fleetq/fleetq/internal/integration"
	"github.com/fleetq/fleetq/internal/workload"
)

// GroupFinalizer keeps a group's Workload until the group controller has stopped the members
// it started: deleting the Workload is how a user ends a group that will not succeed (as in
// Kueue), and its running members must not outlive the quota it held.
const GroupFinalizer = "fleetq.dev/group"

// Reasons of the events the group controller writes on members.
const (
	ReasonGroupWaiting      = "GroupWaiting"
	ReasonGroupInconsistent = "GroupInconsistent"
)

// GroupReconciler runs the groups of one kind (integration.Grouper, Kueue's pod groups) as one
// Workload each, named after the group: it is created once every member announced by the group's
// size exists, all members start together when it is admitted, an eviction deletes the members
// that started (a started Pod cannot be held again) and the Workload goes back to its queue only
// while the group is whole. A group that lost members before starting waits, with a message, for
// replacements. Requests are groups: the Name is the group's name.
type GroupReconciler struct {
	Adapter  integration.Adapter
	Grouper  integration.Grouper
	Client   client.Client
	Clock    clock.PassiveClock
	Recorder events.EventRecorder
	Log      logr.Logger
	Config   *config.Configuration

	mu sync.Mutex
	// told is the last message each waiting group's members were given, so a group whose Pods
	// arrive one by one gets one event per change, not one per reconcile.
	told map[types.NamespacedName]string
}

// SetupWithManager registers the group controller of the kind; members' and group Workloads'
// changes reach their group.
func (r *GroupReconciler) SetupWithManager(mgr ctrl.Manager) error {
	byLabel := func(_ context.Context, obj client.Object) []reconcile.Request {
		name, ok := obj.GetLabels()[r.Grouper.GroupLabel()]
		if !ok || name == "" {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: name}}}
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName(r.Adapter)+"-groups").
		Watches(r.Adapter.New(), handler.EnqueueRequestsFromMapFunc(byLabel)).
		Watches(&kueue.Workload{}, handler.EnqueueRequestsFromMapFunc(byLabel)).
		WithOptions(controller.Options{MaxConcurrentReconciles: 4}).
		Complete(r)
}

// Reconcile moves one group a step, decided from what its members and its Workload say now.
func (r *GroupReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	err := r.reconcile(ctx, req.NamespacedName)
	if apierrors.IsConflict(err) {
		return reconcile.Result{Requeue: true}, nil
	}
	return reconcile.Result{}, err
}

// member is one object of a group, with what the group controller needs to know of it.
type member struct {
	obj    client.Object
	status integration.Status
	size   int32
	// started: fleetq let it run (it is not held by its suspend field or gate).
	started bool
}

func (m member) deleting() bool { return m.obj.GetDeletionTimestamp() != nil }

// running: it may hold resources now (it has not ended).
func (m member) running() bool { return !m.status.Finished && (m.started || m.status.Active) }

// counts: it is part of the group's size (failed and leaving members are replaced).
func (m member) counts() bool { return !m.deleting() && !(m.status.Finished && m.status.Failed) }

func (m member) succeeded() bool { return m.status.Finished && !m.status.Failed }

// group is a group's members, read from the cache, by name.
type group struct {
	key     types.NamespacedName
	members []member
}

func (g group) filter(keep func(member) bool) []member {
	var out []member
	for _, m := range g.members {
		if keep(m) {
			out = append(out, m)
		}
	}
	return out
}

func (r *GroupReconciler) read(ctx context.Context, key types.NamespacedName) (group, error) {
	return readGroup(ctx, r.Client, r.Adapter, r.Grouper, key, func(obj client.Object) bool { return Managed(obj, r.Config, nil) })
}

// readGroup lists a group's members (those managed says fleetq manages), sorted by name.
func readGroup(ctx context.Context, c client.Reader, a integration.Adapter, gr integration.Grouper, key types.NamespacedName, managed func(client.Object) bool) (group, error) {
	list := gr.NewList()
	if err := c.List(ctx, list, client.InNamespace(key.Namespace), client.MatchingLabels{gr.GroupLabel(): key.Name}); err != nil {
		return group{}, fmt.Errorf("listing the members of group %s: %w", key, err)
	}
	objs, err := meta.ExtractList(list)
	if err != nil {
		return group{}, err
	}
	g := group{key: key}
	for _, o := range objs {
		obj := o.(client.Object)
		if !managed(obj) {
			continue
		}
		_, size, err := gr.Group(obj)
		if err != nil {
			continue // its webhook refused it; one from before fleetq ran is not a member
		}
		g.members = append(g.members, member{obj: obj, status: a.Status(obj), size: size, started: !a.Suspended(obj)})
	}
	slices.SortFunc(g.members, func(a, b member) int { return strings.Compare(a.obj.GetName(), b.obj.GetName()) })
	return g, nil
}

// GroupMembers lists the members of a group's Workload that count toward its size (not leaving,
// not failed), sorted by name, with the pod set each is in: dispatch copies each of them to the
// group's worker. The members are those the manager's cache holds (it caches only the objects
// fleetq manages).
func GroupMembers(ctx context.Context, c client.Reader, a integration.Adapter, wl *kueue.Workload) ([]client.Object, []kueue.PodSetReference, error) {
	gr, ok := a.(integration.Grouper)
	if !ok {
		return nil, nil, fmt.Errorf("%s is not a kind whose objects form groups", a.GVK().Kind)
	}
	key := types.NamespacedName{Namespace: wl.Namespace, Name: wl.Labels[gr.GroupLabel()]}
	g, err := readGroup(ctx, c, a, gr, key, func(client.Object) bool { return true })
	if err != nil {
		return nil, nil, err
	}
	var objs []client.Object
	for _, m := range g.filter(member.counts) {
		objs = append(objs, m.obj)
	}
	if len(objs) == 0 {
		return nil, nil, nil
	}
	_, sets := gr.GroupPodSets(objs)
	return objs, sets, nil
}

func (r *GroupReconciler) reconcile(ctx context.Context, key types.NamespacedName) error {
	g, err := r.read(ctx, key)
	if err != nil {
		return err
	}
	wl := &kueue.Workload{}
	if err := r.Client.Get(ctx, key, wl); err != nil {
		if !apierrors.IsNotFound(err) {
			return err
		}
		wl = nil
	}
	if wl != nil && wl.Labels[r.Grouper.GroupLabel()] != key.Name {
		r.tell(g, corev1.EventTypeWarning, ReasonGroupInconsistent, fmt.Sprintf("group %s cannot be queued: Workload %s exists and is not this group's; rename the group (label %s)", key.Name, key, r.Grouper.GroupLabel()))
		return nil
	}
	switch {
	case wl == nil:
		return r.create(ctx, g)
	case wl.DeletionTimestamp != nil:
		return r.ended(ctx, g, wl)
	case len(g.members) == 0:
		// Every member is gone: so is the group, and the quota its Workload held.
		return r.release(ctx, wl)
	case workload.IsFinished(wl):
		return nil
	}
	if msg, failed, done := r.finished(g); done {
		return r.finish(ctx, wl, failed, msg)
	}
	switch {
	case !workload.HasQuotaReservation(wl):
		return r.pending(ctx, g, wl)
	case workload.ClusterName(wl) != "":
		// Dispatched: copies of its members run in that worker, and dispatch starts, stops and
		// requeues them; the members here stay gated (their status mirrors the copies').
		return nil
	case workload.IsEvicted(wl) || !workload.IsActive(wl):
		return r.stop(ctx, g, wl)
	case workload.IsAdmitted(wl):
		return r.start(ctx, g, wl)
	}
	return nil
}

// size is the size the group's members agree on, or a message saying how they disagree.
func (r *GroupReconciler) size(g group, ms []member) (int32, string) {
	var sizes []string
	queues := map[string]bool{}
	for _, m := range ms {
		sizes = append(sizes, fmt.Sprintf("%s: %d", m.obj.GetName(), m.size))
		queues[m.obj.GetLabels()[kueue.QueueNameLabel]] = true
	}
	if slices.ContainsFunc(ms, func(m member) bool { return m.size != ms[0].size }) {
		return 0, fmt.Sprintf("the members of group %s give different sizes (%s); give every member the same size", g.key.Name, strings.Join(sizes, ", "))
	}
	if len(queues) > 1 {
		return 0, fmt.Sprintf("the members of group %s name different queues (label %s); give every member the same queue", g.key.Name, kueue.QueueNameLabel)
	}
	return ms[0].size, ""
}

// create makes the group's Workload once every member exists.
func (r *GroupReconciler) create(ctx context.Context, g group) error {
	ms := g.filter(member.counts)
	if len(ms) == 0 || len(g.filter(member.succeeded)) == len(ms) {
		return nil // nothing left to run, or it all ran before fleetq saw it
	}
	size, problem := r.size(g, ms)
	switch {
	case problem != "":
		r.tell(g, corev1.EventTypeWarning, ReasonGroupInconsistent, problem)
		return nil
	case int32(len(ms)) < size:
		r.tell(g, corev1.EventTypeNormal, ReasonGroupWaiting, r.waiting(g, len(ms), size))
		return nil
	case int32(len(ms)) > size:
		r.tell(g, corev1.EventTypeWarning, ReasonGroupInconsistent, fmt.Sprintf("group %s has %d %ss but its size is %d: delete the extra ones or give every member the size %d", g.key.Name, len(ms), r.Adapter.GVK().Kind, size, len(ms)))
		return nil
	}
	objs := make([]client.Object, len(ms))
	for i, m := range ms {
		objs[i] = m.obj
	}
	podSets, _ := r.Grouper.GroupPodSets(objs)
	wl := &kueue.Workload{
		ObjectMeta: metav1.ObjectMeta{
			Name:       g.key.Name,
			Namespace:  g.key.Namespace,
			Labels:     map[string]string{r.Grouper.GroupLabel(): g.key.Name},
			Finalizers: []string{GroupFinalizer},
		},
		Spec: kueue.WorkloadSpec{PodSets: podSets, QueueName: kueue.LocalQueueName(ms[0].obj.GetLabels()[kueue.QueueNameLabel])},
	}
	if err := setPriority(ctx, r.Client, r.Adapter.GVK().Kind, ms[0].obj, wl); err != nil {
		r.tell(g, corev1.EventTypeWarning, "WorkloadNotCreated", err.Error())
		return err
	}
	if err := r.Client.Create(ctx, wl); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil // created by an earlier reconcile; the watch brings it
		}
		err = fmt.Errorf("creating the workload of group %s: %w", g.key, err)
		if apierrors.IsInvalid(err) || apierrors.IsForbidden(err) {
			r.tell(g, corev1.EventTypeWarning, "WorkloadNotCreated", err.Error())
		}
		return err
	}
	return nil // no event, as for a job's Workload (see ensureWorkload)
}

func (r *GroupReconciler) waiting(g group, have int, size int32) string {
	return fmt.Sprintf("group %s has %d of its %d %ss: it is queued once the %d missing are created (all of a group's members start together, or none)",
		g.key.Name, have, size, r.Adapter.GVK().Kind, int(size)-have)
}

// finished says whether the group ended: every member it counts succeeded, or a member said it
// must not be retried and none runs any more.
func (r *GroupReconciler) finished(g group) (msg string, failed, done bool) {
	ms := g.filter(member.counts)
	if len(ms) == 0 {
		return "", false, false
	}
	succeeded := len(g.filter(member.succeeded))
	if int32(succeeded) >= ms[0].size {
		return fmt.Sprintf("all %d %ss of group %s succeeded", succeeded, r.Adapter.GVK().Kind, g.key.Name), false, true
	}
	for _, m := range g.members {
		if m.obj.GetAnnotations()[kueue.RetriableInGroupAnnotation] == "false" && len(g.filter(member.running)) == 0 {
			return fmt.Sprintf("group %s ended without succeeding: %d of its %d %ss succeeded, and %s says %s: false",
				g.key.Name, succeeded, ms[0].size, r.Adapter.GVK().Kind, m.obj.GetName(), kueue.RetriableInGroupAnnotation), true, true
		}
	}
	return "", false, false
}

func (r *GroupReconciler) finish(ctx context.Context, wl *kueue.Workload, failed bool, msg string) error {
	orig := wl.DeepCopy()
	reason := kueue.WorkloadFinishedReasonSucceeded
	if failed {
		reason = kueue.WorkloadFinishedReasonFailed
	}
	workload.SetCondition(wl, kueue.WorkloadFinished, metav1.ConditionTrue, reason, msg, r.Clock.Now())
	r.forget(wl)
	return client.IgnoreNotFound(r.Client.Status().Patch(ctx, wl, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})))
}

// pending keeps a queued Workload true to its group: it follows a member replaced with another
// spec or a fixed queue label, and a group that lost a member before it was admitted gives its
// Workload up, so that it is never admitted short (it is made again once the group is whole).
func (r *GroupReconciler) pending(ctx context.Context, g group, wl *kueue.Workload) error {
	ms := g.filter(member.counts)
	if size, problem := r.size(g, ms); problem != "" || int32(len(ms)) != size {
		if problem == "" {
			problem = r.waiting(g, len(ms), size)
		}
		r.tell(g, corev1.EventTypeNormal, ReasonGroupWaiting, problem)
		return r.release(ctx, wl)
	}
	objs := make([]client.Object, len(ms))
	for i, m := range ms {
		objs[i] = m.obj
	}
	podSets, _ := r.Grouper.GroupPodSets(objs)
	q := kueue.LocalQueueName(ms[0].obj.GetLabels()[kueue.QueueNameLabel])
	if integration.PodSetsEqual(wl.Spec.PodSets, podSets) && (q == "" || q == wl.Spec.QueueName) {
		return nil
	}
	orig := wl.DeepCopy()
	wl.Spec.PodSets = podSets
	if q != "" {
		wl.Spec.QueueName = q
	}
	if err := r.Client.Patch(ctx, wl, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("updating the workload of group %s: %w", g.key, err)
	}
	return nil
}

// start lets the group's members run with their pod set's placement, as many of each pod set as
// were admitted; a member over that stays held.
func (r *GroupReconciler) start(ctx context.Context, g group, wl *kueue.Workload) error {
	ms := g.filter(member.counts)
	if !slices.ContainsFunc(g.members, func(m member) bool { return m.started }) && !r.whole(g, wl) {
		// A member left between admission and start: requeued, so no part of the group runs.
		return Requeue(ctx, r.Client, r.Clock, r.Config.RequeuingStrategy, wl)
	}
	flavors, err := Flavors(ctx, r.Client, wl)
	if err != nil {
		return err
	}
	placements := integration.Placements(wl, flavors, wl.Status.AdmissionChecks)
	objs := make([]client.Object, len(ms))
	for i, m := range ms {
		objs[i] = m.obj
	}
	_, sets := r.Grouper.GroupPodSets(objs)
	room := map[kueue.PodSetReference]int32{}
	for _, p := range placements {
		room[p.Name] = podSetCount(wl, p)
	}
	for i, m := range ms {
		if m.started {
			room[sets[i]]--
		}
	}
	started := 0
	for i, m := range ms {
		if m.started || m.status.Finished {
			continue
		}
		p, ok := integration.Find(placements, sets[i])
		if !ok || room[sets[i]] <= 0 {
			r.event(m.obj, corev1.EventTypeWarning, ReasonGroupInconsistent, "held: workload %s has no room for it in pod set %q (a group's size and its members' specs are fixed once it is admitted)", wl.Name, sets[i])
			continue
		}
		room[sets[i]]--
		own, err := r.Adapter.PodSets(m.obj)
		if err != nil || len(own) != 1 {
			return fmt.Errorf("starting %s %s of group %s: %v", r.Adapter.GVK().Kind, m.obj.GetName(), g.key, err)
		}
		orig := m.obj.DeepCopyObject().(client.Object)
		p.Name = own[0].Name // the member's own pod set carries the group's pod set's placement
		if err := r.Adapter.ApplyPlacements(m.obj, []integration.PodSetPlacement{p}); err != nil {
			return fmt.Errorf("starting %s %s of group %s: %w", r.Adapter.GVK().Kind, m.obj.GetName(), g.key, err)
		}
		r.Adapter.SetSuspended(m.obj, false)
		if err := r.Client.Patch(ctx, m.obj, client.MergeFrom(orig)); err != nil {
			return fmt.Errorf("starting %s %s of group %s: %w", r.Adapter.GVK().Kind, m.obj.GetName(), g.key, err)
		}
		started++
		r.event(m.obj, corev1.EventTypeNormal, ReasonStarted, "Admitted by ClusterQueue %s with group %s", wl.Status.Admission.ClusterQueue, g.key.Name)
	}
	if started > 0 {
		r.Log.V(2).Info("Group started", "group", g.key, "members", started)
	}
	return nil
}

// whole reports whether the group has every member its Workload's pod sets count.
func (r *GroupReconciler) whole(g group, wl *kueue.Workload) bool {
	var want int32
	for _, ps := range wl.Spec.PodSets {
		want += ps.Count
	}
	return int32(len(g.filter(member.counts))) >= want
}

// podSetCount is how many members of a pod set were admitted.
func podSetCount(wl *kueue.Workload, p integration.PodSetPlacement) int32 {
	if p.Count != nil {
		return *p.Count
	}
	if ps := integration.FindPodSet(wl.Spec.PodSets, p.Name); ps != nil {
		return ps.Count
	}
	return 0
}

// stop deletes the members an evicted group started (they cannot be held again), and once none
// runs releases the reservation: the Workload is requeued, and given up by pending if the group
// is no longer whole.
func (r *GroupReconciler) stop(ctx context.Context, g group, wl *kueue.Workload) error {
	reason, msg := evictionCause(wl)
	if err := r.deleteRunning(ctx, g, msg); err != nil {
		return err
	}
	if len(g.filter(member.running)) > 0 {
		return nil // their ends bring us back
	}
	if n, err := runningPods(ctx, r.Client, wl); err != nil || n > 0 {
		return err
	}
	r.Log.V(2).Info("Group stopped", "group", g.key, "reason", reason)
	return Requeue(ctx, r.Client, r.Clock, r.Config.RequeuingStrategy, wl)
}

// ended stops the members of a group whose Workload a user deleted, then lets the Workload go.
func (r *GroupReconciler) ended(ctx context.Context, g group, wl *kueue.Workload) error {
	if err := r.deleteRunning(ctx, g, fmt.Sprintf("Workload %s/%s was deleted", wl.Namespace, wl.Name)); err != nil {
		return err
	}
	if len(g.filter(member.running)) > 0 || !controllerutil.ContainsFinalizer(wl, GroupFinalizer) {
		return nil
	}
	orig := wl.DeepCopy()
	controllerutil.RemoveFinalizer(wl, GroupFinalizer)
	return client.IgnoreNotFound(r.Client.Patch(ctx, wl, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})))
}

func (r *GroupReconciler) deleteRunning(ctx context.Context, g group, why string) error {
	for _, m := range g.members {
		if !m.running() || m.deleting() {
			continue
		}
		uid := m.obj.GetUID()
		if err := r.Client.Delete(ctx, m.obj, client.Preconditions{UID: &uid}, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting %s %s of group %s to stop it: %w", r.Adapter.GVK().Kind, m.obj.GetName(), g.key, err)
		}
		r.event(m.obj, corev1.EventTypeNormal, ReasonStopped, "%s; deleted, since a started %s cannot be held again", why, r.Adapter.GVK().Kind)
	}
	return nil
}

// release deletes the group's Workload, which holds no member that runs: its finalizer goes
// first (it is there to stop running members, and there are none), with the Workload's version
// as a precondition so that one admitted meanwhile is looked at again instead.
func (r *GroupReconciler) release(ctx context.Context, wl *kueue.Workload) error {
	r.forget(wl)
	if controllerutil.ContainsFinalizer(wl, GroupFinalizer) {
		orig := wl.DeepCopy()
		controllerutil.RemoveFinalizer(wl, GroupFinalizer)
		if err := r.Client.Patch(ctx, wl, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
			return client.IgnoreNotFound(err)
		}
	}
	err := r.Client.Delete(ctx, wl, client.Preconditions{UID: &wl.UID, ResourceVersion: &wl.ResourceVersion})
	return client.IgnoreNotFound(err)
}

// tell gives every member of a group the same event, once for each new message.
func (r *GroupReconciler) tell(g group, typ, reason, msg string) {
	r.mu.Lock()
	if r.told == nil {
		r.told = map[types.NamespacedName]string{}
	}
	same := r.told[g.key] == msg
	r.told[g.key] = msg
	r.mu.Unlock()
	if same || len(g.members) == 0 {
		return
	}
	// Events of one reason about one object are folded into a series that keeps the first
	// message; naming the newest member as related starts a new one each time a member arrives.
	newest := g.members[0].obj
	for _, m := range g.members[1:] {
		t, n := m.obj.GetCreationTimestamp(), newest.GetCreationTimestamp()
		if t.After(n.Time) || (t.Equal(&n) && m.obj.GetName() > newest.GetName()) {
			newest = m.obj
		}
	}
	for _, m := range g.members {
		if r.Recorder != nil {
			r.Recorder.Eventf(m.obj, newest, typ, reason, reason, "%s", msg)
		}
	}
}

// forget drops what tell remembers of the group of a Workload that goes or finishes.
func (r *GroupReconciler) forget(wl *kueue.Workload) {
	r.mu.Lock()
	delete(r.told, client.ObjectKeyFromObject(wl))
	r.mu.Unlock()
}

func (r *GroupReconciler) event(obj client.Object, typ, reason, format string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(obj, nil, typ, reason, reason, format, args...)
	}
}
