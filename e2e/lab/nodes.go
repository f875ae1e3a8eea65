package lab

import (
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Nodes returns the fake Node objects a defaulted cluster spec describes, in pool order. Every
// provider registers the same objects, so a test sees identical nodes on the local lab and on kind.
func Nodes(c ClusterSpec) []*corev1.Node {
	var nodes []*corev1.Node
	for _, p := range c.NodePools {
		for i := range p.Count {
			name := fmt.Sprintf("%s%d", p.NamePrefix, i)
			labels := map[string]string{
				"kubernetes.io/hostname": name,
				"kubernetes.io/os":       "linux",
				"kubernetes.io/arch":     "amd64",
				"type":                   "kwok",
				RegionLabel:              c.Region,
				ZoneLabel:                c.Region + "-a",
				PoolLabel:                p.Name,
			}
			maps.Copy(labels, p.Labels)
			allocatable := p.Allocatable
			if allocatable == nil {
				allocatable = p.Capacity
			}
			nodes = append(nodes, &corev1.Node{
				ObjectMeta: metav1.ObjectMeta{
					Name:        name,
					Labels:      labels,
					Annotations: map[string]string{FakeNodeAnnotation: "fake"},
				},
				Spec: corev1.NodeSpec{Taints: append([]corev1.Taint(nil), p.Taints...)},
				Status: corev1.NodeStatus{
					Capacity:    p.Capacity.DeepCopy(),
					Allocatable: allocatable.DeepCopy(),
					NodeInfo: corev1.NodeSystemInfo{
						Architecture:    "amd64",
						OperatingSystem: "linux",
						KubeletVersion:  "fake",
					},
				},
			})
		}
	}
	return nodes
}

// RegisterNodes creates the cluster's fake nodes, leaving nodes that already exist as they are so a
// restarted lab keeps what tests changed on them.
func RegisterNodes(ctx context.Context, cs kubernetes.Interface, c ClusterSpec) error {
	for _, n := range Nodes(c) {
		created, err := cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("cluster %q: create node %q: %w", c.Name, n.Name, err)
		}
		// Create keeps the status the kubelet registers with, but a server that drops it must not
		// leave a node without capacity: the scheduler would place nothing there.
		if len(created.Status.Allocatable) == 0 {
			created.Status = n.Status
			if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
				return fmt.Errorf("cluster %q: set status of node %q: %w", c.Name, n.Name, err)
			}
		}
	}
	return nil
}
