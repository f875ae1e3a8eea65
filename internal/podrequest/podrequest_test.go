package podrequest

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

func res(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

func ctr(req corev1.ResourceList) corev1.Container {
	return corev1.Container{Name: "c", Resources: corev1.ResourceRequirements{Requests: req}}
}

func TestOf(t *testing.T) {
	always := ptr.To(corev1.ContainerRestartPolicyAlways)
	cases := map[string]struct {
		spec corev1.PodSpec
		want corev1.ResourceList
	}{
		"containers add up": {
			spec: corev1.PodSpec{Containers: []corev1.Container{ctr(res("cpu", "1", "memory", "512Mi")), ctr(res("cpu", "500m", "nvidia.com/gpu", "1"))}},
			want: res("cpu", "1500m", "memory", "512Mi", "nvidia.com/gpu", "1"),
		},
		"limits stand in for missing requests": {
			spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
				Limits: res("nvidia.com/gpu", "2", "cpu", "4"), Requests: res("cpu", "1")}}}},
			want: res("cpu", "1", "nvidia.com/gpu", "2"),
		},
		"a big init container sets the peak": {
			spec: corev1.PodSpec{
				InitContainers: []corev1.Container{ctr(res("cpu", "4"))},
				Containers:     []corev1.Container{ctr(res("cpu", "1", "memory", "1Gi"))},
			},
			want: res("cpu", "4", "memory", "1Gi"),
		},
		"sidecars run next to containers and to later init containers": {
			spec: corev1.PodSpec{
				InitContainers: []corev1.Container{
					{Name: "side", RestartPolicy: always, Resources: corev1.ResourceRequirements{Requests: res("cpu", "1")}},
					ctr(res("cpu", "2")),
				},
				Containers: []corev1.Container{ctr(res("cpu", "1"))},
			},
			want: res("cpu", "3"),
		},
		"overhead is added": {
			spec: corev1.PodSpec{Containers: []corev1.Container{ctr(res("cpu", "1"))}, Overhead: res("cpu", "100m")},
			want: res("cpu", "1100m"),
		},
		"pod-level resources win": {
			spec: corev1.PodSpec{
				Resources:  &corev1.ResourceRequirements{Requests: res("cpu", "8")},
				Containers: []corev1.Container{ctr(res("cpu", "1"))},
			},
			want: res("cpu", "8"),
		},
		"no requests": {
			spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}},
			want: corev1.ResourceList{},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Of(&tc.spec)
			if diff := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })); diff != "" {
				t.Errorf("Of (-want +got):\n%s", diff)
			}
		})
	}
}
