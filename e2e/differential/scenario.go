// Package differential plays generated admission scenarios against Kueue v0.17 and fleetq, each on
// its own lab cluster in apiserver mode, and reports the first step where their decisions differ.
//
// A scenario is queue objects (flavors, cohorts, ClusterQueues, LocalQueues, priority classes) and
// steps (Workloads created, finished or deleted, a quota edited). After every step the runner waits
// until each system settles, then records which Workloads hold quota, on which flavors, and which
// were evicted. Workloads are created directly, with no Job: the runner plays the job's part and
// finishes each eviction (clears the reservation) as Kueue's own integration tests do.
package differential

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
)

// Scenario is one generated case: everything needed to replay it, in a form a person can read.
type Scenario struct {
	// Seed generated the scenario (Generate(Seed) returns it again).
	Seed uint64 `json:"seed"`
	// FairSharing turns fair sharing on in both systems' configuration.
	FairSharing bool `json:"fairSharing,omitempty"`
	// Flavors are ResourceFlavor names, without the scenario's prefix.
	Flavors []string `json:"flavors"`
	// Resources are covered together by every quota (one resource group).
	Resources  []corev1.ResourceName `json:"resources"`
	Cohorts    []Cohort              `json:"cohorts,omitempty"`
	Queues     []Queue               `json:"queues"`
	Priorities []Priority            `json:"priorities,omitempty"`
	Steps      []Step                `json:"steps"`
}

// Cohort is a Cohort object: a parent in a tree and, optionally, quota of its own.
type Cohort struct {
	Name   string   `json:"name"`
	Parent string   `json:"parent,omitempty"`
	Quotas []Quota  `json:"quotas,omitempty"`
	Weight *float64 `json:"weight,omitempty"`
}

// Queue is a ClusterQueue with a LocalQueue of the same name in the scenario's namespace.
type Queue struct {
	Name   string `json:"name"`
	Cohort string `json:"cohort,omitempty"`
	// Quotas are in the order the queue lists its flavors.
	Quotas         []Quota                       `json:"quotas"`
	Strategy       kueue.QueueingStrategy        `json:"strategy"`
	WithinQueue    kueue.PreemptionPolicy        `json:"withinClusterQueue"`
	Reclaim        kueue.PreemptionPolicy        `json:"reclaimWithinCohort"`
	BorrowPolicy   string                        `json:"borrowWithinCohort,omitempty"`
	BorrowMaxPrio  *int32                        `json:"borrowMaxPriorityThreshold,omitempty"`
	WhenCanBorrow  kueue.FlavorFungibilityPolicy `json:"whenCanBorrow,omitempty"`
	WhenCanPreempt kueue.FlavorFungibilityPolicy `json:"whenCanPreempt,omitempty"`
	Weight         *float64                      `json:"weight,omitempty"`
}

// Quota is one flavor's quota for every resource of the scenario: Nominal and the limits are per
// resource, in the resource's unit (cores, GiB).
type Quota struct {
	Flavor    string           `json:"flavor"`
	Nominal   map[string]int64 `json:"nominal"`
	Borrowing map[string]int64 `json:"borrowingLimit,omitempty"`
	Lending   map[string]int64 `json:"lendingLimit,omitempty"`
}

// Priority is a WorkloadPriorityClass.
type Priority struct {
	Name  string `json:"name"`
	Value int32  `json:"value"`
}

// StepKind says what a step does.
type StepKind string

// The steps a scenario is made of.
const (
	// Create submits Workloads, one per wall-clock second so that creation order is never a tie.
	Create StepKind = "create"
	// Finish marks a Workload that holds quota Finished, as its job completing would.
	Finish StepKind = "finish"
	// Delete deletes a Workload, pending or holding quota.
	Delete StepKind = "delete"
	// EditQuota changes one queue's nominal quota of one flavor.
	EditQuota StepKind = "editQuota"
)

