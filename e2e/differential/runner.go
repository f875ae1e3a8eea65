package differential

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
)

// Target is one system under test, reached through a client of its own cluster.
type Target struct {
	// Name is "kueue" or "fleetq".
	Name   string
	Client client.Client
}

// Options tune how a scenario is played.
type Options struct {
	// Quiet is how long a system's decisions must stay unchanged for it to count as settled.
	Quiet time.Duration
	// StepTimeout bounds the wait for a system to settle after one step.
	StepTimeout time.Duration
}

// DefaultOptions settle a system after 2 s without a decision changing, within a minute.
func DefaultOptions() Options { return Options{Quiet: 2 * time.Second, StepTimeout: time.Minute} }

// Result is one scenario played through both systems.
type Result struct {
	Scenario *Scenario    `json:"scenario"`
	Kueue    []StepResult `json:"kueue"`
	Fleetq   []StepResult `json:"fleetq"`
	// Difference is the first step where they differ; nil when they agree throughout.
	Difference *Difference `json:"difference,omitempty"`
	// Error is why the scenario could not be played to the end (not a difference).
	Error    string        `json:"error,omitempty"`
	Duration time.Duration `json:"duration"`
}

// player is one system's side of a scenario.
type player struct {
	Target
	names Names
	// evictions counts each Workload's evictions; counted remembers the Evicted condition last
	// counted, so an eviction retried after a conflict is counted once.
	evictions map[string]int
	counted   map[string]string
}

// Play runs a scenario through both systems in lock step: set up the queues, then per step apply
// it to both, wait until both settle and compare. It stops at the first difference.
func Play(ctx context.Context, s *Scenario, k, f Target, o Options) *Result {
	start := time.Now()
	res := &Result{Scenario: s}
	n := NamesFor(s)
	players := []*player{newPlayer(k, n), newPlayer(f, n)}
	defer func() { res.Duration = time.Since(start) }()
	defer both(players, func(p *player) error { p.cleanUp(context.WithoutCancel(ctx), s); return nil }) //nolint:errcheck // best effort
	if err := both(players, func(p *player) error { return p.setUp(ctx, s, o.StepTimeout) }); err != nil {
		res.Error = err.Error()
		return res
	}
	for i := range s.Steps {
		step := &s.Steps[i]
		if i > 0 {
			resolveTarget(step, res.Kueue[i-1].State)
		}
		results := make([]StepResult, 2)
		err := both(players, func(p *player) error {
			if err := p.apply(ctx, s, i); err != nil {
				return err
			}
			r, err := p.settle(ctx, o)
			if err != nil {
				return err
			}
			if p.Name == k.Name {
				results[0] = r
			} else {
				results[1] = r
			}
			return nil
		})
		if err != nil {
			res.Error = fmt.Sprintf("step %d (%s): %v", i, step.Kind, err)
			return res
		}
		res.Kueue, res.Fleetq = append(res.Kueue, results[0]), append(res.Fleetq, results[1])
		if d := compareStep(s, i, results[0], results[1]); d != nil {
			res.Difference = d
			return res
		}
	}
	return res
}

func newPlayer(t Target, n Names) *player {
	return &player{Target: t, names: n, evictions: map[string]int{}, counted: map[string]string{}}
}

// both runs fn for each player at once and joins their errors, each named by its system.
func both(ps []*player, fn func(*player) error) error {
	errs := make([]error, len(ps))
	var wg sync.WaitGroup
	for i, p := range ps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(p); err != nil {
				errs[i] = fmt.Errorf("%s: %w", p.Name, err)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// resolveTarget picks a Finish step's Workload among those holding quota, and a Delete step's
// among those not gone, in the state both systems agreed on after the previous step.
func resolveTarget(st *Step, prev State) {
	var candidates []string
	switch st.Kind {
	case Finish:
		candidates = prev.reserved()
	case Delete:
		candidates = prev.live()
	default:
		return
	}
	st.Target = ""
	if len(candidates) > 0 {
		st.Target = candidates[st.Pick%len(candidates)]
	}
}

// setUp creates the scenario's queue objects and waits until every ClusterQueue is active.
func (p *player) setUp(ctx context.Context, s *Scenario, timeout time.Duration) error {
	for _, o := range s.Objects(p.names) {
		if err := p.Client.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create %T %s: %w", o, client.ObjectKeyFromObject(o), err)
		}
	}
	return poll(ctx, timeout, func() (bool, string, error) {
		for _, q := range s.Queues {
			cq := &kueue.ClusterQueue{}
			if err := p.Client.Get(ctx, client.ObjectKey{Name: p.names.ClusterQueue(q.Name)}, cq); err != nil {
				return false, "", err
			}
			if !meta.IsStatusConditionTrue(cq.Status.Conditions, kueue.ClusterQueueActive) {
				return false, fmt.Sprintf("clusterqueue %s not active: %v", cq.Name, cq.Status.Conditions), nil
			}
		}
		return true, "", nil
	})
}

// apply plays one step on the player's cluster.
func (p *player) apply(ctx context.Context, s *Scenario, i int) error {
	st := s.Steps[i]
	c := p.Client
	switch st.Kind {
	case Create:
		for _, w := range st.Workloads {
			// Kueue orders equal priorities by creation time (1 s resolution), then by UID: one
			// Workload per second keeps the order the steps give, in both systems.
			time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second + 50*time.Millisecond)))
			if err := c.Create(ctx, s.WorkloadObject(p.names, w)); err != nil {
				return fmt.Errorf("create workload %s: %w", w.Name, err)
			}
		}
	case Finish:
		if st.Target == "" {
			return nil
		}
		return p.patchWorkload(ctx, st.Target, func(wl *kueue.Workload) {
			meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: kueue.WorkloadFinished, Status: metav1.ConditionTrue, Reason: "Succeeded", Message: "Finished by the differential runner"})
		})
	case Delete:
		if st.Target == "" {
			return nil
		}
		wl := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: p.names.Namespace, Name: st.Target}}
		if err := c.Delete(ctx, wl); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete workload %s: %w", st.Target, err)
		}
	case EditQuota:
		queues := s.QueuesAt(i)
		for _, q := range queues {
			if q.Name != st.Queue {
				continue
			}
			want := s.clusterQueue(p.names, q).Spec.ResourceGroups
			return retry.RetryOnConflict(retry.DefaultRetry, func() error {
				cq := &kueue.ClusterQueue{}
				if err := c.Get(ctx, client.ObjectKey{Name: p.names.ClusterQueue(q.Name)}, cq); err != nil {
					return err
				}
				cq.Spec.ResourceGroups = want
				return c.Update(ctx, cq)
			})
		}
		return fmt.Errorf("edit quota: no queue %q", st.Queue)
	}
	return nil
}

