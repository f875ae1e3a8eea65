// Package integration runs fleetq-agent in-process against a real worker cluster of the lab
// (kube-apiserver, kube-scheduler, kube-controller-manager and kwok with fake A100 and L4 nodes)
// and plays the manager's side of the contract by hand: synced flavors, copied Jobs and Workloads,
// and the manager's Lease.
package integration

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2" //nolint:revive // Ginkgo's DSL reads best unqualified.
	. "github.com/onsi/gomega"    //nolint:revive // Gomega's DSL reads best unqualified.
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	fleetq "github.com/fleetq/fleetq/api/fleetq/v1alpha1"
	"github.com/fleetq/fleetq/config"
	"github.com/fleetq/fleetq/config/crd"
	"github.com/fleetq/fleetq/e2e/framework"
	"github.com/fleetq/fleetq/e2e/lab"
	"github.com/fleetq/fleetq/worker/setup"
)

const (
	worker    = "us-east"
	agentNS   = "fleetq-system"
	origin    = "fleetq-test"
	waitLong  = 2 * time.Minute
	poll      = 200 * time.Millisecond
	leaseName = fleetq.ManagerLeasePrefix + origin
)

var (
	env        *framework.Environment
	agent      *framework.Component
	k8s        client.Client
	healthPort int
)

func init() {
	// The harness's clients know the kueue kinds; the specs also read fleetq.dev CapacityReports.
	utilruntime.Must(fleetq.AddToScheme(framework.Scheme))
}

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(m.Run())
}

func TestAgent(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "fleetq-agent on a lab worker")
}

// labSpec is a management cluster (API server only: the manager's side is played by the specs) and
// one full worker with two A100 nodes (8 GPUs, tainted) and two L4 nodes (4 GPUs).
func labSpec() *lab.Spec {
	a100, l4 := lab.A100Pool(), lab.L4Pool()
	a100.Count, l4.Count = 2, 2
	return &lab.Spec{
		Mode:       lab.ModeFull,
		Management: lab.ClusterSpec{Name: "management", Mode: lab.ModeAPIServer},
		Workers:    []lab.ClusterSpec{{Name: worker, NodePools: []lab.NodePool{a100, l4}}},
	}
}

var _ = BeforeSuite(func(ctx SpecContext) {
	ctrllog.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	crds, err := crd.CustomResourceDefinitions()
	Expect(err).NotTo(HaveOccurred())
	started := time.Now()
	env, err = framework.Setup(ctx, framework.Config{Spec: labSpec(), CRDs: crds, Progress: GinkgoWriter})
	Expect(err).NotTo(HaveOccurred())
	AddReportEntry("lab up (API-server management + full worker, CRDs installed)", time.Since(started).Round(100*time.Millisecond).String())
	k8s = env.Cluster(worker).Client()
	Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: agentNS}})).To(Succeed())

	cfg := &config.AgentConfiguration{
		ClusterName: worker,
		Namespace:   agentNS,
		Origin:      origin,
		Metrics:     config.Endpoint{BindAddress: "0"},
		LeaderElection: config.LeaderElection{
			LeaseDuration: &metav1.Duration{Duration: 4 * time.Second},
			RenewDeadline: &metav1.Duration{Duration: 3 * time.Second},
			RetryPeriod:   &metav1.Duration{Duration: time.Second},
		},
		CapacityResyncPeriod: &metav1.Duration{Duration: time.Minute},
		ClientConnection:     config.ClientConnection{QPS: ptr.To[float32](100), Burst: ptr.To[int32](200)},
	}
	// The agent runs with its service account's token and setup.RBAC's permissions only, as it
	// would in the cluster: a missing permission fails the suite.
	rc := rest.AnonymousClientConfig(env.Cluster(worker).RESTConfig())
	rc.BearerToken = agentToken(ctx)
	var a *setup.Agent
	// New binds the probe port; another process on this machine may take a free port first.
	for attempt := 1; ; attempt++ {
		healthPort, err = freePort()
		Expect(err).NotTo(HaveOccurred())
		cfg.Health = config.Endpoint{BindAddress: "127.0.0.1:" + strconv.Itoa(healthPort)}
		cfg.SetDefaults()
		// Plain Pods are opt-in, as in Kueue; the agent runs them beside the default kinds.
		if !slices.Contains(cfg.Integrations.Frameworks, config.FrameworkPod) {
			cfg.Integrations.Frameworks = append(cfg.Integrations.Frameworks, config.FrameworkPod)
		}
		Expect(cfg.Validate()).To(BeEmpty())
		a, err = setup.New(setup.Options{Config: cfg, RestConfig: rc, Log: zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true))})
		if err == nil || attempt == 3 || !(errors.Is(err, syscall.EADDRINUSE) || strings.Contains(err.Error(), "address already in use")) {
			break
		}
	}
	Expect(err).NotTo(HaveOccurred())
	agent, err = env.Start(ctx, framework.ComponentSpec{Name: "fleetq-agent", Cluster: worker, Run: func(ctx context.Context, _ *rest.Config) (err error) {
		defer func() { fmt.Fprintf(GinkgoWriter, "fleetq-agent stopped: %v\n", err) }()
		return a.Start(ctx)
	}})
	Expect(err).NotTo(HaveOccurred())
}, NodeTimeout(10*time.Minute))

var _ = AfterSuite(func(ctx SpecContext) {
	if env == nil {
		return
	}
	if !suitePassed {
		env.DumpLogs(GinkgoWriter, 40)
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

// agentToken creates the agent's service account with setup.RBAC's permissions and returns a token
// for it.
func agentToken(ctx context.Context) string {
	const sa = "fleetq-agent"
	Expect(k8s.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: agentNS, Name: sa}})).To(Succeed())
	for _, obj := range setup.RBAC(agentNS, sa) {
		Expect(k8s.Create(ctx, obj)).To(Succeed())
	}
	tr, err := env.Cluster(worker).Clientset().CoreV1().ServiceAccounts(agentNS).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	return tr.Status.Token
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
