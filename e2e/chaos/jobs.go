package chaos

import (
	"fmt"
	"math/rand/v2"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/e2e/lab"
)

// Teams are the namespaces (and ClusterQueues) jobs are submitted to; testdata/queues.yaml
// defines their queues.
var Teams = []string{"team-a", "team-b"}

// JobSpec is one job of a run's load.
type JobSpec struct {
	Name, Team string
	// Priority is a WorkloadPriorityClass of testdata/queues.yaml: low or high.
	Priority string
	Pods     int32
	// GPUs per pod.
	GPUs   int64
	RunFor time.Duration
	// SubmitAt is when the job is created, from the start of the run.
	SubmitAt time.Duration
}

// PlanJobs returns n jobs of mixed sizes and priorities drawn from seed: a third submitted in a
// burst at the start, the rest spread over the first 70 % of the run, so faults meet both a full
// backlog and arrivals. No job needs more than one worker's 16 A100s.
func PlanJobs(seed uint64, n int, length time.Duration) []JobSpec {
	rng := rand.New(rand.NewPCG(seed, seed^0x5851f42d4c957f2d))
	out := make([]JobSpec, 0, n)
	for i := range n {
		j := JobSpec{
			Name:     fmt.Sprintf("job-%03d", i),
			Team:     Teams[rng.IntN(len(Teams))],
			Priority: "low",
			Pods:     int32(1 + rng.IntN(3)),
			GPUs:     []int64{1, 2, 4, 8}[rng.IntN(4)],
			RunFor:   time.Duration(10+rng.IntN(31)) * time.Second,
		}
		if rng.IntN(10) < 3 {
			j.Priority = "high"
		}
		if int64(j.Pods)*j.GPUs > 16 {
			j.Pods = 2
		}
		if i >= n/3 {
			j.SubmitAt = time.Duration(rng.Int64N(int64(length) * 7 / 10))
		}
		out = append(out, j)
	}
	return out
}

// Job is the batch Job a user would write for the spec: queue and priority labels, a pod run time
// for the lab's fake nodes, GPU requests and limits.
func (j JobSpec) Job() *batchv1.Job {
	gpus := *resource.NewQuantity(j.GPUs, resource.DecimalSI)
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: j.Team, Name: j.Name, Labels: map[string]string{
			kueue.QueueNameLabel: "queue", kueue.PriorityClassLabel: j.Priority,
		}},
		Spec: batchv1.JobSpec{
			Parallelism: ptr.To(j.Pods), Completions: ptr.To(j.Pods),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{lab.RunTimeAnnotation: j.RunFor.String()}},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{
						Name: "trainer", Image: "registry.k8s.io/e2e-test-images/agnhost:2.53",
						Resources: corev1.ResourceRequirements{
							Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), lab.GPUResource: gpus},
							Limits:   corev1.ResourceList{lab.GPUResource: gpus},
						},
					}},
				},
			},
		},
	}
}
