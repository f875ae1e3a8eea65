// Package kind is the lab provider for machines with Docker: each cluster of the spec becomes a kind
// cluster (one control-plane container) with kwok running inside for the fake GPU nodes, and fleetq's
// images loaded into it.
//
// Everything a kind cluster is made from is generated here from the same lab.Spec the local provider
// uses, as plain objects, so it is tested without Docker. Running it needs a Docker engine that can pull
// kindest/node and the kwok image from a registry.
package kind

import (
	"fmt"
	"maps"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/kind/pkg/apis/config/defaults"
	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	"sigs.k8s.io/yaml"

	"github.com/fleetq/fleetq/e2e/lab"
	"github.com/fleetq/fleetq/e2e/lab/kwok"
)

// Defaults for images the kind provider pulls.
const (
	// DefaultKwokImage runs kwok inside each kind cluster; the same version the local lab builds.
	DefaultKwokImage = "registry.k8s.io/kwok/kwok:v0.8.0"
	// kwokNamespace holds the in-cluster kwok controller.
	kwokNamespace = "kube-system"
	kwokName      = "kwok-controller"
)

// DefaultNodeImage is the kindest/node image this kind version was released with.
var DefaultNodeImage = defaults.Image

// ClusterName is the kind cluster (and Docker container prefix) for a lab cluster.
func ClusterName(c lab.ClusterSpec) string { return "fleetq-" + c.Name }

// Config is the kind cluster configuration for one lab cluster: one control-plane node whose API server
// is published on 127.0.0.1 (on the spec's port, or a free one).
func Config(c lab.ClusterSpec, nodeImage string) *v1alpha4.Cluster {
	if nodeImage == "" {
		nodeImage = DefaultNodeImage
	}
	cfg := &v1alpha4.Cluster{
		TypeMeta: v1alpha4.TypeMeta{Kind: "Cluster", APIVersion: "kind.x-k8s.io/v1alpha4"},
		Name:     ClusterName(c),
		Nodes: []v1alpha4.Node{{
			Role:  v1alpha4.ControlPlaneRole,
			Image: nodeImage,
			// The real node carries the region too, so region-aware components see one topology.
			Labels: map[string]string{lab.RegionLabel: c.Region, "lab.fleetq.dev/cluster": c.Name},
		}},
		Networking: v1alpha4.Networking{
			APIServerAddress: "127.0.0.1",
			APIServerPort:    int32(c.APIServerPort),
		},
	}
	v1alpha4.SetDefaultsCluster(cfg)
	return cfg
}

// ConfigYAML renders Config as the file `kind create cluster --config` takes, for logs and debugging.
func ConfigYAML(c lab.ClusterSpec, nodeImage string) ([]byte, error) {
	data, err := yaml.Marshal(Config(c, nodeImage))
	if err != nil {
		return nil, fmt.Errorf("cluster %q: kind config: %w", c.Name, err)
	}
	return data, nil
}

// KwokObjects are the objects that run kwok inside a kind cluster: its service account and RBAC, the
// stages as a ConfigMap, and a Deployment pinned to the real control-plane node. kwok only manages nodes
// annotated as fake, so it leaves the kind node alone.
func KwokObjects(spec lab.Spec, kwokImage string) ([]runtime.Object, error) {
	if kwokImage == "" {
		kwokImage = DefaultKwokImage
	}
	stages, err := kwok.Render(kwok.Options{PodRunTime: spec.PodRunTime.Duration, PodTerminationDelay: spec.PodTerminationDelay.Duration})
	if err != nil {
		return nil, err
	}
	labels := map[string]string{"app.kubernetes.io/name": kwokName, "app.kubernetes.io/part-of": "fleetq-lab"}
	meta := func(name string, namespaced bool) metav1.ObjectMeta {
		m := metav1.ObjectMeta{Name: name, Labels: maps.Clone(labels)}
		if namespaced {
			m.Namespace = kwokNamespace
		}
		return m
	}
	replicas := int32(1)
	return []runtime.Object{
		&corev1.ServiceAccount{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
			ObjectMeta: meta(kwokName, true),
		},
		&rbacv1.ClusterRole{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
			ObjectMeta: meta(kwokName, false),
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{""}, Resources: []string{"nodes", "pods"}, Verbs: []string{"get", "list", "watch", "update", "patch", "delete"}},
				{APIGroups: []string{""}, Resources: []string{"nodes/status", "pods/status"}, Verbs: []string{"update", "patch"}},
				{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch", "update"}},
				{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
			},
		},
		&rbacv1.ClusterRoleBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
			ObjectMeta: meta(kwokName, false),
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: kwokName},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: kwokName, Namespace: kwokNamespace}},
		},
		&corev1.ConfigMap{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: meta(kwokName+"-stages", true),
			Data:       map[string]string{"stages.yaml": string(stages)},
		},
		&appsv1.Deployment{
			TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
			ObjectMeta: meta(kwokName, true),
			Spec: appsv1.DeploymentSpec{
				Replicas: &replicas,
				Selector: &metav1.LabelSelector{MatchLabels: maps.Clone(labels)},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: maps.Clone(labels)},
					Spec: corev1.PodSpec{
						ServiceAccountName: kwokName,
						// Fake nodes must never run kwok itself.
						NodeSelector: map[string]string{"node-role.kubernetes.io/control-plane": ""},
						Tolerations: []corev1.Toleration{
							{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
						},
						Containers: []corev1.Container{{
							Name:  "kwok",
							Image: kwokImage,
							Args: []string{
								"--config=/etc/kwok/stages.yaml",
								"--manage-all-nodes=false",
								"--manage-nodes-with-annotation-selector=" + lab.FakeNodeAnnotation + "=fake",
								"--cidr=10.244.0.0/16",
								"--node-ip=$(POD_IP)",
							},
							Env: []corev1.EnvVar{{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{
								FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"},
							}}},
							VolumeMounts: []corev1.VolumeMount{{Name: "stages", MountPath: "/etc/kwok", ReadOnly: true}},
						}},
						Volumes: []corev1.Volume{{Name: "stages", VolumeSource: corev1.VolumeSource{
							ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: kwokName + "-stages"}},
						}}},
					},
				},
			},
		},
	}, nil
}
