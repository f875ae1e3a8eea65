package demo

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// golden compares got with testdata/name, or rewrites the file with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./e2e/demo -run %s -update to create it)", err, t.Name())
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s differs (-want +got); if the change is intended, rerun with -update:\n%s", path, diff)
	}
}

func TestRenderFrame(t *testing.T) {
	cases := map[string]struct {
		opts FrameOptions
		file string
	}{
		"wide terminal":       {opts: FrameOptions{Width: 120, Server: "https://127.0.0.1:40001"}, file: "frame-120.golden"},
		"narrow and short":    {opts: FrameOptions{Width: 80, Height: 24, Server: "https://127.0.0.1:40001"}, file: "frame-80x24.golden"},
		"just too short":      {opts: FrameOptions{Width: 100, Height: 38}, file: "frame-100x38.golden"},
		"colours":             {opts: FrameOptions{Width: 100, Color: true}, file: "frame-color.golden"},
		"too narrow to split": {opts: FrameOptions{Width: 40}, file: "frame-min.golden"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			lines := RenderFrame(midStory(), tc.opts)
			w := max(tc.opts.Width, minWidth)
			for i, l := range lines {
				if n := visible(l); n > w {
					t.Errorf("line %d is %d columns wide, more than %d: %q", i, n, w, l)
				}
			}
			if tc.opts.Height > 0 && len(lines) > tc.opts.Height-1 {
				t.Errorf("%d lines for a terminal of %d rows", len(lines), tc.opts.Height)
			}
			golden(t, tc.file, strings.Join(lines, "\n")+"\n")
		})
	}
}

func TestPlainScreen(t *testing.T) {
	var out bytes.Buffer
	sc := &Screen{Out: &out, StatusEvery: 5 * time.Second}
	s := midStory()
	sc.Update(s)
	// Nothing new: no line repeated, no status before StatusEvery.
	s.Now = s.Now.Add(time.Second)
	sc.Update(s)
	s.Now = s.Now.Add(5 * time.Second)
	sc.Update(s)
	golden(t, "plain.golden", out.String())
}

func TestRedrawMovesBackOverThePreviousFrame(t *testing.T) {
	var out bytes.Buffer
	sc := &Screen{Out: &out, TTY: true}
	sc.redraw([]string{"a", "b", "c"})
	sc.redraw([]string{"d"})
	want := "\x1b[2Ka\n\x1b[2Kb\n\x1b[2Kc\n\x1b[J" + "\x1b[3A\r\x1b[2Kd\n\x1b[J"
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("ANSI output (-want +got):\n%s", diff)
	}
}

func TestBar(t *testing.T) {
	cases := map[string]struct {
		f    FlavorView
		want string
	}{
		"empty":              {FlavorView{Nominal: 16, BorrowingLimit: 8}, "[░░░░░░░░░░░░░░░░········]"},
		"half the nominal":   {FlavorView{Used: 8, Nominal: 16, BorrowingLimit: 8}, "[████████░░░░░░░░········]"},
		"borrowing":          {FlavorView{Used: 24, Borrowed: 8, Nominal: 16, BorrowingLimit: 8}, "[████████████████▓▓▓▓▓▓▓▓]"},
		"no borrowing limit": {FlavorView{Used: 4, Nominal: 8, BorrowingLimit: -1}, "[████████████░░░░░░░░░░░░]"},
		"no quota":           {FlavorView{BorrowingLimit: -1}, "[                        ]"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := bar(tc.f, 24, FrameOptions{}); got != tc.want {
				t.Errorf("bar = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestSince(t *testing.T) {
	cases := map[time.Duration]string{-time.Second: "0.0s", 420 * time.Millisecond: "0.4s", 59940 * time.Millisecond: "59.9s", 65 * time.Second: "1m05s", 2*time.Minute + 500*time.Millisecond: "2m01s"}
	for d, want := range cases {
		if got := since(d); got != want {
			t.Errorf("since(%s) = %q, want %q", d, got, want)
		}
	}
}

func TestWrap(t *testing.T) {
	got := wrap("no worker has room: us-east: flavor l4-flavor absent; eu-west: no node has room", 30, 3)
	want := []string{"no worker has room: us-east:", "flavor l4-flavor absent;", "eu-west: no node has room"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("wrap (-want +got):\n%s", diff)
	}
}
