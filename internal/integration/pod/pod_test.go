package pod

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetq/fleetq/internal/integration"
)

func userPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "research", Name: "notebook", Labels: map[string]string{"kueue.x-k8s.io/queue-name": "team-queue"}},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{"disk": "ssd"},
			Containers:   []corev1.Container{{Name: "main", Image: "jupyter"}},
		},
	}
}

func TestHoldAndStart(t *testing.T) {
	a := Adapter{}
	p := userPod()
	if a.Suspended(p) || !a.Status(p).Active {
		t.Fatalf("an ungated Pod reads as held: %+v", a.Status(p))
	}
	a.SetSuspended(p, true)
	a.SetSuspended(p, true)
	if !a.Suspended(p) || len(p.Spec.SchedulingGates) != 1 || p.Labels[integration.ManagedLabel] != "true" {
		t.Fatalf("held Pod: gates %v, labels %v", p.Spec.SchedulingGates, p.Labels)
	}
	if st := a.Status(p); st.Active || st.Finished {
		t.Errorf("a gated Pod without a node is active: %+v", st)
	}
	sets, err := a.PodSets(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(sets) != 1 || sets[0].Name != PodSetName || sets[0].Count != 1 || len(sets[0].Template.Spec.SchedulingGates) != 0 ||
		sets[0].Template.Labels["kueue.x-k8s.io/queue-name"] != "team-queue" {
		t.Errorf("pod sets %+v", sets)
	}

	placement := integration.Placement{
		NodeSelector: map[string]string{"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"},
		Tolerations:  []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists}},
		Labels:       map[string]string{integration.WorkloadUIDLabel: "uid-1"},
	}
	if err := a.ApplyPlacements(p, []integration.PodSetPlacement{{Name: PodSetName, Placement: placement}}); err != nil {
		t.Fatal(err)
	}
	a.SetSuspended(p, false)
	want := map[string]string{"disk": "ssd", "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}
	if diff := cmp.Diff(want, p.Spec.NodeSelector); diff != "" || len(p.Spec.Tolerations) != 1 || p.Labels[integration.WorkloadUIDLabel] != "uid-1" || a.Suspended(p) {
		t.Errorf("started Pod: selector diff %s, tolerations %v, labels %v, gates %v", diff, p.Spec.Tolerations, p.Labels, p.Spec.SchedulingGates)
	}
	if err := a.ApplyPlacements(p, []integration.PodSetPlacement{{Name: "worker"}}); err == nil {
		t.Errorf("a placement for another pod set was accepted")
	}
	if a.RestorePodSets(p, sets) {
		t.Errorf("a Pod's scheduling fields were restored; it is deleted instead")
	}
	if !a.StopByDeletion() {
		t.Errorf("a started Pod must stop by deletion")
	}
}

func TestStatus(t *testing.T) {
	a := Adapter{}
	p := userPod()
	p.Status.Phase = corev1.PodSucceeded
	if st := a.Status(p); !st.Finished || st.Failed {
		t.Errorf("succeeded: %+v", st)
	}
	p.Status.Phase, p.Status.Reason = corev1.PodFailed, "Evicted"
	if st := a.Status(p); !st.Finished || !st.Failed || st.Message != "Pod failed: Evicted" {
		t.Errorf("failed: %+v", st)
	}
	p = userPod()
	a.SetSuspended(p, true)
	p.Spec.NodeName = "node-1" // bound before the gate was seen: it may run
	if !a.Status(p).Active {
		t.Errorf("a bound Pod is not active")
	}
}

func member(name, group, size string) *corev1.Pod {
	p := userPod()
	p.Name = name
	p.Labels[GroupNameLabel] = group
	if size != "" {
		p.Annotations = map[string]string{GroupTotalCountAnnotation: size}
	}
	return p
}

