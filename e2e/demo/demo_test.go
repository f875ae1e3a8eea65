package demo

import (
	"testing"

	"github.com/fleetq/fleetq/e2e/lab"
)

// TestLabSpec: the demo starts its lab with the job operators, but reuses a default lab started
// without them (`fleetq-lab up`) rather than refuse it.
func TestLabSpec(t *testing.T) {
	fresh := labSpec(t.TempDir())
	for _, c := range fresh.Clusters() {
		if len(c.Operators) != len(lab.Operators) {
			t.Errorf("a new demo lab's cluster %s runs operators %v, want %v", c.Name, c.Operators, lab.Operators)
		}
	}
	dir := t.TempDir()
	plain := lab.DefaultSpec(2)
	plain.Default()
	if err := lab.WriteState(dir, &lab.State{Provider: "local", Dir: dir, Spec: plain}); err != nil {
		t.Fatal(err)
	}
	reused := labSpec(dir)
	if reused.String() != plain.String() {
		t.Errorf("a running default lab without operators is not reused:\n%s\nwant\n%s", reused.String(), plain.String())
	}
}
