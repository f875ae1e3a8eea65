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

func TestProfilerTakesCPUWindowsAndAllocations(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.Handle("/debug/pprof/allocs", pprof.Handler("allocs"))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	p, err := startProfileEvery(ctx, srv.URL+"/debug/pprof", dir, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	cancel()
	if err := p.stop(context.Background()); err != nil {
		t.Fatalf("stop: %v", err)
	}
	// The cancel lands mid-window: stop without an error means that window was not cut off.
	if len(p.cpu) == 0 {
		t.Errorf("no CPU window taken")
	}
	for _, f := range p.cpu {
		if st, err := os.Stat(f); err != nil || st.Size() == 0 {
			t.Errorf("CPU window %s: %v (size %v)", f, err, st)
		}
	}
	for _, f := range []string{"cpu-top.txt", "allocs-top.txt"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), "flat%") {
			t.Errorf("%s has no pprof -top table:\n%s", f, b)
		}
	}
}

func TestProfilerSaysWhenTheManagerServesNoProfiles(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	p, err := startProfileEvery(ctx, srv.URL+"/debug/pprof", t.TempDir(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	err = p.stop(context.Background())
	if err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("stop = %v, want the 404 named", err)
	}
}
