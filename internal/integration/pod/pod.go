// Package pod integrates plain Pods (Kueue's "pod" framework, opt-in as in Kueue): a Pod
// labelled with a queue is created with the scheduling gate kueue.x-k8s.io/admission, is one
// Workload of one pod set ("main"), and starts when fleetq adds its flavor's node selector and
// tolerations and removes the gate. A started Pod cannot be gated again, so an evicted Pod is
// stopped by deleting it (integration.Deleter): its quota is released once it is gone, and it is
// not requeued (the Pod is gone; its owner or its user makes a new one).
//
// On a ClusterQueue that dispatches to workers the Pod has no managedBy to hand it over: it stays
// gated where it was created while a gated copy runs in one worker (its agent removes the gate),
// and the copy's status is written into the gated Pod's, so kubectl shows it Running, then
// Completed. That Pod never ran, so an evicted one is requeued, not deleted.
//
// Pods labelled kueue.x-k8s.io/pod-group-name form a pod group (integration.Grouper): one
// Workload named after the group, whose pod sets gather the members with the same spec; it is
// created once the group has the kueue.x-k8s.io/pod-group-total-count Pods it announces.
package pod

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/internal/integration"
)

// Framework is the integration's name in integrations.frameworks.
const Framework = "pod"

// GateName is the scheduling gate that holds a Pod until it is admitted (Kueue's).
const GateName = "kueue.x-k8s.io/admission"

// GroupNameLabel makes a Pod a member of a pod group (Kueue's label).
const GroupNameLabel = kueue.PodGroupNameLabel

// GroupTotalCountAnnotation says how many Pods the Pod's group has (Kueue's annotation).
const GroupTotalCountAnnotation = kueue.PodGroupTotalCountAnnotation

// PodSetName is the one pod set of a Pod's workload.
const PodSetName kueue.PodSetReference = "main"

// Adapter integrates plain Pods.
type Adapter struct{}

var (
	_ integration.Adapter = Adapter{}
	_ integration.Deleter = Adapter{}
	_ integration.Grouper = Adapter{}
)

// Framework implements integration.Adapter.
func (Adapter) Framework() string { return Framework }

// GVK implements integration.Adapter.
func (Adapter) GVK() schema.GroupVersionKind { return corev1.SchemeGroupVersion.WithKind("Pod") }

// Fields implements integration.Adapter: a Pod is held by its scheduling gate and has no
// managedBy.
func (Adapter) Fields() integration.Fields {
	return integration.Fields{Suspend: "spec.schedulingGates[" + GateName + "]"}
}

// New implements integration.Adapter.
func (Adapter) New() client.Object { return &corev1.Pod{} }

func pod(obj client.Object) *corev1.Pod { return obj.(*corev1.Pod) }

// PodSets implements integration.Adapter: one pod set of one pod, the Pod as its user wrote it
// (without fleetq's gate).
func (Adapter) PodSets(obj client.Object) ([]kueue.PodSet, error) {
	return []kueue.PodSet{{Name: PodSetName, Count: 1, Template: template(pod(obj))}}, nil
}

// template is the Pod as its user wrote it: without fleetq's gate and its node.
func template(p *corev1.Pod) corev1.PodTemplateSpec {
	spec := p.Spec.DeepCopy()
	spec.SchedulingGates = slices.DeleteFunc(spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == GateName })
	if len(spec.SchedulingGates) == 0 {
		spec.SchedulingGates = nil
	}
	spec.NodeName = ""
	t := corev1.PodTemplateSpec{Spec: *spec}
	t.Labels, t.Annotations = maps.Clone(p.Labels), maps.Clone(p.Annotations)
	return t
}

var (
	groupLabelPath = field.NewPath("metadata", "labels").Key(GroupNameLabel)
	groupCountPath = field.NewPath("metadata", "annotations").Key(GroupTotalCountAnnotation)
)

// Group implements integration.Grouper: the Pod's kueue.x-k8s.io/pod-group-name label and its
// kueue.x-k8s.io/pod-group-total-count annotation.
func (Adapter) Group(obj client.Object) (string, int32, error) {
	p := pod(obj)
	name, ok := p.Labels[GroupNameLabel]
	if !ok {
		return "", 0, nil
	}
	if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
		return "", 0, field.Invalid(groupLabelPath, name, msgs[0]+"; the group's Workload is named after it")
	}
	raw, ok := p.Annotations[GroupTotalCountAnnotation]
	if !ok {
		return "", 0, field.Required(groupCountPath, fmt.Sprintf("a Pod of pod group %q must say how many Pods the group has, the same number on every member", name))
	}
	n, err := strconv.ParseInt(raw, 10, 32)
	if err != nil || n < 1 {
		return "", 0, field.Invalid(groupCountPath, raw, fmt.Sprintf("must be the number of Pods in pod group %q, a whole number from 1 to %d", name, math.MaxInt32))
	}
	return name, int32(n), nil
}

