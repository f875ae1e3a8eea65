// Command fleetq-demo is fleetq's main demo, the README's first command (`make demo`): it brings up the
// local lab, starts fleetq-manager and the agents, and shows two teams' GPU jobs queueing, borrowing,
// being dispatched and preempted, live in the terminal. See e2e/demo for the story and `fleetq-demo
// --help` for the flags.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"golang.org/x/term"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/fleetq/fleetq/e2e/demo"
	"github.com/fleetq/fleetq/e2e/lab"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if _, err := execute(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "fleetq-demo: %v\n", err)
		os.Exit(1)
	}
}

type flags struct {
	kubeconfig   string
	workers      []string
	namespace    string
	dir          string
	binDir       string
	fleetqBinDir string
	story        string
	plain        bool
	owned        bool
}

// execute runs the command with args, writing to out and errOut, and returns the demo's result.
func execute(ctx context.Context, args []string, out, errOut io.Writer) (*demo.Result, error) {
	// Client libraries log to stderr, which would tear the live screen; the demo reports its own
	// errors, and fleetq's components log to their files.
	ctrllog.SetLogger(logr.Discard())
	klog.SetLogger(logr.Discard())
	rest.SetDefaultWarningHandler(rest.NoWarnings{})
	var f flags
	var res *demo.Result
	cmd := &cobra.Command{
		Use:   "fleetq-demo",
		Short: "Show fleetq queueing, borrowing, dispatching and preempting two teams' GPU jobs, live",
		Long: `fleetq-demo brings up the local lab (management + us-east with 32 A100s + eu-west with 16 L4s;
a running lab is reused), starts fleetq-manager and one fleetq-agent per worker in the background,
applies the Kueue tutorial's GPU flavors and two team queues in one cohort, then submits bursts of
jobs from teams research and inference and shows, live, each job's state and worker, each queue's
usage and borrowing, a preemption when inference reclaims its share, and a summary.

The lab and fleetq keep running afterwards, for kubectl; 'fleetq-lab down' stops everything.

With --kubeconfig it uses an existing management cluster instead: no lab, no process started.
fleetq-manager must run there (and fleetq-agent in each worker); workers are registered from
--worker flags, else the MultiKueueClusters already there are used. Its workers need nodes labelled
nvidia.com/gpu.product=NVIDIA-A100-SXM4-80GB and NVIDIA-L4 for the tutorial's flavors.`,
		Example: `  make demo                                   # builds everything, then runs this
  bin/fleetq-demo --story smoke               # a shorter story (~40 s)
  bin/fleetq-demo --kubeconfig mgmt.kubeconfig --worker us-east=east.kubeconfig --worker eu-west=eu.kubeconfig`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			res, err = run(cmd.Context(), f, out)
			return err
		},
	}
	cmd.SetArgs(args)
	cmd.SetOut(out)
	cmd.SetErr(errOut)
	fs := cmd.Flags()
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "an existing management cluster running fleetq-manager: skip the lab and start nothing")
	fs.StringArrayVar(&f.workers, "worker", nil, "NAME=KUBECONFIG of a worker to register (with --kubeconfig; repeatable)")
	fs.StringVar(&f.namespace, "namespace", "", "fleetq-manager's namespace on that cluster (default fleetq-system)")
	fs.StringVar(&f.dir, "dir", "", "lab directory (default $FLEETQ_LAB_DIR, <repo>/_lab or ~/.fleetq/lab)")
	fs.StringVar(&f.binDir, "bin-dir", "", "directory of etcd, kube-* and kwok (default $FLEETQ_BIN_DIR or <repo>/bin)")
	fs.StringVar(&f.fleetqBinDir, "fleetq-bin-dir", "", "directory of fleetq-manager and fleetq-agent (default next to fleetq-demo, else <repo>/bin)")
	fs.StringVar(&f.story, "story", "default", "default (~2 minutes) or smoke (~40 s, fewer jobs)")
	fs.BoolVar(&f.plain, "plain", false, "print events line by line instead of redrawing the screen (the default when stdout is not a terminal)")
	// Tests run the command in-process and tie the lab to themselves.
	fs.BoolVar(&f.owned, "owned", false, "stop the lab and fleetq's processes when this command exits")
	_ = fs.MarkHidden("owned")
	err := cmd.ExecuteContext(ctx)
	return res, err
}

