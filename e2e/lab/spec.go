// Package lab describes, starts and stops sets of real Kubernetes clusters for fleetq's tests, demo and
// tutorial: a management cluster plus workers in different "regions", with fake GPU nodes.
//
// This package holds what every provider shares (the spec, the fake nodes it implies, the state file,
// the Cluster and Provider contracts); the providers live in lab/local (processes on loopback, the
// default) and lab/kind (Docker).
package lab

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/fleetq/fleetq/e2e/lab/kwok"
)

// Mode says which control-plane processes a cluster runs.
type Mode string

const (
	// ModeAPIServer runs etcd and kube-apiserver only: enough for controllers that read and write
	// objects, and the cheapest way to get many clusters.
	ModeAPIServer Mode = "apiserver"
	// ModeFull adds kube-controller-manager, kube-scheduler and kwok, so Jobs create pods that are
	// scheduled onto fake nodes, run and complete.
	ModeFull Mode = "full"
)

// Role tells the management cluster from the workers.
type Role string

const (
	// RoleManagement is the cluster fleetq-manager runs in and users submit jobs to.
	RoleManagement Role = "management"
	// RoleWorker is a cluster jobs are dispatched to.
	RoleWorker Role = "worker"
)

// Labels and resources the lab puts on fake nodes; tests and flavors select on them.
const (
	// GPUResource is the extended resource fake GPU nodes offer, as NVIDIA's device plugin names it.
	GPUResource corev1.ResourceName = "nvidia.com/gpu"
	// GPUProductLabel is the node label NVIDIA's GPU feature discovery sets to the GPU model.
	GPUProductLabel = "nvidia.com/gpu.product"
	// A100 and L4 are the GPU products of the default workers.
	A100 = "NVIDIA-A100-SXM4-80GB"
	L4   = "NVIDIA-L4"
	// PoolLabel names the node pool a fake node belongs to.
	PoolLabel = "lab.fleetq.dev/pool"
	// RegionLabel and ZoneLabel are the well-known topology labels, set from the cluster's region.
	RegionLabel = "topology.kubernetes.io/region"
	ZoneLabel   = "topology.kubernetes.io/zone"
	// FakeNodeAnnotation marks nodes kwok manages; kwok only touches nodes carrying it, so on kind
	// the real node is left alone.
	FakeNodeAnnotation = "kwok.x-k8s.io/node"
	// RunTimeAnnotation on a pod sets how long it runs on a fake node before it succeeds (a Go
	// duration such as "30s"); without it a pod of a Job or a training job runs Spec.PodRunTime and
	// other pods run until deleted (kwok.CompletingOwners).
	RunTimeAnnotation = kwok.RunTimeAnnotation
)

// Spec describes a lab: one management cluster and any number of workers.
type Spec struct {
	// Mode is what every cluster runs unless its own Mode says otherwise. Default: full.
	Mode Mode `json:"mode,omitempty"`
	// PodRunTime is how long a Job's pod runs on a fake node when it has no RunTimeAnnotation.
	// Default: 5s.
	PodRunTime metav1.Duration `json:"podRunTime,omitempty"`
	// PodTerminationDelay is how long a deleted pod stays Terminating on a fake node (still
	// running, as far as anyone can tell) before it is gone. Default: 0, gone at once.
	PodTerminationDelay metav1.Duration `json:"podTerminationDelay,omitempty"`
	// Management is the cluster users and fleetq-manager talk to.
	Management ClusterSpec `json:"management"`
	// Workers receive dispatched jobs.
	Workers []ClusterSpec `json:"workers,omitempty"`
}

// ClusterSpec describes one cluster.
type ClusterSpec struct {
	// Name is a DNS label, unique in the lab; it names the cluster's directory and kubeconfig context.
	Name string `json:"name"`
	// Region sets the topology labels of the cluster's nodes. Default: the name.
	Region string `json:"region,omitempty"`
	// Mode overrides Spec.Mode for this cluster.
	Mode Mode `json:"mode,omitempty"`
	// APIServerPort fixes the API server's port on 127.0.0.1; 0 picks a free one at start.
	APIServerPort int `json:"apiServerPort,omitempty"`
	// NodePools are the fake nodes registered in the cluster.
	NodePools []NodePool `json:"nodePools,omitempty"`
	// Operators are the job operators the cluster runs (local provider only).
	Operators []Operator `json:"operators,omitempty"`
}

