package lab

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/fleetq/fleetq/internal/podrequest"
)

// Capacity is what a cluster's nodes offer and what its pods hold, the way the scheduler counts it.
type Capacity struct {
	// Nodes and ReadyNodes count all nodes and those whose Ready condition is True.
	Nodes, ReadyNodes int
	// Allocatable sums the nodes' status.allocatable.
	Allocatable corev1.ResourceList
	// Requested sums the requests of pods bound to a node that have not finished.
	Requested corev1.ResourceList
}

// Free is allocatable minus requested for one resource, never below zero.
func (c Capacity) Free(name corev1.ResourceName) resource.Quantity {
	free := c.Allocatable[name].DeepCopy()
	free.Sub(c.Requested[name])
	if free.Sign() < 0 {
		return *resource.NewQuantity(0, free.Format)
	}
	return free
}

// ComputeCapacity sums nodes' allocatable and the requests of the pods bound to them that still hold
// resources (not Succeeded or Failed), counted the way kube-scheduler counts them (podrequest); pods
// bound to nodes not in the list are ignored.
func ComputeCapacity(nodes []corev1.Node, pods []corev1.Pod) Capacity {
	c := Capacity{Allocatable: corev1.ResourceList{}, Requested: corev1.ResourceList{}}
	known := map[string]bool{}
	for _, n := range nodes {
		c.Nodes++
		known[n.Name] = true
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				c.ReadyNodes++
			}
		}
		add(c.Allocatable, n.Status.Allocatable)
	}
	for i := range pods {
		p := &pods[i]
		if !known[p.Spec.NodeName] || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		add(c.Requested, podrequest.Of(&p.Spec))
	}
	return c
}

func add(into, from corev1.ResourceList) {
	for name, q := range from {
		cur := into[name]
		cur.Add(q)
		into[name] = cur
	}
}

// ReadCapacity lists a cluster's nodes and pods and computes its Capacity.
func ReadCapacity(ctx context.Context, cs kubernetes.Interface) (Capacity, error) {
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return Capacity{}, fmt.Errorf("list nodes: %w", err)
	}
	pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return Capacity{}, fmt.Errorf("list pods: %w", err)
	}
	return ComputeCapacity(nodes.Items, pods.Items), nil
}
