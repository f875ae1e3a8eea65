// Command kubectl-fleetq is a kubectl plugin (`kubectl fleetq ...`) that shows what fleetq-manager
// publishes in the management cluster: the worker clusters with their health and capacity
// (clusters), the ClusterQueues' and LocalQueues' workloads (queues), and why a Job waits or where
// it runs and why there (explain); stop and resume hold and release a queue (spec.stopPolicy). It
// talks to the management cluster only; users need no credentials for the workers.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
)

// view is what every subcommand reads from and writes to.
type view struct {
	client    client.Client
	namespace string
	out       io.Writer
	now       func() time.Time
}

func scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(kueue.AddToScheme(s))
	return s
}

// flags are kubectl's own connection flags, with the same names and meaning.
type flags struct {
	kubeconfig, context, namespace string
}

func (f *flags) view(out io.Writer) (*view, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = f.kubeconfig
	overrides := &clientcmd.ConfigOverrides{CurrentContext: f.context}
	overrides.Context.Namespace = f.namespace
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
	rc, err := cc.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	ns, _, err := cc.Namespace()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig namespace: %w", err)
	}
	rc.UserAgent = "kubectl-fleetq"
	c, err := client.New(rc, client.Options{Scheme: scheme()})
	if err != nil {
		return nil, fmt.Errorf("client for %s: %w", rc.Host, err)
	}
	return &view{client: c, namespace: ns, out: out, now: time.Now}, nil
}

func newCommand(out io.Writer) *cobra.Command {
	f := &flags{}
	root := &cobra.Command{
		Use:           "kubectl-fleetq",
		Short:         "Show fleetq's worker clusters, queues and why a job waits or runs where it does",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&f.kubeconfig, "kubeconfig", "", "path to the kubeconfig file of the management cluster")
	root.PersistentFlags().StringVar(&f.context, "context", "", "kubeconfig context to use")
	root.PersistentFlags().StringVarP(&f.namespace, "namespace", "n", "", "namespace of the job (explain) and of the LocalQueues (queues)")
	run := func(fn func(context.Context, *view, []string) error) func(*cobra.Command, []string) error {
		return func(cmd *cobra.Command, args []string) error {
			v, err := f.view(out)
			if err != nil {
				return err
			}
			return fn(cmd.Context(), v, args)
		}
	}
	root.AddCommand(
		&cobra.Command{
			Use:   "clusters",
			Short: "Worker clusters: connected or why not, and free/total capacity per flavor as their agents report it",
			Args:  cobra.NoArgs,
			RunE:  run(func(ctx context.Context, v *view, _ []string) error { return v.clusters(ctx) }),
		},
		&cobra.Command{
			Use:   "queues",
			Short: "ClusterQueues (and the namespace's LocalQueues): pending, reserving, admitted workloads and what they borrow",
			Args:  cobra.NoArgs,
			RunE:  run(func(ctx context.Context, v *view, _ []string) error { return v.queues(ctx) }),
		},
		&cobra.Command{
			Use:   "explain JOB",
			Short: "Why a Job is pending, or where it runs and why there",
			Args:  cobra.ExactArgs(1),
			RunE:  run(func(ctx context.Context, v *view, args []string) error { return v.explain(ctx, args[0]) }),
		},
		stopCommand(run),
		&cobra.Command{
			Use:   "resume clusterqueue|localqueue NAME",
			Short: "Let a stopped ClusterQueue or LocalQueue admit workloads again (spec.stopPolicy: None)",
			Args:  cobra.ExactArgs(2),
			RunE: run(func(ctx context.Context, v *view, args []string) error {
				return v.setStopPolicy(ctx, args[0], args[1], kueue.None)
			}),
		},
	)
	return root
}

// stopCommand holds a queue as kueuectl's stop does: HoldAndDrain, or Hold with
// --keep-already-running.
func stopCommand(run func(func(context.Context, *view, []string) error) func(*cobra.Command, []string) error) *cobra.Command {
	var keep bool
	cmd := &cobra.Command{
		Use:   "stop clusterqueue|localqueue NAME",
		Short: "Stop a ClusterQueue or LocalQueue: it admits nothing new and evicts what it admitted (spec.stopPolicy: HoldAndDrain)",
		Args:  cobra.ExactArgs(2),
		RunE: run(func(ctx context.Context, v *view, args []string) error {
			policy := kueue.HoldAndDrain
			if keep {
				policy = kueue.Hold
			}
			return v.setStopPolicy(ctx, args[0], args[1], policy)
		}),
	}
	cmd.Flags().BoolVar(&keep, "keep-already-running", false, "let admitted workloads run on (spec.stopPolicy: Hold)")
	return cmd
}

func main() {
	cmd := newCommand(os.Stdout)
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		fmt.Fprintf(os.Stderr, "kubectl fleetq: %v\n", err)
		os.Exit(1)
	}
}