// Step is one event of a scenario.
type Step struct {
	Kind StepKind `json:"kind"`
	// Workloads are created by a Create step.
	Workloads []Workload `json:"workloads,omitempty"`
	// Pick selects the Finish or Delete target among the candidates (sorted by name) when the step
	// runs, modulo their number: which Workloads hold quota is only known then.
	Pick int `json:"pick,omitempty"`
	// Target is the Workload the step finished or deleted, filled in when it ran.
	Target string `json:"target,omitempty"`
	// Queue, Flavor and Nominal describe an EditQuota step.
	Queue   string           `json:"queue,omitempty"`
	Flavor  string           `json:"flavor,omitempty"`
	Nominal map[string]int64 `json:"nominal,omitempty"`
}

// Workload is a Workload a Create step submits.
type Workload struct {
	Name     string   `json:"name"`
	Queue    string   `json:"queue"`
	Priority string   `json:"priority,omitempty"`
	PodSets  []PodSet `json:"podSets"`
}

// PodSet is Count pods, each requesting Requests (per resource, in the resource's unit).
type PodSet struct {
	Name     string           `json:"name"`
	Count    int32            `json:"count"`
	Requests map[string]int64 `json:"requests"`
}

// Names gives the scenario's objects names of their own, so many scenarios share one cluster.
type Names struct {
	// Namespace holds the LocalQueues and Workloads.
	Namespace string
	// Prefix is put before every cluster-scoped name.
	Prefix string
}

// NamesFor are the names a scenario's objects get: a namespace and a prefix from its seed.
func NamesFor(s *Scenario) Names {
	id := fmt.Sprintf("s%x", s.Seed)
	return Names{Namespace: id, Prefix: id + "-"}
}

func (n Names) flavor(f string) kueue.ResourceFlavorReference {
	return kueue.ResourceFlavorReference(n.Prefix + f)
}
func (n Names) cohort(c string) kueue.CohortReference {
	if c == "" {
		return ""
	}
	return kueue.CohortReference(n.Prefix + c)
}

// ClusterQueue is the name of a queue's ClusterQueue.
func (n Names) ClusterQueue(q string) string { return n.Prefix + q }

// unit turns an amount of a resource into a quantity: cores for cpu, GiB for memory.
func unit(r corev1.ResourceName, v int64) resource.Quantity {
	if r == corev1.ResourceMemory {
		return *resource.NewQuantity(v<<30, resource.BinarySI)
	}
	return *resource.NewQuantity(v, resource.DecimalSI)
}

func (s *Scenario) resourceGroups(n Names, quotas []Quota) []kueue.ResourceGroup {
	if len(quotas) == 0 {
		return nil
	}
	rg := kueue.ResourceGroup{CoveredResources: s.Resources}
	for _, q := range quotas {
		fq := kueue.FlavorQuotas{Name: n.flavor(q.Flavor)}
		for _, r := range s.Resources {
			rq := kueue.ResourceQuota{Name: r, NominalQuota: unit(r, q.Nominal[string(r)])}
			if v, ok := q.Borrowing[string(r)]; ok {
				rq.BorrowingLimit = ptr.To(unit(r, v))
			}
			if v, ok := q.Lending[string(r)]; ok {
				rq.LendingLimit = ptr.To(unit(r, v))
			}
			fq.Resources = append(fq.Resources, rq)
		}
		rg.Flavors = append(rg.Flavors, fq)
	}
	return []kueue.ResourceGroup{rg}
}

func weight(w *float64) *kueue.FairSharing {
	if w == nil {
		return nil
	}
	return &kueue.FairSharing{Weight: ptr.To(resource.MustParse(fmt.Sprintf("%g", *w)))}
}

// Objects are the scenario's queue objects, in the order they are created: namespace, flavors,
// priority classes, cohorts (parents first), ClusterQueues, LocalQueues.
func (s *Scenario) Objects(n Names) []client.Object {
	objs := []client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n.Namespace}}}
	for _, f := range s.Flavors {
		objs = append(objs, &kueue.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: string(n.flavor(f))}})
	}
	for _, p := range s.Priorities {
		objs = append(objs, &kueue.WorkloadPriorityClass{ObjectMeta: metav1.ObjectMeta{Name: n.Prefix + p.Name}, Value: p.Value})
	}
	for _, c := range s.Cohorts {
		objs = append(objs, &kueue.Cohort{
			ObjectMeta: metav1.ObjectMeta{Name: string(n.cohort(c.Name))},
			Spec: kueue.CohortSpec{
				ParentName:     n.cohort(c.Parent),
				ResourceGroups: s.resourceGroups(n, c.Quotas),
				FairSharing:    weight(c.Weight),
			},
		})
	}
	for _, q := range s.Queues {
		objs = append(objs, s.clusterQueue(n, q))
	}
	for _, q := range s.Queues {
		objs = append(objs, &kueue.LocalQueue{
			ObjectMeta: metav1.ObjectMeta{Namespace: n.Namespace, Name: q.Name},
			Spec:       kueue.LocalQueueSpec{ClusterQueue: kueue.ClusterQueueReference(n.ClusterQueue(q.Name))},
		})
	}
	return objs
}

