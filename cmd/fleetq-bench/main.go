// Command fleetq-bench runs fleetq and Kueue v0.17 side by side on the lab and writes a comparison
// report (markdown table, CSV, PNG plots): flags → bench.Options → bench.Bench.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"go.uber.org/zap/zapcore"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/fleetq/fleetq/e2e/bench"
)

func main() {
	scenarios := flag.String("scenarios", "e2e/bench/scenarios/single-baseline.yaml,e2e/bench/scenarios/multi-burst.yaml,e2e/bench/scenarios/multi-pressure.yaml,e2e/bench/scenarios/multi-steady.yaml", "comma-separated scenario files, in report order")
	systems := flag.String("systems", "fleetq,kueue,direct", "comma-separated systems to run: fleetq, kueue, direct (jobs created straight where they run: the lab's ceiling)")
	runs := flag.Int("runs", 1, "runs per scenario and system; each figure is their median, with min and max")
	scale := flag.Float64("scale", 1, "multiplies every scenario's node pools, job counts and steady rates (1 = full size)")
	qps := flag.Float64("qps", 200, "client QPS of every fleetq and Kueue client (manager, remote, agents)")
	burst := flag.Int("burst", 400, "client burst of every fleetq and Kueue client")
	loadQPS := flag.Float64("load-qps", 1000, "QPS of the bench's own load client")
	loadBurst := flag.Int("load-burst", 1000, "burst of the bench's own load client")
	out := flag.String("out", "_bench", "output directory (report.md, CSVs, PNGs, runs/)")
	timeout := flag.Duration("timeout", 0, "replaces every scenario's timeout (0: each file's own); a run that reaches it is measured as far as it got")
	logLevel := flag.Int("fleetq-log-level", 0, "log verbosity of fleetq-manager and fleetq-agent (--zap-log-level); 2 shows each eviction and placement decision, to find why a run was slow")
	profile := flag.Bool("profile", false, "take fleetq-manager's CPU and allocation profiles during each fleetq run (runs/<run>/profile: pprof files and -top summaries)")
	keepAudit := flag.Bool("keep-audit", false, "keep the API servers' audit logs beside each run's other logs (runs/<run>/logs)")
	flag.Parse()
	// The harness's clients log through controller-runtime; only their errors matter here.
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := bench.Bench(ctx, bench.Options{
		ScenarioFiles:  split(*scenarios),
		Systems:        split(*systems),
		Runs:           *runs,
		Scale:          *scale,
		Timeout:        *timeout,
		Knobs:          bench.Knobs{QPS: float32(*qps), Burst: int32(*burst)},
		LoadQPS:        float32(*loadQPS),
		LoadBurst:      *loadBurst,
		Out:            *out,
		KeepAudit:      *keepAudit,
		FleetqLogLevel: *logLevel,
		Profile:        *profile,
		Command:        "go run ./cmd/fleetq-bench " + strings.Join(os.Args[1:], " "),
		Progress:       os.Stderr,
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "fleetq-bench: %v\n", err)
		os.Exit(1)
	}
	fmt.Print(rep.Markdown())
	fmt.Fprintf(os.Stderr, "report written to %s/report.md\n", *out)
}

func split(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
