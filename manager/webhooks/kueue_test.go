package webhooks

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
)

func fakeClient(objs ...client.Object) client.Client {
	s := runtime.NewScheme()
	_ = kueue.AddToScheme(s)
	return fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).Build()
}

func queueWith(flavors ...string) *kueue.ClusterQueue {
	cq := &kueue.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: "cq"}}
	g := kueue.ResourceGroup{CoveredResources: []corev1.ResourceName{corev1.ResourceCPU}}
	for _, f := range flavors {
		g.Flavors = append(g.Flavors, kueue.FlavorQuotas{Name: kueue.ResourceFlavorReference(f), Resources: []kueue.ResourceQuota{{Name: corev1.ResourceCPU, NominalQuota: resource.MustParse("1")}}})
	}
	cq.Spec.ResourceGroups = []kueue.ResourceGroup{g}
	return cq
}

func TestClusterQueueDefaultCopiesCohortAlias(t *testing.T) {
	w := &ClusterQueueWebhook{Client: fakeClient()}
	cases := map[string]struct {
		cohort, cohortName, want kueue.CohortReference
	}{
		"alias only":         {cohort: "ai-platform", want: "ai-platform"},
		"cohortName wins":    {cohort: "a", cohortName: "b", want: "b"},
		"neither":            {want: ""},
		"cohortName already": {cohortName: "c", want: "c"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cq := &kueue.ClusterQueue{Spec: kueue.ClusterQueueSpec{Cohort: tc.cohort, CohortName: tc.cohortName}}
			if err := w.Default(context.Background(), cq); err != nil {
				t.Fatal(err)
			}
			if cq.Spec.CohortName != tc.want {
				t.Errorf("cohortName = %q, want %q", cq.Spec.CohortName, tc.want)
			}
		})
	}
}

func TestClusterQueueValidation(t *testing.T) {
	w := &ClusterQueueWebhook{Client: fakeClient(&kueue.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: "a100"}})}
	cases := map[string]struct {
		cq          *kueue.ClusterQueue
		wantErr     string
		wantWarning string
	}{
		"valid": {cq: queueWith("a100")},
		"missing flavor is a warning, not an error": {
			cq:          queueWith("a100", "l4"),
			wantWarning: `ResourceFlavor "l4" does not exist; ClusterQueue cq stays inactive until it is created`,
		},
		"onFlavors names a flavor the queue does not have": {
			cq: func() *kueue.ClusterQueue {
				cq := queueWith("a100")
				cq.Spec.AdmissionChecksStrategy = &kueue.AdmissionChecksStrategy{AdmissionChecks: []kueue.AdmissionCheckStrategyRule{{Name: "dispatch", OnFlavors: []kueue.ResourceFlavorReference{"h100"}}}}
				return cq
			}(),
			wantErr: `spec.admissionChecksStrategy.admissionChecks[0].onFlavors[0]: Unsupported value: "h100": supported values: "a100"`,
		},
		"bad namespace selector": {
			cq: func() *kueue.ClusterQueue {
				cq := queueWith("a100")
				cq.Spec.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: "Maybe"}}}
				return cq
			}(),
			wantErr: "spec.namespaceSelector.matchExpressions[0].operator",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			warnings, err := w.ValidateCreate(context.Background(), tc.cq)
			if (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("error = %v, want %q", err, tc.wantErr)
			}
			got := strings.Join(warnings, "; ")
			if (got == "") != (tc.wantWarning == "") || !strings.Contains(got, tc.wantWarning) {
				t.Errorf("warnings = %q, want %q", got, tc.wantWarning)
			}
		})
	}
}

func TestCohortCycle(t *testing.T) {
	w := &CohortWebhook{Client: fakeClient(
		&kueue.Cohort{ObjectMeta: metav1.ObjectMeta{Name: "org"}, Spec: kueue.CohortSpec{ParentName: "ml"}},
		&kueue.Cohort{ObjectMeta: metav1.ObjectMeta{Name: "ml"}, Spec: kueue.CohortSpec{ParentName: "root"}},
	)}
	cases := map[string]struct {
		cohort  *kueue.Cohort
		wantErr string
	}{
		"parent chain ends":     {cohort: &kueue.Cohort{ObjectMeta: metav1.ObjectMeta{Name: "team"}, Spec: kueue.CohortSpec{ParentName: "org"}}},
		"missing parent is ok":  {cohort: &kueue.Cohort{ObjectMeta: metav1.ObjectMeta{Name: "team"}, Spec: kueue.CohortSpec{ParentName: "nowhere"}}},
		"own parent":            {cohort: &kueue.Cohort{ObjectMeta: metav1.ObjectMeta{Name: "team"}, Spec: kueue.CohortSpec{ParentName: "team"}}, wantErr: "cycle of cohorts (team -> team)"},
		"cycle through parents": {cohort: &kueue.Cohort{ObjectMeta: metav1.ObjectMeta{Name: "root"}, Spec: kueue.CohortSpec{ParentName: "org"}}, wantErr: "cycle of cohorts (root -> org -> ml -> root)"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := w.ValidateCreate(context.Background(), tc.cohort)
			if (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("error = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func TestResourceFlavorValidation(t *testing.T) {
	w := &ResourceFlavorWebhook{}
	cases := map[string]struct {
		spec    kueue.ResourceFlavorSpec
		wantErr string
	}{
		"valid":           {spec: kueue.ResourceFlavorSpec{NodeLabels: map[string]string{"nvidia.com/gpu.product": "NVIDIA-L4"}}},
		"bad label key":   {spec: kueue.ResourceFlavorSpec{NodeLabels: map[string]string{"bad key": "x"}}, wantErr: "spec.nodeLabels[bad key]"},
		"bad label value": {spec: kueue.ResourceFlavorSpec{NodeLabels: map[string]string{"k": "not valid!"}}, wantErr: `spec.nodeLabels[k]: Invalid value: "not valid!"`},
		"bad toleration key": {
			spec:    kueue.ResourceFlavorSpec{Tolerations: []corev1.Toleration{{Key: "a b", Operator: corev1.TolerationOpExists}}},
			wantErr: "spec.tolerations[0].key",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := w.ValidateCreate(context.Background(), &kueue.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: "f"}, Spec: tc.spec})
			if (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("error = %v, want %q", err, tc.wantErr)
			}
		})
	}
}