func (s *Scenario) clusterQueue(n Names, q Queue) *kueue.ClusterQueue {
	cq := &kueue.ClusterQueue{
		ObjectMeta: metav1.ObjectMeta{Name: n.ClusterQueue(q.Name)},
		Spec: kueue.ClusterQueueSpec{
			NamespaceSelector: &metav1.LabelSelector{},
			CohortName:        n.cohort(q.Cohort),
			ResourceGroups:    s.resourceGroups(n, q.Quotas),
			QueueingStrategy:  q.Strategy,
			Preemption: &kueue.ClusterQueuePreemption{
				WithinClusterQueue:  q.WithinQueue,
				ReclaimWithinCohort: q.Reclaim,
			},
			FairSharing: weight(q.Weight),
		},
	}
	if q.BorrowPolicy != "" {
		cq.Spec.Preemption.BorrowWithinCohort = &kueue.BorrowWithinCohort{
			Policy:               kueue.BorrowWithinCohortPolicy(q.BorrowPolicy),
			MaxPriorityThreshold: q.BorrowMaxPrio,
		}
	}
	if q.WhenCanBorrow != "" || q.WhenCanPreempt != "" {
		cq.Spec.FlavorFungibility = &kueue.FlavorFungibility{WhenCanBorrow: q.WhenCanBorrow, WhenCanPreempt: q.WhenCanPreempt}
	}
	return cq
}

// WorkloadObject is the Workload a Create step submits: a priority class sets both the reference
// and the value, as Kueue's job integrations do.
func (s *Scenario) WorkloadObject(n Names, w Workload) *kueue.Workload {
	wl := &kueue.Workload{
		ObjectMeta: metav1.ObjectMeta{Namespace: n.Namespace, Name: w.Name},
		Spec:       kueue.WorkloadSpec{QueueName: kueue.LocalQueueName(w.Queue)},
	}
	if w.Priority != "" {
		for _, p := range s.Priorities {
			if p.Name == w.Priority {
				wl.Spec.PriorityClassRef = &kueue.PriorityClassRef{
					Group: kueue.WorkloadPriorityClassGroup,
					Kind:  kueue.WorkloadPriorityClassKind,
					Name:  n.Prefix + p.Name,
				}
				wl.Spec.Priority = ptr.To(p.Value)
			}
		}
	}
	for _, ps := range w.PodSets {
		req := corev1.ResourceList{}
		for _, r := range s.Resources {
			req[r] = unit(r, ps.Requests[string(r)])
		}
		wl.Spec.PodSets = append(wl.Spec.PodSets, kueue.PodSet{
			Name:  kueue.PodSetReference(ps.Name),
			Count: ps.Count,
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "main", Image: "differential", Resources: corev1.ResourceRequirements{Requests: req}}},
			}},
		})
	}
	return wl
}

// String is a one-line summary for progress output.
func (s *Scenario) String() string {
	var kinds []string
	for _, st := range s.Steps {
		kinds = append(kinds, string(st.Kind))
	}
	cohorts := map[string]bool{}
	for _, q := range s.Queues {
		if q.Cohort != "" {
			cohorts[q.Cohort] = true
		}
	}
	names := make([]string, 0, len(cohorts))
	for c := range cohorts {
		names = append(names, c)
	}
	sort.Strings(names)
	return fmt.Sprintf("seed %d: %d flavors, %d queues in cohorts [%s], %d cohort objects, fair sharing %v; steps %s",
		s.Seed, len(s.Flavors), len(s.Queues), strings.Join(names, " "), len(s.Cohorts), s.FairSharing, strings.Join(kinds, ","))
}
