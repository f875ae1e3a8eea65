package demo

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/template"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetq "github.com/fleetq/fleetq/api/fleetq/v1alpha1"
	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/e2e/kinds"
	"github.com/fleetq/fleetq/e2e/lab"
	"github.com/fleetq/fleetq/e2e/manifest"
)

// Scheme knows every kind the demo reads or writes.
var Scheme = runtime.NewScheme()

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(Scheme))
	utilruntime.Must(apiextensionsv1.AddToScheme(Scheme))
	utilruntime.Must(kueue.AddToScheme(Scheme))
	utilruntime.Must(fleetq.AddToScheme(Scheme))
}

//go:embed manifests/*.yaml
var manifests embed.FS

// Cluster is one cluster the demo talks to.
type Cluster struct {
	Name string
	// Kubeconfig is the path of its kubeconfig; Raw its contents (credentials embedded).
	Kubeconfig string
	Raw        []byte
	Config     *rest.Config
	Client     client.Client
}

// NewCluster loads a kubeconfig file into a client. The demo's writes are few, but it reads often:
// no client-side throttling on top of the API server's own.
func NewCluster(name, kubeconfig string) (*Cluster, error) {
	raw, err := os.ReadFile(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("cluster %q: kubeconfig: %w", name, err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(raw)
	if err != nil {
		return nil, fmt.Errorf("cluster %q: kubeconfig %s: %w", name, kubeconfig, err)
	}
	cfg.QPS, cfg.Burst = 100, 200
	cl, err := client.New(cfg, client.Options{Scheme: Scheme})
	if err != nil {
		return nil, fmt.Errorf("cluster %q: client: %w", name, err)
	}
	return &Cluster{Name: name, Kubeconfig: kubeconfig, Raw: raw, Config: cfg, Client: cl}, nil
}

// Fleet is the management cluster and the workers the demo registers (none when they are
// registered already).
type Fleet struct {
	Management *Cluster
	Workers    []*Cluster
	// Namespace is fleetq-manager's: worker kubeconfig Secrets live there.
	Namespace string
	// AgentNamespace is where the agents publish their capacity reports in the workers.
	AgentNamespace string
}

// InstallCRDs creates (or updates) CRDs on a cluster and waits until they are served.
func InstallCRDs(ctx context.Context, c *Cluster, crds []*apiextensionsv1.CustomResourceDefinition) error {
	return lab.InstallCRDs(ctx, c.Client, c.Name, crds)
}

// CheckCRDs fails with a clear message when the management cluster does not serve the kinds the
// demo needs (an existing cluster where fleetq is not installed).
func CheckCRDs(ctx context.Context, c *Cluster) error {
	for _, l := range []client.ObjectList{&kueue.ClusterQueueList{}, &kueue.WorkloadList{}, &kueue.MultiKueueClusterList{}} {
		if err := c.Client.List(ctx, l, client.Limit(1)); err != nil {
			if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
				return fmt.Errorf("cluster %q (%s): the kueue.x-k8s.io/v1beta2 CRDs are not installed: install fleetq's CRDs (config/crd/bases) and run fleetq-manager there", c.Name, c.Config.Host)
			}
			return fmt.Errorf("cluster %q (%s): %w", c.Name, c.Config.Host, err)
		}
	}
	return nil
}

// WaitForWebhooks waits until the API server reaches fleetq-manager's webhooks: a server-side dry
// run of a ClusterQueue written with the tutorial's cohort alias comes back with cohortName set by
// the defaulting webhook.
func WaitForWebhooks(ctx context.Context, c *Cluster) (bool, error) {
	cq := &kueue.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: "fleetq-demo-webhook-probe"}, Spec: kueue.ClusterQueueSpec{Cohort: "probe"}}
	if err := c.Client.Create(ctx, cq, client.DryRunAll); err != nil {
		return false, err
	}
	return cq.Spec.CohortName == "probe", nil
}

