package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/e2e/framework"
	"github.com/fleetq/fleetq/e2e/lab"
	"github.com/fleetq/fleetq/e2e/lab/process"
)

// System is a dispatcher under test: fleetq or Kueue.
type System interface {
	// Name is "fleetq" or "kueue".
	Name() string
	// Version says what was run, for the report.
	Version() string
	// CRDs are installed on every cluster of the lab before Install.
	CRDs() ([]*apiextensionsv1.CustomResourceDefinition, error)
	// Install starts the system's processes on the lab and creates the scenario's queue objects,
	// returning once the ClusterQueues are active and every worker is connected.
	Install(ctx context.Context, env *framework.Environment, s *Scenario, dir string) error
	// Processes are the system's running processes, manager first.
	Processes() []Proc
	// Role classifies a request seen in a cluster's audit log by its user agent: "manager",
	// "agent" (fleetq-agent, or Kueue on a worker) or "" for other clients.
	Role(clusterRole lab.Role, userAgent string) string
	// Stop ends every process the system started.
	Stop(ctx context.Context) error
}

// Proc is one process of a system.
type Proc struct {
	// Role is "manager" or "agent".
	Role    string
	Cluster string
	PID     int
	proc    *process.Process
}

// Knobs are the settings both systems get alike; the report states them.
type Knobs struct {
	// QPS and Burst size every client of both systems (manager to management, manager to workers,
	// agents or worker Kueues to their cluster) and the bench's own load client.
	QPS   float32
	Burst int32
}

const (
	readyTimeout = 3 * time.Minute
	readyPoll    = 250 * time.Millisecond
	stopGrace    = 15 * time.Second
)

// startProc starts a binary as a child that dies with the bench, logging to the cluster's logs.
func startProc(env *framework.Environment, role, cluster, name string, args, extraEnv []string) (Proc, error) {
	c := env.Cluster(cluster)
	logDir := filepath.Join(env.Lab.Dir(), cluster, "logs")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return Proc{}, fmt.Errorf("%s in %s: %w", name, cluster, err)
	}
	p := &process.Process{Owner: cluster, State: lab.ProcessState{
		Name: name,
		Args: args,
		Env:  append([]string{"KUBECONFIG=" + c.KubeconfigPath()}, extraEnv...),
		Log:  filepath.Join(logDir, name+".log"),
	}}
	if err := p.Start(true); err != nil {
		return Proc{}, err
	}
	return Proc{Role: role, Cluster: cluster, PID: p.State.PID, proc: p}, nil
}

func stopProcs(ctx context.Context, procs []Proc) error {
	var errs []string
	for i := len(procs) - 1; i >= 0; i-- {
		if err := procs[i].proc.Stop(ctx, stopGrace); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("stop: %s", strings.Join(errs, "; "))
	}
	return nil
}

// checkRunning reports a process that exited, with the end of its log.
func checkRunning(procs []Proc) error {
	for _, p := range procs {
		if !p.proc.Running() {
			return fmt.Errorf("%s in %s exited: %v\n%s", p.proc.State.Name, p.Cluster, p.proc.ExitError(), process.Tail(p.proc.State.Log, 30))
		}
	}
	return nil
}

// waitFor polls cond until it holds, a process dies or the timeout passes; last explains a timeout.
func waitFor(ctx context.Context, what string, procs []Proc, cond func(ctx context.Context) (bool, string)) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, readyPoll, readyTimeout, true, func(ctx context.Context) (bool, error) {
		if err := checkRunning(procs); err != nil {
			return false, err
		}
		ok, why := cond(ctx)
		last = why
		return ok, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for %s: %w (last: %s)", what, err, last)
	}
	return nil
}

// queuesActive says whether every ClusterQueue of the scenario (and, for Kueue, the workers') is
// Active, and every MultiKueueCluster connected.
func queuesActive(ctx context.Context, c client.Client, s *Scenario) (bool, string) {
	for i := range s.queueTotal() {
		cq := &kueue.ClusterQueue{}
		if err := c.Get(ctx, client.ObjectKey{Name: ClusterQueueName(i)}, cq); err != nil {
			return false, err.Error()
		}
		if !meta.IsStatusConditionTrue(cq.Status.Conditions, kueue.ClusterQueueActive) {
			return false, fmt.Sprintf("clusterqueue %s not active: %v", cq.Name, cq.Status.Conditions)
		}
	}
	for _, w := range s.Workers {
		mkc := &kueue.MultiKueueCluster{}
		if err := c.Get(ctx, client.ObjectKey{Name: w.Name}, mkc); err != nil {
			return false, err.Error()
		}
		if !meta.IsStatusConditionTrue(mkc.Status.Conditions, kueue.MultiKueueClusterActive) {
			return false, fmt.Sprintf("multikueuecluster %s not active: %v", w.Name, mkc.Status.Conditions)
		}
	}
	return true, ""
}

// registerWorkers creates each worker's kubeconfig Secret in ns and its MultiKueueCluster.
func registerWorkers(ctx context.Context, env *framework.Environment, s *Scenario, ns string) error {
	m := env.Management().Client()
	for _, w := range s.Workers {
		sec, err := framework.WorkerKubeconfigSecret(env.Cluster(w.Name), ns, w.Name+"-kubeconfig")
		if err != nil {
			return err
		}
		mkc := &kueue.MultiKueueCluster{
			ObjectMeta: metav1.ObjectMeta{Name: w.Name},
			Spec: kueue.MultiKueueClusterSpec{ClusterSource: kueue.ClusterSource{KubeConfig: &kueue.KubeConfig{
				Location: sec.Name, LocationType: kueue.SecretLocationType,
			}}},
		}
		if err := createAll(ctx, m, ManagementCluster, []client.Object{sec, mkc}); err != nil {
			return err
		}
	}
	return nil
}
