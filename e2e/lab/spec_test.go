package lab

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestDefaultSpec(t *testing.T) {
	s := DefaultSpec(2)
	s.Default()
	if err := s.Validate(); err != nil {
		t.Fatalf("default spec does not validate: %v", err)
	}
	type poolView struct {
		Cluster, Region, Pool, Prefix, Product string
		Count                                  int
		GPUs                                   int64
		Tainted                                bool
	}
	var got []poolView
	for _, c := range s.Clusters() {
		if c.Mode != ModeFull {
			t.Errorf("cluster %q mode = %s, want full", c.Name, c.Mode)
		}
		for _, p := range c.NodePools {
			gpus := p.Allocatable[GPUResource]
			got = append(got, poolView{c.Name, c.Region, p.Name, p.NamePrefix, p.Labels[GPUProductLabel], p.Count, gpus.Value(), len(p.Taints) > 0})
		}
	}
	want := []poolView{
		{"management", "us-central", "cpu", "management-cpu-", "", 2, 0, false},
		{"us-east", "us-east", "a100", "us-east-a100-", A100, 4, 8, true},
		{"eu-west", "eu-west", "l4", "eu-west-l4-", L4, 4, 4, false},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("default pools (-want +got):\n%s", diff)
	}
	if s.PodRunTime.Duration != 5*time.Second {
		t.Errorf("pod run time = %s, want 5s", s.PodRunTime.Duration)
	}
}

func TestDefaultSpecWorkerNames(t *testing.T) {
	cases := map[string]struct {
		workers int
		want    []string
	}{
		"management only": {0, []string{"management"}},
		"one worker":      {1, []string{"management", "us-east"}},
		"six workers":     {6, []string{"management", "us-east", "eu-west", "us-west", "ap-south", "worker-5", "worker-6"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := DefaultSpec(tc.workers)
			var got []string
			for _, c := range s.Clusters() {
				got = append(got, c.Name)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("clusters (-want +got):\n%s", diff)
			}
			if err := s.Default().Validate(); err != nil {
				t.Errorf("does not validate: %v", err)
			}
		})
	}
}

func TestDefault(t *testing.T) {
	s := Spec{Management: ClusterSpec{Name: "m", NodePools: []NodePool{{Name: "p", Count: 1, Capacity: resources("1", "1Gi", "10", 0)}}}}
	s.Default()
	want := Spec{
		Mode:       ModeFull,
		PodRunTime: s.PodRunTime,
		Management: ClusterSpec{Name: "m", Region: "m", Mode: ModeFull, NodePools: []NodePool{{
			Name: "p", Count: 1, NamePrefix: "m-p-", Capacity: resources("1", "1Gi", "10", 0), Allocatable: resources("1", "1Gi", "10", 0),
		}}},
	}
	if diff := cmp.Diff(want, s); diff != "" {
		t.Errorf("defaulted spec (-want +got):\n%s", diff)
	}
	if s.PodRunTime.Duration != 5*time.Second {
		t.Errorf("pod run time = %s", s.PodRunTime.Duration)
	}
	apiOnly := Spec{Mode: ModeAPIServer, Management: ClusterSpec{Name: "m"}, Workers: []ClusterSpec{{Name: "w", Mode: ModeFull}}}
	apiOnly.Default()
	if apiOnly.Management.Mode != ModeAPIServer || apiOnly.Workers[0].Mode != ModeFull {
		t.Errorf("modes = %s/%s, want the lab's mode unless the cluster sets one", apiOnly.Management.Mode, apiOnly.Workers[0].Mode)
	}
}

