package batchjob

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/internal/integration"
)

func podSets(t *testing.T, j *batchv1.Job) []kueue.PodSet {
	t.Helper()
	ps, err := Adapter{}.PodSets(j)
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

func TestPodSetsCount(t *testing.T) {
	cases := map[string]struct {
		parallelism, completions *int32
		want                     int32
	}{
		"parallelism":                 {parallelism: ptr.To[int32](4), want: 4},
		"default parallelism is 1":    {want: 1},
		"fewer completions than pods": {parallelism: ptr.To[int32](4), completions: ptr.To[int32](2), want: 2},
		"more completions than pods":  {parallelism: ptr.To[int32](2), completions: ptr.To[int32](10), want: 2},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			job := &batchv1.Job{Spec: batchv1.JobSpec{Parallelism: tc.parallelism, Completions: tc.completions}}
			if got := podSets(t, job)[0].Count; got != tc.want {
				t.Errorf("count = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestStatus(t *testing.T) {
	start := metav1.Now()
	cond := func(typ batchv1.JobConditionType, msg string) batchv1.JobCondition {
		return batchv1.JobCondition{Type: typ, Status: corev1.ConditionTrue, Message: msg, Reason: "R"}
	}
	cases := map[string]struct {
		status batchv1.JobStatus
		want   integration.Status
	}{
		"pending":                           {},
		"running":                           {status: batchv1.JobStatus{Active: 2, StartTime: &start}, want: integration.Status{Active: true}},
		"pods terminating":                  {status: batchv1.JobStatus{Terminating: ptr.To[int32](1)}, want: integration.Status{Active: true}},
		"started, not yet marked":           {status: batchv1.JobStatus{StartTime: &start}, want: integration.Status{Active: true}},
		"suspended after running":           {status: batchv1.JobStatus{StartTime: &start, Conditions: []batchv1.JobCondition{cond(batchv1.JobSuspended, "")}}},
		"success criteria met, pods ending": {status: batchv1.JobStatus{StartTime: &start, Terminating: ptr.To[int32](1), Conditions: []batchv1.JobCondition{cond(batchv1.JobSuccessCriteriaMet, "")}}, want: integration.Status{Active: true, Ending: true}},
		"failure target, pods ending":       {status: batchv1.JobStatus{StartTime: &start, Conditions: []batchv1.JobCondition{cond(batchv1.JobFailureTarget, "")}}, want: integration.Status{Active: true, Ending: true}},
		"complete":                          {status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{cond(batchv1.JobComplete, "")}}, want: integration.Status{Finished: true, Message: "Job finished successfully"}},
		"failed with a message":             {status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{cond(batchv1.JobFailed, "BackoffLimitExceeded")}}, want: integration.Status{Finished: true, Failed: true, Message: "BackoffLimitExceeded"}},
		"failed without one":                {status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{cond(batchv1.JobFailed, "")}}, want: integration.Status{Finished: true, Failed: true, Message: "Job failed: R"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Adapter{}.Status(&batchv1.Job{Status: tc.status})); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReclaimablePods(t *testing.T) {
	cases := map[string]struct {
		parallelism, completions *int32
		succeeded                int32
		want                     map[kueue.PodSetReference]int32
	}{
		"no completions":                   {parallelism: ptr.To[int32](4), succeeded: 3},
		"more completions left than pods":  {parallelism: ptr.To[int32](4), completions: ptr.To[int32](10), succeeded: 3},
		"fewer completions left than pods": {parallelism: ptr.To[int32](4), completions: ptr.To[int32](5), succeeded: 3, want: map[kueue.PodSetReference]int32{PodSetName: 2}},
		"all done":                         {parallelism: ptr.To[int32](4), completions: ptr.To[int32](4), succeeded: 4, want: map[kueue.PodSetReference]int32{PodSetName: 4}},
		"more succeeded than completions":  {parallelism: ptr.To[int32](2), completions: ptr.To[int32](2), succeeded: 3, want: map[kueue.PodSetReference]int32{PodSetName: 2}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			j := &batchv1.Job{Spec: batchv1.JobSpec{Parallelism: tc.parallelism, Completions: tc.completions}, Status: batchv1.JobStatus{Succeeded: tc.succeeded}}
			if diff := cmp.Diff(tc.want, Adapter{}.ReclaimablePods(j)); diff != "" {
				t.Errorf("reclaimable (-want +got):\n%s", diff)
			}
		})
	}
}

func TestApplyPlacementsAndRestore(t *testing.T) {
	a := Adapter{}
	j := &batchv1.Job{Spec: batchv1.JobSpec{Parallelism: ptr.To[int32](4), Template: corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "train"}},
	}}}
	original, _ := a.PodSets(j)
	p := integration.PodSetPlacement{Name: PodSetName, Count: ptr.To[int32](2), Placement: integration.Placement{
		NodeSelector: map[string]string{"gpu": "a100"}, Labels: map[string]string{integration.WorkloadUIDLabel: "uid"},
	}}
	if err := a.ApplyPlacements(j, []integration.PodSetPlacement{p}); err != nil {
		t.Fatal(err)
	}
	if got := *j.Spec.Parallelism; got != 2 {
		t.Errorf("parallelism after a partial admission = %d, want 2", got)
	}
	if j.Spec.Template.Spec.NodeSelector["gpu"] != "a100" || j.Spec.Template.Labels[integration.WorkloadUIDLabel] != "uid" || j.Spec.Template.Labels["app"] != "train" {
		t.Errorf("template after placement: %+v", j.Spec.Template)
	}
	if !a.RestorePodSets(j, original) {
		t.Error("RestorePodSets reported no change")
	}
	if diff := cmp.Diff(original[0].Template, j.Spec.Template); diff != "" {
		t.Errorf("restored template (-want +got):\n%s", diff)
	}
	err := a.ApplyPlacements(j, []integration.PodSetPlacement{{Name: "workers"}})
	if err == nil || !strings.Contains(err.Error(), `has no pod set "workers"`) {
		t.Errorf("placement of an unknown pod set: error = %v", err)
	}
}

