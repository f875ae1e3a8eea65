package chaos

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetq "github.com/fleetq/fleetq/api/fleetq/v1alpha1"
	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/config"
	"github.com/fleetq/fleetq/config/crd"
	"github.com/fleetq/fleetq/dispatch/registry"
	"github.com/fleetq/fleetq/e2e/components"
	"github.com/fleetq/fleetq/e2e/framework"
	"github.com/fleetq/fleetq/e2e/lab"
	"github.com/fleetq/fleetq/e2e/manifest"
	"github.com/fleetq/fleetq/manager/setup"
)

// Workers are the chaos fleet's worker clusters, each with two nodes of 8 A100s.
var Workers = []string{"us-east", "us-west", "eu-west"}

// The fleet's fault-handling settings, short so a run meets many faults: a standby manager takes
// over within LeaderLease (plus a one-second retry); an agent not renewed for fenceTimeout fences
// itself; a worker unreachable for workerLostTimeout counts as lost. Each is longer than the one
// before, as the manager's configuration validation requires.
const (
	LeaderLease       = 5 * time.Second
	FenceTimeout      = 10 * time.Second
	WorkerLostTimeout = 25 * time.Second
	// TerminationDelay is how long every deleted pod of the lab stays Terminating (and counts as
	// running): the "pods slow to terminate" fault, on for the whole run.
	TerminationDelay = 3 * time.Second
)

// logLevel runs fleetq's binaries with their debug logs (jobs started, stopped, deleted; each
// admission pass), so a failed run's saved logs tell what happened to a job.
const logLevel = "--zap-log-level=2"

// Fleet is the chaos lab: a management cluster with two fleetq-manager replicas (leader
// election on, webhooks behind one address), three workers each with a fleetq-agent, every
// component a real process that can be killed, and a Proxy between the manager and each worker.
type Fleet struct {
	Env      *framework.Environment
	Mgmt     client.Client
	Config   *config.Configuration
	Managers []*framework.Component
	// metrics are the replicas' metrics addresses, parallel to Managers: how the suite finds the
	// leader.
	metrics []string
	Agents  map[string]*framework.Component
	// Proxies stand between the manager and each worker; RotateSecret replaces one.
	Proxies map[string]*Proxy
	webhook *Proxy
	// sup restarts components that exit by themselves, during a Run.
	sup *supervisor
}

// LabSpec is the chaos lab's clusters.
func LabSpec() *lab.Spec {
	spec := &lab.Spec{
		Mode:                lab.ModeFull,
		PodRunTime:          metav1.Duration{Duration: 30 * time.Second},
		PodTerminationDelay: metav1.Duration{Duration: TerminationDelay},
		Management:          lab.ClusterSpec{Name: "management", NodePools: []lab.NodePool{lab.CPUPool(1)}},
	}
	for _, w := range Workers {
		pool := lab.A100Pool()
		pool.Count = 2
		spec.Workers = append(spec.Workers, lab.ClusterSpec{Name: w, NodePools: []lab.NodePool{pool}})
	}
	return spec
}

// Up starts the chaos lab, builds and starts fleetq's binaries, registers the workers through
// their proxies and applies testdata/queues.yaml; it returns once every worker is active and
// its capacity is read.
func Up(ctx context.Context, progress io.Writer) (*Fleet, error) {
	crds, err := crd.CustomResourceDefinitions()
	if err != nil {
		return nil, err
	}
	env, err := framework.Setup(ctx, framework.Config{Spec: LabSpec(), CRDs: crds, Progress: progress})
	if err != nil {
		return nil, err
	}
	f := &Fleet{Env: env, Mgmt: env.Management().Client(), Agents: map[string]*framework.Component{}, Proxies: map[string]*Proxy{}}
	if err := f.start(ctx); err != nil {
		_ = f.Down(context.Background())
		return nil, err
	}
	return f, nil
}

