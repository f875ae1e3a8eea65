// Command fleetq-differential plays generated admission scenarios through Kueue v0.17 and fleetq on
// the lab and reports where they decide differently: flags → differential.RunOptions → Run.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"go.uber.org/zap/zapcore"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/fleetq/fleetq/e2e/differential"
)

func main() {
	n := flag.Int("n", 20, "number of scenarios")
	first := flag.Uint64("seed", 1, "seed of the first scenario; the others follow it")
	parallel := flag.Int("parallel", 4, "scenarios played at once (each has its own namespace and queue names)")
	quiet := flag.Duration("quiet", 2*time.Second, "how long a system's decisions must stay unchanged to count as settled")
	out := flag.String("out", "_differential", "output directory: summary.md and a seed-<n>/ reproduction per difference")
	keepAll := flag.Bool("keep-all", false, "write every scenario's reproduction (seed-<n>/), not only the differing ones")
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	seeds := make([]uint64, *n)
	for i := range seeds {
		seeds[i] = *first + uint64(i)
	}
	opts := differential.DefaultOptions()
	opts.Quiet = *quiet
	results, err := differential.Run(ctx, differential.RunOptions{Seeds: seeds, Parallel: *parallel, Out: *out, KeepAll: *keepAll, Play: opts, Progress: os.Stderr})
	if err != nil {
		fmt.Fprintf(os.Stderr, "fleetq-differential: %v\n", err)
		os.Exit(1)
	}
	differential.WriteSummary(os.Stdout, results)
	fmt.Fprintf(os.Stderr, "summary written to %s\n", filepath.Join(*out, "summary.md"))
}