func TestGroupNamesTheLabelOrAnnotationThatIsWrong(t *testing.T) {
	a := Adapter{}
	if name, _, err := a.Group(userPod()); name != "" || err != nil {
		t.Errorf("a Pod on its own: %q, %v", name, err)
	}
	name, size, err := a.Group(member("trainer-0", "trainers", "4"))
	if name != "trainers" || size != 4 || err != nil {
		t.Errorf("a member: %q %d %v", name, size, err)
	}
	for _, tc := range []struct {
		pod  *corev1.Pod
		want string
	}{
		{member("a", "trainers", ""), `metadata.annotations[kueue.x-k8s.io/pod-group-total-count]: Required value: a Pod of pod group "trainers" must say how many Pods the group has`},
		{member("a", "trainers", "four"), `metadata.annotations[kueue.x-k8s.io/pod-group-total-count]: Invalid value: "four": must be the number of Pods in pod group "trainers", a whole number from 1 to 2147483647`},
		{member("a", "trainers", "0"), `Invalid value: "0": must be the number of Pods`},
		{member("a", "trainers", "99999999999"), `Invalid value: "99999999999"`},
		{member("a", "Trainers_1", "2"), `metadata.labels[kueue.x-k8s.io/pod-group-name]: Invalid value: "Trainers_1": a lowercase RFC 1123 subdomain`},
	} {
		if _, _, err := a.Group(tc.pod); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want %q", tc.pod.Annotations, err, tc.want)
		}
	}
}

func TestGroupPodSetsGatherMembersWithTheSameSpec(t *testing.T) {
	a := Adapter{}
	launcher := member("launcher", "mpi", "3")
	w1, w0 := member("worker-1", "mpi", "3"), member("worker-0", "mpi", "3")
	for _, w := range []*corev1.Pod{w0, w1} {
		w.Spec.Containers[0].Image = "trainer:v2"
		// Members differ in hostname and in the API server's service-account volume: one pod set.
		w.Spec.Hostname = w.Name
		w.Spec.Volumes = []corev1.Volume{{Name: "kube-api-access-" + w.Name}}
		w.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "kube-api-access-" + w.Name, MountPath: "/var/run/secrets"}}
	}
	a.SetSuspended(w1, true) // fleetq's gate is not part of the spec
	sets, names := a.GroupPodSets([]client.Object{w1, launcher, w0})
	if len(sets) != 2 {
		t.Fatalf("pod sets %+v", sets)
	}
	if names[0] != names[2] || names[0] == names[1] {
		t.Errorf("members' pod sets %v: the workers share one, the launcher has its own", names)
	}
	workers := integration.FindPodSet(sets, names[0])
	if workers == nil || workers.Count != 2 || workers.Template.Spec.Hostname != "worker-0" || len(workers.Template.Spec.SchedulingGates) != 0 {
		t.Errorf("the workers' pod set %+v: 2 members, the first one's template, no gate", workers)
	}
	if sets[0].Name > sets[1].Name || len(sets[0].Name) != 8 {
		t.Errorf("pod set names %q, %q: sorted, 8 hex digits", sets[0].Name, sets[1].Name)
	}
	again, _ := a.GroupPodSets([]client.Object{w0, launcher, w1})
	if diff := cmp.Diff(sets, again); diff != "" {
		t.Errorf("the members' order changed the pod sets: %s", diff)
	}
	replacement := member("worker-2", "mpi", "3")
	replacement.Spec = *w1.Spec.DeepCopy()
	replacement.Spec.Hostname = "worker-2"
	_, names = a.GroupPodSets([]client.Object{replacement})
	if names[0] != workers.Name {
		t.Errorf("a replacement worker is in pod set %q, not the workers' %q", names[0], workers.Name)
	}
}

