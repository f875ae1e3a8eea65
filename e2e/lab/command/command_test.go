package command

import (
	"bytes"
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetq/fleetq/e2e/lab"
)

// These cases all fail (or finish) before any process starts, so they need no control-plane binaries.
func TestCommandErrors(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "lab")
	cases := map[string]struct {
		args    []string
		want    string
		wantOut string
	}{
		"negative workers":      {args: []string{"up", "--workers", "-1"}, want: "--workers -1: must not be negative"},
		"unknown mode":          {args: []string{"up", "--mode", "fast"}, want: `mode: Unsupported value: "fast"`},
		"base port too low":     {args: []string{"up", "--base-port", "80"}, want: "--base-port 80"},
		"unknown operator":      {args: []string{"up", "--operators", "kubeflow,volcano"}, want: `--operators: unknown operator "volcano"`},
		"operators, no pods":    {args: []string{"up", "--operators", "ray", "--mode", "apiserver"}, want: "an operator needs pods"},
		"unknown provider":      {args: []string{"up", "--provider", "vagrant"}, want: `unknown lab provider "vagrant"`},
		"missing spec file":     {args: []string{"up", "--spec", filepath.Join(dir, "nope.yaml")}, want: "nope.yaml"},
		"status without a lab":  {args: []string{"status"}, want: "no lab in " + dir + ": start one with 'fleetq-lab up'"},
		"kubeconfig needs name": {args: []string{"kubeconfig"}, want: "accepts 1 arg"},
		"kubeconfig, no lab":    {args: []string{"kubeconfig", "us-east"}, want: "no lab in"},
		"down without a lab":    {args: []string{"down"}, wantOut: "no lab in " + dir},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			cmd := New(&out, &errOut)
			cmd.SetArgs(append(tc.args, "--dir", dir))
			err := cmd.ExecuteContext(context.Background())
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("error = %v, want one containing %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if !strings.Contains(out.String(), tc.wantOut) {
				t.Errorf("output %q does not contain %q", out.String(), tc.wantOut)
			}
		})
	}
}

func TestUpSpec(t *testing.T) {
	spec, err := upSpec(upFlags{workers: 2, mode: "apiserver", basePort: 20000, podRunTime: time.Minute})
	if err != nil {
		t.Fatalf("upSpec: %v", err)
	}
	var got []string
	for _, c := range spec.Clusters() {
		got = append(got, c.Name+":"+string(c.Mode)+":"+strconv.Itoa(c.APIServerPort))
	}
	want := []string{"management:apiserver:20000", "us-east:apiserver:20001", "eu-west:apiserver:20002"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("clusters (-want +got):\n%s", diff)
	}
	if spec.PodRunTime.Duration != time.Minute {
		t.Errorf("pod run time = %s", spec.PodRunTime.Duration)
	}
	def, err := upSpec(upFlags{workers: 2, mode: string(lab.ModeFull), podRunTime: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	wantDefault := lab.DefaultSpec(2)
	wantDefault.Default()
	if def.String() != wantDefault.String() {
		t.Errorf("`up` without flags does not start the default spec:\n%s\nwant\n%s", def, wantDefault.String())
	}
}