func (f *Fleet) start(ctx context.Context) error {
	binDir := filepath.Join(f.Env.Lab.Dir(), "chaos-bin")
	var mgrBin, agentBin string
	var err error
	if mgrBin, err = framework.BuildBinary(ctx, "./cmd/fleetq-manager", binDir); err != nil {
		return err
	}
	if agentBin, err = framework.BuildBinary(ctx, "./cmd/fleetq-agent", binDir); err != nil {
		return err
	}
	if f.Config, err = components.ManagerConfig(); err != nil {
		return err
	}
	f.Config.LeaderElection.LeaseDuration = &metav1.Duration{Duration: LeaderLease}
	f.Config.LeaderElection.RenewDeadline = &metav1.Duration{Duration: LeaderLease - time.Second}
	f.Config.LeaderElection.RetryPeriod = &metav1.Duration{Duration: time.Second}
	mc := &f.Config.MultiCluster
	mc.FenceTimeout = &metav1.Duration{Duration: FenceTimeout}
	mc.WorkerLostTimeout = &metav1.Duration{Duration: WorkerLostTimeout}
	mc.LeaseRenewInterval = &metav1.Duration{Duration: time.Second}
	mc.ProbeInterval = &metav1.Duration{Duration: time.Second}
	mc.GCInterval = &metav1.Duration{Duration: 5 * time.Second}
	if errs := f.Config.Validate(); len(errs) > 0 {
		return fmt.Errorf("the chaos fleet's manager configuration: %w", errs.ToAggregate())
	}

	for _, w := range Workers {
		if err := f.startAgent(ctx, agentBin, w); err != nil {
			return err
		}
	}
	if err := ensureNamespace(ctx, f.Mgmt, f.Config.Namespace); err != nil {
		return err
	}
	// Two replicas, each serving webhooks on its own port behind one address, as two pods
	// behind the webhook Service.
	var ports []string
	var replicas []*config.Configuration
	for range 2 {
		cfg := new(config.Configuration)
		*cfg = *f.Config // pointers below are replaced, not written through
		wp, err := setup.FreePort()
		if err != nil {
			return err
		}
		mp, err := setup.FreePort()
		if err != nil {
			return err
		}
		cfg.Webhook.Port = ptr.To(int32(wp))
		cfg.Metrics.BindAddress = fmt.Sprintf("127.0.0.1:%d", mp)
		ports = append(ports, fmt.Sprintf("127.0.0.1:%d", wp))
		f.metrics = append(f.metrics, cfg.Metrics.BindAddress)
		replicas = append(replicas, cfg)
	}
	if f.webhook, err = Listen(ports...); err != nil {
		return err
	}
	for i, cfg := range replicas {
		cfg.Webhook.URL = "https://" + f.webhook.Addr()
		cfg.Webhook.CertDir = filepath.Join(f.Env.Lab.Dir(), "management", "fleetq", fmt.Sprintf("certs-%d", i))
		path, err := config.Write(filepath.Join(f.Env.Lab.Dir(), "management", "fleetq", fmt.Sprintf("manager-%d.yaml", i)), cfg)
		if err != nil {
			return err
		}
		c, err := f.Env.Start(ctx, framework.ComponentSpec{Name: fmt.Sprintf("fleetq-manager-%d", i), Cluster: "management", Binary: mgrBin, Args: []string{"--config", path, logLevel}})
		if err != nil {
			return err
		}
		f.Managers = append(f.Managers, c)
	}
	f.Config = replicas[0]
	if err := components.WaitForWebhooks(ctx, f.Mgmt, 2*time.Minute); err != nil {
		return err
	}
	for _, w := range Workers {
		if err := f.register(ctx, w); err != nil {
			return err
		}
	}
	for _, ns := range Teams {
		if err := ensureNamespace(ctx, f.Mgmt, ns); err != nil {
			return err
		}
	}
	if err := manifest.Apply(ctx, f.Mgmt, filepath.Join("testdata", "queues.yaml")); err != nil {
		return err
	}
	return f.waitReady(ctx, 3*time.Minute)
}

func (f *Fleet) startAgent(ctx context.Context, bin, worker string) error {
	acfg, err := components.AgentConfig(worker, f.Config)
	if err != nil {
		return err
	}
	if err := ensureNamespace(ctx, f.Env.Cluster(worker).Client(), acfg.Namespace); err != nil {
		return fmt.Errorf("cluster %q: %w", worker, err)
	}
	path, err := config.Write(filepath.Join(f.Env.Lab.Dir(), worker, "fleetq", "agent.yaml"), acfg)
	if err != nil {
		return err
	}
	c, err := f.Env.Start(ctx, framework.ComponentSpec{Name: "fleetq-agent", Cluster: worker, Binary: bin, Args: []string{"--config", path, logLevel}})
	if err != nil {
		return err
	}
	f.Agents[worker] = c
	return nil
}

// register puts a proxy before the worker's API server and registers the worker through it, as a
// user does: a kubeconfig Secret and a MultiKueueCluster.
func (f *Fleet) register(ctx context.Context, worker string) error {
	if err := f.newProxy(ctx, worker); err != nil {
		return err
	}
	return f.Mgmt.Create(ctx, MultiKueueCluster(worker))
}

// newProxy starts a proxy to the worker and points its kubeconfig Secret at it (creating the
// Secret the first time), closing the previous proxy.
func (f *Fleet) newProxy(ctx context.Context, worker string) error {
	u, err := url.Parse(f.Env.Cluster(worker).Server())
	if err != nil {
		return err
	}
	p, err := Listen(u.Host)
	if err != nil {
		return err
	}
	data, err := framework.KubeconfigWithServer(f.Env.Cluster(worker), "https://"+p.Addr())
	if err != nil {
		_ = p.Close()
		return err
	}
	sec := framework.KubeconfigSecret(f.Config.Namespace, worker+"-kubeconfig", data)
	if err := f.Mgmt.Create(ctx, sec); apierrors.IsAlreadyExists(err) {
		err = f.Mgmt.Update(ctx, sec)
	}
	if err != nil {
		_ = p.Close()
		return fmt.Errorf("kubeconfig secret of %s: %w", worker, err)
	}
	f.Proxies[worker] = p
	return nil
}

