// Package smoke runs the multi-cluster burst scenario (b) of the benchmark at a smoke size, with the
// built fleetq-manager and fleetq-agent binaries and with the direct ceiling, and checks only that
// every workload finishes (and, for direct, where): the runner, the lab wiring and the recorder stay
// working between `make bench` runs.
// Timings are recorded, never asserted.
package smoke

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2" //nolint:revive // Ginkgo's DSL reads best unqualified.
	. "github.com/onsi/gomega"    //nolint:revive // Gomega's DSL reads best unqualified.
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/fleetq/fleetq/e2e/bench"
	// The test builds and runs fleetq-manager and fleetq-agent; importing what they are made of
	// makes go test's cache run it again whenever that code changes.
	_ "github.com/fleetq/fleetq/manager/setup"
	_ "github.com/fleetq/fleetq/worker/setup"
)

// smokeScale makes scenario (b) 20 jobs on one node pool per worker (8 + 8 + 4 GPUs).
const smokeScale = 0.02

func TestSmoke(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Benchmark smoke: scenario (b) at smoke size, fleetq and direct")
}

var _ = It("finishes every workload of the multi-cluster burst at smoke size", func(ctx SpecContext) {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	s := smokeScenario()
	dir := GinkgoT().TempDir()
	fleetqBin := filepath.Join(dir, "fleetq")
	Expect(bench.BuildFleetq(ctx, fleetqBin)).To(Succeed())
	binDir, err := bench.PrepareBinDir(filepath.Join(dir, "tools"))
	Expect(err).NotTo(HaveOccurred())
	knobs := bench.Knobs{QPS: 200, Burst: 400}
	res, err := bench.Run(ctx, bench.RunOptions{
		Scenario: s,
		System:   &bench.Fleetq{Knobs: knobs, BinDir: fleetqBin, Commit: "smoke"},
		Dir:      filepath.Join(dir, "run"), BinDir: binDir,
		LoadQPS: 200, LoadBurst: 400,
		Progress: GinkgoWriter,
	})
	if err != nil || !res.Finished {
		logs, _ := filepath.Glob(filepath.Join(dir, "run", "logs", "*", "fleetq-*.log"))
		for _, l := range logs {
			data, _ := os.ReadFile(l)
			GinkgoWriter.Printf("---- %s\n%s\n", l, tail(string(data), 4000))
		}
	}
	Expect(err).NotTo(HaveOccurred())
	Expect(res.Records).To(HaveLen(s.Jobs(1)))
	var unfinished []string
	for _, r := range res.Records {
		if r.Finished.IsZero() {
			unfinished = append(unfinished, r.Key)
		}
	}
	Expect(unfinished).To(BeEmpty(), "every workload finishes")
	Expect(res.Finished).To(BeTrue())
	// The first wave's creates were timed twice: with nothing installed (and its Jobs removed
	// again), then against fleetq.
	Expect(res.BareSubmitSpan).To(BeNumerically(">", 0))
	Expect(res.SubmitSpan).To(BeNumerically(">", 0))
	Expect(res.Webhooks[bench.ManagementCluster].Total().Calls).To(BeNumerically(">=", len(res.Records)), "fleetq's webhooks see every Job")
	figures := bench.Compute(res)
	GinkgoWriter.Printf("smoke figures (recorded, not asserted): %v\n", figures)
}, NodeTimeout(12*time.Minute))

var _ = It("runs every job of the burst in a worker with the direct ceiling", func(ctx SpecContext) {
	s := smokeScenario()
	dir := GinkgoT().TempDir()
	binDir, err := bench.PrepareBinDir(filepath.Join(dir, "tools"))
	Expect(err).NotTo(HaveOccurred())
	res, err := bench.Run(ctx, bench.RunOptions{
		Scenario: s, System: &bench.Direct{},
		Dir: filepath.Join(dir, "run"), BinDir: binDir,
		LoadQPS: 200, LoadBurst: 400,
		Progress: GinkgoWriter,
	})
	Expect(err).NotTo(HaveOccurred())
	Expect(res.Records).To(HaveLen(s.Jobs(1)))
	ranIn := map[string]int{}
	var unfinished []string
	for _, r := range res.Records {
		ranIn[r.Cluster]++
		if r.Finished.IsZero() || r.Running.IsZero() {
			unfinished = append(unfinished, r.Key)
		}
	}
	Expect(unfinished).To(BeEmpty(), "every job runs and finishes where it was created")
	// 20 one-GPU jobs over 8 + 8 + 4 GPUs, each worker by its share.
	Expect(ranIn).To(Equal(map[string]int{"us-east": 8, "us-west": 8, "eu-west": 4}))
	Expect(res.BareSubmitSpan).To(BeZero(), "direct creates in the workers: no management-cluster baseline")
	GinkgoWriter.Printf("direct smoke figures (recorded, not asserted): %v\n", bench.Compute(res))
}, NodeTimeout(8*time.Minute))

// smokeScenario is scenario (b) at smoke size; short pods keep the suite quick (the full size runs
// 30 s pods in `make bench`).
func smokeScenario() *bench.Scenario {
	s, err := bench.LoadScenario(filepath.Join("..", "scenarios", "multi-burst.yaml"))
	Expect(err).NotTo(HaveOccurred())
	s = s.Scaled(smokeScale)
	for i := range s.Classes {
		s.Classes[i].RunTime = metav1.Duration{Duration: 2 * time.Second}
	}
	return s
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}
