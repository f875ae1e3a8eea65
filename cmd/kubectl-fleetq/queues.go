package main

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
)

// queues prints every ClusterQueue's workloads (pending, reserving quota, admitted) and what it
// borrows from its cohort, then the LocalQueues of the namespace.
func (v *view) queues(ctx context.Context) error {
	cqs := &kueue.ClusterQueueList{}
	if err := v.client.List(ctx, cqs); err != nil {
		return fmt.Errorf("listing clusterqueues: %w", err)
	}
	if len(cqs.Items) == 0 {
		fmt.Fprintln(v.out, "No ClusterQueues.")
	} else {
		w := tabwriter.NewWriter(v.out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "CLUSTERQUEUE\tCOHORT\tACTIVE\tPENDING\tRESERVING\tADMITTED\tBORROWING")
		for _, cq := range cqs.Items {
			active := "Unknown"
			if c := meta.FindStatusCondition(cq.Status.Conditions, kueue.ClusterQueueActive); c != nil {
				active = string(c.Status)
			}
			cohort := string(cq.Spec.CohortName)
			if cohort == "" {
				cohort = "-"
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%d\t%d\t%s\n", cq.Name, cohort, active,
				cq.Status.PendingWorkloads, cq.Status.ReservingWorkloads, cq.Status.AdmittedWorkloads, borrowing(cq.Status.FlavorsReservation))
		}
		if err := w.Flush(); err != nil {
			return err
		}
	}
	lqs := &kueue.LocalQueueList{}
	if err := v.client.List(ctx, lqs, client.InNamespace(v.namespace)); err != nil {
		return fmt.Errorf("listing localqueues in %s: %w", v.namespace, err)
	}
	if len(lqs.Items) == 0 {
		fmt.Fprintf(v.out, "\nNo LocalQueues in namespace %s.\n", v.namespace)
		return nil
	}
	fmt.Fprintf(v.out, "\nLocalQueues in namespace %s:\n", v.namespace)
	w := tabwriter.NewWriter(v.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "LOCALQUEUE\tCLUSTERQUEUE\tPENDING\tRESERVING\tADMITTED")
	for _, lq := range lqs.Items {
		fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%d\n", lq.Name, lq.Spec.ClusterQueue, lq.Status.PendingWorkloads, lq.Status.ReservingWorkloads, lq.Status.AdmittedWorkloads)
	}
	return w.Flush()
}

// borrowing lists what a queue takes from its cohort beyond its nominal quota.
func borrowing(flavors []kueue.FlavorUsage) string {
	var parts []string
	for _, f := range flavors {
		for _, r := range f.Resources {
			if !r.Borrowed.IsZero() {
				parts = append(parts, fmt.Sprintf("%s %s in %s", r.Borrowed.String(), r.Name, f.Name))
			}
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}
