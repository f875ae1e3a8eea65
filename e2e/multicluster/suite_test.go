// Package multicluster runs fleetq's dispatch end to end on the lab: a management cluster (with its
// own job controller, training-operator, ray-operator and a CPU node, so a job wrongly left to it
// would get pods there) and three workers with their own fleetq-agent — us-east and us-west with
// A100 nodes and both operators, eu-west with L4 nodes and no operator. us-east and eu-west are registered with
// MultiKueueClusters, us-west through a Cluster API Cluster and its kubeconfig Secret.
package multicluster

import (
	"context"
	"net/url"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2" //nolint:revive // Ginkgo's DSL reads best unqualified.
	. "github.com/onsi/gomega"    //nolint:revive // Gomega's DSL reads best unqualified.
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	fleetq "github.com/fleetq/fleetq/api/fleetq/v1alpha1"
	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/config"
	"github.com/fleetq/fleetq/config/crd"
	"github.com/fleetq/fleetq/dispatch/registry"
	"github.com/fleetq/fleetq/e2e/components"
	"github.com/fleetq/fleetq/e2e/framework"
	"github.com/fleetq/fleetq/e2e/kinds"
	"github.com/fleetq/fleetq/e2e/lab"
	"github.com/fleetq/fleetq/e2e/manifest"
	"github.com/fleetq/fleetq/e2e/overlap"
)

const (
	// wait bounds every Eventually: generous, since a 2-core CI machine runs four clusters here.
	wait = 2 * time.Minute
	poll = 200 * time.Millisecond
)

var (
	env       *framework.Environment
	mgmt      client.Client
	manager   *framework.Component
	mgrCfg    *config.Configuration
	agents    = map[string]*framework.Component{}
	watcher   = overlap.New()
	workers   = []string{"us-east", "us-west", "eu-west"}
	stopWatch context.CancelFunc
)

func TestMultiCluster(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Multi-cluster dispatch with fleetq-agent")
}

func labSpec() *lab.Spec {
	east, west, eu := lab.A100Pool(), lab.A100Pool(), lab.L4Pool()
	east.Count, west.Count, eu.Count = 2, 2, 2
	return &lab.Spec{
		Mode:       lab.ModeFull,
		PodRunTime: metav1.Duration{Duration: time.Hour},
		// The management cluster runs the operators too, so a Kubeflow or Ray job left to it would
		// get pods there; eu-west runs none, so it cannot take those kinds.
		Management: lab.ClusterSpec{Name: "management", NodePools: []lab.NodePool{lab.CPUPool(1)}, Operators: lab.Operators},
		Workers: []lab.ClusterSpec{
			{Name: "us-east", NodePools: []lab.NodePool{east}, Operators: lab.Operators},
			{Name: "us-west", NodePools: []lab.NodePool{west}, Operators: lab.Operators},
			{Name: "eu-west", NodePools: []lab.NodePool{eu}},
		},
	}
}

// clusterAPICRD is Cluster API's Cluster CRD from the pinned cluster-api module.
func clusterAPICRD() string {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/cluster-api").Output()
	Expect(err).NotTo(HaveOccurred(), "locating the cluster-api module")
	return filepath.Join(strings.TrimSpace(string(out)), "core", "config", "crd", "bases")
}

