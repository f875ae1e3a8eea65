// Command training-operator runs Kubeflow training-operator v1.8.1's job controllers (PyTorchJob,
// TFJob, XGBoostJob, PaddleJob, MPIJob) against one cluster of the lab.
//
// It is the upstream command without its webhooks: upstream's main waits for a certificate
// rotator that writes to a fixed /tmp directory and serves on a fixed port, which several
// operators on one host (one per lab cluster) cannot share, and the controllers do not need the
// webhooks (they only validate and default specs). Everything else is upstream's code: the
// controllers are set up exactly as its main does.
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
	schedulerpluginsv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	volcanov1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	kubeflowv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	"github.com/kubeflow/training-operator/pkg/config"
	controllerv1 "github.com/kubeflow/training-operator/pkg/controller.v1"
	"github.com/kubeflow/training-operator/pkg/controller.v1/common"
)

func main() {
	var metricsAddr, probeAddr string
	var threads int
	var schemes controllerv1.EnabledSchemes
	flag.StringVar(&metricsAddr, "metrics-bind-address", "0", "The address the metric endpoint binds to (0 turns it off).")
	flag.StringVar(&probeAddr, "health-probe-bind-address", "127.0.0.1:0", "The address the probe endpoint binds to.")
	flag.IntVar(&threads, "controller-threads", 2, "Worker threads per controller.")
	// Upstream's flags for the init containers it adds (PyTorch workers wait for their master,
	// MPI launchers get kubectl), with upstream's defaults.
	flag.StringVar(&config.Config.PyTorchInitContainerImage, "pytorch-init-container-image", config.PyTorchInitContainerImageDefault, "The image for pytorch init container")
	flag.StringVar(&config.Config.PyTorchInitContainerTemplateFile, "pytorch-init-container-template-file", config.PyTorchInitContainerTemplateFileDefault, "The template file for pytorch init container")
	flag.IntVar(&config.Config.PyTorchInitContainerMaxTries, "pytorch-init-container-max-tries", config.PyTorchInitContainerMaxTriesDefault, "The number of tries for the pytorch init container")
	flag.StringVar(&config.Config.MPIKubectlDeliveryImage, "mpi-kubectl-delivery-image", config.MPIKubectlDeliveryImageDefault, "The image for mpi launcher init container")
	flag.Var(&schemes, "enable-scheme", "A kind to run (pytorchjob, tfjob, ...), repeated; all but MXJob when unset.")
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	log := ctrl.Log.WithName("setup")

	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(kubeflowv1.AddToScheme(scheme))
	utilruntime.Must(volcanov1beta1.AddToScheme(scheme))
	utilruntime.Must(schedulerpluginsv1alpha1.AddToScheme(scheme))

	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress: probeAddr,
	})
	if err != nil {
		log.Error(err, "creating the manager")
		os.Exit(1)
	}
	if schemes.Empty() {
		// MXJob is deprecated in v1.8 and its CRD is not installed by the lab.
		schemes = controllerv1.EnabledSchemes{kubeflowv1.PyTorchJobKind, kubeflowv1.TFJobKind,
			kubeflowv1.XGBoostJobKind, kubeflowv1.PaddleJobKind, kubeflowv1.MPIJobKind}
	}
	for _, s := range schemes {
		setup := controllerv1.SupportedSchemeReconciler[s]
		if err := setup(mgr, common.GenNonGangSchedulerSetupFunc(), threads); err != nil {
			log.Error(err, "setting up a controller", "kind", s)
			os.Exit(1)
		}
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		log.Error(err, "adding the health check")
		os.Exit(1)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		log.Error(err, "adding the ready check")
		os.Exit(1)
	}
	log.Info("starting", "kinds", schemes)
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Error(err, "running the manager")
		os.Exit(1)
	}
}
