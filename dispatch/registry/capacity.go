package registry

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

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

// PublishInterval is the least time between two writes of a worker's capacity annotation; a
// fence or unfence is written at once. Under a burst a worker's report changes several times a
// second, and each write would be one more on the management cluster's API server.
const PublishInterval = 5 * time.Second

// publishCapacity writes the connected worker's latest report summary into the
// MultiKueueCluster's CapacityAnnotation when it changed, at most once per PublishInterval
// unless its fence changed; a worker without a report (or not connected) keeps the last one
// written. It returns how long a change held back waits.
func (c *Controller) publishCapacity(ctx context.Context, mkc *kueue.MultiKueueCluster) (time.Duration, error) {
	w, h := c.Registry.Get(mkc.Name)
	if w == nil || !h.Active {
		return 0, nil
	}
	reports := &fleetq.CapacityReportList{}
	if err := w.Client.List(ctx, reports); err != nil {
		return 0, fmt.Errorf("worker %s: listing capacity reports: %w", mkc.Name, err)
	}
	var report *fleetq.CapacityReport
	for i := range reports.Items {
		if r := &reports.Items[i]; r.Status.ClusterName == mkc.Name || (report == nil && r.Name == mkc.Name) {
			report = r
		}
	}
	if report == nil {
		return 0, nil
	}
	summary := Summarize(report)
	raw, err := json.Marshal(summary)
	if err != nil {
		return 0, err
	}
	if mkc.Annotations[CapacityAnnotation] == string(raw) {
		return 0, nil
	}
	var prev CapacitySummary
	fenceChanged := json.Unmarshal([]byte(mkc.Annotations[CapacityAnnotation]), &prev) != nil || prev.Fenced != summary.Fenced
	clk := c.Registry.opts.Clock
	c.mu.Lock()
	last, ok := c.published[mkc.Name]
	c.mu.Unlock()
	if wait := PublishInterval - clk.Since(last); ok && !fenceChanged && wait > 0 {
		return wait, nil
	}
	orig := mkc.DeepCopy()
	metav1.SetMetaDataAnnotation(&mkc.ObjectMeta, CapacityAnnotation, string(raw))
	if err := c.Client.Patch(ctx, mkc, client.MergeFrom(orig)); err != nil {
		return 0, client.IgnoreNotFound(err)
	}
	c.mu.Lock()
	if c.published == nil {
		c.published = map[string]time.Time{}
	}
	c.published[mkc.Name] = clk.Now()
	c.mu.Unlock()
	return 0, nil
}
