// Package conformance holds the specs every lab provider must pass: pods run to completion on the fake
// nodes, the scheduler refuses what does not fit, API servers restart without losing data, the fault
// functions do what they say, components run against the clusters, and `down` leaves nothing behind.
//
// Each spec is a function taking a function that returns its input (Cluster API's e2e style), so a suite
// calls it with clusters of the local lab or of kind alike. The suite in this package runs them on the
// local lab.
package conformance

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2" //nolint:revive // Ginkgo's DSL reads best unqualified.
	. "github.com/onsi/gomega"    //nolint:revive // Gomega's DSL reads best unqualified.
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueuev1beta2 "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/e2e/framework"
	"github.com/fleetq/fleetq/e2e/lab"
	"github.com/fleetq/fleetq/e2e/lab/process"
)

// Timeouts of the polls below: generous, because a 2-core CI box running three clusters is slow, and
// never asserted as durations.
const (
	waitLong  = 3 * time.Minute
	waitShort = 30 * time.Second
	poll      = 200 * time.Millisecond
)

// JobInput describes a Job of identical pods that should run to completion on one cluster's fake nodes.
type JobInput struct {
	Cluster framework.ClusterProxy
	// Pods run in parallel; each requests Quantity of Resource.
	Pods     int32
	Resource corev1.ResourceName
	Quantity string
	// NodeSelector and Tolerations steer the pods to the intended pool; every pod must land on a node
	// carrying NodeSelector's labels.
	NodeSelector map[string]string
	Tolerations  []corev1.Toleration
	// RunTime is how long each pod runs (lab.RunTimeAnnotation).
	RunTime time.Duration
}

// JobRunsToCompletionSpec checks that a batch/v1 Job is scheduled onto the intended fake nodes, its
// pods run and succeed, and the Job becomes Complete.
func JobRunsToCompletionSpec(name string, inputGetter func() JobInput) {
	It(name, func(ctx SpecContext) {
		in := inputGetter()
		cs := in.Cluster.Clientset()
		ns := createNamespace(ctx, cs, "lab-job-")
		job := &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: ns},
			Spec: batchv1.JobSpec{
				Parallelism:  ptr.To(in.Pods),
				Completions:  ptr.To(in.Pods),
				BackoffLimit: ptr.To[int32](0),
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{lab.RunTimeAnnotation: in.RunTime.String()}},
					Spec: corev1.PodSpec{
						RestartPolicy: corev1.RestartPolicyNever,
						NodeSelector:  in.NodeSelector,
						Tolerations:   in.Tolerations,
						Containers: []corev1.Container{{
							Name: "main", Image: "registry.example/trainer:v1",
							Resources: corev1.ResourceRequirements{
								Requests: corev1.ResourceList{in.Resource: resource.MustParse(in.Quantity)},
								Limits:   corev1.ResourceList{in.Resource: resource.MustParse(in.Quantity)},
							},
						}},
					},
				},
			},
		}
		_, err := cs.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())

		Eventually(func(g Gomega) {
			j, err := cs.BatchV1().Jobs(ns).Get(ctx, job.Name, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(j.Status.Succeeded).To(Equal(in.Pods))
			g.Expect(jobCondition(j, batchv1.JobComplete)).To(BeTrue(), "job conditions: %+v", j.Status.Conditions)
		}).WithContext(ctx).WithTimeout(waitLong).WithPolling(poll).Should(Succeed())

		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(pods.Items).To(HaveLen(int(in.Pods)))
		for _, p := range pods.Items {
			Expect(p.Status.Phase).To(Equal(corev1.PodSucceeded))
			node, err := cs.CoreV1().Nodes().Get(ctx, p.Spec.NodeName, metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred(), "pod %s ran on node %q", p.Name, p.Spec.NodeName)
			for k, v := range in.NodeSelector {
				Expect(node.Labels).To(HaveKeyWithValue(k, v), "pod %s ran on node %s", p.Name, node.Name)
			}
			Expect(node.Annotations).To(HaveKeyWithValue(lab.FakeNodeAnnotation, "fake"))
		}
	}, SpecTimeout(waitLong+time.Minute))
}

// UnschedulableInput describes a pod that asks for more of a resource than any node of the cluster has.
type UnschedulableInput struct {
	Cluster      framework.ClusterProxy
	Resource     corev1.ResourceName
	NodeSelector map[string]string
	Tolerations  []corev1.Toleration
}

