package registry

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetq "github.com/fleetq/fleetq/api/fleetq/v1alpha1"
	kueue "github.com/fleetq/fleetq/api/v1beta2"
)

// CapacityAnnotation on a MultiKueueCluster holds, as a JSON CapacitySummary, the worker's
// capacity as its agent last reported it: users (and `kubectl fleetq clusters`) read free and
// total per flavor in the management cluster, with no credentials for the worker.
const CapacityAnnotation = "fleetq.dev/capacity"

// CapacitySummary is the per-flavor part of a worker's CapacityReport; it changes only when the
// report's content does (its revision), so periodic refreshes write nothing.
type CapacitySummary struct {
	// Revision is the report's revision.
	Revision int64 `json:"revision"`
	// Fenced is true while the agent admits nothing (it lost this manager's lease).
	Fenced bool `json:"fenced,omitempty"`
	// Flavors are the report's flavors, by name.
	Flavors []FlavorSummary `json:"flavors,omitempty"`
}

// FlavorSummary is one flavor's nodes, free and allocatable amounts in a worker.
type FlavorSummary struct {
	Name        string              `json:"name"`
	Nodes       int32               `json:"nodes"`
	Free        corev1.ResourceList `json:"free,omitempty"`
	Allocatable corev1.ResourceList `json:"allocatable,omitempty"`
}

// Summarize keeps what a CapacitySummary shows of a report.
func Summarize(cr *fleetq.CapacityReport) CapacitySummary {
	s := CapacitySummary{Revision: cr.Status.Revision, Fenced: cr.Status.Fenced}
	for _, f := range cr.Status.Flavors {
		s.Flavors = append(s.Flavors, FlavorSummary{Name: f.Name, Nodes: f.Nodes, Free: f.Free, Allocatable: f.Allocatable})
	}
	return s
}

// publishCapacity writes the connected worker's latest report summary into the
// MultiKueueCluster's CapacityAnnotation when it changed; a worker without a report (or not
// connected) keeps the last one written.
func (c *Controller) publishCapacity(ctx context.Context, mkc *kueue.MultiKueueCluster) error {
	w, h := c.Registry.Get(mkc.Name)
	if w == nil || !h.Active {
		return nil
	}
	reports := &fleetq.CapacityReportList{}
	if err := w.Client.List(ctx, reports); err != nil {
		return fmt.Errorf("worker %s: listing capacity reports: %w", mkc.Name, err)
	}
	var report *fleetq.CapacityReport
	for i := range reports.Items {
		if r := &reports.Items[i]; r.Status.ClusterName == mkc.Name || (report == nil && r.Name == mkc.Name) {
			report = r
		}
	}
	if report == nil {
		return nil
	}
	raw, err := json.Marshal(Summarize(report))
	if err != nil {
		return err
	}
	if mkc.Annotations[CapacityAnnotation] == string(raw) {
		return nil
	}
	orig := mkc.DeepCopy()
	metav1.SetMetaDataAnnotation(&mkc.ObjectMeta, CapacityAnnotation, string(raw))
	return client.IgnoreNotFound(c.Client.Patch(ctx, mkc, client.MergeFrom(orig)))
}
