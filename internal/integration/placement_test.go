package integration

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
)

func TestInjectAndRestore(t *testing.T) {
	a100 := &kueue.ResourceFlavor{
		ObjectMeta: metav1.ObjectMeta{Name: "a100-flavor"},
		Spec: kueue.ResourceFlavorSpec{
			NodeLabels:  map[string]string{"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"},
			Tolerations: []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
		},
	}
	psa := &kueue.PodSetAssignment{Name: "main", Flavors: map[corev1.ResourceName]kueue.ResourceFlavorReference{"cpu": "a100-flavor", "nvidia.com/gpu": "a100-flavor"}}
	checks := []kueue.AdmissionCheckState{{Name: "prov", PodSetUpdates: []kueue.PodSetUpdate{
		{Name: "main", NodeSelector: map[string]string{"pool": "reserved"}, Labels: map[string]string{"provisioned": "yes"}},
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
	Inject(&tmpl, PlacementFor(psa, Flavors{"a100-flavor": a100}, checks))
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
	Inject(&tmpl, PlacementFor(psa, Flavors{"a100-flavor": a100}, nil))
	if len(tmpl.Spec.Tolerations) != 2 {
		t.Errorf("tolerations after a second inject: %v", tmpl.Spec.Tolerations)
	}
	if !Restore(&tmpl, &user) {
		t.Error("Restore reported no change")
	}
	if diff := cmp.Diff(user, tmpl); diff != "" {
		t.Errorf("restored template (-want +got):\n%s", diff)
	}
}
