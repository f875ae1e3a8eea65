package scheduler

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/manager/cache"
)

func TestFirstCycleWaitsUntilEveryReservationIsAccounted(t *testing.T) {
	cq := kueue.ClusterQueue{
		ObjectMeta: metav1.ObjectMeta{Name: "research-cq"},
		Spec: kueue.ClusterQueueSpec{NamespaceSelector: &metav1.LabelSelector{}, ResourceGroups: []kueue.ResourceGroup{{
			CoveredResources: []corev1.ResourceName{corev1.ResourceCPU},
			Flavors:          []kueue.FlavorQuotas{{Name: "default-flavor", Resources: []kueue.ResourceQuota{{Name: corev1.ResourceCPU, NominalQuota: resource.MustParse("4")}}}},
		}}},
	}
	reserved := func(name, cq string) kueue.Workload {
		return kueue.Workload{
			ObjectMeta: metav1.ObjectMeta{Namespace: "research", Name: name},
			Spec:       kueue.WorkloadSpec{QueueName: "team-queue", PodSets: []kueue.PodSet{{Name: "main", Count: 1}}},
			Status: kueue.WorkloadStatus{
				Conditions: []metav1.Condition{{Type: kueue.WorkloadQuotaReserved, Status: metav1.ConditionTrue}},
				Admission:  &kueue.Admission{ClusterQueue: kueue.ClusterQueueReference(cq)},
			},
		}
	}
	running, orphan := reserved("running", "research-cq"), reserved("orphan", "deleted-cq")
	pending := kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "research", Name: "pending"}}
	wls := []kueue.Workload{running, orphan, pending}

	c := cache.New()
	if got := unaccounted(c, []kueue.ClusterQueue{cq}, wls); !slices.Equal(got, []string{"clusterqueue research-cq"}) {
		t.Errorf("before the queue is cached: %v", got)
	}
	c.AddOrUpdateFlavor(&kueue.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: "default-flavor"}})
	c.AddOrUpdateClusterQueue(&cq)
	if got := unaccounted(c, []kueue.ClusterQueue{cq}, wls); !slices.Equal(got, []string{"workload research/running"}) {
		t.Errorf("the queue is cached, the running workload's quota not yet: %v", got)
	}
	if err := c.SetAdmitted(cache.Workload(&running, "research-cq"), "research/team-queue", true); err != nil {
		t.Fatal(err)
	}
	if got := unaccounted(c, []kueue.ClusterQueue{cq}, wls); len(got) != 0 {
		t.Errorf("everything accounted (pending holds nothing, the orphan's queue is gone): %v", got)
	}
}
