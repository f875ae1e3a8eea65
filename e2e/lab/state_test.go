package lab

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fakeProvider records labs in their state files only; healthy says what Check reports.
type fakeProvider struct {
	name    string
	healthy bool
	ups     int
	downs   int
}

type fakeLab struct {
	p     *fakeProvider
	state *State
}

func (p *fakeProvider) Name() string { return p.name }

func (p *fakeProvider) Up(_ context.Context, spec Spec, opts UpOptions) (Lab, error) {
	p.ups++
	s := &State{Provider: p.name, Dir: opts.Dir, Spec: spec}
	for _, c := range spec.Clusters() {
		s.Clusters = append(s.Clusters, ClusterState{Name: c.Name})
		if err := os.MkdirAll(filepath.Join(opts.Dir, c.Name), 0o755); err != nil {
			return nil, err
		}
	}
	if err := WriteState(opts.Dir, s); err != nil {
		return nil, err
	}
	return &fakeLab{p: p, state: s}, nil
}

func (p *fakeProvider) Open(_ context.Context, s *State) (Lab, error) {
	return &fakeLab{p: p, state: s}, nil
}

func (l *fakeLab) Dir() string         { return l.state.Dir }
func (l *fakeLab) Spec() Spec          { return l.state.Spec }
func (l *fakeLab) Clusters() []Cluster { return nil }
func (l *fakeLab) Down(context.Context) error {
	l.p.downs++
	return RemoveState(l.state.Dir, l.state)
}
func (l *fakeLab) Check(context.Context) error {
	if l.p.healthy {
		return nil
	}
	return errors.New("etcd is not running")
}