func TestCopyAndMirror(t *testing.T) {
	a := Adapter{}
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "train", UID: "u", ResourceVersion: "7", Labels: map[string]string{"team": "a"}},
		Spec: batchv1.JobSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{batchv1.ControllerUidLabel: "u"}}, ManualSelector: ptr.To(false),
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{batchv1.ControllerUidLabel: "u", batchv1.JobNameLabel: "train", "app": "x"}}},
		},
		Status: batchv1.JobStatus{Active: 1},
	}
	c := a.Copy(j).(*batchv1.Job)
	if c.UID != "" || c.ResourceVersion != "" || c.Spec.Selector != nil || c.Spec.ManualSelector != nil || c.Status.Active != 0 {
		t.Errorf("copy keeps what the management cluster filled in: %+v", c)
	}
	if diff := cmp.Diff(map[string]string{"app": "x"}, c.Spec.Template.Labels); diff != "" {
		t.Errorf("copy's template labels (-want +got):\n%s", diff)
	}
	c.Labels["changed"] = "yes"
	if _, ok := j.Labels["changed"]; ok {
		t.Error("the copy shares its labels with the original")
	}

	start, later := metav1.NewTime(metav1.Now().Add(-time.Hour)), metav1.Now()
	local := &batchv1.Job{Status: batchv1.JobStatus{StartTime: &start}}
	remote := &batchv1.Job{Status: batchv1.JobStatus{StartTime: &later, Active: 3, Ready: ptr.To[int32](3)}}
	if !a.MirrorStatus(local, remote) {
		t.Fatal("mirror reported no change")
	}
	if local.Status.Active != 3 || !local.Status.StartTime.Equal(&start) {
		t.Errorf("mirrored status %+v: want the copy's counts and the first start time", local.Status)
	}
	if a.MirrorStatus(local, remote) {
		t.Error("mirroring the same status again reported a change")
	}
	local.Spec.Suspend = ptr.To(true)
	if !a.MirrorStatus(local, nil) {
		t.Fatal("clearing a gone copy's status reported no change")
	}
	if local.Status.Active != 0 || *local.Status.Ready != 0 || local.Status.StartTime != nil {
		t.Errorf("status after the copy is gone: %+v", local.Status)
	}
	if a.MirrorStatus(local, nil) {
		t.Error("clearing twice reported a change")
	}
}

func TestManagedBy(t *testing.T) {
	a, j := Adapter{}, &batchv1.Job{}
	if a.ManagedBy(j) != "" {
		t.Error("unset managedBy should read empty")
	}
	a.SetManagedBy(j, kueue.MultiKueueControllerName)
	if a.ManagedBy(j) != kueue.MultiKueueControllerName {
		t.Errorf("managedBy = %q", a.ManagedBy(j))
	}
	a.SetManagedBy(j, "")
	if j.Spec.ManagedBy != nil {
		t.Error("clearing managedBy left it set")
	}
}

func TestEndNotRecordedUntilTheJobControllerCountsThePod(t *testing.T) {
	pod := func(phase corev1.PodPhase, finalizers ...string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Finalizers: finalizers}, Status: corev1.PodStatus{Phase: phase}}
	}
	cases := map[string]struct {
		pod  *corev1.Pod
		want bool
	}{
		"succeeded, not counted yet": {pod(corev1.PodSucceeded, batchv1.JobTrackingFinalizer), true},
		"succeeded and counted":      {pod(corev1.PodSucceeded), false},
		"running":                    {pod(corev1.PodRunning, batchv1.JobTrackingFinalizer), false},
		"failed, not counted yet":    {pod(corev1.PodFailed, batchv1.JobTrackingFinalizer), false},
	}
	for name, tc := range cases {
		if got := (Adapter{}).EndNotRecorded(tc.pod); got != tc.want {
			t.Errorf("%s: EndNotRecorded = %v, want %v", name, got, tc.want)
		}
	}
}