// NodePool is a group of identical fake nodes.
type NodePool struct {
	// Name is unique within the cluster and is the value of PoolLabel on its nodes.
	Name string `json:"name"`
	// Count is how many nodes the pool has.
	Count int `json:"count"`
	// NamePrefix starts every node's name; nodes are <prefix><index>. Default: "<cluster>-<pool>-".
	NamePrefix string `json:"namePrefix,omitempty"`
	// Labels are added to every node of the pool.
	Labels map[string]string `json:"labels,omitempty"`
	// Taints are set on every node of the pool.
	Taints []corev1.Taint `json:"taints,omitempty"`
	// Capacity is each node's status.capacity.
	Capacity corev1.ResourceList `json:"capacity"`
	// Allocatable is each node's status.allocatable. Default: Capacity.
	Allocatable corev1.ResourceList `json:"allocatable,omitempty"`
}

// defaultWorkers are the workers DefaultSpec hands out, in order: region and GPU pool.
var defaultWorkers = []struct {
	region string
	pool   func() NodePool
}{
	{"us-east", A100Pool},
	{"eu-west", L4Pool},
	{"us-west", A100Pool},
	{"ap-south", L4Pool},
}

// DefaultSpec is the lab `fleetq-lab up` starts: a management cluster with a small CPU pool (for
// single-cluster tutorial runs) and the given number of GPU workers, us-east (A100) and eu-west (L4)
// first; more workers continue with us-west, ap-south and then worker-<n>.
func DefaultSpec(workers int) Spec {
	s := Spec{
		Mode:       ModeFull,
		PodRunTime: metav1.Duration{Duration: 5 * time.Second},
		Management: ClusterSpec{Name: "management", Region: "us-central", NodePools: []NodePool{CPUPool(2)}},
	}
	for i := range workers {
		name, pool := fmt.Sprintf("worker-%d", i+1), A100Pool
		if i < len(defaultWorkers) {
			name, pool = defaultWorkers[i].region, defaultWorkers[i].pool
		}
		s.Workers = append(s.Workers, ClusterSpec{Name: name, Region: name, NodePools: []NodePool{pool()}})
	}
	return s
}

// CPUPool is count CPU-only nodes of 8 CPUs and 32Gi, as the tutorial's single-cluster runs need.
func CPUPool(count int) NodePool {
	return NodePool{
		Name:  "cpu",
		Count: count,
		Labels: map[string]string{
			"node.kubernetes.io/instance-type": "e2-standard-8",
		},
		Capacity: resources("8", "32Gi", "110", 0),
	}
}

// A100Pool is four nodes of 8 A100 GPUs each, tainted so only pods that tolerate GPUs land there.
func A100Pool() NodePool {
	return NodePool{
		Name:  "a100",
		Count: 4,
		Labels: map[string]string{
			GPUProductLabel:                    A100,
			"nvidia.com/gpu.count":             "8",
			"node.kubernetes.io/instance-type": "a2-ultragpu-8g",
		},
		Taints:   []corev1.Taint{{Key: string(GPUResource), Effect: corev1.TaintEffectNoSchedule}},
		Capacity: resources("96", "768Gi", "110", 8),
	}
}

// L4Pool is four nodes of 4 L4 GPUs each, untainted.
func L4Pool() NodePool {
	return NodePool{
		Name:  "l4",
		Count: 4,
		Labels: map[string]string{
			GPUProductLabel:                    L4,
			"nvidia.com/gpu.count":             "4",
			"node.kubernetes.io/instance-type": "g2-standard-48",
		},
		Capacity: resources("48", "192Gi", "110", 4),
	}
}

