package differential

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/fleetq/fleetq/e2e/bench"
	"github.com/fleetq/fleetq/e2e/lab"
)

// RunOptions say which scenarios to play and where to write what was found.
type RunOptions struct {
	// Seeds are the scenarios to generate and play.
	Seeds []uint64
	// Parallel scenarios play at once on the same two clusters (each in its own namespace with
	// names of its own, so they never share quota).
	Parallel int
	// Out receives summary.md and a seed-<n>/ reproduction per differing scenario.
	Out string
	// KeepAll writes the reproduction of every scenario, agreeing ones too.
	KeepAll bool
	// Play tunes settling.
	Play Options
	// Progress receives a line per scenario; may be nil.
	Progress io.Writer
}

// Run builds fleetq, starts the two clusters (once per fair-sharing setting the seeds need), plays
// every scenario and writes the summary and reproductions. It returns the results in seed order.
func Run(ctx context.Context, o RunOptions) ([]*Result, error) {
	if o.Parallel < 1 {
		o.Parallel = 1
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return nil, fmt.Errorf("differential: %w", err)
	}
	binDir, err := lab.FindBinDir()
	if err != nil {
		return nil, err
	}
	fleetqBin := filepath.Join(o.Out, "bin")
	if err := bench.BuildFleetq(ctx, fleetqBin); err != nil {
		return nil, err
	}
	scenarios := make([]*Scenario, len(o.Seeds))
	for i, seed := range o.Seeds {
		scenarios[i] = Generate(seed)
	}
	results := make([]*Result, len(scenarios))
	for _, fair := range []bool{false, true} {
		var todo []int
		for i, s := range scenarios {
			if s.FairSharing == fair {
				todo = append(todo, i)
			}
		}
		if len(todo) == 0 {
			continue
		}
		if err := runGroup(ctx, o, LabOptions{
			Dir:          filepath.Join(o.Out, fmt.Sprintf("lab-fairsharing-%v", fair)),
			BinDir:       binDir,
			FleetqBinDir: fleetqBin,
			FairSharing:  fair,
		}, scenarios, todo, results); err != nil {
			return nil, err
		}
	}
	f, err := os.Create(filepath.Join(o.Out, "summary.md"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	WriteSummary(f, results)
	return results, nil
}

func runGroup(ctx context.Context, o RunOptions, lo LabOptions, scenarios []*Scenario, todo []int, results []*Result) error {
	progress(o.Progress, "starting kueue and fleetq (fair sharing %v) in %s", lo.FairSharing, lo.Dir)
	l, err := StartLab(ctx, lo)
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		defer cancel()
		if err := l.Stop(sctx); err != nil {
			progress(o.Progress, "stopping the lab: %v", err)
		}
	}()
	next := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var writeErr error
	for range o.Parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				r := Play(ctx, scenarios[i], l.Kueue, l.Fleetq, o.Play)
				results[i] = r
				verdict := "agree"
				switch {
				case r.Error != "":
					verdict = "could not run: " + r.Error
				case r.Difference != nil:
					verdict = "differ: " + r.Difference.String()
				}
				progress(o.Progress, "seed %d (%s) in %s: %s", r.Scenario.Seed, r.Scenario, r.Duration.Round(100*time.Millisecond), verdict)
				if r.Difference != nil || r.Error != "" || o.KeepAll {
					if err := WriteReproduction(filepath.Join(o.Out, fmt.Sprintf("seed-%d", r.Scenario.Seed)), r); err != nil {
						mu.Lock()
						writeErr = err
						mu.Unlock()
					}
				}
			}
		}()
	}
	for _, i := range todo {
		select {
		case next <- i:
		case <-ctx.Done():
		}
	}
	close(next)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	return writeErr
}

func progress(w io.Writer, format string, args ...any) {
	if w != nil {
		fmt.Fprintf(w, "%s %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
	}
}