func TestStateRoundTrip(t *testing.T) {
	dir := t.TempDir()
	if _, err := ReadState(dir); !errors.Is(err, ErrNoLab) {
		t.Fatalf("ReadState of an empty dir = %v, want ErrNoLab", err)
	}
	want := &State{Provider: "local", Dir: dir, Owner: 42, Spec: DefaultSpec(1), Clusters: []ClusterState{{
		Name: "management", Server: "https://127.0.0.1:1234",
		Processes: []ProcessState{{Name: "etcd", PID: 7, StartTime: 99, Args: []string{"etcd", "--x"}, Log: "/l", Ports: []int{1, 2}}},
	}}}
	if err := WriteState(dir, want); err != nil {
		t.Fatalf("WriteState: %v", err)
	}
	got, err := ReadState(dir)
	if err != nil {
		t.Fatalf("ReadState: %v", err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("state (-want +got):\n%s", diff)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("WriteState left temporary files: %v", entries)
	}

	cases := map[string]struct {
		content string
		want    string
	}{
		"corrupt":       {content: "{not json", want: "corrupt"},
		"other version": {content: `{"version": 99}`, want: "version 99"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			d := t.TempDir()
			if err := os.WriteFile(filepath.Join(d, StateFile), []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := ReadState(d); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ReadState = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestPrepareDir(t *testing.T) {
	base := t.TempDir()
	file := filepath.Join(base, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	foreign := filepath.Join(base, "foreign")
	if err := os.MkdirAll(foreign, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(foreign, "notes.txt"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		dir  string
		want string
	}{
		"new directory":             {dir: filepath.Join(base, "new", "lab")},
		"path is a file":            {dir: file, want: "not a directory"},
		"directory of someone else": {dir: foreign, want: "holds files but no lab"},
		"parent is a file":          {dir: filepath.Join(file, "lab"), want: "not a directory"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := PrepareDir(tc.dir)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("PrepareDir: %v", err)
				}
				if _, err := os.Stat(filepath.Join(tc.dir, MarkerFile)); err != nil {
					t.Errorf("no marker: %v", err)
				}
				// A directory holding a lab's marker is accepted again.
				if err := PrepareDir(tc.dir); err != nil {
					t.Errorf("second PrepareDir: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.dir) {
				t.Errorf("PrepareDir = %v, want an error naming %s and saying %q", err, tc.dir, tc.want)
			}
		})
	}
}

func TestUpIsIdempotent(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "lab")
	p := &fakeProvider{name: "fake", healthy: true}
	ps := Providers{"fake": p}
	spec := DefaultSpec(1)

	if _, started, err := Up(ctx, p, spec, UpOptions{Dir: dir}); err != nil || !started {
		t.Fatalf("first Up: started=%v err=%v", started, err)
	}
	if _, started, err := Up(ctx, p, spec, UpOptions{Dir: dir}); err != nil || started {
		t.Fatalf("second Up: started=%v err=%v, want the running lab", started, err)
	}
	if p.ups != 1 {
		t.Errorf("provider started %d labs, want 1", p.ups)
	}
	if _, _, err := Up(ctx, p, DefaultSpec(2), UpOptions{Dir: dir}); err == nil || !strings.Contains(err.Error(), "another spec") {
		t.Errorf("Up with another spec = %v, want a refusal", err)
	}
	other := &fakeProvider{name: "other", healthy: true}
	if _, _, err := Up(ctx, other, spec, UpOptions{Dir: dir}); err == nil || !strings.Contains(err.Error(), "a fake lab runs there") {
		t.Errorf("Up with another provider = %v, want a refusal", err)
	}

	// A lab whose processes died (its creator crashed) is stopped and started afresh.
	p.healthy = false
	if _, started, err := Up(ctx, p, spec, UpOptions{Dir: dir}); err != nil || !started {
		t.Fatalf("Up over a stale lab: started=%v err=%v", started, err)
	}
	if p.ups != 2 || p.downs != 1 {
		t.Errorf("ups=%d downs=%d, want 2 and 1", p.ups, p.downs)
	}

	stopped, err := Down(ctx, ps, dir)
	if err != nil || !stopped {
		t.Fatalf("Down: stopped=%v err=%v", stopped, err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("lab dir still exists after Down: %v", err)
	}
	if stopped, err := Down(ctx, ps, dir); err != nil || stopped {
		t.Errorf("second Down: stopped=%v err=%v, want a no-op", stopped, err)
	}
}

func TestUpRejectsInvalidSpec(t *testing.T) {
	p := &fakeProvider{name: "fake"}
	_, _, err := Up(context.Background(), p, Spec{Management: ClusterSpec{Name: "UPPER"}}, UpOptions{Dir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "management.name") {
		t.Errorf("Up = %v, want a validation error", err)
	}
	if p.ups != 0 {
		t.Errorf("provider was called")
	}
}

func TestDownKeepsForeignFiles(t *testing.T) {
	dir := t.TempDir()
	p := &fakeProvider{name: "fake", healthy: true}
	if _, _, err := Up(context.Background(), p, DefaultSpec(0), UpOptions{Dir: dir}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "my-notes.txt"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Down(context.Background(), Providers{"fake": p}, dir); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if diff := cmp.Diff([]string{MarkerFile, "my-notes.txt"}, names); diff != "" {
		t.Errorf("left in the lab dir (-want +got):\n%s", diff)
	}
}

func TestOpenUnknownProvider(t *testing.T) {
	dir := t.TempDir()
	if err := WriteState(dir, &State{Provider: "vagrant"}); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(context.Background(), Providers{}, dir); err == nil || !strings.Contains(err.Error(), `"vagrant"`) {
		t.Errorf("Open = %v, want an unknown-provider error", err)
	}
}

func TestResolveDir(t *testing.T) {
	root, ok := RepoRoot()
	if !ok {
		t.Fatalf("tests run inside the repository, but no go.mod declaring %s was found above the working directory", Module)
	}
	home := t.TempDir()
	t.Setenv("HOME", home)

	t.Run("flag wins", func(t *testing.T) {
		t.Setenv(EnvLabDir, "/from/env")
		if got, _ := ResolveDir("/from/flag"); got != "/from/flag" {
			t.Errorf("got %s", got)
		}
	})
	t.Run("environment", func(t *testing.T) {
		t.Setenv(EnvLabDir, "/from/env")
		if got, _ := ResolveDir(""); got != "/from/env" {
			t.Errorf("got %s", got)
		}
	})
	t.Run("repository", func(t *testing.T) {
		t.Setenv(EnvLabDir, "")
		if got, _ := ResolveDir(""); got != filepath.Join(root, "_lab") {
			t.Errorf("got %s, want %s", got, filepath.Join(root, "_lab"))
		}
	})
	t.Run("outside the repository", func(t *testing.T) {
		t.Setenv(EnvLabDir, "")
		t.Chdir(t.TempDir())
		if got, _ := ResolveDir(""); got != filepath.Join(home, ".fleetq", "lab") {
			t.Errorf("got %s", got)
		}
	})
}

func TestBinaries(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, Etcd), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, KubeAPIServer), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	err := CheckBinaries(dir, BinariesFor(ModeFull))
	if err == nil {
		t.Fatal("got no error")
	}
	for _, want := range []string{"kube-apiserver is not an executable", "binary kwok: not found in " + dir, "make tools"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "binary etcd") {
		t.Errorf("etcd is fine but reported: %v", err)
	}

	t.Setenv(EnvBinDir, dir)
	if got, err := FindBinDir(); err != nil || got != dir {
		t.Errorf("FindBinDir = %s, %v; want %s from $%s", got, err, dir, EnvBinDir)
	}
}
