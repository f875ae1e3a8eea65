package admission

import (
	"fmt"
	"testing"
	"time"

	"github.com/fleetq/fleetq/worker/capacity"
)

// BenchmarkMake measures one plan on a 1,000-node cluster with 500 admitted copies (half of them
// with pods not bound yet) and 100 pending copies that do not fit, some allowed to preempt: the
// shape of a busy worker's pass.
func BenchmarkMake(b *testing.B) {
	var nodes []capacity.Node
	for i := range 1000 {
		nodes = append(nodes, gpuNode(fmt.Sprintf("n%04d", i), 4))
	}
	var copies []Copy
	for i := range 500 {
		c := makeCopy(fmt.Sprintf("ns/admitted-%d", i)).prio(int32(i%3)).gpus(1, 4).admitted(time.Duration(i) * time.Second)
		if i%2 == 0 {
			c = c.runs(nodes[i].Name, 1)
		} else {
			c = c.missing(1, nodes[i].Name)
		}
		copies = append(copies, c.obj())
	}
	for i := range 100 {
		c := makeCopy(fmt.Sprintf("ns/pending-%d", i)).prio(int32(i%5)).gpus(2, 8).created(time.Duration(i) * time.Second)
		if i%10 == 0 {
			c = c.preempts()
		}
		copies = append(copies, c.obj())
	}
	in := Input{Cluster: "us-east", Nodes: nodes, Copies: copies}
	b.ReportAllocs()
	for b.Loop() {
		Make(in)
	}
}
