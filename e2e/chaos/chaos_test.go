package chaos_test

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2" //nolint:revive // Ginkgo's DSL reads best unqualified.
	. "github.com/onsi/gomega"    //nolint:revive // Gomega's DSL reads best unqualified.
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/fleetq/fleetq/e2e/chaos"
)

// The defaults are the short run of `make test`; `make chaos` passes the long run's.
var (
	seed       = flag.Uint64("chaos.seed", 1, "seed of the fault schedule and the load; the same seed reruns the same schedule")
	length     = flag.Duration("chaos.length", time.Minute, "how long faults are injected (whole rounds of every fault kind, at least one)")
	jobCount   = flag.Int("chaos.jobs", 40, "how many jobs are submitted")
	drain      = flag.Duration("chaos.drain", 4*time.Minute, "how long jobs may take to finish once the faults are over")
	reportPath = flag.String("chaos.report", "", "also write the report to this file")
	logsDir    = flag.String("chaos.logs", "", "on failure, copy the lab's logs into this directory (default: a new temporary one)")
)

func TestChaos(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Chaos: exactly once and quota under faults")
}

var _ = Describe("A fleet under faults on a seeded schedule", func() {
	It("runs each job in one cluster at a time, within quota, finishes it once or says why it waits, and leaves no copy", func(ctx SpecContext) {
		ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
		fleet, err := chaos.Up(ctx, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			if CurrentSpecReport().Failed() {
				fleet.Env.DumpLogs(GinkgoWriter, 60)
				dir := *logsDir
				if dir == "" {
					dir, _ = os.MkdirTemp("", "fleetq-chaos-logs-")
				}
				if err := fleet.SaveEvents(ctx, dir); err != nil {
					fmt.Fprintf(GinkgoWriter, "saving the events: %v\n", err)
				}
				if err := fleet.Env.SaveLogs(dir); err != nil {
					fmt.Fprintf(GinkgoWriter, "saving the lab's logs: %v\n", err)
				} else {
					fmt.Fprintf(GinkgoWriter, "the lab's logs are in %s\n", dir)
				}
			}
			Expect(fleet.Down(ctx)).To(Succeed())
		}, NodeTimeout(3*time.Minute))

		rep, err := chaos.Run(ctx, fleet, chaos.Options{Seed: *seed, Length: *length, Jobs: *jobCount, Drain: *drain, Log: GinkgoWriter})
		table := rep.Table()
		fmt.Fprintln(GinkgoWriter, table)
		AddReportEntry("chaos report", table)
		if *reportPath != "" {
			Expect(os.MkdirAll(filepath.Dir(*reportPath), 0o755)).To(Succeed())
			Expect(os.WriteFile(*reportPath, []byte(table), 0o644)).To(Succeed())
		}
		Expect(err).NotTo(HaveOccurred(), "the run could not be carried out\n%s", table)
		rerun := fmt.Sprintf("rerun this schedule: make chaos CHAOS_SEED=%d CHAOS_LENGTH=%s CHAOS_JOBS=%d", *seed, *length, *jobCount)
		Expect(rep.FaultErrors()).To(BeEmpty(), "faults that could not be injected or healed\n%s\n%s", table, rerun)
		Expect(rep.Violations()).To(BeEmpty(), "invariants broken\n%s\n%s", table, rerun)
		Expect(rep.Jobs).To(Equal(*jobCount), "every job was created\n%s", table)
		Expect(rep.Finished).To(BeNumerically(">", 0), "jobs ran at all\n%s", table)
	}, NodeTimeout(runBound()))
})

// runBound is how long the whole spec may take: the faults (a round may overrun the length),
// the drain, clean-up and the lab's start and stop.
func runBound() time.Duration { return *length + *drain + 20*time.Minute }
