package jobs

import (
	"context"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/config"
	"github.com/fleetq/fleetq/internal/integration"
	"github.com/fleetq/fleetq/internal/integration/batchjob"
	"github.com/fleetq/fleetq/internal/integration/pod"
	"github.com/fleetq/fleetq/internal/integration/ray"
	"github.com/fleetq/fleetq/internal/workload"
)

func objects() []client.Object {
	return []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "research", Labels: map[string]string{"kubernetes.io/metadata.name": "research"}}},
		&kueue.LocalQueue{ObjectMeta: metav1.ObjectMeta{Namespace: "research", Name: "team-queue"}, Spec: kueue.LocalQueueSpec{ClusterQueue: "research-cq"}},
		&kueue.LocalQueue{ObjectMeta: metav1.ObjectMeta{Namespace: "research", Name: "gpu-queue"}, Spec: kueue.LocalQueueSpec{ClusterQueue: "gpu-cq"}},
		&kueue.LocalQueue{ObjectMeta: metav1.ObjectMeta{Namespace: "research", Name: "default"}, Spec: kueue.LocalQueueSpec{ClusterQueue: "research-cq"}},
		&kueue.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: "research-cq"}},
		&kueue.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: "gpu-cq"}, Spec: kueue.ClusterQueueSpec{
			AdmissionChecksStrategy: &kueue.AdmissionChecksStrategy{AdmissionChecks: []kueue.AdmissionCheckStrategyRule{{Name: "dispatch"}}},
		}},
		&kueue.AdmissionCheck{ObjectMeta: metav1.ObjectMeta{Name: "dispatch"}, Spec: kueue.AdmissionCheckSpec{ControllerName: kueue.MultiKueueControllerName}},
		&kueue.WorkloadPriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "high"}, Value: 100},
	}
}

func newWebhook(cfg *config.Configuration, objs ...client.Object) *Webhook {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = kueue.AddToScheme(s)
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(append(objects(), objs...)...).Build()
	if cfg == nil {
		cfg = &config.Configuration{}
	}
	cfg.SetDefaults()
	return &Webhook{Adapter: batchjob.Adapter{}, Client: c, APIReader: c, Config: cfg}
}

func job(labels map[string]string) *batchv1.Job {
	return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "research", Name: "train", UID: "uid-1", Labels: labels}}
}

func createCtx() context.Context {
	return admission.NewContextWithRequest(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: admissionv1.Create}})
}

