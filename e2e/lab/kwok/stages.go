// Package kwok renders the configuration the lab runs kwok with: the Stage objects that make fake
// nodes Ready and fake pods run and complete.
//
// The standalone kwok binary has no built-in stages. These are our own, kept to the five the lab needs;
// kwok's module ships fuller examples under kustomize/stage/. The types below mirror only the fields of
// kwok.x-k8s.io/v1alpha1 Stage we set, so fleetq does not depend on kwok's module (and its older k8s.io).
package kwok

import (
	"bytes"
	"fmt"
	"time"

	"sigs.k8s.io/yaml"
)

// RunTimeAnnotation on a pod overrides how long it runs before it succeeds (a Go duration, e.g. "90s").
// A pod that carries it succeeds whatever owns it (a plain pod too).
const RunTimeAnnotation = "pod-complete.stage.kwok.x-k8s.io/delay"

// CompletingOwners are the kinds whose pods succeed after the pod run time: batch Jobs and
// training-operator's jobs (whose pods it owns directly). Other pods (a RayCluster's, a plain
// pod's) run until deleted, like servers, unless they carry RunTimeAnnotation.
var CompletingOwners = []string{"Job", "PyTorchJob", "TFJob", "XGBoostJob", "PaddleJob", "MPIJob"}

// Options are the knobs of the rendered stages.
type Options struct {
	// PodRunTime is how long a pod of a CompletingOwners kind runs when it has no
	// RunTimeAnnotation.
	PodRunTime time.Duration
	// PodTerminationDelay is how long a deleted pod stays Terminating before kwok removes it, as
	// a kubelet takes to stop containers within their grace period. Zero removes pods at once.
	PodTerminationDelay time.Duration
	// HeartbeatInterval is how often a Ready node's conditions are refreshed. kwok also renews node
	// leases on its own, which is what the node lifecycle controller watches. Default: 30s.
	HeartbeatInterval time.Duration
}

// Stage is the subset of kwok's Stage the lab writes.
type Stage struct {
	APIVersion string    `json:"apiVersion"`
	Kind       string    `json:"kind"`
	Metadata   Metadata  `json:"metadata"`
	Spec       StageSpec `json:"spec"`
}

// Metadata names a Stage.
type Metadata struct {
	Name string `json:"name"`
}

// StageSpec says which objects a stage applies to, after what delay, and what it does to them.
type StageSpec struct {
	ResourceRef ResourceRef `json:"resourceRef"`
	Selector    Selector    `json:"selector"`
	Delay       *Delay      `json:"delay,omitempty"`
	Next        Next        `json:"next"`
	// ImmediateNextStage lets the next matching stage run without waiting for a new watch event.
	ImmediateNextStage bool `json:"immediateNextStage,omitempty"`
}

// ResourceRef names the kind a stage acts on.
type ResourceRef struct {
	APIGroup string `json:"apiGroup"`
	Kind     string `json:"kind"`
}

// Selector matches objects by jq expressions over their JSON.
type Selector struct {
	MatchExpressions []Expression `json:"matchExpressions"`
}

// Expression is one jq requirement.
type Expression struct {
	Key      string   `json:"key"`
	Operator string   `json:"operator"`
	Values   []string `json:"values,omitempty"`
}

// Delay is how long kwok waits before applying a stage. With no jitter the delay is exact; kwok
// treats a jitter not larger than the delay as a replacement of it, so the lab sets none.
type Delay struct {
	DurationMilliseconds int64 `json:"durationMilliseconds"`
	DurationFrom         *From `json:"durationFrom,omitempty"`
}

// From reads a value from the object with a jq expression.
type From struct {
	ExpressionFrom string `json:"expressionFrom"`
}

// Next is what a stage does: replace the status from a template, or delete the object.
type Next struct {
	StatusTemplate string `json:"statusTemplate,omitempty"`
	Delete         bool   `json:"delete,omitempty"`
}