// Register makes each worker known to the manager the way a user does: a Secret with its kubeconfig
// (credentials embedded) in the manager's namespace and a MultiKueueCluster naming it. Both are
// updated when they exist, since a restarted lab has new certificates.
func Register(ctx context.Context, f *Fleet) error {
	m := f.Management.Client
	if err := ensureNamespace(ctx, m, f.Namespace); err != nil {
		return fmt.Errorf("cluster %q: %w", f.Management.Name, err)
	}
	for _, w := range f.Workers {
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.Namespace, Name: w.Name + "-kubeconfig"}}
		if err := upsert(ctx, m, sec, func() { sec.Data = map[string][]byte{"kubeconfig": w.Raw} }); err != nil {
			return fmt.Errorf("worker %q: kubeconfig secret %s/%s: %w", w.Name, sec.Namespace, sec.Name, err)
		}
		mkc := &kueue.MultiKueueCluster{ObjectMeta: metav1.ObjectMeta{Name: w.Name}}
		if err := upsert(ctx, m, mkc, func() {
			mkc.Spec.ClusterSource = kueue.ClusterSource{KubeConfig: &kueue.KubeConfig{Location: sec.Name, LocationType: kueue.SecretLocationType}}
		}); err != nil {
			return fmt.Errorf("worker %q: multikueuecluster: %w", w.Name, err)
		}
	}
	return nil
}

// upsert creates obj after mutate, or gets it and updates it after mutate.
func upsert(ctx context.Context, c client.Client, obj client.Object, mutate func()) error {
	err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj)
	switch {
	case apierrors.IsNotFound(err):
		mutate()
		return c.Create(ctx, obj)
	case err != nil:
		return err
	}
	mutate()
	return c.Update(ctx, obj)
}

func ensureNamespace(ctx context.Context, c client.Client, name string) error {
	err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("namespace %s: %w", name, err)
	}
	return nil
}

// Manifests renders the demo's objects for workers (the MultiKueueConfig lists them in order of
// preference): the teams' namespaces, the tutorial's GPU flavors, dispatch, and the GPU queues.
func Manifests(workers []string) ([]byte, error) {
	var out bytes.Buffer
	for _, name := range []string{"namespaces.yaml", "flavors.yaml", "dispatch.yaml", "queues.yaml"} {
		raw, err := manifests.ReadFile("manifests/" + name)
		if err != nil {
			return nil, err
		}
		list, _ := json.Marshal(workers)
		tmpl, err := template.New(name).Parse(string(raw))
		if err != nil {
			return nil, fmt.Errorf("manifest %s: %w", name, err)
		}
		out.WriteString("---\n")
		if err := tmpl.Execute(&out, map[string]string{"Workers": string(list)}); err != nil {
			return nil, fmt.Errorf("manifest %s: %w", name, err)
		}
	}
	return out.Bytes(), nil
}

// Apply server-side applies the demo's objects on the management cluster, like `kubectl apply
// --server-side -f`.
func Apply(ctx context.Context, c *Cluster, workers []string) error {
	raw, err := Manifests(workers)
	if err != nil {
		return err
	}
	objs, err := manifest.Parse(raw)
	if err != nil {
		return fmt.Errorf("demo manifests: %w", err)
	}
	for _, o := range objs {
		if err := c.Client.Patch(ctx, o, client.Apply, client.FieldOwner(PartOfValue), client.ForceOwnership); err != nil {
			return fmt.Errorf("cluster %q: apply %s %q: %w", c.Name, o.GetKind(), o.GetName(), err)
		}
	}
	return nil
}

// RegisteredWorkers lists the MultiKueueClusters of the management cluster.
func RegisteredWorkers(ctx context.Context, c *Cluster) ([]string, error) {
	l := &kueue.MultiKueueClusterList{}
	if err := c.Client.List(ctx, l); err != nil {
		return nil, fmt.Errorf("cluster %q: list multikueueclusters: %w", c.Name, err)
	}
	var out []string
	for _, m := range l.Items {
		out = append(out, m.Name)
	}
	return out, nil
}

