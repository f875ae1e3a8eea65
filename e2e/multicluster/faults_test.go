package multicluster

import (
	"time"

	. "github.com/onsi/ginkgo/v2" //nolint:revive // Ginkgo's DSL reads best unqualified.
	. "github.com/onsi/gomega"    //nolint:revive // Gomega's DSL reads best unqualified.
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/dispatch/registry"
	"github.com/fleetq/fleetq/e2e/framework"
	"github.com/fleetq/fleetq/e2e/lab"
	"github.com/fleetq/fleetq/internal/workload"
)

// setKubeconfig replaces the kubeconfig the manager uses for a worker.
func setKubeconfig(ctx SpecContext, worker string, data []byte) {
	sec := &corev1.Secret{}
	Expect(mgmt.Get(ctx, client.ObjectKey{Namespace: mgrCfg.Namespace, Name: worker + "-kubeconfig"}, sec)).To(Succeed())
	orig := sec.DeepCopy()
	sec.Data[framework.KubeconfigSecretKey] = data
	Expect(mgmt.Patch(ctx, sec, client.MergeFrom(orig))).To(Succeed())
}

func workerActive(ctx SpecContext, worker string) (bool, string) {
	mkc := &kueue.MultiKueueCluster{}
	Expect(mgmt.Get(ctx, client.ObjectKey{Name: worker}, mkc)).To(Succeed())
	c := meta.FindStatusCondition(mkc.Status.Conditions, kueue.MultiKueueClusterActive)
	if c == nil {
		return false, ""
	}
	return c.Status == "True", c.Reason
}

// bringEastBack restarts us-east's API server, and its agent if the agent exited on losing its
// leader lease meanwhile: its Deployment would restart it, and so does the lab.
func bringEastBack(ctx SpecContext, faults lab.Faults) {
	Expect(faults.RestartAPIServer(ctx)).To(Succeed())
	if !agents["us-east"].Running() {
		Expect(agents["us-east"].Restart(ctx)).To(Succeed())
	}
}

