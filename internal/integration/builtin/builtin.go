// Package builtin lists the job integrations fleetq ships, for the manager and the agent to
// select from with integrations.frameworks.
package builtin

import (
	"github.com/fleetq/fleetq/internal/integration"
	"github.com/fleetq/fleetq/internal/integration/batchjob"
)

// Adapters are every built-in integration, in the order their controllers are set up.
func Adapters() []integration.Adapter {
	return []integration.Adapter{batchjob.Adapter{}}
}