// patchWorkload changes a Workload's status with a merge patch that fails on a conflict, retried.
func (p *player) patchWorkload(ctx context.Context, name string, change func(*kueue.Workload)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		wl := &kueue.Workload{}
		if err := p.Client.Get(ctx, client.ObjectKey{Namespace: p.names.Namespace, Name: name}, wl); err != nil {
			return err
		}
		orig := wl.DeepCopy()
		change(wl)
		return p.Client.Status().Patch(ctx, wl, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
	})
}

// settle waits until the system's decisions stay unchanged for Quiet, finishing every eviction it
// sees on the way (the job's part: the evicted Workload gives its reservation back).
func (p *player) settle(ctx context.Context, o Options) (StepResult, error) {
	var res StepResult
	var last State
	since := time.Now()
	err := poll(ctx, o.StepTimeout, func() (bool, string, error) {
		list := &kueue.WorkloadList{}
		if err := p.Client.List(ctx, list, client.InNamespace(p.names.Namespace)); err != nil {
			return false, "", err
		}
		busy := false
		for i := range list.Items {
			wl := &list.Items[i]
			if !evicting(wl) {
				continue
			}
			busy = true
			if err := p.finishEviction(ctx, wl, &res); err != nil {
				return false, "", err
			}
		}
		st := observe(p.names, list.Items, p.evictions)
		if busy || !st.equal(last) {
			last, since = st, time.Now()
			return false, "decisions still changing", nil
		}
		if time.Since(since) < o.Quiet {
			return false, "decisions still changing", nil
		}
		res.State = st
		return true, "", nil
	})
	sort.Slice(res.Evictions, func(i, j int) bool { return res.Evictions[i].Workload < res.Evictions[j].Workload })
	return res, err
}

// finishEviction counts an eviction once and clears the Workload's reservation, as Kueue's job
// integration does once the job stopped.
func (p *player) finishEviction(ctx context.Context, wl *kueue.Workload, res *StepResult) error {
	c := meta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadEvicted)
	mark := c.LastTransitionTime.String() + "|" + c.Message
	if p.counted[wl.Name] != mark {
		p.counted[wl.Name] = mark
		p.evictions[wl.Name]++
		res.Evictions = append(res.Evictions, evictionOf(wl))
	}
	err := p.patchWorkload(ctx, wl.Name, func(wl *kueue.Workload) {
		if !evicting(wl) {
			return
		}
		meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: kueue.WorkloadQuotaReserved, Status: metav1.ConditionFalse, Reason: "Pending", Message: "Eviction finished by the differential runner"})
		if meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadAdmitted) {
			meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: kueue.WorkloadAdmitted, Status: metav1.ConditionFalse, Reason: "NoReservation", Message: "The workload has no reservation"})
		}
		wl.Status.Admission = nil
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("finish eviction of %s: %w", wl.Name, err)
	}
	return nil
}

// cleanUp deletes the scenario's objects, Workloads first, so the cluster can take the next one.
func (p *player) cleanUp(ctx context.Context, s *Scenario) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_ = p.Client.DeleteAllOf(ctx, &kueue.Workload{}, client.InNamespace(p.names.Namespace))
	objs := s.Objects(p.names)
	for i := len(objs) - 1; i > 0; i-- { // the namespace (first) stays: apiserver mode has no namespace controller
		_ = p.Client.Delete(ctx, objs[i])
	}
}

// poll calls cond every 100 ms until it is done, fails, or timeout passes (the error then says
// what cond last waited for).
func poll(ctx context.Context, timeout time.Duration, cond func() (bool, string, error)) error {
	var why string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		done, w, err := cond()
		why = w
		return done, err
	})
	if wait.Interrupted(err) {
		return fmt.Errorf("not settled after %s: %s", timeout, why)
	}
	return err
}