// WaitReady waits until every worker is connected, both ClusterQueues are active and, for the
// workers the demo has clients for, the agent reports capacity for a demo flavor. The error names
// what is not ready and why, as the objects say it.
func WaitReady(ctx context.Context, f *Fleet, workers []string, timeout time.Duration) error {
	var problems []string
	err := poll(ctx, timeout, func() (bool, error) {
		problems = problems[:0]
		m := f.Management.Client
		for _, w := range workers {
			mkc := &kueue.MultiKueueCluster{}
			if err := m.Get(ctx, client.ObjectKey{Name: w}, mkc); err != nil {
				problems = append(problems, fmt.Sprintf("multikueuecluster %q: %v", w, err))
				continue
			}
			if c := meta.FindStatusCondition(mkc.Status.Conditions, kueue.MultiKueueClusterActive); c == nil || c.Status != metav1.ConditionTrue {
				why := "no Active condition yet (is fleetq-manager running?)"
				if c != nil {
					why = c.Reason + ": " + c.Message
				}
				problems = append(problems, fmt.Sprintf("worker %q not connected: %s", w, why))
			}
		}
		for _, name := range []string{ClusterQueueOf(Research), ClusterQueueOf(Inference)} {
			cq := &kueue.ClusterQueue{}
			if err := m.Get(ctx, client.ObjectKey{Name: name}, cq); err != nil {
				problems = append(problems, fmt.Sprintf("clusterqueue %q: %v", name, err))
				continue
			}
			if c := meta.FindStatusCondition(cq.Status.Conditions, kueue.ClusterQueueActive); c == nil || c.Status != metav1.ConditionTrue {
				why := "no Active condition yet"
				if c != nil {
					why = c.Reason + ": " + c.Message
				}
				problems = append(problems, fmt.Sprintf("clusterqueue %q not active: %s", name, why))
			}
		}
		for _, w := range f.Workers {
			rep := &fleetq.CapacityReport{}
			if err := w.Client.Get(ctx, client.ObjectKey{Namespace: f.AgentNamespace, Name: w.Name}, rep); err != nil {
				problems = append(problems, fmt.Sprintf("worker %q: no capacity report (is fleetq-agent running there?): %v", w.Name, err))
				continue
			}
			if !hasNodes(rep) {
				problems = append(problems, fmt.Sprintf("worker %q: its capacity report has no node of a demo flavor yet (fleetq-manager syncs the flavors; nodes need the nvidia.com/gpu.product label)", w.Name))
			}
		}
		return len(problems) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("the fleet is not ready after %s:\n  %s", timeout, strings.Join(problems, "\n  "))
	}
	return nil
}

func hasNodes(rep *fleetq.CapacityReport) bool {
	for _, f := range rep.Status.Flavors {
		if f.Nodes > 0 {
			return true
		}
	}
	return false
}

// MissingKinds lists the story's job kinds (other than batch/v1 Job) that cannot run: the
// management cluster does not serve the kind, or no worker's agent reports running it.
func MissingKinds(ctx context.Context, f *Fleet, sc Scenario) (map[string]bool, error) {
	missing := map[string]bool{}
	for _, kind := range sc.Kinds() {
		gvk := KindGVKs[kind]
		if _, err := f.Management.Client.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
			if !meta.IsNoMatchError(err) {
				return nil, fmt.Errorf("cluster %q: looking up %s: %w", f.Management.Name, gvk, err)
			}
			missing[kind] = true
			continue
		}
		framework := gvk.Group + "/" + strings.ToLower(kind)
		runs := false
		for _, w := range f.Workers {
			rep := &fleetq.CapacityReport{}
			if err := w.Client.Get(ctx, client.ObjectKey{Namespace: f.AgentNamespace, Name: w.Name}, rep); err == nil && slices.Contains(rep.Status.Kinds, framework) {
				runs = true
			}
		}
		if !runs {
			missing[kind] = true
		}
	}
	return missing, nil
}

