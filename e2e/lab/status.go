package lab

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ClusterStatus is what `fleetq-lab status` shows for one cluster.
type ClusterStatus struct {
	Name       string
	Role       Role
	Region     string
	Mode       Mode
	Server     string
	Kubeconfig string
	// Err is why the cluster could not be read (API server stopped, frozen, ...); the fields below are
	// then empty.
	Err      error
	Capacity Capacity
	// GPUProducts lists the distinct GPU models of the cluster's nodes.
	GPUProducts []string
}

// ReadStatus reads every cluster's nodes and pods in parallel, giving each at most timeout.
func ReadStatus(ctx context.Context, l Lab, timeout time.Duration) []ClusterStatus {
	clusters := l.Clusters()
	out := make([]ClusterStatus, len(clusters))
	var wg sync.WaitGroup
	for i, c := range clusters {
		spec := c.Spec()
		out[i] = ClusterStatus{Name: c.Name(), Role: c.Role(), Region: spec.Region, Mode: spec.Mode,
			Server: c.Server(), Kubeconfig: c.KubeconfigPath()}
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			out[i].Err = readClusterStatus(ctx, c, &out[i])
		})
	}
	wg.Wait()
	return out
}

func readClusterStatus(ctx context.Context, c Cluster, st *ClusterStatus) error {
	// A frozen API server accepts connections and never answers; the caller's context bounds each request.
	cs, err := Clientset(c)
	if err != nil {
		return err
	}
	capacity, err := ReadCapacity(ctx, cs)
	if err != nil {
		return fmt.Errorf("cluster %q: %w", c.Name(), err)
	}
	st.Capacity = capacity
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("cluster %q: %w", c.Name(), err)
	}
	products := map[string]bool{}
	for _, n := range nodes.Items {
		if p := n.Labels[GPUProductLabel]; p != "" {
			products[p] = true
		}
	}
	for p := range products {
		st.GPUProducts = append(st.GPUProducts, p)
	}
	sort.Strings(st.GPUProducts)
	return nil
}
