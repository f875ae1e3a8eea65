package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetq/fleetq/e2e/lab"
	"github.com/fleetq/fleetq/e2e/lab/local"
)

// ManagementCluster is the name of the cluster users submit to.
const ManagementCluster = "management"

// poolNode returns the node shape of a pool type: the lab's A100 and L4 nodes, and a 96-CPU node for
// CPU-only scenarios (the lab's own CPU pool is too small for Kueue's baseline shape).
func poolNode(typ string) (lab.NodePool, error) {
	switch typ {
	case "a100":
		return lab.A100Pool(), nil
	case "l4":
		return lab.L4Pool(), nil
	case "cpu":
		return lab.NodePool{
			Name:   "cpu",
			Labels: map[string]string{"node.kubernetes.io/instance-type": "n2-standard-96"},
			Capacity: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse("96"),
				corev1.ResourceMemory: resource.MustParse("384Gi"),
				corev1.ResourcePods:   resource.MustParse("110"),
			},
		}, nil
	}
	return lab.NodePool{}, fmt.Errorf("pool type %q is not one of cpu, a100, l4", typ)
}

func labPools(ps []Pool) []lab.NodePool {
	var out []lab.NodePool
	for _, p := range ps {
		n, _ := poolNode(p.Type)
		n.Name, n.Count = p.Type, p.Count
		out = append(out, n)
	}
	return out
}

// LabSpec is the lab a scenario runs on: in a multi-cluster scenario the management cluster runs
// only etcd and an API server (jobs never run there), as in the dispatch e2e suite; in an
// apiserver-mode scenario every cluster does.
func (s *Scenario) LabSpec() lab.Spec {
	spec := lab.Spec{
		Mode: lab.ModeFull,
		// Every job states its run time; this only applies to pods that do not.
		PodRunTime: metav1.Duration{Duration: time.Hour},
		Management: lab.ClusterSpec{Name: ManagementCluster, NodePools: labPools(s.Management)},
	}
	if s.Mode == lab.ModeAPIServer {
		spec.Mode = lab.ModeAPIServer
	}
	if s.Topology == MultiCluster {
		spec.Management.Mode = lab.ModeAPIServer
		for _, w := range s.Workers {
			spec.Workers = append(spec.Workers, lab.ClusterSpec{Name: w.Name, NodePools: labPools(w.Pools)})
		}
	}
	return spec
}

// auditPolicy logs every request's metadata (who, user agent, verb, object) once, when it completes
// (watches: when they start), so requests can be counted per client. The log backend runs in
// blocking mode: an event is in the file before its response is sent, so the log is complete at
// the end of the window.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
`

// auditedBinDir makes a directory holding the lab's binaries where kube-apiserver is a wrapper that
// adds audit logging to <cluster dir>/logs/audit.log: apiserver_request_total has no client label,
// the audit log's userAgent does. Every other flag is the lab's own, for both systems alike.
func auditedBinDir(dir string) (string, error) {
	real, err := lab.FindBinDir()
	if err != nil {
		return "", err
	}
	binDir := filepath.Join(dir, "bin")
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return "", fmt.Errorf("bench bin dir: %w", err)
	}
	for _, n := range []string{lab.Etcd, lab.KubeScheduler, lab.Kwok} {
		link := filepath.Join(binDir, n)
		_ = os.Remove(link)
		if err := os.Symlink(filepath.Join(real, n), link); err != nil {
			return "", fmt.Errorf("bench bin dir: %w", err)
		}
	}
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o644); err != nil {
		return "", fmt.Errorf("audit policy: %w", err)
	}
	// exec keeps the pid, so the lab tracks and stops the API server as usual.
	script := fmt.Sprintf(`#!/bin/sh
# Written by fleetq's benchmark: the lab's kube-apiserver with an audit log beside its other logs.
dir=
for a in "$@"; do case $a in --cert-dir=*) dir=${a#--cert-dir=} ;; esac; done
exec %q "$@" --audit-policy-file=%q --audit-log-path="$dir/../logs/audit.log" --audit-log-mode=blocking --audit-log-maxsize=0
`, filepath.Join(real, lab.KubeAPIServer), policy)
	if err := os.WriteFile(filepath.Join(binDir, lab.KubeAPIServer), []byte(script), 0o755); err != nil {
		return "", fmt.Errorf("apiserver wrapper: %w", err)
	}
	// kube-controller-manager's default client limit (20 QPS) would make the Job controller, not the
	// dispatcher, set the pace at which pods appear; both systems get the raised limit.
	kcm := fmt.Sprintf(`#!/bin/sh
# Written by fleetq's benchmark: the lab's kube-controller-manager with a raised client limit.
exec %q "$@" --kube-api-qps=%d --kube-api-burst=%d
`, filepath.Join(real, lab.KubeControllerManager), ControllerManagerQPS, 2*ControllerManagerQPS)
	if err := os.WriteFile(filepath.Join(binDir, lab.KubeControllerManager), []byte(kcm), 0o755); err != nil {
		return "", fmt.Errorf("controller-manager wrapper: %w", err)
	}
	return binDir, nil
}

// ControllerManagerQPS is the client QPS the benchmark's kube-controller-managers run with.
const ControllerManagerQPS = 200

// auditedProvider is the local provider started from auditedBinDir.
type auditedProvider struct {
	local.Provider
	binDir string
}

func (p auditedProvider) Up(ctx context.Context, spec lab.Spec, opts lab.UpOptions) (lab.Lab, error) {
	if p.binDir != "" {
		opts.BinDir = p.binDir
	}
	return p.Provider.Up(ctx, spec, opts)
}

// auditLog is the audit log of one cluster of a lab started by auditedProvider.
func auditLog(l lab.Lab, cluster string) string {
	return filepath.Join(l.Dir(), cluster, "logs", "audit.log")
}
