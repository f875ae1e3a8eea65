package conformance

import (
	"flag"
	"os"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2" //nolint:revive // Ginkgo's DSL reads best unqualified.
	. "github.com/onsi/gomega"    //nolint:revive // Gomega's DSL reads best unqualified.
	corev1 "k8s.io/api/core/v1"

	"github.com/fleetq/fleetq/config/crd"
	"github.com/fleetq/fleetq/e2e/framework"
	"github.com/fleetq/fleetq/e2e/lab"
)

// env is the lab of this suite: the default three clusters in full mode, started once.
var env *framework.Environment

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(m.Run())
}

func TestLabConformance(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Lab conformance (local provider)")
}

var _ = BeforeSuite(func(ctx SpecContext) {
	crds, err := crd.CustomResourceDefinitions()
	Expect(err).NotTo(HaveOccurred())
	started := time.Now()
	spec := lab.DefaultSpec(2)
	// The job operators run in us-east only: the other clusters show a lab without them.
	spec.Workers[0].Operators = lab.Operators
	env, err = framework.Setup(ctx, framework.Config{Spec: &spec, CRDs: crds, Progress: GinkgoWriter})
	Expect(err).NotTo(HaveOccurred())
	AddReportEntry("lab up (3 clusters, full mode, CRDs installed, operators in us-east)", time.Since(started).Round(100*time.Millisecond).String())
}, NodeTimeout(10*time.Minute))

var _ = AfterSuite(func(ctx SpecContext) {
	if env == nil {
		return
	}
	if !suitePassed {
		env.DumpLogs(GinkgoWriter, 30)
	}
	Expect(env.Teardown(ctx)).To(Succeed())
}, NodeTimeout(5*time.Minute))

// suitePassed turns false on the first failed spec, so AfterSuite can print the lab's logs.
var suitePassed = true

var _ = ReportAfterEach(func(r SpecReport) {
	if r.Failed() {
		suitePassed = false
	}
})

var gpuToleration = []corev1.Toleration{{Key: string(lab.GPUResource), Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}

var _ = Describe("The local lab", Ordered, func() {
	worker := func(name string) framework.ClusterProxy { return env.Cluster(name) }

	Context("on us-east (A100 nodes, tainted)", func() {
		JobRunsToCompletionSpec("runs a Job of 2 one-GPU pods to Complete on the A100 nodes", func() JobInput {
			return JobInput{
				Cluster: worker("us-east"), Pods: 2, Resource: lab.GPUResource, Quantity: "1",
				NodeSelector: map[string]string{lab.GPUProductLabel: lab.A100}, Tolerations: gpuToleration,
				RunTime: time.Second,
			}
		})
		OperatorJobsRunToCompletionSpec(func() OperatorInput {
			return OperatorInput{Cluster: worker("us-east"), Tolerations: gpuToleration}
		})
		UnschedulablePodSpec(func() UnschedulableInput {
			return UnschedulableInput{
				Cluster: worker("us-east"), Resource: lab.GPUResource,
				NodeSelector: map[string]string{lab.GPUProductLabel: lab.A100}, Tolerations: gpuToleration,
			}
		})
	})

	Context("on the management cluster (CPU pool)", func() {
		JobRunsToCompletionSpec("runs a CPU Job to Complete on the CPU nodes", func() JobInput {
			return JobInput{
				Cluster: env.Management(), Pods: 3, Resource: corev1.ResourceCPU, Quantity: "2",
				NodeSelector: map[string]string{lab.PoolLabel: "cpu"}, RunTime: time.Second,
			}
		})
	})

	Context("on every cluster", func() {
		for _, name := range []string{"management", "us-east", "eu-west"} {
			CRDsServedSpec(func() ClusterInput { return ClusterInput{Cluster: env.Cluster(name)} })
		}
	})

	Context("fault functions on eu-west", func() {
		APIServerRestartSpec(func() ClusterInput { return ClusterInput{Cluster: worker("eu-west")} })
		FaultsSpec(func() ClusterInput { return ClusterInput{Cluster: worker("eu-west")} })
	})

	Context("components on us-east", func() {
		ComponentsSpec(func() ComponentsInput { return ComponentsInput{Env: env, Cluster: "us-east"} })
	})

	Context("down", func() {
		DownLeavesNothingSpec(func() DownInput { return DownInput{Env: env} })
	})
})
