package cache

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/internal/engine"
)

func cpuQueue(name, cohort, nominal string) *kueue.ClusterQueue {
	return &kueue.ClusterQueue{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: kueue.ClusterQueueSpec{
			Cohort:            kueue.CohortReference(cohort),
			NamespaceSelector: &metav1.LabelSelector{},
			ResourceGroups: []kueue.ResourceGroup{{
				CoveredResources: []corev1.ResourceName{corev1.ResourceCPU},
				Flavors: []kueue.FlavorQuotas{{Name: "default-flavor", Resources: []kueue.ResourceQuota{{
					Name: corev1.ResourceCPU, NominalQuota: resource.MustParse(nominal), BorrowingLimit: ptr.To(resource.MustParse("4")),
				}}}},
			}},
		},
	}
}

func TestClusterQueueConversion(t *testing.T) {
	cq := cpuQueue("research-cq", "ai-platform", "4")
	cq.Spec.QueueingStrategy = kueue.StrictFIFO
	cq.Spec.Preemption = &kueue.ClusterQueuePreemption{ReclaimWithinCohort: kueue.PreemptionPolicyAny, WithinClusterQueue: kueue.PreemptionPolicyLowerPriority}
	cq.Spec.StopPolicy = ptr.To(kueue.Hold)
	got := ClusterQueue(cq)
	want := engine.ClusterQueue{
		Name:             "research-cq",
		Cohort:           "ai-platform", // the tutorial's alias counts as cohortName
		QueueingStrategy: engine.StrictFIFO,
		Preemption:       engine.Preemption{ReclaimWithinCohort: engine.PreemptAny, WithinClusterQueue: engine.PreemptLowerPriority},
		Stopped:          true,
		ResourceGroups: []engine.ResourceGroup{{
			CoveredResources: []corev1.ResourceName{corev1.ResourceCPU},
			Flavors: []engine.FlavorQuotas{{Name: "default-flavor", Resources: []engine.ResourceQuota{{
				Name: corev1.ResourceCPU, Nominal: 4000, BorrowingLimit: ptr.To[int64](4000),
			}}}},
		}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ClusterQueue (-want +got):\n%s", diff)
	}
}

func TestWorkloadConversion(t *testing.T) {
	created := metav1.NewTime(time.Unix(100, 0))
	wl := &kueue.Workload{
		ObjectMeta: metav1.ObjectMeta{Namespace: "research", Name: "job-a", CreationTimestamp: created},
		Spec: kueue.WorkloadSpec{
			Priority: ptr.To[int32](7),
			PodSets: []kueue.PodSet{{Name: "main", Count: 2, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				NodeSelector: map[string]string{"zone": "a"},
				Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("512Mi"), "example.com/zero": resource.MustParse("0"),
				}}}},
			}}}},
		},
	}
	got := Workload(wl, "research-cq")
	want := engine.Workload{
		Key: "research/job-a", ClusterQueue: "research-cq", Priority: 7, Timestamp: created.UnixNano(),
		PodSets: []engine.PodSet{{
			Name: "main", Count: 2, NodeSelector: map[string]string{"zone": "a"},
			Requests: map[corev1.ResourceName]int64{corev1.ResourceCPU: 1000, corev1.ResourceMemory: 512 << 20},
		}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Workload (-want +got):\n%s", diff)
	}

	// Once quota is reserved, the admission (and not the LocalQueue) says where it is held.
	wl.Status.Admission = &kueue.Admission{ClusterQueue: "other-cq", PodSetAssignments: []kueue.PodSetAssignment{{
		Name: "main", Count: ptr.To[int32](2), Flavors: map[corev1.ResourceName]kueue.ResourceFlavorReference{corev1.ResourceCPU: "default-flavor"},
		ResourceUsage: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
	}}}
	wl.Status.Conditions = []metav1.Condition{{Type: kueue.WorkloadQuotaReserved, Status: metav1.ConditionTrue, LastTransitionTime: metav1.NewTime(time.Unix(200, 0))}}
	got = Workload(wl, "research-cq")
	if got.ClusterQueue != "other-cq" || got.AdmittedAt != time.Unix(200, 0).UnixNano() || got.Admission.PodSets[0].Usage[corev1.ResourceCPU] != 2000 {
		t.Errorf("admitted workload: cq %q admittedAt %d usage %v", got.ClusterQueue, got.AdmittedAt, got.Admission.PodSets[0].Usage)
	}
	back := Admission(got.Admission)
	if diff := cmp.Diff(wl.Status.Admission, back, cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })); diff != "" {
		t.Errorf("Admission round trip (-want +got):\n%s", diff)
	}
}