// GroupLabel implements integration.Grouper.
func (Adapter) GroupLabel() string { return GroupNameLabel }

// NewList implements integration.Grouper.
func (Adapter) NewList() client.ObjectList { return &corev1.PodList{} }

// GroupPodSets implements integration.Grouper: members whose specs ask for the same (role) share
// a pod set, named by a hash of that shape as Kueue names a group's roles, so a
// replacement Pod joins the pod set of the one it replaces; pod sets are sorted by name and each
// one's template is its first member's by name.
func (Adapter) GroupPodSets(members []client.Object) ([]kueue.PodSet, []kueue.PodSetReference) {
	sets := map[kueue.PodSetReference]*kueue.PodSet{}
	first := map[kueue.PodSetReference]string{}
	names := make([]kueue.PodSetReference, len(members))
	for i, m := range members {
		t := template(pod(m))
		name := role(t.Spec)
		names[i] = name
		ps, ok := sets[name]
		if !ok {
			ps = &kueue.PodSet{Name: name}
			sets[name] = ps
		}
		ps.Count++
		if !ok || m.GetName() < first[name] {
			ps.Template, first[name] = t, m.GetName()
		}
	}
	out := make([]kueue.PodSet, 0, len(sets))
	for _, ps := range sets {
		out = append(out, *ps)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, names
}

// role names the pod set of a member by what admission looks at in its spec — its containers'
// names, images and resources, and where it may be scheduled — as the first 8 hex digits of a
// hash. What differs from member to member (hostname, the API server's service-account volume
// and its mounts, environment) is left out.
func role(spec corev1.PodSpec) kueue.PodSetReference {
	type container struct {
		Name, Image string
		Resources   corev1.ResourceRequirements
	}
	containers := func(cs []corev1.Container) []container {
		out := make([]container, len(cs))
		for i, c := range cs {
			out[i] = container{Name: c.Name, Image: c.Image, Resources: c.Resources}
		}
		return out
	}
	shape := struct {
		InitContainers, Containers []container
		NodeSelector               map[string]string
		Affinity                   *corev1.Affinity
		Tolerations                []corev1.Toleration
		TopologySpread             []corev1.TopologySpreadConstraint
		PriorityClassName          string
		RuntimeClassName           *string
		Overhead                   corev1.ResourceList
		Resources                  *corev1.ResourceRequirements
	}{containers(spec.InitContainers), containers(spec.Containers), spec.NodeSelector, spec.Affinity, spec.Tolerations,
		spec.TopologySpreadConstraints, spec.PriorityClassName, spec.RuntimeClassName, spec.Overhead, spec.Resources}
	b, err := json.Marshal(shape)
	if err != nil {
		panic(err) // plain API types always marshal
	}
	sum := sha256.Sum256(b)
	return kueue.PodSetReference(hex.EncodeToString(sum[:4]))
}

// Suspended implements integration.Adapter: the Pod carries the gate.
func (Adapter) Suspended(obj client.Object) bool {
	return slices.ContainsFunc(pod(obj).Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == GateName })
}

// SetSuspended implements integration.Adapter: adds the gate (which the API server accepts only
// when the Pod is created), with integration.ManagedLabel so the manager's pod cache holds it,
// or removes the gate.
func (a Adapter) SetSuspended(obj client.Object, suspended bool) {
	p := pod(obj)
	if suspended {
		if !a.Suspended(obj) {
			p.Spec.SchedulingGates = append(p.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: GateName})
		}
		if p.Labels == nil {
			p.Labels = map[string]string{}
		}
		p.Labels[integration.ManagedLabel] = "true"
		return
	}
	p.Spec.SchedulingGates = slices.DeleteFunc(p.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == GateName })
	if len(p.Spec.SchedulingGates) == 0 {
		p.Spec.SchedulingGates = nil
	}
}

// ApplyPlacements implements integration.Adapter: the flavor's node selector entries and
// tolerations are added to the gated Pod (the API server allows only additions), with fleetq's
// labels.
func (Adapter) ApplyPlacements(obj client.Object, placements []integration.PodSetPlacement) error {
	p := pod(obj)
	for _, pl := range placements {
		if pl.Name != PodSetName {
			return integration.ErrNoPodSet(Adapter{}, obj, pl.Name)
		}
		t := corev1.PodTemplateSpec{Spec: p.Spec}
		t.Labels, t.Annotations = p.Labels, p.Annotations
		integration.Inject(&t, pl.Placement)
		p.Spec.NodeSelector, p.Spec.Tolerations = t.Spec.NodeSelector, t.Spec.Tolerations
		p.Labels, p.Annotations = t.Labels, t.Annotations
	}
	return nil
}

