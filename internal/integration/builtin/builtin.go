// Package builtin lists the job integrations fleetq ships, and builds the set a configuration
// selects (integrations.frameworks and integrations.generic) for the manager and the agent.
package builtin

import (
	"github.com/fleetq/fleetq/internal/integration"
	"github.com/fleetq/fleetq/internal/integration/batchjob"
	"github.com/fleetq/fleetq/internal/integration/kubeflow"
	"github.com/fleetq/fleetq/internal/integration/pod"
	"github.com/fleetq/fleetq/internal/integration/ray"
)

// Adapters are every built-in integration, in the order their controllers are set up.
func Adapters() []integration.Adapter {
	out := []integration.Adapter{batchjob.Adapter{}}
	out = append(out, kubeflow.Adapters()...)
	out = append(out, ray.Adapters()...)
	return append(out, pod.Adapter{})
}

// Resources are the API resources of the built-in kinds, by group, for RBAC rules (the agent's
// and the manager's access to workers).
func Resources() map[string][]string {
	return map[string][]string{
		"":             {"pods"},
		"batch":        {"jobs"},
		"kubeflow.org": {"pytorchjobs", "tfjobs", "xgboostjobs", "paddlejobs", "mpijobs"},
		"ray.io":       {"rayjobs", "rayclusters"},
	}
}