// A worker's copy leaves out what the management cluster's API server filled in: the worker
// would refuse a priority number its own PriorityClass did not resolve, and mounts its own token.
func TestCopyLeavesOutWhatTheAPIServerFilledIn(t *testing.T) {
	p := userPod()
	p.Spec.NodeName = "mgmt-node"
	p.Spec.PriorityClassName = "high"
	p.Spec.Priority = ptr.To[int32](1000)
	p.Spec.PreemptionPolicy = ptr.To(corev1.PreemptLowerPriority)
	token := corev1.Volume{Name: "kube-api-access-x7k2p", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}}},
	}}}
	data := corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
	p.Spec.Volumes = []corev1.Volume{data, token}
	p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}, {Name: token.Name, MountPath: "/var/run/secrets/kubernetes.io/serviceaccount"}}
	p.Status.Phase = corev1.PodRunning

	c := Adapter{}.Copy(p).(*corev1.Pod)
	if c.Spec.NodeName != "" || c.Spec.Priority != nil || c.Spec.PreemptionPolicy != nil || c.Spec.PriorityClassName != "high" {
		t.Errorf("copy: node %q, priority %v, preemptionPolicy %v, class %q", c.Spec.NodeName, c.Spec.Priority, c.Spec.PreemptionPolicy, c.Spec.PriorityClassName)
	}
	if diff := cmp.Diff([]corev1.Volume{data}, c.Spec.Volumes); diff != "" {
		t.Errorf("volumes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]corev1.VolumeMount{{Name: "data", MountPath: "/data"}}, c.Spec.Containers[0].VolumeMounts); diff != "" {
		t.Errorf("mounts (-want +got):\n%s", diff)
	}
	if c.Status.Phase != "" || len(p.Spec.Volumes) != 2 || p.Spec.Priority == nil {
		t.Errorf("the copy has a status, or the original was changed: %+v", p.Spec)
	}
}

// The gated Pod shows its copy's life, keeps its own PodScheduled, and goes back to Pending when
// the copy is gone.
func TestMirrorStatus(t *testing.T) {
	a := Adapter{}
	local := userPod()
	a.SetSuspended(local, true)
	gated := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonSchedulingGated}
	local.Status = corev1.PodStatus{Phase: corev1.PodPending, QOSClass: corev1.PodQOSBestEffort, Conditions: []corev1.PodCondition{gated}}
	remote := userPod()
	started := metav1.Now()
	remote.Status = corev1.PodStatus{
		Phase: corev1.PodRunning, StartTime: &started, HostIP: "10.0.0.7", PodIP: "10.1.0.9", QOSClass: corev1.PodQOSGuaranteed,
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue},
		},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "main", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}}}},
	}
	if !a.MirrorStatus(local, remote) {
		t.Fatal("a running copy changed nothing")
	}
	want := corev1.PodStatus{
		Phase: corev1.PodRunning, StartTime: &started, QOSClass: corev1.PodQOSBestEffort,
		Conditions:        []corev1.PodCondition{gated, {Type: corev1.PodReady, Status: corev1.ConditionTrue}},
		ContainerStatuses: remote.Status.ContainerStatuses,
	}
	if diff := cmp.Diff(want, local.Status); diff != "" {
		t.Errorf("mirrored status (-want +got):\n%s", diff)
	}
	if a.MirrorStatus(local, remote) {
		t.Error("mirroring the same status again reported a change")
	}
	if a.Status(local).Active {
		t.Error("the gated Pod counts as active here: its copy's pods are the worker's")
	}
	remote.Status.Phase = corev1.PodSucceeded
	a.MirrorStatus(local, remote)
	if st := a.Status(local); !st.Finished || st.Failed {
		t.Errorf("a copy that succeeded: %+v", st)
	}
	if !a.MirrorStatus(local, nil) {
		t.Fatal("a gone copy changed nothing")
	}
	want = corev1.PodStatus{Phase: corev1.PodPending, QOSClass: corev1.PodQOSBestEffort, Conditions: []corev1.PodCondition{gated}}
	if diff := cmp.Diff(want, local.Status); diff != "" {
		t.Errorf("status once the copy is gone (-want +got):\n%s", diff)
	}
}
