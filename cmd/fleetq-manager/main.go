// Command fleetq-manager runs fleetq's admission engine, job integration and dispatch on the
// management cluster: flags → configuration → wired manager → run.
package main

import (
	"flag"
	"fmt"
	"os"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/fleetq/fleetq/config"
	"github.com/fleetq/fleetq/manager/setup"
)

func main() {
	configFile := flag.String("config", "", "path to the manager's configuration file (config.fleetq.dev/v1alpha1 Configuration); defaults apply when empty")
	zopts := zap.Options{}
	zopts.BindFlags(flag.CommandLine)
	flag.Parse()

	log := zap.New(zap.UseFlagOptions(&zopts))
	ctrl.SetLogger(log)

	cfg, err := config.Load(*configFile)
	if err != nil {
		fmt.Fprintf(os.Stderr, "fleetq-manager: %v\n", err)
		os.Exit(2)
	}
	restCfg, err := ctrl.GetConfig() // --kubeconfig flag, KUBECONFIG, or in-cluster
	if err != nil {
		fmt.Fprintf(os.Stderr, "fleetq-manager: no cluster to talk to: %v\n", err)
		os.Exit(2)
	}
	mgr, err := setup.New(setup.Options{Config: cfg, RestConfig: restCfg, Log: log})
	if err != nil {
		log.Error(err, "Wiring the manager")
		os.Exit(1)
	}
	log.Info("Starting fleetq-manager", "namespace", cfg.Namespace, "qps", *cfg.ClientConnection.QPS, "burst", *cfg.ClientConnection.Burst)
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Error(err, "fleetq-manager stopped")
		os.Exit(1)
	}
}