func TestRouteFor(t *testing.T) {
	c := New()
	c.AddOrUpdateFlavor(&kueue.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: "default-flavor"}})
	c.AddOrUpdateClusterQueue(cpuQueue("research-cq", "", "4"))
	restricted := cpuQueue("restricted-cq", "", "4")
	restricted.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "research"}}
	c.AddOrUpdateClusterQueue(restricted)
	for _, lq := range []*kueue.LocalQueue{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "research", Name: "team-queue"}, Spec: kueue.LocalQueueSpec{ClusterQueue: "research-cq"}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "research", Name: "ghost-queue"}, Spec: kueue.LocalQueueSpec{ClusterQueue: "ghost-cq"}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "research", Name: "stopped-queue"}, Spec: kueue.LocalQueueSpec{ClusterQueue: "research-cq", StopPolicy: ptr.To(kueue.Hold)}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "research", Name: "restricted-queue"}, Spec: kueue.LocalQueueSpec{ClusterQueue: "restricted-cq"}},
	} {
		c.AddOrUpdateLocalQueue(lq)
	}
	cases := map[string]struct {
		queue   string
		labels  map[string]string
		wantCQ  string
		problem string
	}{
		"routed":                 {queue: "team-queue", wantCQ: "research-cq"},
		"no queue name":          {problem: "names no LocalQueue; set the kueue.x-k8s.io/queue-name label"},
		"missing LocalQueue":     {queue: "no-such-queue", problem: "LocalQueue no-such-queue doesn't exist in namespace research"},
		"missing ClusterQueue":   {queue: "ghost-queue", wantCQ: "ghost-cq", problem: "ClusterQueue ghost-cq doesn't exist"},
		"stopped LocalQueue":     {queue: "stopped-queue", wantCQ: "research-cq", problem: "LocalQueue stopped-queue is stopped"},
		"namespace not selected": {queue: "restricted-queue", wantCQ: "restricted-cq", problem: "namespace research doesn't match the namespaceSelector of ClusterQueue restricted-cq"},
		"namespace selected":     {queue: "restricted-queue", labels: map[string]string{"team": "research"}, wantCQ: "restricted-cq"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := c.RouteFor("research", tc.labels, tc.queue)
			if r.ClusterQueue != tc.wantCQ {
				t.Errorf("ClusterQueue = %q, want %q", r.ClusterQueue, tc.wantCQ)
			}
			if (tc.problem == "") != (r.Problem == "") || !strings.Contains(r.Problem, tc.problem) {
				t.Errorf("Problem = %q, want one containing %q", r.Problem, tc.problem)
			}
		})
	}
}

func TestAssumeAndRelease(t *testing.T) {
	c := New()
	var changed []string
	c.OnChange = func(cq, lq string) { changed = append(changed, cq+"|"+lq) }
	c.AddOrUpdateFlavor(&kueue.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: "default-flavor"}})
	c.AddOrUpdateClusterQueue(cpuQueue("a", "c", "4"))
	c.AddOrUpdateClusterQueue(cpuQueue("b", "c", "4"))
	w := engine.Workload{Key: "ns/w", ClusterQueue: "a", Admission: &engine.Admission{ClusterQueue: "a", PodSets: []engine.PodSetAssignment{{
		Name: "main", Count: 1, Flavors: map[corev1.ResourceName]string{corev1.ResourceCPU: "default-flavor"}, Usage: map[corev1.ResourceName]int64{corev1.ResourceCPU: 6000},
	}}}}
	if err := c.Assume(w, "ns/lq", true); err != nil {
		t.Fatal(err)
	}
	if !c.IsAssumed("ns/w") || !c.HoldsQuota("ns/w") {
		t.Fatal("an assumed admission holds quota and is marked assumed")
	}
	st, admitted, _ := c.ClusterQueueStatus("a")
	if admitted != 1 || st.Usage[0].Resources[0].Total != 6000 || st.Usage[0].Resources[0].Borrowed != 2000 {
		t.Errorf("status after assume: admitted %d usage %+v", admitted, st.Usage)
	}
	// The API server confirms it: no longer assumed.
	if err := c.SetAdmitted(w, "ns/lq", true); err != nil {
		t.Fatal(err)
	}
	if c.IsAssumed("ns/w") {
		t.Error("confirmed admission is still assumed")
	}
	if u := c.LocalQueueUsage("ns/lq"); u.Reserving != 1 || u.Usage["default-flavor"][corev1.ResourceCPU] != 6000 {
		t.Errorf("LocalQueueUsage = %+v", u)
	}
	wake := c.Release("ns/w")
	if diff := cmp.Diff([]string{"a", "b"}, wake); diff != "" {
		t.Errorf("queues woken by the release (-want +got):\n%s", diff)
	}
	if c.HoldsQuota("ns/w") {
		t.Error("released workload still holds quota")
	}
	if len(changed) < 2 || changed[len(changed)-1] != "a|ns/lq" {
		t.Errorf("OnChange calls = %v", changed)
	}
}
