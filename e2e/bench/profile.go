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
	// heap is the last heap snapshot taken; gaps counts the windows the manager did not answer.
	heap string
	gaps int
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

// systemProfile is a profiler of a system's manager with the context that ends it.
type systemProfile struct {
	p      *profiler
	ctx    context.Context
	cancel context.CancelFunc
}

// profileSystem starts profiling sys's manager into dir, or returns nil for a system that is
// not profiled (whose finish and abandon do nothing).
func profileSystem(ctx context.Context, sys System, dir string) (*systemProfile, error) {
	pr, ok := sys.(Profiler)
	if !ok || pr.ProfileURL() == "" {
		return nil, nil
	}
	pctx, cancel := context.WithCancel(ctx)
	p, err := startProfile(pctx, pr.ProfileURL(), dir, ProfileWindow)
	if err != nil {
		cancel()
		return nil, err
	}
	return &systemProfile{p: p, ctx: ctx, cancel: cancel}, nil
}

// finish ends the profile: it waits for the last window and writes the summaries.
func (s *systemProfile) finish() error {
	if s == nil {
		return nil
	}
	s.cancel()
	return s.p.stop(context.WithoutCancel(s.ctx))
}

// abandon stops taking windows without waiting for them (a run that failed).
func (s *systemProfile) abandon() {
	if s != nil {
		s.cancel()
	}
}

// loop takes one CPU window after another until ctx ends, each followed by a heap snapshot
// (heap-NNN: the heap in use at the window's end, so the peak before a restart is kept); the
// window running then completes, so the run's last seconds are in the profile too. A manager
// that does not answer (restarted in place by a probe) is asked again a second later: its
// absence is a gap between windows, not the end of the profile.
func (p *profiler) loop(ctx context.Context) error {
	for i := 1; ctx.Err() == nil; i++ {
		cpu := filepath.Join(p.dir, fmt.Sprintf("cpu-%03d.pb.gz", i))
		url := fmt.Sprintf("%s/profile?seconds=%d", p.base, int(p.window/time.Second))
		err := p.fetch(context.WithoutCancel(ctx), url, cpu)
		if err == nil {
			p.cpu = append(p.cpu, cpu)
			heap := filepath.Join(p.dir, fmt.Sprintf("heap-%03d.pb.gz", i))
			if err = p.fetch(context.WithoutCancel(ctx), p.base+"/heap", heap); err == nil {
				p.heap = heap
			}
		}
		var st statusError
		if errors.As(err, &st) {
			return err
		}
		if err != nil {
			p.gaps++
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}
	return nil
}

// stop waits for the last CPU window, takes the allocation profile (allocations since the
// process started) and writes text summaries beside the profiles: cpu-top.txt, allocs-top.txt
// and heap-top.txt (the last heap snapshot's memory in use).
func (p *profiler) stop(ctx context.Context) error {
	err := <-p.done
	allocs := filepath.Join(p.dir, "allocs.pb.gz")
	if aerr := p.fetch(ctx, p.base+"/allocs", allocs); aerr != nil {
		return errors.Join(err, aerr)
	}
	if len(p.cpu) > 0 {
		header := fmt.Sprintf("%d windows of %s merged; asks the manager did not answer (restarted, or too busy): %d\n\n", len(p.cpu), p.window, p.gaps)
		err = errors.Join(err, pprofTop(ctx, filepath.Join(p.dir, "cpu-top.txt"), header, nil, p.cpu))
	}
	if p.heap != "" {
		err = errors.Join(err, pprofTop(ctx, filepath.Join(p.dir, "heap-top.txt"), "", []string{"-sample_index=inuse_space"}, []string{p.heap}))
	}
	return errors.Join(err, pprofTop(ctx, filepath.Join(p.dir, "allocs-top.txt"), "", []string{"-sample_index=alloc_space"}, []string{allocs}))
}

// statusError is a pprof handler's answer other than 200: the manager answers, but serves no
// such profile, so asking again is no use.
type statusError struct{ url, status, body string }

func (e statusError) Error() string {
	return fmt.Sprintf("profile %s: %s: %s", e.url, e.status, e.body)
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
		return statusError{url: url, status: resp.Status, body: string(body)}
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

// pprofTop writes header and `go tool pprof -top` of the merged profiles into out, flat and
// cumulative, so the report's reader sees where the time went without a pprof at hand.
func pprofTop(ctx context.Context, out, header string, flags, profiles []string) error {
	text := []byte(header)
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