// Render returns the stages as a multi-document YAML file for kwok's --config.
func Render(o Options) ([]byte, error) {
	if o.PodRunTime < 0 {
		return nil, fmt.Errorf("kwok stages: negative pod run time %s", o.PodRunTime)
	}
	if o.PodTerminationDelay < 0 {
		return nil, fmt.Errorf("kwok stages: negative pod termination delay %s", o.PodTerminationDelay)
	}
	var buf bytes.Buffer
	for i, s := range Stages(o) {
		data, err := yaml.Marshal(s)
		if err != nil {
			return nil, fmt.Errorf("kwok stage %q: %w", s.Metadata.Name, err)
		}
		if i > 0 {
			buf.WriteString("---\n")
		}
		buf.Write(data)
	}
	return buf.Bytes(), nil
}

// Stages returns the lab's stages: node-initialize, node-heartbeat, pod-ready, pod-complete,
// pod-complete-timed and pod-delete.
func Stages(o Options) []Stage {
	if o.HeartbeatInterval <= 0 {
		o.HeartbeatInterval = 30 * time.Second
	}
	node := ResourceRef{APIGroup: "v1", Kind: "Node"}
	pod := ResourceRef{APIGroup: "v1", Kind: "Pod"}
	notDeleted := Expression{Key: ".metadata.deletionTimestamp", Operator: "DoesNotExist"}
	running := Expression{Key: ".status.phase", Operator: "In", Values: []string{"Running"}}
	runTime := &Delay{
		DurationMilliseconds: o.PodRunTime.Milliseconds(),
		DurationFrom:         &From{ExpressionFrom: fmt.Sprintf(".metadata.annotations[%q]", RunTimeAnnotation)},
	}
	var terminate *Delay
	if o.PodTerminationDelay > 0 {
		terminate = &Delay{DurationMilliseconds: o.PodTerminationDelay.Milliseconds()}
	}
	return []Stage{
		stage("node-initialize", StageSpec{
			ResourceRef: node,
			Selector: Selector{MatchExpressions: []Expression{
				{Key: readyStatus, Operator: "NotIn", Values: []string{"True"}},
			}},
			Next: Next{StatusTemplate: nodeInitializeTemplate},
		}),
		stage("node-heartbeat", StageSpec{
			ResourceRef: node,
			Selector: Selector{MatchExpressions: []Expression{
				{Key: ".status.phase", Operator: "In", Values: []string{"Running"}},
				{Key: readyStatus, Operator: "In", Values: []string{"True"}},
			}},
			Delay:              &Delay{DurationMilliseconds: o.HeartbeatInterval.Milliseconds()},
			Next:               Next{StatusTemplate: nodeHeartbeatTemplate},
			ImmediateNextStage: true,
		}),
		stage("pod-ready", StageSpec{
			ResourceRef: pod,
			Selector: Selector{MatchExpressions: []Expression{
				notDeleted,
				{Key: ".status.phase", Operator: "In", Values: []string{"Pending"}},
				{Key: readyStatus, Operator: "NotIn", Values: []string{"True"}},
			}},
			Next: Next{StatusTemplate: podReadyTemplate},
		}),
		stage("pod-complete", StageSpec{
			ResourceRef: pod,
			Selector: Selector{MatchExpressions: []Expression{
				notDeleted, running,
				{Key: ".metadata.ownerReferences.[].kind", Operator: "In", Values: CompletingOwners},
			}},
			Delay: runTime,
			Next:  Next{StatusTemplate: podCompleteTemplate},
		}),
		// Matchable together with pod-complete; both do the same, so either may win.
		stage("pod-complete-timed", StageSpec{
			ResourceRef: pod,
			Selector: Selector{MatchExpressions: []Expression{
				notDeleted, running,
				{Key: fmt.Sprintf(".metadata.annotations[%q]", RunTimeAnnotation), Operator: "Exists"},
			}},
			Delay: runTime,
			Next:  Next{StatusTemplate: podCompleteTemplate},
		}),
		stage("pod-delete", StageSpec{
			ResourceRef: pod,
			Selector: Selector{MatchExpressions: []Expression{
				{Key: ".metadata.deletionTimestamp", Operator: "Exists"},
			}},
			Delay: terminate,
			Next:  Next{Delete: true},
		}),
	}
}

func stage(name string, spec StageSpec) Stage {
	return Stage{APIVersion: "kwok.x-k8s.io/v1alpha1", Kind: "Stage", Metadata: Metadata{Name: name}, Spec: spec}
}

