package bench

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/pprof"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// profileFrom serves mux's CPU profile handler with the allocation and heap handlers, and
// starts a profiler of one-second windows on it until ctx ends.
func profileFrom(ctx context.Context, t *testing.T, mux *http.ServeMux, dir string) *profiler {
	t.Helper()
	mux.Handle("/debug/pprof/allocs", pprof.Handler("allocs"))
	mux.Handle("/debug/pprof/heap", pprof.Handler("heap"))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	p, err := startProfile(ctx, srv.URL+"/debug/pprof", dir, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// windows serves CPU profiles, the first one dropped (as a manager restarted in place drops its
// connection) when dropFirst, and closes the returned channel when the signalAt'th is asked.
func windows(signalAt int, dropFirst bool) (*http.ServeMux, <-chan struct{}) {
	signal := make(chan struct{})
	calls := 0
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/profile", func(w http.ResponseWriter, r *http.Request) {
		calls++
		if calls == signalAt {
			close(signal)
		}
		if calls == 1 && dropFirst {
			if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
				conn.Close()
			}
			return
		}
		pprof.Profile(w, r)
	})
	return mux, signal
}

func TestProfilerTakesCPUWindowsAndAllocations(t *testing.T) {
	// The second window's request says the first is written: cancel lands mid-window then.
	mux, second := windows(2, false)
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	p := profileFrom(ctx, t, mux, dir)
	<-second
	cancel()
	if err := p.stop(context.Background()); err != nil {
		t.Fatalf("stop: %v", err)
	}
	// The window running at the cancel completes, and no window starts after it.
	if len(p.cpu) != 2 {
		t.Errorf("CPU windows %v, want the two taken before and across the cancel", p.cpu)
	}
	for _, f := range p.cpu {
		if st, err := os.Stat(f); err != nil || st.Size() == 0 {
			t.Errorf("CPU window %s: %v (size %v)", f, err, st)
		}
	}
	for _, f := range []string{"cpu-top.txt", "allocs-top.txt", "heap-top.txt"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), "flat%") {
			t.Errorf("%s has no pprof -top table:\n%s", f, b)
		}
	}
}

func TestProfilerAsksARestartingManagerAgain(t *testing.T) {
	// The first window's connection is dropped; the second, asked again, is taken.
	mux, taken := windows(2, true)
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	p := profileFrom(ctx, t, mux, dir)
	<-taken
	cancel()
	if err := p.stop(context.Background()); err != nil {
		t.Fatalf("stop = %v, want the dropped window passed over", err)
	}
	if len(p.cpu) != 1 || p.gaps != 1 {
		t.Errorf("windows %v, gaps %d; want one window after one gap", p.cpu, p.gaps)
	}
	b, err := os.ReadFile(filepath.Join(dir, "cpu-top.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "did not answer (restarted, or too busy): 1") {
		t.Errorf("cpu-top.txt does not count the gap:\n%.300s", b)
	}
}

func TestProfilerSaysWhenTheManagerServesNoProfiles(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	p, err := startProfile(ctx, srv.URL+"/debug/pprof", t.TempDir(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	err = p.stop(context.Background())
	if err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("stop = %v, want the 404 named", err)
	}
}