func TestDefault(t *testing.T) {
	cases := map[string]struct {
		cfg           *config.Configuration
		labels        map[string]string
		wantSuspend   bool
		wantManagedBy string
		wantQueue     string
	}{
		"a job naming a queue is suspended":             {labels: map[string]string{kueue.QueueNameLabel: "team-queue"}, wantSuspend: true, wantQueue: "team-queue"},
		"a job of a dispatching queue is managed by it": {labels: map[string]string{kueue.QueueNameLabel: "gpu-queue"}, wantSuspend: true, wantManagedBy: ManagedByMultiKueue, wantQueue: "gpu-queue"},
		"a job without a queue is left alone":           {},
		"manageJobsWithoutQueueName suspends it":        {cfg: &config.Configuration{ManageJobsWithoutQueueName: true}, wantSuspend: true},
		"the default LocalQueue is given":               {cfg: &config.Configuration{DefaultLocalQueue: "default"}, wantSuspend: true, wantQueue: "default"},
		"no default LocalQueue in the namespace":        {cfg: &config.Configuration{DefaultLocalQueue: "absent"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := newWebhook(tc.cfg)
			j := job(tc.labels)
			if err := w.Default(createCtx(), j); err != nil {
				t.Fatal(err)
			}
			if got := ptr.Deref(j.Spec.Suspend, false); got != tc.wantSuspend {
				t.Errorf("suspend = %v, want %v", got, tc.wantSuspend)
			}
			if got := ptr.Deref(j.Spec.ManagedBy, ""); got != tc.wantManagedBy {
				t.Errorf("managedBy = %q, want %q", got, tc.wantManagedBy)
			}
			if got := j.Labels[kueue.QueueNameLabel]; got != tc.wantQueue {
				t.Errorf("queue label = %q, want %q", got, tc.wantQueue)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	admittedWL := &kueue.Workload{
		ObjectMeta: metav1.ObjectMeta{Namespace: "research", Name: workload.NameFor("Job", "train", "uid-1")},
		Status:     kueue.WorkloadStatus{Conditions: []metav1.Condition{{Type: kueue.WorkloadAdmitted, Status: metav1.ConditionTrue}}},
	}
	reservedWL := &kueue.Workload{
		ObjectMeta: metav1.ObjectMeta{Namespace: "research", Name: workload.NameFor("Job", "train", "uid-1")},
		Spec:       kueue.WorkloadSpec{PodSets: []kueue.PodSet{{Name: kueue.DefaultPodSetName, Count: 2}}},
		Status: kueue.WorkloadStatus{
			Conditions: []metav1.Condition{{Type: kueue.WorkloadQuotaReserved, Status: metav1.ConditionTrue}, {Type: kueue.WorkloadAdmitted, Status: metav1.ConditionTrue}},
			Admission:  &kueue.Admission{PodSetAssignments: []kueue.PodSetAssignment{{Name: kueue.DefaultPodSetName, Count: ptr.To[int32](2)}}},
		},
	}
	suspended := func(j *batchv1.Job, s bool) *batchv1.Job { j.Spec.Suspend = ptr.To(s); return j }
	sized := func(j *batchv1.Job, n int32, gpus string) *batchv1.Job {
		j.Spec.Parallelism = ptr.To(n)
		j.Spec.Template.Spec.Containers = []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse(gpus)}}}}
		return j
	}
	q := func(name string) map[string]string { return map[string]string{kueue.QueueNameLabel: name} }
	cases := map[string]struct {
		old, new *batchv1.Job
		objs     []client.Object
		wantErr  string
	}{
		"create with a bad queue name": {new: job(q("Not_A_Queue")), wantErr: `metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "Not_A_Queue"`},
		"create with a missing priority class": {
			new:     job(map[string]string{kueue.QueueNameLabel: "team-queue", kueue.PriorityClassLabel: "urgent"}),
			wantErr: `metadata.labels[kueue.x-k8s.io/priority-class]: Not found: "urgent (WorkloadPriorityClass; create it or fix the label`,
		},
		"create with an existing priority class": {new: job(map[string]string{kueue.QueueNameLabel: "team-queue", kueue.PriorityClassLabel: "high"})},
		"unsuspending a pending job": {
			old: suspended(job(q("team-queue")), true), new: suspended(job(q("team-queue")), false),
			wantErr: `spec.suspend: Forbidden: the job waits in LocalQueue "team-queue" for quota`,
		},
		"unsuspending an admitted job (the manager starting it)": {
			old: suspended(job(q("team-queue")), true), new: suspended(job(q("team-queue")), false), objs: []client.Object{admittedWL},
		},
		"moving a running job to another queue": {
			old: suspended(job(q("team-queue")), false), new: suspended(job(q("gpu-queue")), false),
			wantErr: `metadata.labels[kueue.x-k8s.io/queue-name]: Forbidden: cannot change from "team-queue" to "gpu-queue" while the job runs`,
		},
		"moving a suspended job to another queue": {old: suspended(job(q("team-queue")), true), new: suspended(job(q("gpu-queue")), true)},
		"an unmanaged job is not checked":         {old: suspended(job(nil), true), new: suspended(job(nil), false)},
		"growing an admitted job": {
			old: sized(suspended(job(q("team-queue")), false), 2, "1"), new: sized(suspended(job(q("team-queue")), false), 4, "1"), objs: []client.Object{reservedWL},
			wantErr: "spec.parallelism: Forbidden: the job cannot grow to 4 pods while admitted with 2: its quota is reserved for the admitted shape",
		},
		"shrinking an admitted job": {
			old: sized(suspended(job(q("team-queue")), false), 2, "1"), new: sized(suspended(job(q("team-queue")), false), 1, "1"), objs: []client.Object{reservedWL},
		},
		"changing the requests of an admitted (dispatched, suspended here) job": {
			old: sized(suspended(job(q("gpu-queue")), true), 2, "1"), new: sized(suspended(job(q("gpu-queue")), true), 2, "8"), objs: []client.Object{reservedWL},
			wantErr: `spec: Forbidden: pod set "main": the pods' resources cannot change while admitted`,
		},
		"growing a pending job (its workload follows)": {
			old: sized(suspended(job(q("team-queue")), true), 2, "1"), new: sized(suspended(job(q("team-queue")), true), 4, "8"),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := newWebhook(nil, tc.objs...)
			var err error
			if tc.old == nil {
				err = w.ValidateCreate(context.Background(), tc.new)
			} else {
				err = w.ValidateUpdate(context.Background(), tc.old, tc.new)
			}
			if (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("error = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// A RayJob's RayCluster carries the RayJob's labels, queue name included: the webhooks leave a
// job another integrated job owns alone (its owner's workload accounts for it).
func TestWebhooksLeaveJobsOwnedByIntegratedJobs(t *testing.T) {
	reg, err := integration.NewRegistry(batchjob.Adapter{}, ray.RayJob)
	if err != nil {
		t.Fatal(err)
	}
	w := newWebhook(nil)
	w.Integrations = reg
	j := job(map[string]string{kueue.QueueNameLabel: "Not_A_Queue"})
	j.OwnerReferences = []metav1.OwnerReference{{APIVersion: "ray.io/v1", Kind: "RayJob", Name: "train", UID: "r", Controller: ptr.To(true)}}
	if err := w.Default(createCtx(), j); err != nil {
		t.Fatal(err)
	}
	if j.Spec.Suspend != nil {
		t.Error("the webhook suspended a job a RayJob owns")
	}
	if err := w.ValidateCreate(context.Background(), j); err != nil {
		t.Errorf("the webhook validated a job a RayJob owns: %v", err)
	}
	j.OwnerReferences = nil
	if err := w.ValidateCreate(context.Background(), j); err == nil {
		t.Error("the same job on its own was not validated")
	}
}

// A member of a pod group is checked against the group: its size annotation at creation, its
// group and size for good, and its gate against the group's Workload (named after the group).
func TestValidatePodGroupMembers(t *testing.T) {
	member := func(group, size string, gated bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "research", Name: "trainer-0", UID: "uid-p",
			Labels:      map[string]string{kueue.QueueNameLabel: "team-queue", kueue.PodGroupNameLabel: group},
			Annotations: map[string]string{kueue.PodGroupTotalCountAnnotation: size}}}
		if gated {
			p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: pod.GateName}}
		}
		return p
	}
	admitted := &kueue.Workload{
		ObjectMeta: metav1.ObjectMeta{Namespace: "research", Name: "trainers"},
		Status:     kueue.WorkloadStatus{Conditions: []metav1.Condition{{Type: kueue.WorkloadAdmitted, Status: metav1.ConditionTrue}}},
	}
	cases := map[string]struct {
		old, new *corev1.Pod
		objs     []client.Object
		wantErr  string
	}{
		"create a member": {new: member("trainers", "4", true)},
		"create a member without a size": {new: member("trainers", "", true),
			wantErr: `metadata.annotations[kueue.x-k8s.io/pod-group-total-count]: Invalid value: "": must be the number of Pods in pod group "trainers"`},
		"ungating a member of a queued group": {old: member("trainers", "4", true), new: member("trainers", "4", false),
			wantErr: `spec.schedulingGates[kueue.x-k8s.io/admission]: Forbidden: the job waits in LocalQueue "team-queue" for quota`},
		"ungating a member of an admitted group (the manager starting it)": {old: member("trainers", "4", true), new: member("trainers", "4", false), objs: []client.Object{admitted}},
		"moving a member to another group": {old: member("trainers", "4", true), new: member("evaluators", "4", true),
			wantErr: `metadata.labels[kueue.x-k8s.io/pod-group-name]: Forbidden: a member of group "trainers" (size 4) cannot leave it or change its size (to group "evaluators", size 4); delete the Pod and create it again`},
		"resizing a member's group": {old: member("trainers", "4", true), new: member("trainers", "2", true),
			wantErr: `cannot leave it or change its size (to group "trainers", size 2)`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := newWebhook(nil, tc.objs...)
			w.Adapter = pod.Adapter{}
			var err error
			if tc.old == nil {
				err = w.ValidateCreate(context.Background(), tc.new)
			} else {
				err = w.ValidateUpdate(context.Background(), tc.old, tc.new)
			}
			if (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("error = %v, want %q", err, tc.wantErr)
			}
		})
	}
}
