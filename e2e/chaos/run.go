package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetq "github.com/fleetq/fleetq/api/fleetq/v1alpha1"
	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/e2e/framework"
	"github.com/fleetq/fleetq/e2e/overlap"
)

// Options tune a run.
type Options struct {
	Seed uint64
	// Length is how long faults are injected (whole rounds of every kind, at least one).
	Length time.Duration
	// Jobs is how many jobs are submitted.
	Jobs int
	// Drain bounds how long jobs may take to finish once the faults are over.
	Drain time.Duration
	// Log receives a line per fault and per phase.
	Log io.Writer
}

const (
	// recoveryBound is how long the fleet may take to be healthy after a fault is healed
	// before the run counts it as not recovered.
	recoveryBound = 3 * time.Minute
	// cleanupBound is how long the workers may take to drop every copy once the jobs are deleted.
	cleanupBound = 3 * time.Minute
	checkEvery   = 2 * time.Second
)

// Run submits the load, injects the faults of Plan(o.Seed), checks the invariants all along and
// at the end, deletes the jobs and checks the workers are left with nothing; the report has
// every violation. An error is a run that could not be carried out (not a violation).
func Run(ctx context.Context, f *Fleet, o Options) (*Report, error) {
	log := func(format string, args ...any) {
		if o.Log != nil {
			fmt.Fprintf(o.Log, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
		}
	}
	plan := Plan(o.Seed, o.Length, Workers, Timings{WorkerLostTimeout: WorkerLostTimeout, Freeze: 30 * time.Second})
	jobs := PlanJobs(o.Seed, o.Jobs, o.Length)
	log("seed %d: %d jobs, %d faults:\n%s", o.Seed, len(jobs), len(plan), Describe(plan))
	rep := NewReport(o.Seed, o.Length)

	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	comps := map[string]*framework.Component{}
	for i, m := range f.Managers {
		comps[fmt.Sprintf("manager replica %d", i)] = m
	}
	for w, a := range f.Agents {
		comps["agent of "+w] = a
	}
	f.sup = newSupervisor(comps)
	supCtx, stopSup := context.WithCancel(ctx)
	defer stopSup()
	go f.sup.run(supCtx)
	rec := overlap.New()
	for _, c := range f.Env.Clusters() {
		if err := rec.Watch(watchCtx, c.Name(), c.Clientset()); err != nil {
			return rep, err
		}
	}
	check := func(ctx context.Context) {
		for _, o := range rec.OverlapList() {
			rep.Violate(OneCopy, o.Job+"/"+o.Cluster+"/"+o.Other, o.String())
		}
		cqs, wls := &kueue.ClusterQueueList{}, &kueue.WorkloadList{}
		if f.Mgmt.List(ctx, cqs) != nil || f.Mgmt.List(ctx, wls) != nil {
			return // the management cluster is never faulted; a failed list is checked next time
		}
		for _, v := range QuotaViolations(cqs.Items, wls.Items) {
			rep.Violate(QuotaHeld, v, v)
		}
	}
	var checks sync.WaitGroup
	checks.Add(1)
	go func() {
		defer checks.Done()
		t := time.NewTicker(checkEvery)
		defer t.Stop()
		for {
			select {
			case <-watchCtx.Done():
				return
			case <-t.C:
				check(watchCtx)
			}
		}
	}()

	var submitted []JobSpec
	var submitMu sync.Mutex
	var load sync.WaitGroup
	load.Add(2)
	go func() {
		defer load.Done()
		sort.SliceStable(jobs, func(i, j int) bool { return jobs[i].SubmitAt < jobs[j].SubmitAt })
		for _, j := range jobs {
			if !sleepUntil(ctx, rep.Start.Add(j.SubmitAt)) {
				return
			}
			if err := submit(ctx, f.Mgmt, j); err != nil {
				submitMu.Lock()
				rep.SubmitErrors = append(rep.SubmitErrors, fmt.Sprintf("%s/%s: %v", j.Team, j.Name, err))
				submitMu.Unlock()
				continue
			}
			submitMu.Lock()
			submitted = append(submitted, j)
			submitMu.Unlock()
		}
	}()
	go func() {
		defer load.Done()
		for i, fault := range plan {
			if !sleepUntil(ctx, rep.Start.Add(fault.At)) {
				return
			}
			inj := f.inject(ctx, fault, log)
			if inj.Err == nil {
				inj.Recovered = f.recovered(ctx, inj.Healed)
				if inj.Recovered.IsZero() {
					rep.Violate(Recovery, fmt.Sprintf("fault %d", i+1), fmt.Sprintf("the fleet is not healthy %s after %s was healed: %v", recoveryBound, fault, f.Healthy(ctx)))
				} else {
					log("recovered in %s", inj.Recovered.Sub(inj.Healed).Round(100*time.Millisecond))
				}
			} else {
				log("fault %s: %v", fault, inj.Err)
			}
			rep.Injected(inj)
			if !sleepUntil(ctx, time.Now().Add(fault.Gap)) {
				return
			}
		}
	}()
	load.Wait()
	if err := ctx.Err(); err != nil {
		return rep, err
	}
	log("faults over; %d jobs submitted; draining for up to %s", len(submitted), o.Drain)
	rep.Jobs = len(submitted)

	outcomes := f.drain(ctx, submitted, rec, o.Drain)
	for _, out := range outcomes {
		switch {
		case out.violation != "":
			rep.Violate(EveryJobEnds, out.job, out.violation)
		case out.outcome == Finished:
			rep.Finished++
		case out.outcome == Pending:
			rep.Pending++
		}
	}
	check(ctx)
	log("%d finished, %d pending; deleting the jobs", rep.Finished, rep.Pending)
	for _, left := range f.cleanup(ctx) {
		rep.Violate(NoCopyLeft, left, left)
	}
	stopSup()
	rep.Restarts = f.sup.Restarts()
	for _, r := range rep.Restarts {
		if r.Crashed {
			rep.Violate(Recovery, r.Component+r.At.String(), fmt.Sprintf("the %s crashed: %s", r.Component, r.Why))
		}
	}
	for name, c := range comps {
		if !c.Running() {
			rep.Violate(Recovery, name, fmt.Sprintf("the %s is not running at the end: %v", name, c.Err()))
		}
	}
	stopWatch()
	checks.Wait()
	rep.Terminations = rec.Terminations()
	return rep, nil
}

// submit creates the job, retrying for a minute through a manager fail-over (its webhooks
// briefly unreachable), as a user's pipeline would.
func submit(ctx context.Context, c client.Client, j JobSpec) error {
	deadline := time.Now().Add(time.Minute)
	for {
		err := c.Create(ctx, j.Job())
		if err == nil || apierrors.IsAlreadyExists(err) {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		sleepUntil(ctx, time.Now().Add(time.Second))
	}
}

func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// inject starts the fault, keeps it for its duration and heals it.
func (f *Fleet) inject(ctx context.Context, fault Fault, log func(string, ...any)) Injected {
	inj := Injected{Fault: fault, Start: time.Now()}
	log("fault: %s", fault)
	heal, err := f.begin(ctx, fault)
	if err == nil {
		sleepUntil(ctx, inj.Start.Add(fault.For))
		err = heal(ctx)
	}
	inj.Healed, inj.Err = time.Now(), err
	return inj
}

// begin injects one fault and returns what heals it.
func (f *Fleet) begin(ctx context.Context, fault Fault) (func(context.Context) error, error) {
	w := fault.Target
	switch fault.Kind {
	case KillManager:
		var i int
		err := poll(ctx, 30*time.Second, func() error { var err error; i, err = f.Leader(ctx); return err })
		if err != nil {
			return nil, err
		}
		return f.kill(ctx, f.Managers[i])
	case KillAgent:
		return f.kill(ctx, f.Agents[w])
	case FreezeAPIServer, StopAPIServer:
		faults, err := f.Env.Cluster(w).Faults()
		if err != nil {
			return nil, err
		}
		if fault.Kind == FreezeAPIServer {
			return faults.Resume, faults.FreezeAPIServer(ctx)
		}
		return faults.RestartAPIServer, faults.StopAPIServer(ctx)
	case Partition:
		p := f.Proxies[w]
		p.Cut()
		return func(context.Context) error { p.Heal(); return nil }, nil
	case RecreateCluster:
		if err := f.Mgmt.Delete(ctx, MultiKueueCluster(w)); err != nil {
			return nil, err
		}
		err := poll(ctx, time.Minute, func() error {
			if err := f.Mgmt.Get(ctx, client.ObjectKey{Name: w}, &kueue.MultiKueueCluster{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("multikueuecluster %s not gone yet (%v)", w, err)
			}
			return nil
		})
		return func(ctx context.Context) error { return f.Mgmt.Create(ctx, MultiKueueCluster(w)) }, err
	case RotateSecret:
		old := f.Proxies[w]
		if err := f.newProxy(ctx, w); err != nil {
			return nil, err
		}
		// The old address keeps working a while, as an old credential does, then goes: a manager
		// still on the old connection loses the worker.
		return func(context.Context) error { return old.Close() }, nil
	}
	return nil, fmt.Errorf("unknown fault kind %q", fault.Kind)
}

// kill SIGKILLs a component, held down (not restarted by the supervisor) until healed.
func (f *Fleet) kill(ctx context.Context, c *framework.Component) (func(context.Context) error, error) {
	f.sup.hold(c)
	if err := c.Kill(ctx); err != nil {
		f.sup.release(c)
		return nil, err
	}
	return func(ctx context.Context) error {
		defer f.sup.release(c)
		return c.Restart(ctx)
	}, nil
}

// recovered waits until the fleet is healthy and returns when it was (zero if not within the bound).
func (f *Fleet) recovered(ctx context.Context, since time.Time) time.Time {
	if poll(ctx, recoveryBound-time.Since(since), func() error { return f.Healthy(ctx) }) != nil {
		return time.Time{}
	}
	return time.Now()
}

func poll(ctx context.Context, timeout time.Duration, cond func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return errors.Join(err, ctx.Err())
		}
		sleepUntil(ctx, time.Now().Add(500*time.Millisecond))
	}
}

type jobOutcome struct {
	job       string
	outcome   Outcome
	violation string
}

// drain waits until every submitted job has finished (or the bound is reached) and judges each.
func (f *Fleet) drain(ctx context.Context, submitted []JobSpec, rec *overlap.Recorder, bound time.Duration) []jobOutcome {
	deadline := time.Now().Add(bound)
	for {
		outs, done := f.outcomes(ctx, submitted, rec)
		if done || time.Now().After(deadline) || ctx.Err() != nil {
			return outs
		}
		sleepUntil(ctx, time.Now().Add(5*time.Second))
	}
}

func (f *Fleet) outcomes(ctx context.Context, submitted []JobSpec, rec *overlap.Recorder) ([]jobOutcome, bool) {
	byOwner := map[string]*kueue.Workload{}
	jobsByKey := map[string]*batchv1.Job{}
	for _, team := range Teams {
		wls := &kueue.WorkloadList{}
		jobs := &batchv1.JobList{}
		if f.Mgmt.List(ctx, wls, client.InNamespace(team)) != nil || f.Mgmt.List(ctx, jobs, client.InNamespace(team)) != nil {
			return nil, false
		}
		for i := range wls.Items {
			for _, ref := range wls.Items[i].OwnerReferences {
				byOwner[string(ref.UID)] = &wls.Items[i]
			}
		}
		for i := range jobs.Items {
			jobsByKey[team+"/"+jobs.Items[i].Name] = &jobs.Items[i]
		}
	}
	var outs []jobOutcome
	done := true
	for _, j := range submitted {
		key := j.Team + "/" + j.Name
		job := jobsByKey[key]
		if job == nil {
			outs = append(outs, jobOutcome{job: key, violation: fmt.Sprintf("job %s is gone from the management cluster", key)})
			continue
		}
		out, violation := JobOutcome(job, byOwner[string(job.UID)], rec.Succeeded(key))
		if out != Finished {
			done = false
		}
		outs = append(outs, jobOutcome{job: key, outcome: out, violation: violation})
	}
	return outs, done
}

// cleanup deletes every job the way a user does and lists what the workers still hold once the
// bound is over: copies (Jobs, Workloads) in the teams' namespaces and pods fleetq started.
func (f *Fleet) cleanup(ctx context.Context) []string {
	for _, team := range Teams {
		_ = f.Mgmt.DeleteAllOf(ctx, &batchv1.Job{}, client.InNamespace(team), client.PropagationPolicy("Background"))
	}
	var left []string
	_ = poll(ctx, cleanupBound, func() error {
		left = nil
		for _, team := range Teams {
			wls := &kueue.WorkloadList{}
			if err := f.Mgmt.List(ctx, wls, client.InNamespace(team)); err != nil {
				return err
			}
			for _, wl := range wls.Items {
				left = append(left, fmt.Sprintf("management: workload %s/%s is left after its job was deleted", team, wl.Name))
			}
		}
		for _, w := range Workers {
			c := f.Env.Cluster(w).Client()
			for _, team := range Teams {
				jobs, wls := &batchv1.JobList{}, &kueue.WorkloadList{}
				if err := c.List(ctx, jobs, client.InNamespace(team)); err != nil && !apierrors.IsNotFound(err) {
					return err
				}
				if err := c.List(ctx, wls, client.InNamespace(team)); err != nil && !apierrors.IsNotFound(err) {
					return err
				}
				for _, j := range jobs.Items {
					left = append(left, fmt.Sprintf("%s: job %s/%s is left after its workload was deleted", w, team, j.Name))
				}
				for _, wl := range wls.Items {
					left = append(left, fmt.Sprintf("%s: workload %s/%s is left after the management one was deleted", w, team, wl.Name))
				}
			}
			pods := &corev1.PodList{}
			if err := c.List(ctx, pods, client.HasLabels{fleetq.WorkloadUIDLabel}); err != nil {
				return err
			}
			for _, p := range pods.Items {
				left = append(left, fmt.Sprintf("%s: pod %s/%s (%s) is left after its workload was deleted", w, p.Namespace, p.Name, p.Status.Phase))
			}
		}
		if len(left) > 0 {
			return fmt.Errorf("%d objects left", len(left))
		}
		return nil
	})
	return left
}
