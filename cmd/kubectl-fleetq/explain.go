package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/internal/workload"
)

// jobUIDLabel on a Workload holds the UID of its Job (as in Kueue).
const jobUIDLabel = "kueue.x-k8s.io/job-uid"

// maxEvents bounds the events explain prints, newest first.
const maxEvents = 10

// explain tells why a Job waits (its Workload's QuotaReserved condition and admission checks,
// which carry the per-worker placement explanation) or where it runs and why there (the
// placement events), from the management cluster alone.
func (v *view) explain(ctx context.Context, name string) error {
	name = strings.TrimPrefix(strings.TrimPrefix(name, "jobs/"), "job/")
	job := &batchv1.Job{}
	if err := v.client.Get(ctx, types.NamespacedName{Namespace: v.namespace, Name: name}, job); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("job %s/%s not found (use -n for another namespace)", v.namespace, name)
		}
		return fmt.Errorf("reading job %s/%s: %w", v.namespace, name, err)
	}
	out := v.out
	queue := job.Labels[kueue.QueueNameLabel]
	fmt.Fprintf(out, "Job %s/%s", job.Namespace, job.Name)
	if queue != "" {
		fmt.Fprintf(out, " in LocalQueue %s", queue)
	}
	fmt.Fprintln(out)
	wl, err := v.workloadOf(ctx, job)
	if err != nil {
		return err
	}
	if wl == nil {
		if queue == "" {
			fmt.Fprintf(out, "Not managed by fleetq: it has no %s label, so it runs (or not) without quota.\n", kueue.QueueNameLabel)
		} else {
			fmt.Fprintln(out, "No Workload yet: fleetq-manager creates one per queued Job; is the manager running (kubectl -n fleetq-system get pods)?")
		}
		return nil
	}
	fmt.Fprintf(out, "Workload %s: %s\n", wl.Name, summary(wl))
	if a := wl.Status.Admission; a != nil {
		fmt.Fprintf(out, "Quota: ClusterQueue %s%s\n", a.ClusterQueue, assignments(a))
	}
	if c := workload.ClusterName(wl); c != "" {
		fmt.Fprintf(out, "Worker: %s\n", c)
	}
	fmt.Fprintln(out, "Conditions:")
	conds := append([]metav1.Condition(nil), wl.Status.Conditions...)
	sort.SliceStable(conds, func(i, j int) bool { return conds[i].LastTransitionTime.Before(&conds[j].LastTransitionTime) })
	for _, c := range conds {
		fmt.Fprintf(out, "  %s=%s (%s, %s ago): %s\n", c.Type, c.Status, c.Reason, age(v.now().Sub(c.LastTransitionTime.Time)), c.Message)
	}
	if len(wl.Status.AdmissionChecks) > 0 {
		fmt.Fprintln(out, "Admission checks:")
		for _, ac := range wl.Status.AdmissionChecks {
			fmt.Fprintf(out, "  %s: %s: %s\n", ac.Name, ac.State, ac.Message)
		}
	}
	return v.events(ctx, job, wl)
}

func (v *view) workloadOf(ctx context.Context, job *batchv1.Job) (*kueue.Workload, error) {
	wl := &kueue.Workload{}
	err := v.client.Get(ctx, types.NamespacedName{Namespace: job.Namespace, Name: workload.NameFor("Job", job.Name, job.UID)}, wl)
	if err == nil {
		return wl, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("reading the workload of job %s/%s: %w", job.Namespace, job.Name, err)
	}
	list := &kueue.WorkloadList{}
	if err := v.client.List(ctx, list, client.InNamespace(job.Namespace), client.MatchingLabels{jobUIDLabel: string(job.UID)}); err != nil {
		return nil, fmt.Errorf("listing the workloads of job %s/%s: %w", job.Namespace, job.Name, err)
	}
	if len(list.Items) == 0 {
		return nil, nil
	}
	return &list.Items[0], nil
}

// summary is the workload's state in one phrase, with the reason it waits when it does.
func summary(wl *kueue.Workload) string {
	conds := wl.Status.Conditions
	switch {
	case meta.IsStatusConditionTrue(conds, kueue.WorkloadFinished):
		c := meta.FindStatusCondition(conds, kueue.WorkloadFinished)
		return "finished (" + c.Reason + ")"
	case meta.IsStatusConditionTrue(conds, kueue.WorkloadEvicted):
		c := meta.FindStatusCondition(conds, kueue.WorkloadEvicted)
		return "evicted (" + c.Reason + "): " + c.Message
	case meta.IsStatusConditionTrue(conds, kueue.WorkloadAdmitted):
		if c := workload.ClusterName(wl); c != "" {
			return "admitted, running in worker " + c
		}
		return "admitted"
	case meta.IsStatusConditionTrue(conds, kueue.WorkloadQuotaReserved):
		return "quota reserved, waiting for its admission checks"
	case !workload.IsActive(wl):
		return "deactivated (spec.active is false)"
	}
	if c := meta.FindStatusCondition(conds, kueue.WorkloadQuotaReserved); c != nil {
		return "pending (" + c.Reason + "), why: see QuotaReserved below"
	}
	return "pending, not considered by the manager yet"
}

func assignments(a *kueue.Admission) string {
	var parts []string
	for _, ps := range a.PodSetAssignments {
		var rs []string
		names := make([]string, 0, len(ps.Flavors))
		for r := range ps.Flavors {
			names = append(names, string(r))
		}
		sort.Strings(names)
		for _, r := range names {
			usage := ps.ResourceUsage[corev1.ResourceName(r)]
			rs = append(rs, fmt.Sprintf("%s=%s in %s", r, usage.String(), ps.Flavors[corev1.ResourceName(r)]))
		}
		parts = append(parts, fmt.Sprintf("pod set %s: %s", ps.Name, strings.Join(rs, ", ")))
	}
	if len(parts) == 0 {
		return ""
	}
	return "; " + strings.Join(parts, "; ")
}

// events prints the newest events about the job and its workload: the scheduler's admission,
// the placement with its per-worker explanation, evictions.
func (v *view) events(ctx context.Context, job *batchv1.Job, wl *kueue.Workload) error {
	list := &eventsv1.EventList{}
	if err := v.client.List(ctx, list, client.InNamespace(job.Namespace)); err != nil {
		return fmt.Errorf("listing events in %s: %w", job.Namespace, err)
	}
	var evs []eventsv1.Event
	for _, e := range list.Items {
		r := e.Regarding
		if (r.Kind == "Workload" && r.Name == wl.Name) || (r.Kind == "Job" && r.Name == job.Name) {
			evs = append(evs, e)
		}
	}
	if len(evs) == 0 {
		return nil
	}
	sort.SliceStable(evs, func(i, j int) bool { return eventTime(evs[i]).After(eventTime(evs[j])) })
	fmt.Fprintln(v.out, "Events (newest first):")
	for i, e := range evs {
		if i == maxEvents {
			fmt.Fprintf(v.out, "  ... %d older\n", len(evs)-maxEvents)
			break
		}
		fmt.Fprintf(v.out, "  %s ago  %s  %s/%s  %s\n", age(v.now().Sub(eventTime(e))), e.Type, e.Regarding.Kind, e.Reason, e.Note)
	}
	return nil
}

func eventTime(e eventsv1.Event) time.Time {
	switch {
	case e.Series != nil:
		return e.Series.LastObservedTime.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	case !e.DeprecatedLastTimestamp.IsZero():
		return e.DeprecatedLastTimestamp.Time
	}
	return e.CreationTimestamp.Time
}
