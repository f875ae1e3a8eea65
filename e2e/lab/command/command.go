// Package command is the fleetq-lab command line: up, down, status and kubeconfig over the lab
// library. cmd/fleetq-lab only calls Execute, so everything here is testable in-process.
package command

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/fleetq/fleetq/e2e/lab"
	"github.com/fleetq/fleetq/e2e/lab/kind"
	"github.com/fleetq/fleetq/e2e/lab/local"
)

// Providers are the providers the command knows, by name.
func Providers() lab.Providers {
	return lab.Providers{
		local.ProviderName: local.New(),
		kind.ProviderName:  kind.New(kind.Options{}),
	}
}

// Execute runs the command with os.Args and returns the process exit code.
func Execute() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cmd := New(os.Stdout, os.Stderr)
	if err := cmd.ExecuteContext(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "fleetq-lab: %v\n", err)
		return 1
	}
	return 0
}

// New builds the command tree writing to out and errOut.
func New(out, errOut io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "fleetq-lab",
		Short: "Start and stop a lab of real Kubernetes clusters with fake GPU nodes on this machine",
		Long: `fleetq-lab runs a management cluster and GPU worker clusters (us-east: A100, eu-west: L4) as local
processes on 127.0.0.1: etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok for fake
nodes, from the binaries 'make tools' builds. No container runtime is needed.

The lab lives in one directory: --dir, else $FLEETQ_LAB_DIR, else <repo>/_lab inside the fleetq
repository, else ~/.fleetq/lab.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(out)
	root.SetErr(errOut)
	var dir string
	root.PersistentFlags().StringVar(&dir, "dir", "", "lab directory (default $FLEETQ_LAB_DIR, <repo>/_lab or ~/.fleetq/lab)")
	root.AddCommand(upCommand(&dir), downCommand(&dir), statusCommand(&dir), kubeconfigCommand(&dir))
	return root
}

type upFlags struct {
	workers    int
	mode       string
	provider   string
	basePort   int
	specFile   string
	podRunTime time.Duration
	operators  string
	binDir     string
	owned      bool
}

func upCommand(dir *string) *cobra.Command {
	var f upFlags
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Start the lab (does nothing if it already runs)",
		Example: `  fleetq-lab up                      # management + us-east (A100) + eu-west (L4)
  fleetq-lab up --workers 1 --mode apiserver
  fleetq-lab up --operators kubeflow,ray    # training-operator and ray-operator in every cluster
  export KUBECONFIG=$(fleetq-lab kubeconfig management)`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runUp(cmd.Context(), cmd.OutOrStdout(), *dir, f)
		},
	}
	fs := cmd.Flags()
	fs.IntVar(&f.workers, "workers", 2, "number of worker clusters: us-east (A100), eu-west (L4), us-west, ap-south, worker-N")
	fs.StringVar(&f.mode, "mode", string(lab.ModeFull), "full (pods run on fake nodes) or apiserver (etcd and API server only)")
	fs.StringVar(&f.provider, "provider", local.ProviderName, "local (processes) or kind (needs Docker with registry access)")
	fs.IntVar(&f.basePort, "base-port", 0, "API server ports: management gets this one, workers the next ones; 0 picks free ports")
	fs.StringVar(&f.specFile, "spec", "", "lab spec file (YAML); replaces --workers, --mode, --pod-run-time, --operators and --base-port")
	fs.DurationVar(&f.podRunTime, "pod-run-time", 5*time.Second, "how long a Job's pod runs on a fake node (per pod: annotation "+lab.RunTimeAnnotation+")")
	fs.StringVar(&f.operators, "operators", "", "job operators every cluster runs, comma-separated: kubeflow (training-operator), ray (ray-operator)")
	fs.StringVar(&f.binDir, "bin-dir", "", "directory of etcd, kube-* and kwok (default $FLEETQ_BIN_DIR, <repo>/bin, or next to fleetq-lab)")
	// Tests that run the command in-process tie the lab to themselves.
	fs.BoolVar(&f.owned, "owned", false, "stop the lab's processes when this command exits")
	_ = fs.MarkHidden("owned")
	return cmd
}

func runUp(ctx context.Context, out io.Writer, dirFlag string, f upFlags) error {
	dir, err := lab.ResolveDir(dirFlag)
	if err != nil {
		return err
	}
	spec, err := upSpec(f)
	if err != nil {
		return err
	}
	p, err := Providers().Get(f.provider)
	if err != nil {
		return err
	}
	started := time.Now()
	l, fresh, err := lab.Up(ctx, p, spec, lab.UpOptions{Dir: dir, BinDir: f.binDir, Owned: f.owned, Progress: out})
	if err != nil {
		return err
	}
	if fresh {
		fmt.Fprintf(out, "lab up in %s (%s)\n", time.Since(started).Round(100*time.Millisecond), dir)
	}
	printStatus(ctx, out, l)
	fmt.Fprintf(out, "\nexport KUBECONFIG=%s\n", lab.Management(l).KubeconfigPath())
	return nil
}

func upSpec(f upFlags) (lab.Spec, error) {
	if f.specFile != "" {
		return lab.LoadSpec(f.specFile)
	}
	if f.workers < 0 {
		return lab.Spec{}, fmt.Errorf("--workers %d: must not be negative", f.workers)
	}
	spec := lab.DefaultSpec(f.workers)
	spec.Mode = lab.Mode(f.mode)
	spec.PodRunTime.Duration = f.podRunTime
	ops, err := lab.ParseOperators(f.operators)
	if err != nil {
		return lab.Spec{}, fmt.Errorf("--operators: %w", err)
	}
	spec.WithOperators(ops...)
	if f.basePort != 0 {
		if f.basePort < 1024 || f.basePort+f.workers > 65535 {
			return lab.Spec{}, fmt.Errorf("--base-port %d: ports %d-%d must lie in 1024-65535", f.basePort, f.basePort, f.basePort+f.workers)
		}
		spec.Management.APIServerPort = f.basePort
		for i := range spec.Workers {
			spec.Workers[i].APIServerPort = f.basePort + 1 + i
		}
	}
	spec.Default()
	if err := spec.Validate(); err != nil {
		return lab.Spec{}, fmt.Errorf("lab spec: %w", err)
	}
	return spec, nil
}

func downCommand(dir *string) *cobra.Command {
	return &cobra.Command{
		Use:   "down",
		Short: "Stop the lab and remove its files (also after its creator crashed)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, err := lab.ResolveDir(*dir)
			if err != nil {
				return err
			}
			started := time.Now()
			stopped, err := lab.Down(cmd.Context(), Providers(), d)
			if err != nil {
				return err
			}
			if stopped {
				fmt.Fprintf(cmd.OutOrStdout(), "lab in %s stopped in %s\n", d, time.Since(started).Round(100*time.Millisecond))
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "no lab in %s\n", d)
			}
			return nil
		},
	}
}

func statusCommand(dir *string) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Show each cluster: API server, nodes and free GPUs",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			l, err := open(cmd.Context(), *dir)
			if err != nil {
				return err
			}
			printStatus(cmd.Context(), cmd.OutOrStdout(), l)
			return nil
		},
	}
}

func kubeconfigCommand(dir *string) *cobra.Command {
	return &cobra.Command{
		Use:   "kubeconfig CLUSTER",
		Short: "Print the path of a cluster's admin kubeconfig",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			l, err := open(cmd.Context(), *dir)
			if err != nil {
				return err
			}
			c, err := lab.Find(l, args[0])
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), c.KubeconfigPath())
			return nil
		},
	}
}

func open(ctx context.Context, dirFlag string) (lab.Lab, error) {
	d, err := lab.ResolveDir(dirFlag)
	if err != nil {
		return nil, err
	}
	l, err := lab.Open(ctx, Providers(), d)
	if errors.Is(err, lab.ErrNoLab) {
		return nil, fmt.Errorf("no lab in %s: start one with 'fleetq-lab up'", d)
	}
	return l, err
}

// printStatus writes one row per cluster, then the first problem Check finds, if any.
func printStatus(ctx context.Context, out io.Writer, l lab.Lab) {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CLUSTER\tROLE\tREGION\tMODE\tAPI SERVER\tNODES (READY/ALL)\tFREE GPUS\tGPU")
	for _, st := range lab.ReadStatus(ctx, l, 5*time.Second) {
		if st.Err != nil {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\tunreachable: %s\t\t\n", st.Name, st.Role, st.Region, st.Mode, st.Server, short(st.Err))
			continue
		}
		gpus := "-"
		if total := st.Capacity.Allocatable[lab.GPUResource]; !total.IsZero() {
			free := st.Capacity.Free(lab.GPUResource)
			gpus = fmt.Sprintf("%s/%s", free.String(), total.String())
		}
		product := strings.Join(st.GPUProducts, ",")
		if product == "" {
			product = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d/%d\t%s\t%s\n", st.Name, st.Role, st.Region, st.Mode, st.Server,
			st.Capacity.ReadyNodes, st.Capacity.Nodes, gpus, product)
	}
	tw.Flush()
	checkCtx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := l.Check(checkCtx); err != nil {
		fmt.Fprintf(out, "problem: %s\n", short(err))
	}
}

// short keeps the first line of an error, for table cells.
func short(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}
