// Package podrequest computes what one pod asks the scheduler for, the way kube-scheduler counts
// it, so quota (manager), capacity (agent) and placement (dispatch) all charge the same amounts.
package podrequest

import (
	corev1 "k8s.io/api/core/v1"
)

// Of returns the effective requests of a pod with this spec: pod-level resources when set;
// otherwise the larger of (regular containers plus restartable init containers, i.e. sidecars)
// and each init container's peak while it runs, plus the pod overhead. Limits stand in for
// requests that are not set, as the API server defaults them.
func Of(spec *corev1.PodSpec) corev1.ResourceList {
	out := corev1.ResourceList{}
	if spec.Resources != nil && (len(spec.Resources.Requests) > 0 || len(spec.Resources.Limits) > 0) {
		add(out, requests(spec.Resources))
		add(out, spec.Overhead)
		return out
	}
	sidecars := corev1.ResourceList{}
	for i := range spec.InitContainers {
		c := &spec.InitContainers[i]
		req := requests(&c.Resources)
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			add(sidecars, req) // a sidecar keeps running next to the regular containers
			continue
		}
		// A regular init container runs alone, next to the sidecars started before it.
		peak := corev1.ResourceList{}
		add(peak, sidecars)
		add(peak, req)
		maxInto(out, peak)
	}
	regular := corev1.ResourceList{}
	for i := range spec.Containers {
		add(regular, requests(&spec.Containers[i].Resources))
	}
	add(regular, sidecars)
	maxInto(out, regular)
	add(out, spec.Overhead)
	return out
}

// requests is a container's requests, falling back to its limits where a request is unset.
func requests(r *corev1.ResourceRequirements) corev1.ResourceList {
	out := corev1.ResourceList{}
	for name, q := range r.Limits {
		out[name] = q
	}
	for name, q := range r.Requests {
		out[name] = q
	}
	return out
}

func add(into, from corev1.ResourceList) {
	for name, q := range from {
		sum := into[name]
		sum.Add(q)
		into[name] = sum
	}
}

// maxInto keeps, per resource, the larger of into and from; with a regular init container the
// pod's peak is the larger of its init phase and its run phase.
func maxInto(into, from corev1.ResourceList) {
	for name, q := range from {
		if cur, ok := into[name]; !ok || q.Cmp(cur) > 0 {
			into[name] = q.DeepCopy()
		}
	}
}