func run(ctx context.Context, f flags, out io.Writer) (*demo.Result, error) {
	o := demo.Options{Kubeconfig: f.kubeconfig, Namespace: f.namespace, Dir: f.dir, BinDir: f.binDir, FleetqBinDir: f.fleetqBinDir, Owned: f.owned, Progress: out}
	if f.kubeconfig == "" && len(f.workers) > 0 {
		return nil, errors.New("--worker needs --kubeconfig: on the lab the demo registers its workers itself")
	}
	if f.kubeconfig == "" && f.namespace != "" {
		return nil, errors.New("--namespace needs --kubeconfig: on the lab the demo configures fleetq-manager itself")
	}
	for _, w := range f.workers {
		name, path, ok := strings.Cut(w, "=")
		if !ok || name == "" || path == "" {
			return nil, fmt.Errorf("--worker %q: want NAME=KUBECONFIG", w)
		}
		o.Workers = append(o.Workers, demo.WorkerKubeconfig{Name: name, Kubeconfig: path})
	}
	switch f.story {
	case "default":
		o.Scenario = demo.Default(demo.DefaultTimings)
	case "smoke":
		o.Scenario = demo.Smoke(demo.SmokeTimings)
	default:
		return nil, fmt.Errorf("--story %q: want default or smoke", f.story)
	}
	o.Screen = screen(out, f.plain)
	res, err := demo.Run(ctx, o)
	if res != nil && (res.Management != "" || res.LabDir != "") {
		explore(out, f, res, err)
	}
	if err != nil && errors.Is(ctx.Err(), context.Canceled) {
		return res, errors.New("interrupted")
	}
	return res, err
}

// screen redraws in place on a terminal and falls back to log lines otherwise.
func screen(out io.Writer, plain bool) *demo.Screen {
	sc := &demo.Screen{Out: out}
	f, ok := out.(*os.File)
	if plain || !ok || !term.IsTerminal(int(f.Fd())) {
		return sc
	}
	sc.TTY = true
	sc.Options.Color = os.Getenv("NO_COLOR") == "" && os.Getenv("TERM") != "dumb"
	sc.Size = func() (int, int) {
		w, h, err := term.GetSize(int(f.Fd()))
		if err != nil {
			return 100, 0
		}
		return w, h
	}
	return sc
}

// explore prints how to look at what the demo left running, and how to stop it.
func explore(out io.Writer, f flags, res *demo.Result, runErr error) {
	p := func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }
	p("")
	if res.LabDir != "" {
		if runErr != nil {
			p("The lab keeps running in %s.", res.LabDir)
		} else {
			p("The lab, fleetq-manager and the agents keep running. Explore:")
		}
	} else {
		p("Explore:")
	}
	p("  export KUBECONFIG=%s", res.Management)
	p("  kubectl get clusterqueues                      # usage and pending jobs per team")
	p("  kubectl get clusterqueue research-gpu-cq -o yaml | grep -A12 flavorsReservation   # borrowed GPUs")
	p("  kubectl -n research get workloads -o wide      # admission and worker of each job")
	if res.State != nil {
		if j := res.State.Explained(); j != nil && j.Workload != "" {
			p("  kubectl -n %s describe workload %s   # why %s cannot run, cluster by cluster", j.Spec.Team, j.Workload, j.Spec.Name)
		}
	}
	p("  kubectl get multikueueclusters                 # the workers and their connection")
	names := make([]string, 0, len(res.Workers))
	for n := range res.Workers {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		p("  kubectl --kubeconfig %s get pods -A   # pods run only in the workers (%s)", res.Workers[n], n)
	}
	for _, l := range res.Logs {
		p("  tail -f %s", l)
	}
	if res.LabDir != "" {
		down := "go run ./cmd/fleetq-lab down"
		if _, inRepo := lab.RepoRoot(); !inRepo {
			down = "fleetq-lab down"
		}
		if f.dir != "" {
			down += " --dir " + res.LabDir
		}
		if abs, err := filepath.Abs(filepath.Join("bin", "fleetq-lab")); err == nil {
			if _, err := os.Stat(abs); err == nil {
				down += "   (or bin/fleetq-lab down)"
			}
		}
		p("Stop everything: %s", down)
	}
}
