// Command fleetq-agent runs in a worker cluster with credentials for that cluster only: it publishes
// the cluster's CapacityReport and admits, preempts and fences the workloads fleetq-manager copies
// there. Flags → configuration → wired agent → run.
package main

import (
	"flag"
	"fmt"
	"os"

	"go.uber.org/zap/zapcore"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/fleetq/fleetq/config"
	"github.com/fleetq/fleetq/worker/setup"
)

func main() {
	configFile := flag.String("config", "", "path to the agent's configuration file (config.fleetq.dev/v1alpha1 AgentConfiguration); defaults apply when empty")
	clusterName := flag.String("cluster-name", "", "this worker's name on the manager (its MultiKueueCluster or Cluster API Cluster); overrides clusterName in the file")
	verbosity := flag.Int("v", 0, "log verbosity: 1 logs each admission, 2 each pass and report write (same as --zap-log-level=<n>)")
	zopts := zap.Options{}
	zopts.BindFlags(flag.CommandLine)
	flag.Parse() // controller-runtime registers --kubeconfig on the default flag set
	if *verbosity > 0 {
		zopts.Level = zapcore.Level(-*verbosity)
	}

	log := zap.New(zap.UseFlagOptions(&zopts))
	ctrl.SetLogger(log)

	cfg, err := config.LoadAgent(*configFile, *clusterName)
	if err != nil {
		fmt.Fprintf(os.Stderr, "fleetq-agent: %v\n", err)
		os.Exit(2)
	}
	restCfg, err := ctrl.GetConfig() // --kubeconfig flag, KUBECONFIG, or in-cluster
	if err != nil {
		fmt.Fprintf(os.Stderr, "fleetq-agent: no cluster to talk to: %v\n", err)
		os.Exit(2)
	}
	agent, err := setup.New(setup.Options{Config: cfg, RestConfig: restCfg, Log: log})
	if err != nil {
		log.Error(err, "Wiring the agent")
		os.Exit(1)
	}
	log.Info("Starting fleetq-agent", "cluster", cfg.ClusterName, "namespace", cfg.Namespace, "origin", cfg.Origin,
		"qps", *cfg.ClientConnection.QPS, "burst", *cfg.ClientConnection.Burst)
	if err := agent.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Error(err, "fleetq-agent stopped")
		os.Exit(1)
	}
}
