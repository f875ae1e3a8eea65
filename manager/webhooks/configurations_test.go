package webhooks

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/config"
)

// TestPodHooksSeeOnlyQueuedPods: the plain Pods' hooks see only Pods that name a queue even when
// the configuration manages jobs without one, so the manager being down blocks no other Pod;
// the Job hooks follow the configuration.
func TestPodHooksSeeOnlyQueuedPods(t *testing.T) {
	cfg := &config.Configuration{
		Namespace: "fleetq-system", ManageJobsWithoutQueueName: true,
		ManagedJobsNamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "ml"}},
		Webhook:                      config.Webhook{URL: "https://127.0.0.1:9443"},
	}
	kinds := []JobKind{
		{Kind: "Job", Group: "batch", Version: "v1", Resource: "jobs", MutatePath: "/mutate-batch-v1-job", ValidatePath: "/validate-batch-v1-job"},
		{Kind: "Pod", Group: "", Version: "v1", Resource: "pods", MutatePath: "/mutate-core-v1-pod", ValidatePath: "/validate-core-v1-pod"},
	}
	m, v := Configurations(cfg, []byte("ca"), kinds, "")
	type sel struct{ object, namespace *metav1.LabelSelector }
	got := map[string]sel{}
	for _, w := range m.Webhooks {
		got[w.Name] = sel{w.ObjectSelector, w.NamespaceSelector}
	}
	for _, w := range v.Webhooks {
		got[w.Name] = sel{w.ObjectSelector, w.NamespaceSelector}
	}
	for _, name := range []string{"mpod.fleetq.dev", "vpod.fleetq.dev"} {
		s, ok := got[name]
		if !ok {
			t.Fatalf("no webhook %s in %v", name, got)
		}
		if len(s.object.MatchExpressions) != 1 || s.object.MatchExpressions[0].Key != kueue.QueueNameLabel || s.object.MatchExpressions[0].Operator != metav1.LabelSelectorOpExists {
			t.Errorf("%s object selector %+v: want the queue-name label to exist", name, s.object)
		}
		if len(s.namespace.MatchLabels) != 0 || len(s.namespace.MatchExpressions) != 0 {
			t.Errorf("%s namespace selector %+v: want every namespace (the object selector decides)", name, s.namespace)
		}
	}
	for _, name := range []string{"mjob.fleetq.dev", "vjob.fleetq.dev"} {
		s := got[name]
		if len(s.object.MatchExpressions) != 0 || s.namespace.MatchLabels["team"] != "ml" {
			t.Errorf("%s: object %+v namespace %+v; want every Job of the managed namespaces", name, s.object, s.namespace)
		}
	}
}

// TestJobValidationPassesOverTheManagersOwnUpdates: with the manager's user name known, each job
// validating webhook carries a match condition that leaves out that user's updates (and only
// those); mutating and queue webhooks, and every hook when the manager has no service account
// of its own, carry none.
func TestJobValidationPassesOverTheManagersOwnUpdates(t *testing.T) {
	cfg := &config.Configuration{Namespace: "fleetq-system", Webhook: config.Webhook{URL: "https://127.0.0.1:9443"}}
	kinds := []JobKind{{Kind: "Job", Group: "batch", Version: "v1", Resource: "jobs", MutatePath: "/mutate-batch-v1-job", ValidatePath: "/validate-batch-v1-job"}}
	self := `system:serviceaccount:fleetq-system:fleetq-manager`
	m, v := Configurations(cfg, []byte("ca"), kinds, self)
	for _, w := range v.Webhooks {
		switch w.Name {
		case "vjob.fleetq.dev":
			want := `!(request.operation == 'UPDATE' && request.userInfo.username == "system:serviceaccount:fleetq-system:fleetq-manager")`
			if len(w.MatchConditions) != 1 || w.MatchConditions[0].Name != OwnUpdatesCondition || w.MatchConditions[0].Expression != want {
				t.Errorf("%s match conditions %+v; want one, %s", w.Name, w.MatchConditions, want)
			}
		default:
			if len(w.MatchConditions) != 0 {
				t.Errorf("%s match conditions %+v; want none (not a job hook)", w.Name, w.MatchConditions)
			}
		}
	}
	for _, w := range m.Webhooks {
		if len(w.MatchConditions) != 0 {
			t.Errorf("mutating %s match conditions %+v; want none (it sees only creates)", w.Name, w.MatchConditions)
		}
	}
	// Unknown, or not an identity of the manager's own (users may share an admin's): none.
	for _, who := range []string{"", "kubernetes-admin", "system:admin"} {
		_, v = Configurations(cfg, []byte("ca"), kinds, who)
		for _, w := range v.Webhooks {
			if len(w.MatchConditions) != 0 {
				t.Errorf("%s match conditions %+v with manager user %q; want none", w.Name, w.MatchConditions, who)
			}
		}
	}
}
