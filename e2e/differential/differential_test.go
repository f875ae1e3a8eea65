package differential_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2" //nolint:revive // Ginkgo's DSL reads best unqualified.
	. "github.com/onsi/gomega"    //nolint:revive // Gomega's DSL reads best unqualified.
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/fleetq/fleetq/e2e/differential"
)

func TestDifferential(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Differential: generated scenarios through Kueue v0.17 and fleetq")
}

// fixedSeeds run in `make test`: seeds 1-6 (flat and nested cohorts, one to three flavors), and
// the seeds on which fleetq first decided differently from Kueue, as regression guards: 105 and 123
// (a workload over its queue's nominal quota preempted its own queue to borrow), 116 (borrowing a
// sub-cohort covers was reclaimed from outside it). Seeds 7 and 8 (fair sharing) still differ and
// are open in issue 18; `make differential N=500` runs many more.
var fixedSeeds = []uint64{1, 2, 3, 4, 5, 6, 105, 116, 123}

var _ = BeforeSuite(func() {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
})

var _ = It("decides as Kueue v0.17 does on the fixed seeds", func(ctx SpecContext) {
	out := filepath.Join(os.TempDir(), fmt.Sprintf("fleetq-differential-%d", os.Getpid()))
	DeferCleanup(func() { _ = os.RemoveAll(out) })
	results, err := differential.Run(ctx, differential.RunOptions{
		Seeds: fixedSeeds, Parallel: 4, Out: out, Play: differential.DefaultOptions(), Progress: GinkgoWriter,
	})
	Expect(err).NotTo(HaveOccurred())
	var problems []string
	for _, r := range results {
		switch {
		case r.Error != "":
			problems = append(problems, fmt.Sprintf("seed %d could not run: %s", r.Scenario.Seed, r.Error))
		case r.Difference != nil:
			steps, _ := os.ReadFile(filepath.Join(out, fmt.Sprintf("seed-%d", r.Scenario.Seed), "steps.md"))
			problems = append(problems, fmt.Sprintf("seed %d (%s): %s\n%s", r.Scenario.Seed, r.Scenario, r.Difference, steps))
		}
	}
	Expect(problems).To(BeEmpty(), strings.Join(problems, "\n\n"))
}, NodeTimeout(15*time.Minute))
