package setup

import (
	"maps"
	"slices"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetq "github.com/fleetq/fleetq/api/fleetq/v1alpha1"
	"github.com/fleetq/fleetq/internal/integration/builtin"
)

// RBAC returns the only permissions fleetq-agent needs in its worker cluster, bound to a service
// account in its namespace: read nodes, pods and synced flavors; read copies and patch their status
// and their jobs' suspend field (delete Pod copies, which cannot be suspended again); write its own
// CapacityReport, leader-election Lease and Events; read the manager's Lease. Installers (chart,
// lab, demo) apply these objects; the integration suite runs the agent with exactly them.
func RBAC(namespace, serviceAccount string) []client.Object {
	name := fleetq.AgentName
	subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: serviceAccount, Namespace: namespace}}
	rules := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch"}}}
	// Job copies of every built-in kind (Pods among them, which capacity reads too): read, and
	// suspend or start them.
	kinds := builtin.Resources()
	for _, g := range slices.Sorted(maps.Keys(kinds)) {
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{g}, Resources: kinds[g], Verbs: []string{"get", "list", "watch", "patch"}})
	}
	// A started Pod copy cannot be gated again: it is stopped by deleting it.
	rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"delete"}})
	cluster := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Rules: append(rules, []rbacv1.PolicyRule{
			{APIGroups: []string{"kueue.x-k8s.io"}, Resources: []string{"workloads", "resourceflavors"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{"kueue.x-k8s.io"}, Resources: []string{"workloads/status"}, Verbs: []string{"get", "patch"}},
			{APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
		}...),
	}
	local := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{fleetq.GroupVersion.Group}, Resources: []string{"capacityreports"}, Verbs: []string{"get", "list", "watch", "create", "patch", "update"}},
			{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch"}},
			{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
		},
	}
	return []client.Object{
		cluster,
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
			Subjects:   subject,
		},
		local,
		&rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
			Subjects:   subject,
		},
	}
}
