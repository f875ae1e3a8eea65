package bench

import (
	"context"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/e2e/lab"
)

// Names of the objects every run creates, the same for both systems.
const (
	// LocalQueueName is the LocalQueue in every team namespace.
	LocalQueueName = "lq"
	// AdmissionCheckName and MultiKueueConfigName wire multi-cluster ClusterQueues to the workers.
	AdmissionCheckName   = "dispatch"
	MultiKueueConfigName = "workers"
	// WorkerQueueName is the ClusterQueue Kueue needs in each worker (fleetq's workers need none).
	WorkerQueueName = "worker-cq"
	// multiKueueController is the AdmissionCheck controller both systems answer to.
	multiKueueController = "kueue.x-k8s.io/multikueue"
)

// TeamNamespace is the namespace of queue i.
func TeamNamespace(i int) string { return fmt.Sprintf("team-%d", i) }

// ClusterQueueName is the name of queue i.
func ClusterQueueName(i int) string { return fmt.Sprintf("cq-%d", i) }

func cohortOf(s *Scenario, i int) string { return fmt.Sprintf("cohort-%d", i/s.Queues.PerCohort) }

// PriorityClassName names the WorkloadPriorityClass of a priority value.
func PriorityClassName(p int32) string { return fmt.Sprintf("priority-%d", p) }

// coveredResources lists the resources a flavor's quota covers: what its nodes offer except pods.
func coveredResources(capacity corev1.ResourceList) []corev1.ResourceName {
	var out []corev1.ResourceName
	for name := range capacity {
		out = append(out, name)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// resourceFlavor selects a pool's nodes by the lab's pool label and tolerates its taints.
func resourceFlavor(f Flavor) *kueue.ResourceFlavor {
	n, _ := poolNode(f.PoolType)
	rf := &kueue.ResourceFlavor{
		ObjectMeta: metav1.ObjectMeta{Name: f.Name},
		Spec:       kueue.ResourceFlavorSpec{NodeLabels: map[string]string{lab.PoolLabel: f.PoolType}},
	}
	for _, t := range n.Taints {
		rf.Spec.Tolerations = append(rf.Spec.Tolerations, corev1.Toleration{Key: t.Key, Operator: corev1.TolerationOpExists, Effect: t.Effect})
	}
	return rf
}

// resourceGroups puts every flavor of the scenario in one group per set of covered resources, each
// resource's quota given by quota(flavor, resource).
func resourceGroups(s *Scenario, flavors []Flavor, capacity func(Flavor) corev1.ResourceList, quota func(Flavor, corev1.ResourceName, resource.Quantity) kueue.ResourceQuota) []kueue.ResourceGroup {
	var groups []kueue.ResourceGroup
	index := map[string]int{}
	for _, f := range flavors {
		capa := capacity(f)
		covered := coveredResources(capa)
		key := fmt.Sprint(covered)
		i, ok := index[key]
		if !ok {
			i = len(groups)
			index[key] = i
			groups = append(groups, kueue.ResourceGroup{CoveredResources: covered})
		}
		fq := kueue.FlavorQuotas{Name: kueue.ResourceFlavorReference(f.Name)}
		for _, r := range covered {
			fq.Resources = append(fq.Resources, quota(f, r, capa[r]))
		}
		groups[i].Flavors = append(groups[i].Flavors, fq)
	}
	return groups
}

// managementObjects are the queue objects of the management cluster: flavors, priority classes,
// ClusterQueues (with the dispatch admission check in multi-cluster scenarios), team namespaces and
// their LocalQueues. Both systems get exactly these.
func managementObjects(s *Scenario) []client.Object {
	var objs []client.Object
	for _, f := range s.Flavors {
		objs = append(objs, resourceFlavor(f))
	}
	objs = append(objs, priorityClasses(s)...)
	if s.Topology == MultiCluster {
		var names []string
		for _, w := range s.Workers {
			names = append(names, w.Name)
		}
		objs = append(objs,
			&kueue.MultiKueueConfig{ObjectMeta: metav1.ObjectMeta{Name: MultiKueueConfigName}, Spec: kueue.MultiKueueConfigSpec{Clusters: names}},
			&kueue.AdmissionCheck{ObjectMeta: metav1.ObjectMeta{Name: AdmissionCheckName}, Spec: kueue.AdmissionCheckSpec{
				ControllerName: multiKueueController,
				Parameters:     &kueue.AdmissionCheckParametersReference{APIGroup: kueue.GroupVersion.Group, Kind: "MultiKueueConfig", Name: MultiKueueConfigName},
			}})
	}
	for i := range s.queueTotal() {
		cohort := kueue.CohortReference(cohortOf(s, i))
		if s.isProbe(i) {
			cohort = "" // a probe borrows nothing and lends nothing: its admission waits on no one
		}
		cq := &kueue.ClusterQueue{
			ObjectMeta: metav1.ObjectMeta{Name: ClusterQueueName(i)},
			Spec: kueue.ClusterQueueSpec{
				NamespaceSelector: &metav1.LabelSelector{},
				CohortName:        cohort,
				ResourceGroups: resourceGroups(s, s.Flavors, s.FlavorCapacity, func(f Flavor, r corev1.ResourceName, capa resource.Quantity) kueue.ResourceQuota {
					q := kueue.ResourceQuota{Name: r, NominalQuota: share(capa, s.Queues.NominalShare)}
					if s.Queues.BorrowingShare > 0 {
						q.BorrowingLimit = ptr.To(share(capa, s.Queues.BorrowingShare))
					}
					return q
				}),
				Preemption: &kueue.ClusterQueuePreemption{
					ReclaimWithinCohort: kueue.PreemptionPolicy(orDefault(s.Queues.ReclaimWithinCohort, "Never")),
					WithinClusterQueue:  kueue.PreemptionPolicy(orDefault(s.Queues.WithinClusterQueue, "Never")),
				},
			},
		}
		if s.Topology == MultiCluster {
			cq.Spec.AdmissionChecksStrategy = &kueue.AdmissionChecksStrategy{AdmissionChecks: []kueue.AdmissionCheckStrategyRule{{Name: AdmissionCheckName}}}
		}
		objs = append(objs, cq)
	}
	objs = append(objs, teamObjects(s, func(int) string { return "" })...)
	return objs
}

// teamObjects are the team namespaces and their LocalQueues; cq picks each queue's ClusterQueue
// ("" for the team's own).
func teamObjects(s *Scenario, cq func(int) string) []client.Object {
	var objs []client.Object
	for i := range s.queueTotal() {
		target := cq(i)
		if target == "" {
			target = ClusterQueueName(i)
		}
		objs = append(objs,
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: TeamNamespace(i)}},
			&kueue.LocalQueue{
				ObjectMeta: metav1.ObjectMeta{Namespace: TeamNamespace(i), Name: LocalQueueName},
				Spec:       kueue.LocalQueueSpec{ClusterQueue: kueue.ClusterQueueReference(target)},
			})
	}
	return objs
}