// RestorePodSets implements integration.Adapter: a started Pod's scheduling fields cannot be
// taken back (it is deleted instead), and a gated one never got any.
func (Adapter) RestorePodSets(client.Object, []kueue.PodSet) bool { return false }

// Status implements integration.Adapter: a Pod ends Succeeded or Failed; until then it may run
// once its gate is gone.
func (a Adapter) Status(obj client.Object) integration.Status {
	p := pod(obj)
	switch p.Status.Phase {
	case corev1.PodSucceeded:
		return integration.Status{Finished: true, Message: "Pod succeeded"}
	case corev1.PodFailed:
		msg := p.Status.Message
		if msg == "" {
			msg = "Pod failed: " + p.Status.Reason
		}
		return integration.Status{Finished: true, Failed: true, Message: msg}
	}
	return integration.Status{Active: !a.Suspended(obj) || p.Spec.NodeName != ""}
}

// StopByDeletion implements integration.Deleter.
func (Adapter) StopByDeletion() bool { return true }

// ManagedBy implements integration.Adapter: a Pod has none.
func (Adapter) ManagedBy(client.Object) string { return "" }

// SetManagedBy implements integration.Adapter: a Pod has none.
func (Adapter) SetManagedBy(client.Object, string) {}

// Copy implements integration.Adapter: the Pod without what this cluster's API server filled in
// for it — its node, the priority its PriorityClass resolved to (the worker resolves the class
// again, and refuses a pod whose number differs) and the service-account token volume (the
// worker mounts its own).
func (Adapter) Copy(obj client.Object) client.Object {
	p := pod(obj)
	c := &corev1.Pod{}
	c.Name, c.Namespace = p.Name, p.Namespace
	c.Labels, c.Annotations = maps.Clone(p.Labels), maps.Clone(p.Annotations)
	c.Spec = *p.Spec.DeepCopy()
	c.Spec.NodeName = ""
	c.Spec.Priority, c.Spec.PreemptionPolicy = nil, nil
	var dropped []string
	c.Spec.Volumes = slices.DeleteFunc(c.Spec.Volumes, func(v corev1.Volume) bool {
		if tokenVolume(v) {
			dropped = append(dropped, v.Name)
			return true
		}
		return false
	})
	for _, cs := range [][]corev1.Container{c.Spec.InitContainers, c.Spec.Containers} {
		for i := range cs {
			cs[i].VolumeMounts = slices.DeleteFunc(cs[i].VolumeMounts, func(m corev1.VolumeMount) bool { return slices.Contains(dropped, m.Name) })
		}
	}
	return c
}

// tokenVolume reports whether v is the service-account token volume the API server adds to a
// pod (kube-api-access-*, a projected service-account token).
func tokenVolume(v corev1.Volume) bool {
	if !strings.HasPrefix(v.Name, "kube-api-access-") || v.Projected == nil {
		return false
	}
	return slices.ContainsFunc(v.Projected.Sources, func(s corev1.VolumeProjection) bool { return s.ServiceAccountToken != nil })
}

// MirrorStatus implements integration.Adapter: the copy's phase, conditions and container
// states are written into the gated Pod, which keeps its own PodScheduled condition (it is not
// scheduled here); a nil remote puts it back to Pending.
func (Adapter) MirrorStatus(local, remote client.Object) bool {
	l := pod(local)
	var st corev1.PodStatus
	if remote != nil {
		r := pod(remote).Status
		st = corev1.PodStatus{
			Phase: r.Phase, Message: r.Message, Reason: r.Reason, StartTime: r.StartTime,
			InitContainerStatuses: r.InitContainerStatuses, ContainerStatuses: r.ContainerStatuses,
		}
		for _, c := range r.Conditions {
			if c.Type != corev1.PodScheduled {
				st.Conditions = append(st.Conditions, c)
			}
		}
	} else {
		st.Phase = corev1.PodPending
	}
	if c := findCondition(l.Status.Conditions, corev1.PodScheduled); c != nil {
		st.Conditions = append([]corev1.PodCondition{*c}, st.Conditions...)
	}
	st.QOSClass = l.Status.QOSClass
	if equality.Semantic.DeepEqual(l.Status, st) {
		return false
	}
	l.Status = st
	return true
}

func findCondition(cs []corev1.PodCondition, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range cs {
		if cs[i].Type == t {
			return &cs[i]
		}
	}
	return nil
}
