package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// Profiler is a system whose manager serves net/http/pprof during a run.
type Profiler interface {
	// ProfileURL is the base of its pprof handlers (".../debug/pprof"), "" when not profiled.
	ProfileURL() string
}

// ProfileWindow is the length of one CPU profile: a run is profiled in back-to-back windows
// (pprof merges them), so a run of any length is covered without knowing its length ahead.
const ProfileWindow = 10 * time.Second

// profiler collects a manager's profiles over a run's measured window into dir.
type profiler struct {
	base, dir string
	window    time.Duration
	client    *http.Client
	done      chan error
	cpu       []string
}

// startProfile starts taking CPU profiles of window seconds from base until stop is called.
func startProfile(ctx context.Context, base, dir string, window time.Duration) (*profiler, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("profile: %w", err)
	}
	p := &profiler{base: base, dir: dir, window: window, client: &http.Client{Timeout: window + 30*time.Second}, done: make(chan error, 1)}
	go func() { p.done <- p.loop(ctx) }()
	return p, nil
}

// loop takes one CPU window after another until ctx ends; the window running then completes,
// so the run's last seconds are in the profile too.
func (p *profiler) loop(ctx context.Context) error {
	for i := 1; ctx.Err() == nil; i++ {
		file := filepath.Join(p.dir, fmt.Sprintf("cpu-%03d.pb.gz", i))
		url := fmt.Sprintf("%s/profile?seconds=%d", p.base, int(p.window/time.Second))
		if err := p.fetch(context.WithoutCancel(ctx), url, file); err != nil {
			return err
		}
		p.cpu = append(p.cpu, file)
	}
	return nil
}

// stop waits for the last CPU window, takes the allocation profile (allocations since the
// process started) and writes text summaries beside the profiles: cpu-top.txt, allocs-top.txt.
func (p *profiler) stop(ctx context.Context) error {
	err := <-p.done
	allocs := filepath.Join(p.dir, "allocs.pb.gz")
	if aerr := p.fetch(ctx, p.base+"/allocs", allocs); aerr != nil {
		return errors.Join(err, aerr)
	}
	if len(p.cpu) > 0 {
		err = errors.Join(err, pprofTop(ctx, filepath.Join(p.dir, "cpu-top.txt"), nil, p.cpu))
	}
	return errors.Join(err, pprofTop(ctx, filepath.Join(p.dir, "allocs-top.txt"), []string{"-sample_index=alloc_space"}, []string{allocs}))
}

func (p *profiler) fetch(ctx context.Context, url, file string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return fmt.Errorf("profile %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("profile %s: %s: %s", url, resp.Status, body)
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return fmt.Errorf("profile %s: %w", url, err)
	}
	return f.Close()
}

// pprofTop writes `go tool pprof -top` of the merged profiles into out, flat and cumulative, so
// the report's reader sees where the time went without a pprof at hand.
func pprofTop(ctx context.Context, out string, flags, profiles []string) error {
	var text []byte
	for _, order := range [][]string{nil, {"-cum"}} {
		args := append(append(append([]string{"tool", "pprof", "-top", "-nodecount=40"}, order...), flags...), profiles...)
		b, err := exec.CommandContext(ctx, "go", args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("go tool pprof %s: %w: %s", out, err, b)
		}
		text = append(append(text, b...), '\n')
	}
	return os.WriteFile(out, text, 0o644)
}
