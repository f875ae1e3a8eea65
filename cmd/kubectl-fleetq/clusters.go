package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"

	"k8s.io/apimachinery/pkg/api/meta"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/dispatch/registry"
)

// clusters prints every worker: whether the manager is connected to it (the MultiKueueCluster's
// Active condition, with its reason and since when), and free/total per flavor from the capacity
// summary the manager publishes on it.
func (v *view) clusters(ctx context.Context) error {
	list := &kueue.MultiKueueClusterList{}
	if err := v.client.List(ctx, list); err != nil {
		return fmt.Errorf("listing multikueueclusters: %w", err)
	}
	if len(list.Items) == 0 {
		fmt.Fprintln(v.out, "No worker clusters: register one with a kubeconfig Secret and a MultiKueueCluster (see the fleetq-agent chart's notes).")
		return nil
	}
	w := tabwriter.NewWriter(v.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "CLUSTER\tACTIVE\tREASON\tSINCE\tFREE/TOTAL PER FLAVOR")
	var notes []string
	for _, mkc := range list.Items {
		active, reason, since := "Unknown", "NotReconciled", "-"
		if c := meta.FindStatusCondition(mkc.Status.Conditions, kueue.MultiKueueClusterActive); c != nil {
			active, reason, since = string(c.Status), c.Reason, age(v.now().Sub(c.LastTransitionTime.Time))
			if active != "True" {
				notes = append(notes, fmt.Sprintf("%s: %s", mkc.Name, c.Message))
			}
		}
		capacity, note := capacityOf(&mkc)
		if note != "" {
			notes = append(notes, fmt.Sprintf("%s: %s", mkc.Name, note))
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", mkc.Name, active, reason, since, capacity)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	for _, n := range notes {
		fmt.Fprintln(v.out, n)
	}
	return nil
}

func capacityOf(mkc *kueue.MultiKueueCluster) (string, string) {
	raw, ok := mkc.Annotations[registry.CapacityAnnotation]
	if !ok {
		return "-", "no capacity published yet (is fleetq-agent running there, and the manager connected?)"
	}
	var s registry.CapacitySummary
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		return "?", fmt.Sprintf("annotation %s is unreadable: %v", registry.CapacityAnnotation, err)
	}
	var parts []string
	for _, f := range s.Flavors {
		switch f.Nodes {
		case 0:
			parts = append(parts, fmt.Sprintf("%s: no nodes", f.Name))
		case 1:
			parts = append(parts, fmt.Sprintf("%s: %s on 1 node", f.Name, freeOverTotal(f.Free, f.Allocatable)))
		default:
			parts = append(parts, fmt.Sprintf("%s: %s on %d nodes", f.Name, freeOverTotal(f.Free, f.Allocatable), f.Nodes))
		}
	}
	out := strings.Join(parts, "; ")
	if out == "" {
		out = "no flavor matches its nodes"
	}
	if s.Fenced {
		return out, "its agent is fenced (lost this manager's lease) and admits nothing"
	}
	return out, ""
}
