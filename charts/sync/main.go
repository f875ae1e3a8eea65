// Command sync writes the charts' generated files (CRDs from config/crd/bases, the agent's RBAC
// rules from worker/setup.RBAC); `make charts` runs it from the repository root.
package main

import (
	"fmt"
	"os"

	"github.com/fleetq/fleetq/charts"
)

func main() {
	if err := charts.Write(".", "charts"); err != nil {
		fmt.Fprintf(os.Stderr, "charts sync: %v\n", err)
		os.Exit(1)
	}
}
