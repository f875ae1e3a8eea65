// Package singlecluster runs the Kueue GPU quota tutorial, step by step and with its own
// manifests, against fleetq-manager on one real cluster of the lab (API server, scheduler,
// controller-manager and kwok nodes: CPU nodes and tainted A100 nodes), and the Kubeflow and Ray
// job kinds with training-operator and ray-operator running there.
package singlecluster

import (
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2" //nolint:revive // Ginkgo's DSL reads best unqualified.
	. "github.com/onsi/gomega"    //nolint:revive // Gomega's DSL reads best unqualified.
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/fleetq/fleetq/config"
	"github.com/fleetq/fleetq/config/crd"
	"github.com/fleetq/fleetq/e2e/components"
	"github.com/fleetq/fleetq/e2e/framework"
	"github.com/fleetq/fleetq/e2e/kinds"
	"github.com/fleetq/fleetq/e2e/lab"
)

var (
	env     *framework.Environment
	k8s     client.Client
	manager *framework.Component
	mgrCfg  *config.Configuration
)

func TestSingleCluster(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Single cluster: the tutorial on fleetq-manager")
}

var _ = BeforeSuite(func(ctx SpecContext) {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	crds, err := crd.CustomResourceDefinitions()
	Expect(err).NotTo(HaveOccurred())
	a100 := lab.A100Pool()
	a100.Count = 1
	// The job-kind specs get A100 nodes of their own, so they never wait for the tutorial's pods.
	kindsPool := lab.A100Pool()
	kindsPool.Name, kindsPool.Count = kindsPoolName, 1
	spec := lab.Spec{
		// Pods run until their job is deleted, as the tutorial's 60-second sleeps would while a
		// person reads along; specs that need completion set a shorter run time per pod.
		PodRunTime: metav1.Duration{Duration: time.Hour},
		Management: lab.ClusterSpec{Name: "management", NodePools: []lab.NodePool{lab.CPUPool(2), a100, kindsPool}, Operators: lab.Operators},
	}
	env, err = framework.Setup(ctx, framework.Config{Spec: &spec, CRDs: crds, Progress: GinkgoWriter})
	Expect(err).NotTo(HaveOccurred())
	k8s = env.Management().Client()
	mgrCfg, err = components.ManagerConfig()
	Expect(err).NotTo(HaveOccurred())
	// RayClusters go through the generic adapter, described as a user would for a kind fleetq has
	// no adapter for: the generic adapter against a real operator.
	kinds.UseGenericRayCluster(&mgrCfg.Integrations)
	// Plain Pods are opt-in, as in Kueue.
	mgrCfg.Integrations.Frameworks = append(mgrCfg.Integrations.Frameworks, config.FrameworkPod)
	Expect(mgrCfg.Validate()).To(BeEmpty())
	manager, err = components.StartManager(ctx, env, "management", mgrCfg)
	Expect(err).NotTo(HaveOccurred())
	Expect(components.WaitForWebhooks(ctx, k8s, time.Minute)).To(Succeed())
}, NodeTimeout(10*time.Minute))

var _ = AfterSuite(func(ctx SpecContext) {
	if env == nil {
		return
	}
	if CurrentSpecReport().Failed() {
		env.DumpLogs(GinkgoWriter, 40)
	}
	Expect(env.Teardown(ctx)).To(Succeed())
}, NodeTimeout(5*time.Minute))
