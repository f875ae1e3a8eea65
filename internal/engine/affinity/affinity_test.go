package affinity

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

func TestMatches(t *testing.T) {
	gpu := map[string]string{"gpu": "a100", "zone": "us-east-1a"}
	in := func(key string, op corev1.NodeSelectorOperator, values ...string) *corev1.NodeSelector {
		return &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: op, Values: values}},
		}}}
	}
	cases := map[string]struct {
		labels   map[string]string
		selector map[string]string
		required *corev1.NodeSelector
		mode     Mode
		want     bool
	}{
		"no constraints":                       {labels: gpu, mode: Node, want: true},
		"selector matches":                     {labels: gpu, selector: map[string]string{"gpu": "a100"}, mode: Node, want: true},
		"selector conflicts":                   {labels: gpu, selector: map[string]string{"gpu": "l4"}, mode: Flavor, want: false},
		"selector on unknown key, node":        {labels: gpu, selector: map[string]string{"team": "x"}, mode: Node, want: false},
		"selector on unknown key, flavor":      {labels: gpu, selector: map[string]string{"team": "x"}, mode: Flavor, want: true},
		"affinity In matches":                  {labels: gpu, required: in("gpu", corev1.NodeSelectorOpIn, "l4", "a100"), want: true},
		"affinity NotIn excludes":              {labels: gpu, required: in("gpu", corev1.NodeSelectorOpNotIn, "a100"), want: false},
		"affinity DoesNotExist on present key": {labels: gpu, required: in("gpu", corev1.NodeSelectorOpDoesNotExist), want: false},
		"affinity In on absent key, flavor":    {labels: gpu, required: in("team", corev1.NodeSelectorOpIn, "x"), mode: Flavor, want: true},
		"affinity In on absent key, node":      {labels: gpu, required: in("team", corev1.NodeSelectorOpIn, "x"), mode: Node, want: false},
		"affinity Gt":                          {labels: map[string]string{"mem": "80"}, required: in("mem", corev1.NodeSelectorOpGt, "40"), want: true},
		"affinity Lt fails":                    {labels: map[string]string{"mem": "80"}, required: in("mem", corev1.NodeSelectorOpLt, "40"), want: false},
		"empty term matches nothing":           {labels: gpu, required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{}}}, want: false},
		"second term matches":                  {labels: gpu, required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "gpu", Operator: corev1.NodeSelectorOpIn, Values: []string{"l4"}}}}, {MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpExists}}}}}, want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Matches(tc.labels, tc.selector, tc.required, tc.mode); got != tc.want {
				t.Errorf("Matches() = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestUntoleratedTaint(t *testing.T) {
	gpuTaint := corev1.Taint{Key: "nvidia.com/gpu", Effect: corev1.TaintEffectNoSchedule}
	cases := map[string]struct {
		taints      []corev1.Taint
		tolerations [][]corev1.Toleration
		want        string
	}{
		"no taints": {},
		"untolerated": {
			taints: []corev1.Taint{gpuTaint},
			want:   "nvidia.com/gpu:NoSchedule",
		},
		"tolerated by Exists": {
			taints:      []corev1.Taint{gpuTaint},
			tolerations: [][]corev1.Toleration{{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists}}},
		},
		"tolerated by the second list": {
			taints:      []corev1.Taint{gpuTaint},
			tolerations: [][]corev1.Toleration{nil, {{Operator: corev1.TolerationOpExists}}},
		},
		"wrong effect": {
			taints:      []corev1.Taint{gpuTaint},
			tolerations: [][]corev1.Toleration{{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}}},
			want:        "nvidia.com/gpu:NoSchedule",
		},
		"Equal needs the value": {
			taints:      []corev1.Taint{{Key: "spot", Value: "true", Effect: corev1.TaintEffectNoExecute}},
			tolerations: [][]corev1.Toleration{{{Key: "spot", Value: "false"}}},
			want:        "spot=true:NoExecute",
		},
		"PreferNoSchedule never blocks": {
			taints: []corev1.Taint{{Key: "soft", Effect: corev1.TaintEffectPreferNoSchedule}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := ""
			if taint, ok := UntoleratedTaint(tc.taints, tc.tolerations...); ok {
				got = TaintString(taint)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("UntoleratedTaint() (-want +got):\n%s", diff)
			}
		})
	}
}
