package jobs

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
)

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
			if got := PodSets(job)[0].Count; got != tc.want {
				t.Errorf("count = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestInjectAndRestore(t *testing.T) {
	a100 := &kueue.ResourceFlavor{
		ObjectMeta: metav1.ObjectMeta{Name: "a100-flavor"},
		Spec: kueue.ResourceFlavorSpec{
			NodeLabels:  map[string]string{"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"},
			Tolerations: []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
		},
	}
	psa := &kueue.PodSetAssignment{Name: PodSetName, Flavors: map[corev1.ResourceName]kueue.ResourceFlavorReference{"cpu": "a100-flavor", "nvidia.com/gpu": "a100-flavor"}}
	checks := []kueue.AdmissionCheckState{{Name: "prov", PodSetUpdates: []kueue.PodSetUpdate{
		{Name: PodSetName, NodeSelector: map[string]string{"pool": "reserved"}, Labels: map[string]string{"provisioned": "yes"}},
		{Name: "other", NodeSelector: map[string]string{"ignored": "yes"}},
	}}}
	user := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "train"}},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{"zone": "a"},
			Tolerations:  []corev1.Toleration{{Key: "spot", Operator: corev1.TolerationOpExists}},
		},
	}
	tmpl := *user.DeepCopy()
	Inject(&tmpl, PlacementFor(psa, map[kueue.ResourceFlavorReference]*kueue.ResourceFlavor{"a100-flavor": a100}, checks))
	want := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "train", "provisioned": "yes"}},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{"zone": "a", "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB", "pool": "reserved"},
			Tolerations: []corev1.Toleration{
				{Key: "spot", Operator: corev1.TolerationOpExists},
				{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
			},
		},
	}
	if diff := cmp.Diff(want, tmpl); diff != "" {
		t.Errorf("injected template (-want +got):\n%s", diff)
	}
	// Injecting twice adds nothing more (a retried start).
	Inject(&tmpl, PlacementFor(psa, map[kueue.ResourceFlavorReference]*kueue.ResourceFlavor{"a100-flavor": a100}, nil))
	if len(tmpl.Spec.Tolerations) != 2 {
		t.Errorf("tolerations after a second inject: %v", tmpl.Spec.Tolerations)
	}
	Restore(&tmpl, &user)
	if diff := cmp.Diff(user, tmpl); diff != "" {
		t.Errorf("restored template (-want +got):\n%s", diff)
	}
}

func TestBackoff(t *testing.T) {
	cases := map[string]struct {
		n, base, max int32
		want         string
	}{
		"first eviction waits the base": {n: 1, base: 10, max: 3600, want: "10s"},
		"doubles":                       {n: 3, base: 10, max: 3600, want: "40s"},
		"capped":                        {n: 20, base: 10, max: 300, want: "5m0s"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Backoff(tc.n, tc.base, tc.max).String(); got != tc.want {
				t.Errorf("Backoff = %s, want %s", got, tc.want)
			}
		})
	}
}