var _ = BeforeSuite(func(ctx SpecContext) {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	crds, err := crd.CustomResourceDefinitions()
	Expect(err).NotTo(HaveOccurred())
	env, err = framework.Setup(ctx, framework.Config{Spec: labSpec(), CRDs: crds, Progress: GinkgoWriter})
	Expect(err).NotTo(HaveOccurred())
	mgmt = env.Management().Client()
	capi, err := framework.LoadCRDs(clusterAPICRD())
	Expect(err).NotTo(HaveOccurred())
	var clusterCRD []*apiextensionsv1.CustomResourceDefinition
	for _, c := range capi {
		if c.Name == "clusters.cluster.x-k8s.io" {
			clusterCRD = append(clusterCRD, c)
		}
	}
	Expect(clusterCRD).To(HaveLen(1))
	Expect(framework.InstallCRDs(ctx, env.Management(), clusterCRD)).To(Succeed())

	mgrCfg, err = components.ManagerConfig()
	Expect(err).NotTo(HaveOccurred())
	// A fail-over (leaseDuration + retryPeriod) ends before the workers fence (fenceTimeout),
	// which ends before the manager places a lost worker's jobs elsewhere (workerLostTimeout).
	mgrCfg.LeaderElection.LeaseDuration = &metav1.Duration{Duration: 5 * time.Second}
	mgrCfg.LeaderElection.RenewDeadline = &metav1.Duration{Duration: 4 * time.Second}
	mgrCfg.LeaderElection.RetryPeriod = &metav1.Duration{Duration: time.Second}
	mgrCfg.MultiCluster.FenceTimeout = &metav1.Duration{Duration: 8 * time.Second}
	mgrCfg.MultiCluster.WorkerLostTimeout = &metav1.Duration{Duration: 20 * time.Second}
	mgrCfg.MultiCluster.LeaseRenewInterval = &metav1.Duration{Duration: time.Second}
	mgrCfg.MultiCluster.ProbeInterval = &metav1.Duration{Duration: time.Second}
	mgrCfg.MultiCluster.GCInterval = &metav1.Duration{Duration: 5 * time.Second}
	mgrCfg.MultiCluster.ClusterAPISelector = &metav1.LabelSelector{MatchLabels: map[string]string{"fleetq.dev/worker": "true"}}
	// RayClusters go through the generic adapter, in the manager and in every agent; plain Pods
	// (opt-in, as in Kueue) are integrated too.
	kinds.UseGenericRayCluster(&mgrCfg.Integrations)
	mgrCfg.Integrations.Frameworks = append(mgrCfg.Integrations.Frameworks, config.FrameworkPod)
	Expect(mgrCfg.Validate()).To(BeEmpty())

	for _, w := range workers {
		acfg, err := components.AgentConfig(w, mgrCfg)
		Expect(err).NotTo(HaveOccurred())
		kinds.UseGenericRayCluster(&acfg.Integrations)
		acfg.Integrations.Frameworks = append(acfg.Integrations.Frameworks, config.FrameworkPod)
		agents[w], err = components.StartAgent(ctx, env, acfg)
		Expect(err).NotTo(HaveOccurred())
	}
	manager, err = components.StartManager(ctx, env, "management", mgrCfg)
	Expect(err).NotTo(HaveOccurred())
	Expect(components.WaitForWebhooks(ctx, mgmt, time.Minute)).To(Succeed())

	// us-east and eu-west as users register MultiKueue workers; us-west through Cluster API.
	Expect(components.RegisterWorker(ctx, env, mgrCfg, "us-east")).To(Succeed())
	Expect(components.RegisterWorker(ctx, env, mgrCfg, "eu-west")).To(Succeed())
	registerClusterAPI(ctx, "us-west")

	for _, ns := range []string{"research", "inference"} {
		Expect(mgmt.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	}
	dir := filepath.Join("..", "testdata", "multicluster")
	Expect(manifest.Apply(ctx, mgmt, filepath.Join(dir, "flavors.yaml"), filepath.Join(dir, "dispatch.yaml"), filepath.Join(dir, "queues.yaml"))).To(Succeed())

	watchCtx, cancel := context.WithCancel(context.Background())
	stopWatch = cancel
	for _, w := range workers {
		Expect(watcher.Watch(watchCtx, w, env.Cluster(w).Clientset())).To(Succeed())
	}
	Expect(watcher.Watch(watchCtx, "management", env.Management().Clientset())).To(Succeed())

	Eventually(func(g Gomega) {
		for _, w := range workers {
			mkc := &kueue.MultiKueueCluster{}
			g.Expect(mgmt.Get(ctx, client.ObjectKey{Name: w}, mkc)).To(Succeed())
			g.Expect(meta.IsStatusConditionTrue(mkc.Status.Conditions, kueue.MultiKueueClusterActive)).To(BeTrue(), "worker %s active: %v", w, mkc.Status.Conditions)
			// Published once the manager's placement has read the worker's report: until then the
			// first spec's job would go to the next worker in preference order.
			g.Expect(mkc.Annotations).To(HaveKey(registry.CapacityAnnotation), "the manager has not read %s's capacity report yet", w)
			rep := &fleetq.CapacityReport{}
			g.Expect(env.Cluster(w).Client().Get(ctx, client.ObjectKey{Namespace: mgrCfg.Namespace, Name: w}, rep)).To(Succeed())
			// The manager has synced its flavors there and the agent reports capacity per flavor.
			g.Expect(rep.Status.Flavors).NotTo(BeEmpty(), "worker %s reports no flavor yet", w)
		}
		for _, name := range []string{"research-gpu-cq", "inference-gpu-cq"} {
			cq := &kueue.ClusterQueue{}
			g.Expect(mgmt.Get(ctx, client.ObjectKey{Name: name}, cq)).To(Succeed())
			g.Expect(meta.IsStatusConditionTrue(cq.Status.Conditions, kueue.ClusterQueueActive)).To(BeTrue(), "%s active: %v", name, cq.Status.Conditions)
		}
	}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(poll).Should(Succeed())
}, NodeTimeout(10*time.Minute))

// registerClusterAPI registers a lab worker the Cluster API way: a Cluster object labelled for
// the manager's selector and its <name>-kubeconfig Secret (key "value").
func registerClusterAPI(ctx context.Context, worker string) {
	sec, err := framework.WorkerKubeconfigSecret(env.Cluster(worker), mgrCfg.Namespace, worker+"-kubeconfig")
	Expect(err).NotTo(HaveOccurred())
	sec.Data = map[string][]byte{"value": sec.Data[framework.KubeconfigSecretKey]}
	sec.Labels = map[string]string{clusterv1.ClusterNameLabel: worker}
	Expect(mgmt.Create(ctx, sec)).To(Succeed())
	server, err := url.Parse(env.Cluster(worker).Server())
	Expect(err).NotTo(HaveOccurred())
	port, err := strconv.Atoi(server.Port())
	Expect(err).NotTo(HaveOccurred())
	cl := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: mgrCfg.Namespace, Name: worker, Labels: map[string]string{"fleetq.dev/worker": "true"}},
		// The lab made this cluster, not a Cluster API provider: the object only describes it.
		Spec: clusterv1.ClusterSpec{ControlPlaneEndpoint: clusterv1.APIEndpoint{Host: server.Hostname(), Port: int32(port)}},
	}
	Expect(mgmt.Create(ctx, cl)).To(Succeed())
}

var _ = AfterSuite(func(ctx SpecContext) {
	if stopWatch != nil {
		stopWatch()
	}
	if env == nil {
		return
	}
	if CurrentSpecReport().Failed() {
		env.DumpLogs(GinkgoWriter, 40)
	}
	Expect(env.Teardown(ctx)).To(Succeed())
}, NodeTimeout(5*time.Minute))