func priorityClasses(s *Scenario) []client.Object {
	seen := map[int32]bool{}
	var objs []client.Object
	for _, c := range s.Classes {
		if c.Priority == 0 || seen[c.Priority] {
			continue
		}
		seen[c.Priority] = true
		objs = append(objs, &kueue.WorkloadPriorityClass{ObjectMeta: metav1.ObjectMeta{Name: PriorityClassName(c.Priority)}, Value: c.Priority})
	}
	return objs
}

// kueueWorkerObjects are what Kueue needs in a worker for MultiKueue: the flavors of the worker's
// pools, one ClusterQueue offering exactly the worker's hardware (quota = its nodes' allocatable,
// so MultiKueue's placement by worker quota matches the nodes), the team namespaces with LocalQueues
// of the same names as on the manager, and the priority classes.
func kueueWorkerObjects(s *Scenario, w Worker) []client.Object {
	var flavors []Flavor
	for _, f := range s.Flavors {
		if len(WorkerCapacity(w, f.PoolType)) > 0 {
			flavors = append(flavors, f)
		}
	}
	var objs []client.Object
	for _, f := range flavors {
		objs = append(objs, resourceFlavor(f))
	}
	objs = append(objs, priorityClasses(s)...)
	objs = append(objs, &kueue.ClusterQueue{
		ObjectMeta: metav1.ObjectMeta{Name: WorkerQueueName},
		Spec: kueue.ClusterQueueSpec{
			NamespaceSelector: &metav1.LabelSelector{},
			ResourceGroups: resourceGroups(s, flavors, func(f Flavor) corev1.ResourceList { return WorkerCapacity(w, f.PoolType) },
				func(_ Flavor, r corev1.ResourceName, capa resource.Quantity) kueue.ResourceQuota {
					return kueue.ResourceQuota{Name: r, NominalQuota: capa}
				}),
		},
	})
	objs = append(objs, teamObjects(s, func(int) string { return WorkerQueueName })...)
	return objs
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// createAll creates objects in order, tolerating ones that exist.
func createAll(ctx context.Context, c client.Client, cluster string, objs []client.Object) error {
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("cluster %q: create %T %q: %w", cluster, o, client.ObjectKeyFromObject(o), err)
		}
	}
	return nil
}