func TestValidate(t *testing.T) {
	pool := func(mut func(*NodePool)) []NodePool {
		p := NodePool{Name: "gpu", Count: 2, Capacity: resources("8", "32Gi", "110", 8)}
		mut(&p)
		return []NodePool{p}
	}
	cases := map[string]struct {
		spec Spec
		want []string // substrings of the error, one per problem
	}{
		"valid": {spec: Spec{Management: ClusterSpec{Name: "m"}, Workers: []ClusterSpec{{Name: "w", NodePools: pool(func(*NodePool) {})}}}},
		"bad names and duplicates": {
			spec: Spec{Management: ClusterSpec{Name: "Mgmt"}, Workers: []ClusterSpec{{Name: "w"}, {Name: "w"}}},
			want: []string{"management.name", "workers[1].name: Duplicate"},
		},
		"unknown mode": {
			spec: Spec{Mode: "fast", Management: ClusterSpec{Name: "m"}},
			want: []string{`mode: Unsupported value: "fast"`},
		},
		"ports out of range and shared": {
			spec: Spec{Management: ClusterSpec{Name: "m", APIServerPort: 80}, Workers: []ClusterSpec{{Name: "a", APIServerPort: 7000}, {Name: "b", APIServerPort: 7000}}},
			want: []string{"management.apiServerPort: Invalid value: 80", `workers[1].apiServerPort: Invalid value: 7000: also used by cluster "a"`},
		},
		"negative count": {
			spec: Spec{Management: ClusterSpec{Name: "m", NodePools: pool(func(p *NodePool) { p.Count = -1 })}},
			want: []string{"management.nodePools[0].count"},
		},
		"bad taint effect and label": {
			spec: Spec{Management: ClusterSpec{Name: "m", NodePools: pool(func(p *NodePool) {
				p.Taints = []corev1.Taint{{Key: "nvidia.com/gpu", Effect: "Sometimes"}}
				p.Labels = map[string]string{"gpu": "not a valid value!"}
			})}},
			want: []string{"management.nodePools[0].taints[0].effect", "management.nodePools[0].labels[gpu]"},
		},
		"capacity missing pods, allocatable above capacity": {
			spec: Spec{Management: ClusterSpec{Name: "m", NodePools: pool(func(p *NodePool) {
				delete(p.Capacity, corev1.ResourcePods)
				p.Allocatable = corev1.ResourceList{GPUResource: resource.MustParse("9")}
			})}},
			want: []string{"management.nodePools[0].capacity[pods]: Required", "management.nodePools[0].allocatable[nvidia.com/gpu]"},
		},
		"operators: unknown, twice, without pods": {
			spec: Spec{Management: ClusterSpec{Name: "m", Operators: []Operator{OperatorRay, "volcano", OperatorRay}},
				Workers: []ClusterSpec{{Name: "w", Mode: ModeAPIServer, Operators: []Operator{OperatorKubeflow}}}},
			want: []string{`management.operators[1]: Unsupported value: "volcano"`, `management.operators[2]: Duplicate value: "ray"`,
				`workers[0].operators[0]: Invalid value: "kubeflow": an operator needs pods: set the cluster's mode to full`},
		},
		"node names collide across pools": {
			spec: Spec{Management: ClusterSpec{Name: "m", NodePools: []NodePool{
				{Name: "a", NamePrefix: "n-", Count: 1, Capacity: resources("1", "1Gi", "1", 0)},
				{Name: "b", NamePrefix: "n-", Count: 1, Capacity: resources("1", "1Gi", "1", 0)},
			}}},
			want: []string{`node "n-0" is also in pool "a"`},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := tc.spec.Default().Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("got no error, want %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestLoadSpec(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	if err := os.WriteFile(good, []byte(`
mode: apiserver
podRunTime: 30s
management: {name: hub}
workers:
- name: gpu-1
  region: us-east
  nodePools:
  - name: h100
    count: 2
    labels: {nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}
    capacity: {cpu: "96", memory: 1Ti, pods: "110", nvidia.com/gpu: "8"}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := LoadSpec(good)
	if err != nil {
		t.Fatalf("LoadSpec: %v", err)
	}
	if s.Mode != ModeAPIServer || s.PodRunTime.Duration != 30*time.Second || s.Workers[0].NodePools[0].NamePrefix != "gpu-1-h100-" {
		t.Errorf("loaded spec not as written and defaulted:\n%s", s)
	}
	gpus := s.Workers[0].NodePools[0].Allocatable[GPUResource]
	if gpus.Value() != 8 {
		t.Errorf("allocatable GPUs = %s, want 8 (defaulted from capacity)", gpus.String())
	}

	cases := map[string]string{
		"unknown field": "management: {name: hub}\nwokers: []\n",
		"invalid spec":  "management: {name: Hub}\n",
	}
	for name, content := range cases {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".yaml")
			if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := LoadSpec(p); err == nil || !strings.Contains(err.Error(), p) {
				t.Errorf("LoadSpec(%s) error = %v, want one naming the file", name, err)
			}
		})
	}
	if _, err := LoadSpec(filepath.Join(dir, "missing.yaml")); err == nil {
		t.Errorf("LoadSpec of a missing file: got no error")
	}
}

func TestNodes(t *testing.T) {
	s := DefaultSpec(1)
	s.Default()
	nodes := Nodes(s.Workers[0])
	if len(nodes) != 4 {
		t.Fatalf("got %d nodes, want 4", len(nodes))
	}
	n := nodes[3]
	if n.Name != "us-east-a100-3" {
		t.Errorf("name = %q", n.Name)
	}
	for k, v := range map[string]string{
		GPUProductLabel: A100, RegionLabel: "us-east", ZoneLabel: "us-east-a", PoolLabel: "a100", "kubernetes.io/hostname": "us-east-a100-3",
	} {
		if n.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, n.Labels[k], v)
		}
	}
	if n.Annotations[FakeNodeAnnotation] != "fake" {
		t.Errorf("kwok would not manage the node: annotations %v", n.Annotations)
	}
	if diff := cmp.Diff([]corev1.Taint{{Key: "nvidia.com/gpu", Effect: corev1.TaintEffectNoSchedule}}, n.Spec.Taints); diff != "" {
		t.Errorf("taints (-want +got):\n%s", diff)
	}
	if gpus := n.Status.Allocatable[GPUResource]; gpus.Value() != 8 {
		t.Errorf("allocatable GPUs = %s", gpus.String())
	}
	// Nodes must not share maps with the spec: a test that edits one node must not edit the others.
	nodes[0].Status.Allocatable[GPUResource] = resource.MustParse("1")
	if gpus := nodes[1].Status.Allocatable[GPUResource]; gpus.Value() != 8 {
		t.Errorf("nodes share their allocatable map")
	}
}

func TestParseOperators(t *testing.T) {
	got, err := ParseOperators(" ray, kubeflow,ray,")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]Operator{OperatorRay, OperatorKubeflow}, got); diff != "" {
		t.Errorf("operators (-want +got):\n%s", diff)
	}
	if got, err := ParseOperators(""); err != nil || len(got) != 0 {
		t.Errorf(`ParseOperators("") = %v, %v; want none`, got, err)
	}
	_, err = ParseOperators("kubeflow,mpi")
	if err == nil || !strings.Contains(err.Error(), `unknown operator "mpi": the lab runs kubeflow, ray`) {
		t.Errorf("error %v; want it to name the unknown operator and the known ones", err)
	}
	spec := DefaultSpec(2)
	spec.WithOperators(OperatorRay)
	for _, c := range spec.Clusters() {
		if diff := cmp.Diff([]Operator{OperatorRay}, c.Operators); diff != "" {
			t.Errorf("cluster %s operators (-want +got):\n%s", c.Name, diff)
		}
	}
}