// UnschedulablePodSpec checks that the real scheduler accounts for extended resources: a pod asking for
// one more than the largest node's allocatable stays Pending as Unschedulable, "Insufficient <resource>".
func UnschedulablePodSpec(inputGetter func() UnschedulableInput) {
	It("keeps a pod that fits no node Pending as Unschedulable", func(ctx SpecContext) {
		in := inputGetter()
		cs := in.Cluster.Clientset()
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		var largest int64
		for _, n := range nodes.Items {
			q := n.Status.Allocatable[in.Resource]
			largest = max(largest, q.Value())
		}
		Expect(largest).To(BeNumerically(">", 0), "no node of %s offers %s", in.Cluster.Name(), in.Resource)
		tooMuch := *resource.NewQuantity(largest+1, resource.DecimalSI)

		ns := createNamespace(ctx, cs, "lab-unschedulable-")
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "too-big", Namespace: ns},
			Spec: corev1.PodSpec{
				NodeSelector: in.NodeSelector,
				Tolerations:  in.Tolerations,
				Containers: []corev1.Container{{Name: "main", Image: "registry.example/trainer:v1", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{in.Resource: tooMuch}, Limits: corev1.ResourceList{in.Resource: tooMuch},
				}}},
			},
		}
		_, err = cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			p, err := cs.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(p.Status.Phase).To(Equal(corev1.PodPending))
			g.Expect(p.Spec.NodeName).To(BeEmpty())
			cond := podCondition(p, corev1.PodScheduled)
			g.Expect(cond).NotTo(BeNil(), "the scheduler has not looked at the pod yet")
			g.Expect(cond.Status).To(Equal(corev1.ConditionFalse))
			g.Expect(cond.Reason).To(Equal(corev1.PodReasonUnschedulable))
			g.Expect(cond.Message).To(ContainSubstring("Insufficient " + string(in.Resource)))
		}).WithContext(ctx).WithTimeout(waitLong).WithPolling(poll).Should(Succeed())
	}, SpecTimeout(waitLong+time.Minute))
}

// ClusterInput names the cluster a spec works on.
type ClusterInput struct {
	Cluster framework.ClusterProxy
}

// CRDsServedSpec checks that fleetq's CRDs are installed and served: a ResourceFlavor can be created.
func CRDsServedSpec(inputGetter func() ClusterInput) {
	It("serves fleetq's kueue.x-k8s.io/v1beta2 CRDs", func(ctx SpecContext) {
		in := inputGetter()
		rf := &kueuev1beta2.ResourceFlavor{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "lab-flavor-"},
			Spec:       kueuev1beta2.ResourceFlavorSpec{NodeLabels: map[string]string{lab.GPUProductLabel: lab.A100}},
		}
		Expect(in.Cluster.Client().Create(ctx, rf)).To(Succeed())
		got := &kueuev1beta2.ResourceFlavor{}
		Expect(in.Cluster.Client().Get(ctx, keyOf(rf.Name), got)).To(Succeed())
		Expect(got.Spec.NodeLabels).To(HaveKeyWithValue(lab.GPUProductLabel, lab.A100))
		Expect(in.Cluster.Client().Delete(ctx, got)).To(Succeed())
	}, SpecTimeout(waitShort))
}