const readyStatus = `.status.conditions.[] | select( .type == "Ready" ) | .status`

// The templates are kwok's Go templates over the object; NodeConditions, NodeIP, PodIPWith and friends
// are functions kwok provides.
const nodeInitializeTemplate = `{{ $now := Now }}
{{ $lastTransitionTime := or .metadata.creationTimestamp $now }}
conditions:
{{ range NodeConditions }}
- lastHeartbeatTime: {{ $now | Quote }}
  lastTransitionTime: {{ $lastTransitionTime | Quote }}
  message: {{ .message | Quote }}
  reason: {{ .reason | Quote }}
  status: {{ .status | Quote }}
  type: {{ .type | Quote }}
{{ end }}
addresses:
{{ with NodeIP }}
- address: {{ . | Quote }}
  type: InternalIP
{{ end }}
- address: {{ .metadata.name | Quote }}
  type: Hostname
{{ with .status.allocatable }}
allocatable:
{{ YAML . 1 }}
{{ end }}
{{ with .status.capacity }}
capacity:
{{ YAML . 1 }}
{{ end }}
nodeInfo:
  architecture: amd64
  operatingSystem: linux
  kubeletVersion: {{ printf "kwok-%s" Version | Quote }}
  kubeProxyVersion: {{ printf "kwok-%s" Version | Quote }}
  containerRuntimeVersion: {{ printf "kwok-%s" Version | Quote }}
phase: Running
`

const nodeHeartbeatTemplate = `{{ $now := Now }}
{{ $lastTransitionTime := or .metadata.creationTimestamp $now }}
conditions:
{{ range NodeConditions }}
- lastHeartbeatTime: {{ $now | Quote }}
  lastTransitionTime: {{ $lastTransitionTime | Quote }}
  message: {{ .message | Quote }}
  reason: {{ .reason | Quote }}
  status: {{ .status | Quote }}
  type: {{ .type | Quote }}
{{ end }}
`

const podReadyTemplate = `{{ $now := Now }}
conditions:
- lastTransitionTime: {{ $now | Quote }}
  status: "True"
  type: Initialized
- lastTransitionTime: {{ $now | Quote }}
  status: "True"
  type: Ready
- lastTransitionTime: {{ $now | Quote }}
  status: "True"
  type: ContainersReady
{{ range .spec.readinessGates }}
- lastTransitionTime: {{ $now | Quote }}
  status: "True"
  type: {{ .conditionType | Quote }}
{{ end }}
containerStatuses:
{{ range .spec.containers }}
- image: {{ .image | Quote }}
  name: {{ .name | Quote }}
  ready: true
  restartCount: 0
  started: true
  state:
    running:
      startedAt: {{ $now | Quote }}
{{ end }}
initContainerStatuses:
{{ range .spec.initContainers }}
- image: {{ .image | Quote }}
  name: {{ .name | Quote }}
  ready: true
  restartCount: 0
  state:
    terminated:
      exitCode: 0
      finishedAt: {{ $now | Quote }}
      reason: Completed
      startedAt: {{ $now | Quote }}
{{ end }}
hostIP: {{ NodeIPWith .spec.nodeName | Quote }}
podIP: {{ PodIPWith .spec.nodeName ( or .spec.hostNetwork false ) ( or .metadata.uid "" ) ( or .metadata.name "" ) ( or .metadata.namespace "" ) | Quote }}
phase: Running
startTime: {{ $now | Quote }}
`

const podCompleteTemplate = `{{ $now := Now }}
{{ $started := or .status.startTime $now }}
conditions:
- lastTransitionTime: {{ $now | Quote }}
  reason: PodCompleted
  status: "False"
  type: Ready
- lastTransitionTime: {{ $now | Quote }}
  reason: PodCompleted
  status: "False"
  type: ContainersReady
containerStatuses:
{{ range .spec.containers }}
- image: {{ .image | Quote }}
  name: {{ .name | Quote }}
  ready: false
  restartCount: 0
  started: false
  state:
    terminated:
      exitCode: 0
      finishedAt: {{ $now | Quote }}
      reason: Completed
      startedAt: {{ $started | Quote }}
{{ end }}
phase: Succeeded
`