// Capacity describes what each worker's agent reports, e.g. "us-east: 4 nodes of a100-flavor,
// 32 GPUs".
func Capacity(ctx context.Context, f *Fleet) []string {
	var out []string
	for _, w := range f.Workers {
		rep := &fleetq.CapacityReport{}
		if err := w.Client.Get(ctx, client.ObjectKey{Namespace: f.AgentNamespace, Name: w.Name}, rep); err != nil {
			continue
		}
		for _, fl := range rep.Status.Flavors {
			if fl.Nodes > 0 {
				gpus := fl.Allocatable[GPU]
				out = append(out, fmt.Sprintf("%s: %d nodes of %s, %s GPUs", w.Name, fl.Nodes, fl.Name, gpus.String()))
			}
		}
	}
	return out
}

// Clean deletes the jobs of an earlier run of the demo and waits until they and their workloads
// are gone, so names can be reused and the queues start empty.
func Clean(ctx context.Context, c *Cluster, progress io.Writer) error {
	sel := client.MatchingLabels{PartOfLabel: PartOfValue}
	uids := map[string]bool{}
	for _, ns := range []string{Research, Inference} {
		jobs := &batchv1.JobList{}
		if err := c.Client.List(ctx, jobs, client.InNamespace(ns), sel); err != nil {
			return fmt.Errorf("cluster %q: list jobs in %s: %w", c.Name, ns, err)
		}
		for _, j := range jobs.Items {
			uids[string(j.UID)] = true
		}
		if len(jobs.Items) > 0 {
			if err := c.Client.DeleteAllOf(ctx, &batchv1.Job{}, client.InNamespace(ns), sel, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
				return fmt.Errorf("cluster %q: delete the previous demo's jobs in %s: %w", c.Name, ns, err)
			}
		}
		for _, gvk := range KindGVKs {
			items, err := kinds.List(ctx, c.Client, gvk, ns)
			if err != nil {
				return fmt.Errorf("cluster %q: %w", c.Name, err)
			}
			for _, u := range items {
				if u.GetLabels()[PartOfLabel] != PartOfValue {
					continue
				}
				uids[string(u.GetUID())] = true
				if err := c.Client.Delete(ctx, &u, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
					return fmt.Errorf("cluster %q: delete the previous demo's %s %s/%s: %w", c.Name, u.GetKind(), ns, u.GetName(), err)
				}
			}
		}
	}
	if len(uids) == 0 {
		return nil
	}
	fmt.Fprintf(progress, "removing %d jobs of an earlier demo run\n", len(uids))
	var left []string
	err := poll(ctx, 2*time.Minute, func() (bool, error) {
		left = left[:0]
		for _, ns := range []string{Research, Inference} {
			jobs := &batchv1.JobList{}
			if err := c.Client.List(ctx, jobs, client.InNamespace(ns), sel); err != nil {
				return false, nil
			}
			for _, j := range jobs.Items {
				left = append(left, "job "+ns+"/"+j.Name)
			}
			for _, gvk := range KindGVKs {
				items, err := kinds.List(ctx, c.Client, gvk, ns)
				if err != nil {
					return false, nil
				}
				for _, u := range items {
					if uids[string(u.GetUID())] {
						left = append(left, gvk.Kind+" "+ns+"/"+u.GetName())
					}
				}
			}
			wls := &kueue.WorkloadList{}
			if err := c.Client.List(ctx, wls, client.InNamespace(ns)); err != nil {
				return false, nil
			}
			for _, wl := range wls.Items {
				for _, o := range wl.OwnerReferences {
					if uids[string(o.UID)] {
						left = append(left, "workload "+ns+"/"+wl.Name)
					}
				}
			}
		}
		return len(left) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("cluster %q: the previous demo's objects are not gone (is fleetq-manager running?): %s", c.Name, strings.Join(left, ", "))
	}
	return nil
}

// poll calls cond every 200ms until it is true, it fails, or timeout passes.
func poll(ctx context.Context, timeout time.Duration, cond func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("not within %s", timeout)
			}
			return ctx.Err()
		case <-tick.C:
		}
	}
}
