package multicluster

import (
	"encoding/json"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2" //nolint:revive // Ginkgo's DSL reads best unqualified.
	. "github.com/onsi/gomega"    //nolint:revive // Gomega's DSL reads best unqualified.
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/config"
	"github.com/fleetq/fleetq/dispatch/registry"
	"github.com/fleetq/fleetq/e2e/components"
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
func bringEastBack(ctx SpecContext, faults lab.Faults) { bringBack(ctx, "us-east", faults) }

// bringBack restarts a worker's API server, and its agent if it exited meanwhile.
func bringBack(ctx SpecContext, worker string, faults lab.Faults) {
	Expect(faults.RestartAPIServer(ctx)).To(Succeed())
	if !agents[worker].Running() {
		Expect(agents[worker].Restart(ctx)).To(Succeed())
	}
}

// withLostWorkerPolicy restarts the manager with another multiCluster.lostWorkerPolicy until the
// spec ends.
func withLostWorkerPolicy(ctx SpecContext, policy string) {
	mgrCfg.MultiCluster.LostWorkerPolicy = policy
	restartManager(ctx)
	DeferCleanup(func(ctx SpecContext) {
		mgrCfg.MultiCluster.LostWorkerPolicy = config.AtMostOnce
		restartManager(ctx)
	})
}

// restartManager restarts the manager with mgrCfg and waits until its webhooks answer again, so
// the spec's next job is not refused by a webhook that is not serving yet.
func restartManager(ctx SpecContext) {
	Expect(manager.Restart(ctx)).To(Succeed())
	Expect(components.WaitForWebhooks(ctx, mgmt, time.Minute)).To(Succeed())
}

// stopEastAPIServer stops us-east's API server until it is brought back, at the latest when
// the spec ends (later specs need it), and says when the stop began: the API server refuses
// probes from then on, while it shuts down.
func stopEastAPIServer(ctx SpecContext) (lab.Faults, time.Time) {
	GinkgoHelper()
	return stopAPIServer(ctx, "us-east")
}

// stopAPIServer is stopEastAPIServer for any worker.
func stopAPIServer(ctx SpecContext, worker string) (lab.Faults, time.Time) {
	GinkgoHelper()
	faults, err := env.Cluster(worker).Faults()
	Expect(err).NotTo(HaveOccurred())
	stopped := time.Now()
	Expect(faults.StopAPIServer(ctx)).To(Succeed())
	DeferCleanup(func(ctx SpecContext) {
		if !framework.Reachable(ctx, env.Cluster(worker), 5*time.Second) {
			bringBack(ctx, worker, faults)
		}
	})
	return faults, stopped
}

// onEast starts a job that fills one us-east node and waits until it runs there.
func onEast(ctx SpecContext, name string) *batchv1.Job {
	job := gpuJob{pods: 1, gpus: 8, runFor: "1h"}.create(ctx, name)
	Eventually(func(g Gomega) {
		g.Expect(clusterOf(ctx, job)).To(Equal("us-east"), "placement: %s (%v)", placementOf(ctx, job), eventNotes(ctx, job, "QuotaReserved"))
		g.Expect(runningIn(ctx, "us-east", job)).To(Equal(1))
	}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
	return job
}

// expectRefusedByEast waits until the job's admission check says how us-east does not take its
// copy (state, then cause), then sees it run on us-west, rejected from us-east after within.
func expectRefusedByEast(ctx SpecContext, job *batchv1.Job, state, cause string, within time.Duration) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		g.Expect(checkMessage(ctx, job)).To(And(HavePrefix("Dispatched to worker us-east, "+state), ContainSubstring(cause)))
	}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
	expectRunningOn(ctx, job, "us-west", 2*wait)
	Expect(eventNotes(ctx, job, "Rejected")).To(ContainElement(And(HavePrefix(fmt.Sprintf("worker us-east did not take the copy within %s: ", within)), HaveSuffix("placing it elsewhere"))))
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

	It("at least once: partitioned from the manager, a worker fences its copies before the manager places them elsewhere, and its stale copies go when it is back", func(ctx SpecContext) {
		withLostWorkerPolicy(ctx, config.AtLeastOnce)
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

	It("at least once: re-dispatches the jobs of a worker whose API server died, and removes their stale copies when it is back", func(ctx SpecContext) {
		withLostWorkerPolicy(ctx, config.AtLeastOnce)
		job := onEast(ctx, "orphaned")
		// When this spec failed half-way, later specs still need a clean record (this runs after
		// us-east is back: cleanups run last in, first out).
		DeferCleanup(func() { watcher.Unobservable("us-east", job.Namespace+"/"+job.Name) })
		faults, stopped := stopEastAPIServer(ctx)
		Eventually(func(g Gomega) {
			g.Expect(clusterOf(ctx, job)).To(Equal("us-west"))
			g.Expect(runningIn(ctx, "us-west", job)).To(Equal(1))
		}).WithContext(ctx).WithTimeout(2 * wait).WithPolling(poll).Should(Succeed())
		Expect(time.Since(stopped)).To(BeNumerically(">=", mgrCfg.MultiCluster.WorkerLostTimeout.Duration))
		wl := workloadOf(ctx, job)
		Expect(workload.IsAdmitted(wl)).To(BeTrue())

		// While us-east's API server is dead, nothing about its pods can be observed or
		// enforced (a real kubelet would keep running them): its stale copy's pods (those that
		// exist now) are excused from the overlap check, and this spec asserts instead that the
		// copy is removed once it is back.
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
	})
	It("at most once: keeps the job of a worker whose API server died on that worker until it is back, and never runs it twice", func(ctx SpecContext) {
		job := onEast(ctx, "kept")
		faults, stopped := stopEastAPIServer(ctx)
		// Its nodes may still run the pod (a real kubelet would): past workerLostTimeout the
		// workload stays placed on us-east, says why, and no copy appears anywhere else.
		Eventually(func() string { return checkMessage(ctx, job) }).WithContext(ctx).WithTimeout(wait).WithPolling(poll).
			Should(ContainSubstring("multiCluster.lostWorkerPolicy: AtMostOnce"))
		Expect(time.Since(stopped)).To(BeNumerically(">=", mgrCfg.MultiCluster.WorkerLostTimeout.Duration))
		Consistently(func(g Gomega) {
			g.Expect(clusterOf(ctx, job)).To(Equal("us-east"))
			for _, w := range []string{"us-west", "eu-west"} {
				j := &batchv1.Job{}
				g.Expect(apierrors.IsNotFound(env.Cluster(w).Client().Get(ctx, client.ObjectKeyFromObject(job), j))).To(BeTrue(), "a copy in %s", w)
			}
		}).WithContext(ctx).WithTimeout(5 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())

		bringEastBack(ctx, faults)
		Eventually(func(g Gomega) {
			active, _ := workerActive(ctx, "us-east")
			g.Expect(active).To(BeTrue())
			g.Expect(runningIn(ctx, "us-east", job)).To(Equal(1), "the job kept running where it was")
			g.Expect(workload.IsAdmitted(workloadOf(ctx, job))).To(BeTrue())
			g.Expect(copiesOf(ctx, job)).To(Equal([]string{"us-east"}))
			// The overlap watcher's informer for us-east relists with its own backoff after the outage.
			g.Expect(watcher.Clusters(job.Namespace+"/"+job.Name)).To(Equal([]string{"us-east"}), "it ran in us-east only")
		}).WithContext(ctx).WithTimeout(2 * wait).WithPolling(poll).Should(Succeed())
	})

	It("does not preempt a job whose worker does not answer; it preempts one it can stop, where the preemptor then fits", func(ctx SpecContext) {
		for name, value := range map[string]int32{"mc-low": 10, "mc-high": 1000} {
			wpc := &kueue.WorkloadPriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value}
			Expect(mgmt.Create(ctx, wpc)).To(Succeed())
			DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(mgmt.Delete(ctx, wpc))).To(Succeed()) })
		}
		// Pinned to A100s: the high job would otherwise take the L4 flavor, where it fits quota by
		// borrowing (but no node), rather than preempt.
		low := gpuJob{pods: 1, gpus: 8, runFor: "1h", priorityClass: "mc-low", product: lab.A100}
		// research holds 24 A100s, nominal 16 plus its borrowing limit, over the two A100 workers
		// (two nodes of 8 each): the last job, admitted last and so the first victim among equals,
		// runs on one of them (down), and at least one of the others on the other worker (up).
		// The three share one priority, so the victim, queued again, cannot in turn preempt the
		// last one once its worker answers again: what the spec checks at its end stays true.
		var lows []*batchv1.Job
		for _, name := range []string{"low-a", "low-b", "last-c"} {
			j := low.create(ctx, name)
			Eventually(func(g Gomega) {
				c := clusterOf(ctx, j)
				g.Expect(c).NotTo(BeEmpty())
				g.Expect(runningIn(ctx, c, j)).To(Equal(1))
			}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
			lows = append(lows, j)
		}
		down := clusterOf(ctx, lows[2])
		up := map[string]string{"us-east": "us-west", "us-west": "us-east"}[down]
		Expect(up).NotTo(BeEmpty(), "last-c runs on %s", down)

		faults, _ := stopAPIServer(ctx, down)
		Eventually(func() bool { active, _ := workerActive(ctx, down); return active }).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(BeFalse())
		// last-c would be the victim: on the worker that is down, its eviction cannot land, and
		// what ran there may have finished unseen.
		high := gpuJob{pods: 1, gpus: 8, runFor: "1h", priorityClass: "mc-high", product: lab.A100}.create(ctx, "high")
		expectRunningOn(ctx, high, up, 2*wait)
		victims := 0
		for _, j := range lows {
			wl := workloadOf(ctx, j)
			if c := meta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadPreempted); c != nil && c.Status == metav1.ConditionTrue {
				victims++
				Expect(c.Message).To(ContainSubstring("high"), "%s preempted for the high job", j.Name)
				Expect(workload.ClusterName(wl)).NotTo(Equal(down), "%s was preempted although its worker is down", j.Name)
			}
		}
		Expect(victims).To(BeNumerically(">=", 1), "the high job made its room on %s", up)

		bringBack(ctx, down, faults)
		Eventually(func(g Gomega) {
			g.Expect(runningIn(ctx, down, lows[2])).To(Equal(1), "last-c runs on where it was")
			g.Expect(workload.IsAdmitted(workloadOf(ctx, lows[2]))).To(BeTrue())
		}).WithContext(ctx).WithTimeout(2 * wait).WithPolling(poll).Should(Succeed())
	})

	It("places the jobs of a worker whose MultiKueueCluster was deleted elsewhere after workerLostTimeout, and removes their copies when it is registered again", func(ctx SpecContext) {
		job := onEast(ctx, "unregistered")
		mkc := &kueue.MultiKueueCluster{}
		Expect(mgmt.Get(ctx, client.ObjectKey{Name: "us-east"}, mkc)).To(Succeed())
		again := &kueue.MultiKueueCluster{ObjectMeta: metav1.ObjectMeta{Name: mkc.Name, Labels: mkc.Labels}, Spec: mkc.Spec}
		register := func(ctx SpecContext) {
			if err := mgmt.Create(ctx, again.DeepCopy()); !apierrors.IsAlreadyExists(err) {
				Expect(err).NotTo(HaveOccurred())
			}
			Eventually(func() bool { active, _ := workerActive(ctx, "us-east"); return active }).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(BeTrue())
			// Placement passes a worker over until it has read its report again, unfenced.
			Eventually(func(g Gomega) {
				cur := &kueue.MultiKueueCluster{}
				g.Expect(mgmt.Get(ctx, client.ObjectKey{Name: "us-east"}, cur)).To(Succeed())
				var sum registry.CapacitySummary
				g.Expect(json.Unmarshal([]byte(cur.Annotations[registry.CapacityAnnotation]), &sum)).To(Succeed())
				g.Expect(sum.Fenced).To(BeFalse())
				g.Expect(sum.Flavors).NotTo(BeEmpty())
			}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
		}
		DeferCleanup(register)
		// takeOut deletes us-east's MultiKueueCluster: the job is not stranded, it says why it
		// waits, goes elsewhere after workerLostTimeout (us-east's agent, which no longer hears
		// from the manager, has fenced the old copy by then), and its stale copy in us-east goes
		// once the manager reaches it again.
		takeOut := func(job *batchv1.Job) {
			GinkgoHelper()
			cur := &kueue.MultiKueueCluster{}
			Expect(mgmt.Get(ctx, client.ObjectKey{Name: "us-east"}, cur)).To(Succeed())
			deleted := time.Now()
			Expect(mgmt.Delete(ctx, cur)).To(Succeed())
			Eventually(func() string { return checkMessage(ctx, job) }).WithContext(ctx).WithTimeout(wait).WithPolling(poll).
				Should(ContainSubstring("worker us-east is not registered"))
			Eventually(func(g Gomega) {
				g.Expect(clusterOf(ctx, job)).To(Equal("us-west"), "placement: %s", placementOf(ctx, job))
				g.Expect(runningIn(ctx, "us-west", job)).To(Equal(1))
			}).WithContext(ctx).WithTimeout(2 * wait).WithPolling(poll).Should(Succeed())
			Expect(time.Since(deleted)).To(BeNumerically(">=", mgrCfg.MultiCluster.WorkerLostTimeout.Duration), "placed elsewhere only after workerLostTimeout")
			Expect(eventNotes(ctx, job, "Rejected")).To(ContainElement(ContainSubstring("worker us-east lost: no longer registered")))
			register(ctx)
			Eventually(func() []string { return copiesOf(ctx, job) }).WithContext(ctx).WithTimeout(wait).WithPolling(poll).
				Should(Equal([]string{"us-west"}), "the stale copy in us-east goes once the manager reaches it again")
		}

		// After a restart no requeue of the job's workload is pending: the deletion itself must
		// bring it back to the dispatcher.
		restartManager(ctx)
		Consistently(func(g Gomega) {
			g.Expect(clusterOf(ctx, job)).To(Equal("us-east"))
			g.Expect(runningIn(ctx, "us-east", job)).To(Equal(1))
		}).WithContext(ctx).WithTimeout(mgrCfg.MultiCluster.WorkerLostTimeout.Duration + 2*time.Second).WithPolling(time.Second).Should(Succeed())
		takeOut(job)
		// Registered again, the worker's count starts afresh: taken out a second time, its
		// next job gets the whole grace too.
		takeOut(onEast(ctx, "unregistered-again"))
	})

	It("keeps the quota of a job deleted while its worker is unreachable until its copy is gone there", func(ctx SpecContext) {
		job := onEast(ctx, "deleted-while-away")
		good, err := framework.WorkerKubeconfigSecret(env.Cluster("us-east"), mgrCfg.Namespace, "unused")
		Expect(err).NotTo(HaveOccurred())
		closed, err := framework.ClosedPortKubeconfig(env.Cluster("us-east"))
		Expect(err).NotTo(HaveOccurred())
		setKubeconfig(ctx, "us-east", closed)
		DeferCleanup(func(ctx SpecContext) { setKubeconfig(ctx, "us-east", good.Data[framework.KubeconfigSecretKey]) })
		Eventually(func() bool { active, _ := workerActive(ctx, "us-east"); return active }).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(BeFalse())
		reserving := func(g Gomega) int32 {
			cq := &kueue.ClusterQueue{}
			g.Expect(mgmt.Get(ctx, client.ObjectKey{Name: "research-gpu-cq"}, cq)).To(Succeed())
			return cq.Status.ReservingWorkloads
		}
		// The queue's status is written a moment after the admission.
		Eventually(reserving).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(BeNumerically(">=", 1))
		wl := workloadOf(ctx, job)
		Expect(mgmt.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
		// The copy may still run in us-east: the workload, and the quota it holds, stay.
		Eventually(func(g Gomega) {
			cur := &kueue.Workload{}
			g.Expect(mgmt.Get(ctx, client.ObjectKeyFromObject(wl), cur)).To(Succeed())
			g.Expect(cur.DeletionTimestamp).NotTo(BeNil(), "the garbage collector deletes the job's workload")
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
		Consistently(func(g Gomega) {
			cur := &kueue.Workload{}
			g.Expect(mgmt.Get(ctx, client.ObjectKeyFromObject(wl), cur)).To(Succeed())
			g.Expect(cur.DeletionTimestamp).NotTo(BeNil())
			g.Expect(workload.HasQuotaReservation(cur)).To(BeTrue())
			g.Expect(reserving(g)).To(BeNumerically(">=", 1))
		}).WithContext(ctx).WithTimeout(5 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())

		setKubeconfig(ctx, "us-east", good.Data[framework.KubeconfigSecretKey])
		Eventually(func(g Gomega) {
			g.Expect(copiesOf(ctx, job)).To(BeEmpty())
			g.Expect(podsIn(ctx, "us-east", job)).To(BeEmpty())
			g.Expect(apierrors.IsNotFound(mgmt.Get(ctx, client.ObjectKeyFromObject(wl), &kueue.Workload{}))).To(BeTrue(), "the workload goes once its copy is gone")
		}).WithContext(ctx).WithTimeout(wait).WithPolling(poll).Should(Succeed())
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
		Expect(eventNotes(ctx, job, "Rejected")).To(ContainElement(fmt.Sprintf(
			"worker us-east's agent did not take up the copy within workerLostTimeout (%s): is fleetq-agent running there? Placing it elsewhere",
			mgrCfg.MultiCluster.WorkerLostTimeout.Duration)))

		// While its agent stays down, us-east gets nothing more, and the placement says why.
		next := gpuJob{pods: 1, gpus: 8, runFor: "1h"}.create(ctx, "after-silence")
		Eventually(func(g Gomega) {
			g.Expect(clusterOf(ctx, next)).To(Equal("us-west"))
			g.Expect(runningIn(ctx, "us-west", next)).To(Equal(1))
			g.Expect(eventNotes(ctx, next, "QuotaReserved")).To(ContainElement(ContainSubstring("us-east: its agent left a copy untouched and has not reported since")))
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
		// A refusal (4xx) is the worker's lasting answer: placed elsewhere after 15 s.
		expectRefusedByEast(ctx, job, "which does not take the copy yet: ", "no-jobs", 15*time.Second)
		Expect(eventNotes(ctx, job, "QuotaReserved")).To(ContainElement(ContainSubstring("us-east: refused this workload's copy (")))
		Expect(watcher.Clusters(job.Namespace + "/" + job.Name)).To(Equal([]string{"us-west"}))
	})

	It("places a job elsewhere when a worker's API server fails every copy with a server error, and says why", func(ctx SpecContext) {
		// A webhook in us-east that nothing serves, failing closed: every Job create there is
		// answered 500 Internal Error, as with a broken admission controller.
		east := env.Cluster("us-east").Client()
		hook := &admissionregistrationv1.ValidatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: "broken-job-check"},
			Webhooks: []admissionregistrationv1.ValidatingWebhook{{
				Name:                    "broken.jobs.example.com",
				ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:1/validate")},
				Rules:                   []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create}, Rule: admissionregistrationv1.Rule{APIGroups: []string{"batch"}, APIVersions: []string{"v1"}, Resources: []string{"jobs"}}}},
				FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
				SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
				AdmissionReviewVersions: []string{"v1"},
				NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: "research"}},
			}},
		}
		Expect(east.Create(ctx, hook)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(east.Delete(ctx, hook))).To(Succeed()) })

		job := gpuJob{pods: 1, gpus: 1, runFor: "1h"}.create(ctx, "server-error")
		// A server error may pass: given workerLostTimeout.
		expectRefusedByEast(ctx, job, "which fails to take the copy yet: ", "broken.jobs.example.com", mgrCfg.MultiCluster.WorkerLostTimeout.Duration)
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
