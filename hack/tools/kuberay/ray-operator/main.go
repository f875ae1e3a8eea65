// Command ray-operator runs KubeRay ray-operator v1.5.0's RayCluster and RayJob controllers
// against one cluster of the lab.
//
// The controllers are upstream's, set up as upstream's main sets them up (webhooks off, as
// upstream's default). One part is the lab's own: the lab's nodes are kwok's, so no Ray runtime
// runs in the head pod and no Ray dashboard answers. The controllers reach the dashboard through
// the ClientProvider they are given, and the lab's provider (labDashboard) answers as a Ray
// runtime would for a job submitted in K8sJobMode: the Ray job runs while its submitter Job
// (`ray job submit --wait`) runs, and ends as it ends.
package main

import (
	"flag"
	"os"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	"github.com/ray-project/kuberay/ray-operator/controllers/ray"
)

func main() {
	var metricsAddr, probeAddr string
	var concurrency int
	flag.StringVar(&metricsAddr, "metrics-addr", "0", "The address the metric endpoint binds to (0 turns it off).")
	flag.StringVar(&probeAddr, "health-probe-bind-address", "127.0.0.1:0", "The address the probe endpoint binds to.")
	flag.IntVar(&concurrency, "reconcile-concurrency", 2, "Concurrent reconciles per controller.")
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	log := ctrl.Log.WithName("setup")
	fail := func(err error, msg string) {
		if err != nil {
			log.Error(err, msg)
			os.Exit(1)
		}
	}

	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(rayv1.AddToScheme(scheme))

	cfg := ctrl.GetConfigOrDie()
	cfg.UserAgent = "kuberay-operator/v1.5.0 (fleetq lab)"
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress: probeAddr,
	})
	fail(err, "creating the manager")

	ctx := ctrl.SetupSignalHandler()
	fail(ray.NewReconciler(ctx, mgr, ray.RayClusterReconcilerOptions{}).SetupWithManager(mgr, concurrency), "setting up the RayCluster controller")
	provider := labProvider{reader: mgr.GetAPIReader()}
	fail(ray.NewRayJobReconciler(ctx, mgr, ray.RayJobReconcilerOptions{}, provider).SetupWithManager(mgr, concurrency), "setting up the RayJob controller")
	fail(mgr.AddHealthzCheck("healthz", healthz.Ping), "adding the health check")
	fail(mgr.AddReadyzCheck("readyz", healthz.Ping), "adding the ready check")
	log.Info("starting")
	fail(mgr.Start(ctx), "running the manager")
}