// resources is a node's capacity. Every node has 1Ti of ephemeral storage, as real nodes report
// some: operators add init containers that ask for it (an MPIJob's launcher asks for 5Gi).
func resources(cpu, memory, pods string, gpus int64) corev1.ResourceList {
	rl := corev1.ResourceList{
		corev1.ResourceCPU:              resource.MustParse(cpu),
		corev1.ResourceMemory:           resource.MustParse(memory),
		corev1.ResourcePods:             resource.MustParse(pods),
		corev1.ResourceEphemeralStorage: resource.MustParse("1Ti"),
	}
	if gpus > 0 {
		rl[GPUResource] = *resource.NewQuantity(gpus, resource.DecimalSI)
	}
	return rl
}

// Clusters lists the management cluster first, then the workers in order.
func (s *Spec) Clusters() []ClusterSpec {
	return append([]ClusterSpec{s.Management}, s.Workers...)
}

// Cluster returns the named cluster's spec.
func (s *Spec) Cluster(name string) (ClusterSpec, bool) {
	for _, c := range s.Clusters() {
		if c.Name == name {
			return c, true
		}
	}
	return ClusterSpec{}, false
}

// RoleOf says whether the named cluster is the management cluster or a worker.
func (s *Spec) RoleOf(name string) Role {
	if name == s.Management.Name {
		return RoleManagement
	}
	return RoleWorker
}

// Default fills every unset field with its default, in place, and returns s for chaining.
func (s *Spec) Default() *Spec {
	if s.Mode == "" {
		s.Mode = ModeFull
	}
	if s.PodRunTime.Duration == 0 {
		s.PodRunTime.Duration = 5 * time.Second
	}
	s.Management.defaults(s.Mode)
	for i := range s.Workers {
		s.Workers[i].defaults(s.Mode)
	}
	return s
}

func (c *ClusterSpec) defaults(mode Mode) {
	if c.Region == "" {
		c.Region = c.Name
	}
	if c.Mode == "" {
		c.Mode = mode
	}
	for i := range c.NodePools {
		p := &c.NodePools[i]
		if p.NamePrefix == "" {
			p.NamePrefix = c.Name + "-" + p.Name + "-"
		}
		if p.Allocatable == nil {
			p.Allocatable = p.Capacity.DeepCopy()
		}
	}
}

// Validate reports every problem in a defaulted spec, each with its field path.
func (s *Spec) Validate() error {
	var errs field.ErrorList
	if s.Mode != ModeAPIServer && s.Mode != ModeFull {
		errs = append(errs, field.NotSupported(field.NewPath("mode"), s.Mode, []Mode{ModeAPIServer, ModeFull}))
	}
	if s.PodRunTime.Duration < 0 {
		errs = append(errs, field.Invalid(field.NewPath("podRunTime"), s.PodRunTime.Duration.String(), "must not be negative"))
	}
	if s.PodTerminationDelay.Duration < 0 {
		errs = append(errs, field.Invalid(field.NewPath("podTerminationDelay"), s.PodTerminationDelay.Duration.String(), "must not be negative"))
	}
	names := map[string]bool{}
	ports := map[int]string{}
	for i, c := range s.Clusters() {
		path := field.NewPath("management")
		if i > 0 {
			path = field.NewPath("workers").Index(i - 1)
		}
		errs = append(errs, c.validate(path, names, ports)...)
	}
	return errs.ToAggregate()
}