// APIServerRestartSpec checks that RestartAPIServer brings the API server back on the same address with
// the same data (objects keep their UID and content, the fake nodes are still there) and the cluster
// back to work: a Job created right after runs.
func APIServerRestartSpec(inputGetter func() ClusterInput) {
	It("restarts an API server on the same port with its data", func(ctx SpecContext) {
		in := inputGetter()
		faults, err := in.Cluster.Faults()
		Expect(err).NotTo(HaveOccurred())
		cs := in.Cluster.Clientset()
		ns := createNamespace(ctx, cs, "lab-restart-")
		cm, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "survivor"}, Data: map[string]string{"written": "before the restart"},
		}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		nodesBefore, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		server := in.Cluster.Server()

		Expect(faults.RestartAPIServer(ctx)).To(Succeed())

		Expect(in.Cluster.Server()).To(Equal(server))
		// A fresh client from the unchanged kubeconfig: the address and credentials still work.
		fresh, err := kubernetes.NewForConfig(in.Cluster.RESTConfig())
		Expect(err).NotTo(HaveOccurred())
		got, err := fresh.CoreV1().ConfigMaps(ns).Get(ctx, cm.Name, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(got.UID).To(Equal(cm.UID))
		Expect(got.Data).To(Equal(cm.Data))
		nodesAfter, err := fresh.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(nodesAfter.Items).To(HaveLen(len(nodesBefore.Items)))

		// The whole cluster works again at once, not only its API server: a Job created now gets a
		// running pod within the short wait (no controller left in client-go's backoff after being
		// refused while the API server's authorizer warmed up).
		job := &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Name: "after-restart"},
			Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{lab.RunTimeAnnotation: "1h"}},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Tolerations:   []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
					Containers: []corev1.Container{{Name: "main", Image: "registry.example/trainer:v1",
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}},
				},
			}},
		}
		_, err = fresh.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			pods, err := fresh.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(pods.Items).To(HaveLen(1), "the job controller created no pod")
			g.Expect(pods.Items[0].Status.Phase).To(Equal(corev1.PodRunning), "pod %s on node %q", pods.Items[0].Name, pods.Items[0].Spec.NodeName)
		}).WithContext(ctx).WithTimeout(waitShort).WithPolling(poll).Should(Succeed())
	}, SpecTimeout(waitLong))
}

// FaultsSpec checks the freeze, resume and stop functions the way a client sees them: a frozen API
// server accepts connections but does not answer, a stopped one refuses connections, and both come back.
// It also checks the closed-port kubeconfig helper, the stand-in for a worker that is gone.
func FaultsSpec(inputGetter func() ClusterInput) {
	It("freezes, resumes, stops and restarts an API server", func(ctx SpecContext) {
		in := inputGetter()
		faults, err := in.Cluster.Faults()
		Expect(err).NotTo(HaveOccurred())
		port := serverPort(in.Cluster.Server())

		Expect(faults.FreezeAPIServer(ctx)).To(Succeed())
		Expect(dial(port)).To(Succeed(), "a frozen API server's port still accepts connections")
		Expect(framework.Reachable(ctx, in.Cluster, time.Second)).To(BeFalse(), "a frozen API server answered")
		Expect(faults.Resume(ctx)).To(Succeed())
		Eventually(func() bool { return framework.Reachable(ctx, in.Cluster, 2*time.Second) }).
			WithContext(ctx).WithTimeout(waitShort).WithPolling(poll).Should(BeTrue())

		Expect(faults.StopAPIServer(ctx)).To(Succeed())
		Expect(dial(port)).NotTo(Succeed(), "a stopped API server's port accepts connections")
		Expect(faults.RestartAPIServer(ctx)).To(Succeed())
		Expect(framework.Reachable(ctx, in.Cluster, 5*time.Second)).To(BeTrue())

		kc, err := framework.ClosedPortKubeconfig(in.Cluster)
		Expect(err).NotTo(HaveOccurred())
		cfg, err := clientcmd.RESTConfigFromKubeConfig(kc)
		Expect(err).NotTo(HaveOccurred())
		cs, err := kubernetes.NewForConfig(cfg)
		Expect(err).NotTo(HaveOccurred())
		_, err = cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		Expect(err).To(MatchError(ContainSubstring("connection refused")))
		secret := framework.KubeconfigSecret("kueue-system", "gone-worker", kc)
		Expect(secret.Data).To(HaveKeyWithValue(framework.KubeconfigSecretKey, kc))
	}, SpecTimeout(waitLong))
}

// ComponentsInput gives the components spec its environment and a cluster to run against.
type ComponentsInput struct {
	Env     *framework.Environment
	Cluster string
}

