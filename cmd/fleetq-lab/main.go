// Command fleetq-lab starts, inspects and stops a lab of Kubernetes clusters with fake GPU nodes on this
// machine; see `fleetq-lab --help`. The logic lives in e2e/lab/command.
package main

import (
	"os"

	"github.com/fleetq/fleetq/e2e/lab/command"
)

func main() {
	os.Exit(command.Execute())
}
