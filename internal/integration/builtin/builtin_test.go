package builtin

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetq/fleetq/config"
	"github.com/fleetq/fleetq/internal/integration"
)

// The configuration validates framework names without importing the adapters; the two lists
// must agree.
func TestEveryKnownFrameworkIsBuiltIn(t *testing.T) {
	var names []string
	for _, a := range Adapters() {
		names = append(names, a.Framework())
	}
	if diff := cmp.Diff(slices.Sorted(slices.Values(config.KnownFrameworks)), slices.Sorted(slices.Values(names))); diff != "" {
		t.Errorf("config.KnownFrameworks (-) and builtin.Adapters (+) differ:\n%s", diff)
	}
	if _, err := integration.NewRegistry(Adapters()...); err != nil {
		t.Error(err)
	}
}

// Every built-in kind has its resource listed for RBAC, and nothing else is listed.
func TestEveryKindHasItsResource(t *testing.T) {
	n, kinds := 0, 0
	for _, a := range Adapters() {
		kinds++
		if !slices.Contains(Resources()[a.GVK().Group], strings.ToLower(a.GVK().Kind)+"s") {
			t.Errorf("%s: no resource in Resources()", a.GVK())
		}
	}
	for _, rs := range Resources() {
		n += len(rs)
	}
	if n != kinds {
		t.Errorf("Resources lists %d resources for %d kinds", n, kinds)
	}
}