func (c *ClusterSpec) validate(path *field.Path, names map[string]bool, ports map[int]string) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(c.Name) {
		errs = append(errs, field.Invalid(path.Child("name"), c.Name, msg))
	}
	if names[c.Name] {
		errs = append(errs, field.Duplicate(path.Child("name"), c.Name))
	}
	names[c.Name] = true
	if c.Mode != ModeAPIServer && c.Mode != ModeFull {
		errs = append(errs, field.NotSupported(path.Child("mode"), c.Mode, []Mode{ModeAPIServer, ModeFull}))
	}
	for _, msg := range validation.IsValidLabelValue(c.Region) {
		errs = append(errs, field.Invalid(path.Child("region"), c.Region, msg))
	}
	if p := c.APIServerPort; p != 0 {
		if p < 1024 || p > 65535 {
			errs = append(errs, field.Invalid(path.Child("apiServerPort"), p, "must be 0 (pick a free port) or in 1024-65535"))
		} else if other, ok := ports[p]; ok {
			errs = append(errs, field.Invalid(path.Child("apiServerPort"), p, fmt.Sprintf("also used by cluster %q", other)))
		}
		ports[p] = c.Name
	}
	errs = append(errs, c.validateOperators(path)...)
	pools := map[string]bool{}
	nodes := map[string]string{}
	for i, p := range c.NodePools {
		pp := path.Child("nodePools").Index(i)
		for _, msg := range validation.IsDNS1123Label(p.Name) {
			errs = append(errs, field.Invalid(pp.Child("name"), p.Name, msg))
		}
		if pools[p.Name] {
			errs = append(errs, field.Duplicate(pp.Child("name"), p.Name))
		}
		pools[p.Name] = true
		if p.Count < 0 {
			errs = append(errs, field.Invalid(pp.Child("count"), p.Count, "must not be negative"))
		}
		if p.Count > 0 {
			last := fmt.Sprintf("%s%d", p.NamePrefix, p.Count-1)
			for _, msg := range validation.IsDNS1123Subdomain(last) {
				errs = append(errs, field.Invalid(pp.Child("namePrefix"), p.NamePrefix, "node name "+last+": "+msg))
			}
		}
		for n := range p.Count {
			name := fmt.Sprintf("%s%d", p.NamePrefix, n)
			if other, ok := nodes[name]; ok {
				errs = append(errs, field.Invalid(pp.Child("namePrefix"), p.NamePrefix,
					fmt.Sprintf("node %q is also in pool %q", name, other)))
				break
			}
			nodes[name] = p.Name
		}
		for k, v := range p.Labels {
			for _, msg := range validation.IsQualifiedName(k) {
				errs = append(errs, field.Invalid(pp.Child("labels").Key(k), k, msg))
			}
			for _, msg := range validation.IsValidLabelValue(v) {
				errs = append(errs, field.Invalid(pp.Child("labels").Key(k), v, msg))
			}
		}
		for j, t := range p.Taints {
			tp := pp.Child("taints").Index(j)
			for _, msg := range validation.IsQualifiedName(t.Key) {
				errs = append(errs, field.Invalid(tp.Child("key"), t.Key, msg))
			}
			switch t.Effect {
			case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
			default:
				errs = append(errs, field.NotSupported(tp.Child("effect"), t.Effect, []corev1.TaintEffect{
					corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute}))
			}
		}
		if len(p.Capacity) == 0 {
			errs = append(errs, field.Required(pp.Child("capacity"), "a node needs at least cpu, memory and pods"))
		}
		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods} {
			if _, ok := p.Capacity[r]; len(p.Capacity) > 0 && !ok {
				errs = append(errs, field.Required(pp.Child("capacity").Key(string(r)), "the scheduler needs it"))
			}
		}
		for r, q := range p.Allocatable {
			if c, ok := p.Capacity[r]; !ok || q.Cmp(c) > 0 {
				errs = append(errs, field.Invalid(pp.Child("allocatable").Key(string(r)), q.String(), "must not exceed capacity"))
			}
		}
	}
	return errs
}

// LoadSpec reads a spec from a YAML or JSON file and defaults it.
func LoadSpec(path string) (Spec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Spec{}, fmt.Errorf("lab spec: %w", err)
	}
	var s Spec
	if err := yaml.UnmarshalStrict(data, &s); err != nil {
		return Spec{}, fmt.Errorf("lab spec %s: %w", path, err)
	}
	s.Default()
	if err := s.Validate(); err != nil {
		return Spec{}, fmt.Errorf("lab spec %s: %w", path, err)
	}
	return s, nil
}

// String renders the spec as YAML, for logs and `fleetq-lab up --print-spec`.
func (s Spec) String() string {
	data, err := yaml.Marshal(s)
	if err != nil {
		b, _ := json.Marshal(s)
		return string(b)
	}
	return strings.TrimSpace(string(data))
}