// onEast starts a job that fills one us-east node and waits until it runs there.
func onEast(ctx SpecContext, name string) *batchv1.Job {
	// Fill us-west first so nothing else lands there by chance; the job under test goes to us-east.
	job := gpuJob{pods: 1, gpus: 8, runFor: "1h"}.create(ctx, name)
	Eventually(func(g Gomega) {
		g.Expect(clusterOf(ctx, job)).To(Equal("us-east"))
		g.Expect(runningIn(ctx, "us-east", job)).To(Equal(1))
	}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
	return job
}

// stopAgent stops a worker's agent until the spec ends.
func stopAgent(ctx SpecContext, worker string) {
	Expect(agents[worker].Stop(ctx)).To(Succeed())
	DeferCleanup(func(ctx SpecContext) {
		if !agents[worker].Running() {
			Expect(agents[worker].Restart(ctx)).To(Succeed())
		}
	})
}

var _ = Describe("Worker faults", Ordered, func() {
	AfterEach(func(ctx SpecContext) {
		cleanup(ctx)
		Expect(watcher.Overlaps()).To(BeEmpty(), "no job may run in two clusters at once")
	})

	It("partitioned from the manager, a worker fences its copies before the manager places them elsewhere, and its stale copies go when it is back", func(ctx SpecContext) {
		job := onEast(ctx, "partitioned")
		good, err := framework.WorkerKubeconfigSecret(env.Cluster("us-east"), mgrCfg.Namespace, "unused")
		Expect(err).NotTo(HaveOccurred())
		closed, err := framework.ClosedPortKubeconfig(env.Cluster("us-east"))
		Expect(err).NotTo(HaveOccurred())
		cut := time.Now()
		setKubeconfig(ctx, "us-east", closed)

		Eventually(func(g Gomega) {
			active, reason := workerActive(ctx, "us-east")
			g.Expect(active).To(BeFalse())
			g.Expect(reason).To(Equal(registry.ReasonClientConnectionFailed))
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
		// The agent, which still reaches its own API server, stops the copy once the lease expires.
		Eventually(func() int { return runningIn(ctx, "us-east", job) }).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(BeZero())
		fenced := time.Now()
		Eventually(func(g Gomega) {
			g.Expect(clusterOf(ctx, job)).To(Equal("us-west"))
			g.Expect(runningIn(ctx, "us-west", job)).To(Equal(1))
		}).WithContext(ctx).WithTimeout(2 * wait).WithPolling(poll).Should(Succeed())
		moved := time.Now()
		Expect(moved.Sub(cut)).To(BeNumerically(">=", mgrCfg.MultiCluster.WorkerLostTimeout.Duration), "it is placed elsewhere only after workerLostTimeout")
		Expect(fenced.Before(moved)).To(BeTrue())
		AddReportEntry("partition: copy fenced / running elsewhere, after the cut",
			fenced.Sub(cut).Round(time.Second).String()+" / "+moved.Sub(cut).Round(time.Second).String())

		setKubeconfig(ctx, "us-east", good.Data[framework.KubeconfigSecretKey])
		Eventually(func(g Gomega) {
			active, _ := workerActive(ctx, "us-east")
			g.Expect(active).To(BeTrue())
			g.Expect(copiesOf(ctx, job)).To(Equal([]string{"us-west"}), "the stale copy in us-east is deleted")
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
		Expect(watcher.Clusters(job.Namespace + "/" + job.Name)).To(Equal([]string{"us-east", "us-west"}))
	})

	It("re-dispatches the jobs of a worker whose API server died, and removes their stale copies when it is back", func(ctx SpecContext) {
		job := onEast(ctx, "orphaned")
		faults, err := env.Cluster("us-east").Faults()
		Expect(err).NotTo(HaveOccurred())
		// From the moment the stop begins: the API server refuses probes while it shuts down.
		stopped := time.Now()
		Expect(faults.StopAPIServer(ctx)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) {
			// When this spec failed half-way, later specs still need us-east and a clean record.
			if !framework.Reachable(ctx, env.Cluster("us-east"), 5*time.Second) {
				bringEastBack(ctx, faults)
			}
			watcher.Unobservable("us-east", job.Namespace+"/"+job.Name)
		})
		Eventually(func(g Gomega) {
			g.Expect(clusterOf(ctx, job)).To(Equal("us-west"))
			g.Expect(runningIn(ctx, "us-west", job)).To(Equal(1))
		}).WithContext(ctx).WithTimeout(2 * wait).WithPolling(poll).Should(Succeed())
		Expect(time.Since(stopped)).To(BeNumerically(">=", mgrCfg.MultiCluster.WorkerLostTimeout.Duration))
		wl := workloadOf(ctx, job)
		Expect(workload.IsAdmitted(wl)).To(BeTrue())

		// While us-east's API server is dead, nothing about its pods can be observed or
		// enforced (a real kubelet would keep running them): its stale copy is excused from the
		// overlap check, and this spec asserts instead that the copy is removed once it is back.
		watcher.Unobservable("us-east", job.Namespace+"/"+job.Name)
		bringEastBack(ctx, faults)
		back := time.Now()
		Eventually(func(g Gomega) {
			active, _ := workerActive(ctx, "us-east")
			g.Expect(active).To(BeTrue())
			g.Expect(copiesOf(ctx, job)).To(Equal([]string{"us-west"}), "the stale copy in us-east is deleted")
			g.Expect(podsIn(ctx, "us-east", job)).To(BeEmpty())
		}).WithContext(ctx).WithTimeout(2 * wait).WithPolling(poll).Should(Succeed())
		AddReportEntry("dead API server: back → stale copy removed", time.Since(back).Round(time.Second).String())
		watcher.Unobservable("us-east", job.Namespace+"/"+job.Name)
	})
	It("places a job elsewhere when its worker's agent is down, and sends that worker nothing until the agent reports again", func(ctx SpecContext) {
		stopAgent(ctx, "us-east")
		created := time.Now()
		// us-east's last report says it has room, so the job goes there first.
		job := gpuJob{pods: 1, gpus: 8, runFor: "1h"}.create(ctx, "agentless")
		Eventually(func(g Gomega) {
			g.Expect(clusterOf(ctx, job)).To(Equal("us-east"))
			g.Expect(copiesOf(ctx, job)).To(Equal([]string{"us-east"}))
			g.Expect(checkMessage(ctx, job)).To(Equal("Dispatched to worker us-east, waiting for its agent to start it"))
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
		expectRunningOn(ctx, job, "us-west", 2*wait) // and the untouched copy in us-east is deleted
		Expect(time.Since(created)).To(BeNumerically(">=", mgrCfg.MultiCluster.WorkerLostTimeout.Duration), "taken back only after workerLostTimeout")
		Expect(eventNotes(ctx, job, "Rejected")).To(ContainElement(
			"worker us-east's agent did not take up the copy within workerLostTimeout (15s): is fleetq-agent running there? Placing it elsewhere"))

		// While its agent stays down, us-east gets nothing more, and the placement says why.
		next := gpuJob{pods: 1, gpus: 8, runFor: "1h"}.create(ctx, "after-silence")
		Eventually(func(g Gomega) {
			g.Expect(clusterOf(ctx, next)).To(Equal("us-west"))
			g.Expect(runningIn(ctx, "us-west", next)).To(Equal(1))
			g.Expect(eventNotes(ctx, next, "Placed")).To(ContainElement(ContainSubstring("us-east: its agent left a copy untouched and has not reported since")))
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
		Expect(watcher.Clusters(next.Namespace + "/" + next.Name)).To(Equal([]string{"us-west"}))

		// Its agent back, us-east reports again and takes the next job.
		Expect(agents["us-east"].Restart(ctx)).To(Succeed())
		back := gpuJob{pods: 1, gpus: 8, runFor: "1h"}.create(ctx, "agent-back")
		expectRunningOn(ctx, back, "us-east", wait)
	})

	It("places a job elsewhere when its worker cannot start the copy its stale report made room for", func(ctx SpecContext) {
		// Pods outside fleetq take us-east's GPUs while its agent is down, so its report still
		// shows them free when the job is placed.
		stopAgent(ctx, "us-east")
		squatters := squat(ctx, "us-east")
		DeferCleanup(func(ctx SpecContext) {
			for _, p := range squatters {
				Expect(client.IgnoreNotFound(env.Cluster("us-east").Client().Delete(ctx, p))).To(Succeed())
			}
		})
		job := gpuJob{pods: 1, gpus: 8, runFor: "1h"}.create(ctx, "stale-report")
		Eventually(func(g Gomega) {
			g.Expect(clusterOf(ctx, job)).To(Equal("us-east"))
			g.Expect(copiesOf(ctx, job)).To(Equal([]string{"us-east"}))
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
		Expect(agents["us-east"].Restart(ctx)).To(Succeed())
		// The agent sees the nodes full and says so; the manager passes it on to the user.
		Eventually(func(g Gomega) {
			g.Expect(checkMessage(ctx, job)).To(HavePrefix("Dispatched to worker us-east, which cannot start it yet: "))
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
		expectRunningOn(ctx, job, "us-west", 2*wait) // and the copy us-east could not start is deleted
		Expect(eventNotes(ctx, job, "Rejected")).To(ContainElement(HavePrefix("worker us-east could not start it within 15s: ")))
		Expect(podsIn(ctx, "us-east", job)).To(BeEmpty(), "the copy never started in us-east")
		Expect(watcher.Clusters(job.Namespace + "/" + job.Name)).To(Equal([]string{"us-west"}))
		for _, p := range squatters {
			Expect(env.Cluster("us-east").Client().Delete(ctx, p)).To(Succeed())
		}
	})

	It("places a job elsewhere when a worker's API server refuses its copy, and says why", func(ctx SpecContext) {
		// A ResourceQuota in us-east's namespace allows no Jobs: the copy can never be created there.
		east := env.Cluster("us-east").Client()
		if err := east.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "research"}}); !apierrors.IsAlreadyExists(err) {
			Expect(err).NotTo(HaveOccurred())
		}
		quota := &corev1.ResourceQuota{
			ObjectMeta: metav1.ObjectMeta{Namespace: "research", Name: "no-jobs"},
			Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"count/jobs.batch": resource.MustParse("0")}},
		}
		Expect(east.Create(ctx, quota)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(east.Delete(ctx, quota))).To(Succeed()) })

		job := gpuJob{pods: 1, gpus: 1, runFor: "1h"}.create(ctx, "refused")
		Eventually(func(g Gomega) {
			g.Expect(checkMessage(ctx, job)).To(And(HavePrefix("Dispatched to worker us-east, which does not take the copy yet: "), ContainSubstring("no-jobs")))
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
		expectRunningOn(ctx, job, "us-west", 2*wait)
		Expect(eventNotes(ctx, job, "Rejected")).To(ContainElement(And(HavePrefix("worker us-east did not take the copy within 15s: "), HaveSuffix("placing it elsewhere"))))
		Expect(eventNotes(ctx, job, "Placed")).To(ContainElement(ContainSubstring("us-east: refused this workload's copy (")))
		Expect(watcher.Clusters(job.Namespace + "/" + job.Name)).To(Equal([]string{"us-west"}))
	})

	It("queues a job its worker's agent preempted again at once, as a preemption, not a rejection", func(ctx SpecContext) {
		job := gpuJob{pods: 1, gpus: 1, runFor: "1h"}.create(ctx, "preempted-there")
		expectRunningOn(ctx, job, "us-east", wait)
		// us-east's agent makes room for a higher-priority copy: the test writes its verdict as the
		// agent does (Evicted and Preempted on the copy, then the Job suspended).
		east := env.Cluster("us-east").Client()
		Eventually(func(g Gomega) {
			rwl := &kueue.Workload{}
			g.Expect(east.Get(ctx, client.ObjectKeyFromObject(workloadOf(ctx, job)), rwl)).To(Succeed())
			now := metav1.Now()
			msg := "Preempted to accommodate a higher-priority workload"
			meta.SetStatusCondition(&rwl.Status.Conditions, metav1.Condition{Type: kueue.WorkloadEvicted, Status: metav1.ConditionTrue, Reason: kueue.WorkloadEvictedByPreemption, Message: msg, LastTransitionTime: now})
			meta.SetStatusCondition(&rwl.Status.Conditions, metav1.Condition{Type: kueue.WorkloadPreempted, Status: metav1.ConditionTrue, Reason: kueue.InClusterQueueReason, Message: msg, LastTransitionTime: now})
			g.Expect(east.Status().Update(ctx, rwl)).To(Succeed())
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
		Eventually(func(g Gomega) {
			rjob := &batchv1.Job{}
			g.Expect(east.Get(ctx, client.ObjectKeyFromObject(job), rjob)).To(Succeed())
			rjob.Spec.Suspend = ptr.To(true)
			g.Expect(east.Update(ctx, rjob)).To(Succeed())
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())

		Eventually(func(g Gomega) {
			g.Expect(eventNotes(ctx, job, kueue.WorkloadEvictedByPreemption)).To(ContainElement(
				"worker us-east evicted its copy (Preempted): Preempted to accommodate a higher-priority workload"))
			wl := workloadOf(ctx, job)
			rq := meta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadRequeued)
			g.Expect(rq).NotTo(BeNil())
			g.Expect(rq.Reason).To(Equal(kueue.WorkloadEvictedByPreemption), "requeued as a preemption: %s", rq.Message)
			g.Expect(wl.Status.RequeueState).To(BeNil(), "a preempted workload queues again without backoff")
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
		Expect(eventNotes(ctx, job, "Rejected")).To(BeEmpty())
		Eventually(func(g Gomega) {
			c := clusterOf(ctx, job)
			g.Expect(c).NotTo(BeEmpty())
			g.Expect(runningIn(ctx, c, job)).To(Equal(1))
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed(), "and it runs again")
	})
})