// ComponentsSpec checks both ways of running a component: in-process with the cluster's configuration,
// and as a binary with KUBECONFIG set and its output captured in the lab's logs.
func ComponentsSpec(inputGetter func() ComponentsInput) {
	It("runs components in-process and as binaries", func(ctx SpecContext) {
		in := inputGetter()
		cluster := in.Env.Cluster(in.Cluster)
		ns := createNamespace(ctx, cluster.Clientset(), "lab-components-")

		inProc, err := in.Env.Start(ctx, framework.ComponentSpec{
			Name: "in-process", Cluster: in.Cluster,
			Run: func(ctx context.Context, cfg *rest.Config) error {
				cs, err := kubernetes.NewForConfig(cfg)
				if err != nil {
					return err
				}
				if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "alive"}}, metav1.CreateOptions{}); err != nil {
					return err
				}
				<-ctx.Done()
				return nil
			},
		})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() error {
			_, err := cluster.Clientset().CoreV1().ConfigMaps(ns).Get(ctx, "alive", metav1.GetOptions{})
			return err
		}).WithContext(ctx).WithTimeout(waitShort).WithPolling(poll).Should(Succeed())
		Expect(inProc.Running()).To(BeTrue())
		Expect(inProc.Stop(ctx)).To(Succeed())
		Expect(inProc.Running()).To(BeFalse())
		Expect(inProc.Err()).NotTo(HaveOccurred())

		bin, err := in.Env.Start(ctx, framework.ComponentSpec{
			Name: "binary", Cluster: in.Cluster,
			Binary: "/bin/sh", Args: []string{"-c", `echo "kubeconfig=$KUBECONFIG"; exec sleep 600`},
		})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() (string, error) {
			data, err := os.ReadFile(bin.LogPath())
			return string(data), err
		}).WithContext(ctx).WithTimeout(waitShort).WithPolling(poll).Should(ContainSubstring("kubeconfig=" + cluster.KubeconfigPath()))
		Expect(bin.Restart(ctx)).To(Succeed())
		Expect(bin.Running()).To(BeTrue())
		Expect(bin.Stop(ctx)).To(Succeed())
		Expect(bin.Running()).To(BeFalse())
	}, SpecTimeout(waitLong))
}

// DownInput gives the down spec the lab to stop.
type DownInput struct {
	Env *framework.Environment
}

// DownLeavesNothingSpec stops the lab through its state file, as `fleetq-lab down` does, and checks by
// pid that no process of it runs and by dialing that none of its ports is open. Run it last.
func DownLeavesNothingSpec(inputGetter func() DownInput) {
	It("stops every process and frees every port on down", func(ctx SpecContext) {
		in := inputGetter()
		state, err := lab.ReadState(in.Env.Lab.Dir())
		Expect(err).NotTo(HaveOccurred())
		var procs []lab.ProcessState
		for _, c := range state.Clusters {
			procs = append(procs, c.Processes...)
		}
		Expect(procs).NotTo(BeEmpty())
		for _, p := range procs {
			Expect(process.Running(p)).To(BeTrue(), "%s (pid %d) should run before down", p.Name, p.PID)
		}

		Expect(in.Env.Down(ctx)).To(Succeed())

		for _, p := range procs {
			Expect(process.Running(p)).To(BeFalse(), "%s (pid %d) still runs after down", p.Name, p.PID)
			for _, port := range p.Ports {
				Expect(dial(port)).NotTo(Succeed(), "%s's port %d still accepts connections after down", p.Name, port)
			}
		}
		_, err = os.Stat(state.Dir)
		Expect(os.IsNotExist(err)).To(BeTrue(), "lab dir %s still exists: %v", state.Dir, err)
	}, SpecTimeout(waitLong))
}

func createNamespace(ctx context.Context, cs kubernetes.Interface, prefix string) string {
	ns, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix}}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	// Pods need the namespace's default service account, which the controller-manager creates.
	Eventually(func() error {
		_, err := cs.CoreV1().ServiceAccounts(ns.Name).Get(ctx, "default", metav1.GetOptions{})
		return err
	}).WithContext(ctx).WithTimeout(waitShort).WithPolling(poll).Should(Succeed())
	return ns.Name
}

func keyOf(name string) client.ObjectKey { return client.ObjectKey{Name: name} }

func jobCondition(j *batchv1.Job, t batchv1.JobConditionType) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func podCondition(p *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

func serverPort(server string) int {
	_, port, err := net.SplitHostPort(strings.TrimPrefix(server, "https://"))
	Expect(err).NotTo(HaveOccurred(), "server %q", server)
	n, err := strconv.Atoi(port)
	Expect(err).NotTo(HaveOccurred())
	return n
}

func dial(port int) error {
	c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), 2*time.Second)
	if err != nil {
		return err
	}
	return c.Close()
}