// MultiKueueCluster is the worker's MultiKueueCluster, reading its kubeconfig Secret.
func MultiKueueCluster(worker string) *kueue.MultiKueueCluster {
	return &kueue.MultiKueueCluster{
		ObjectMeta: metav1.ObjectMeta{Name: worker},
		Spec: kueue.MultiKueueClusterSpec{ClusterSource: kueue.ClusterSource{KubeConfig: &kueue.KubeConfig{
			Location: worker + "-kubeconfig", LocationType: kueue.SecretLocationType,
		}}},
	}
}

// Healthy is nil once the fleet works again: a manager replica leads, the webhooks answer,
// every worker is active with its capacity read, and every agent runs, reports afresh and is
// not fenced; otherwise it says what is not back.
func (f *Fleet) Healthy(ctx context.Context) error {
	if _, err := f.Leader(ctx); err != nil {
		return err
	}
	if err := components.WaitForWebhooks(ctx, f.Mgmt, 2*time.Second); err != nil {
		return err
	}
	for _, w := range Workers {
		mkc := &kueue.MultiKueueCluster{}
		if err := f.Mgmt.Get(ctx, client.ObjectKey{Name: w}, mkc); err != nil {
			return fmt.Errorf("worker %s: %w", w, err)
		}
		if c := meta.FindStatusCondition(mkc.Status.Conditions, kueue.MultiKueueClusterActive); c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("worker %s is not active: %v", w, c)
		}
		if _, ok := mkc.Annotations[registry.CapacityAnnotation]; !ok {
			return fmt.Errorf("worker %s: its capacity is not read yet", w)
		}
		if !f.Agents[w].Running() {
			return fmt.Errorf("the agent of %s is not running: %v", w, f.Agents[w].Err())
		}
		rep := &fleetq.CapacityReport{}
		if err := f.Env.Cluster(w).Client().Get(ctx, client.ObjectKey{Namespace: f.Config.MultiCluster.AgentNamespace, Name: w}, rep); err != nil {
			return fmt.Errorf("worker %s: its capacity report: %w", w, err)
		}
		if rep.Status.Fenced {
			return fmt.Errorf("the agent of %s is still fenced", w)
		}
		if age := time.Since(rep.Status.UpdateTime.Time); age > 2*config.DefaultCapacityResyncPeriod {
			return fmt.Errorf("the agent of %s last reported %s ago", w, age.Round(time.Second))
		}
	}
	return nil
}

func (f *Fleet) waitReady(ctx context.Context, timeout time.Duration) error {
	if err := poll(ctx, timeout, func() error { return f.Healthy(ctx) }); err != nil {
		return fmt.Errorf("chaos fleet not ready after %s: %w", timeout, err)
	}
	return nil
}

// Leader is the index of the manager replica that holds the leader lease, read from each
// replica's leader_election_master_status metric.
func (f *Fleet) Leader(ctx context.Context) (int, error) {
	for i, addr := range f.metrics {
		if !f.Managers[i].Running() {
			continue
		}
		leads, err := leads(ctx, addr)
		if err == nil && leads {
			return i, nil
		}
	}
	return -1, fmt.Errorf("no manager replica leads")
}

func leads(ctx context.Context, addr string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return false, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "leader_election_master_status{") && strings.HasSuffix(line, " 1") {
			return true, nil
		}
	}
	return false, sc.Err()
}

// Down stops every component and the lab.
func (f *Fleet) Down(ctx context.Context) error {
	for _, p := range f.Proxies {
		_ = p.Close()
	}
	if f.webhook != nil {
		_ = f.webhook.Close()
	}
	return f.Env.Teardown(ctx)
}

func ensureNamespace(ctx context.Context, c client.Client, name string) error {
	err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("namespace %s: %w", name, err)
	}
	return nil
}

// SaveEvents writes the events of the teams' namespaces in every cluster (placements,
// evictions, the job controller's pod creations) into dir as events-<cluster>.txt, oldest
// first: the history a failed run is read from.
func (f *Fleet) SaveEvents(ctx context.Context, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, c := range f.Env.Clusters() {
		var evs []corev1.Event
		for _, team := range Teams {
			list := &corev1.EventList{}
			if err := c.Client().List(ctx, list, client.InNamespace(team)); err != nil {
				return fmt.Errorf("cluster %s: events of %s: %w", c.Name(), team, err)
			}
			evs = append(evs, list.Items...)
		}
		at := func(e corev1.Event) time.Time {
			switch {
			case !e.EventTime.IsZero():
				return e.EventTime.Time
			case !e.LastTimestamp.IsZero():
				return e.LastTimestamp.Time
			}
			return e.CreationTimestamp.Time
		}
		sort.SliceStable(evs, func(i, j int) bool { return at(evs[i]).Before(at(evs[j])) })
		var b strings.Builder
		for _, e := range evs {
			fmt.Fprintf(&b, "%s %s/%s %s %s x%d: %s\n", at(e).UTC().Format("15:04:05.000"), e.InvolvedObject.Kind, e.InvolvedObject.Name,
				e.Type, e.Reason, max(e.Count, 1), e.Message)
		}
		if err := os.WriteFile(filepath.Join(dir, "events-"+c.Name()+".txt"), []byte(b.String()), 0o644); err != nil {
			return err
		}
	}
	return nil
}
