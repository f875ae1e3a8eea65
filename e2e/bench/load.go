package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	"golang.org/x/time/rate"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/e2e/lab"
)

// loadWorkers is how many create calls the load generator keeps in flight.
const loadWorkers = 16

// submission is one job the load generator creates.
type submission struct {
	wave  int
	index int
	class Class
	queue int
}

// plan lists a scenario's submissions per wave: classes cycle in order, queues round robin over the
// wave's queues (every queue when it names none).
func plan(s *Scenario) [][]submission {
	out := make([][]submission, len(s.Waves))
	n := 0
	for wi, w := range s.Waves {
		queues := w.Queues
		if len(queues) == 0 {
			for q := range s.QueueCount() {
				queues = append(queues, q)
			}
		}
		for i := range w.Count {
			out[wi] = append(out[wi], submission{wave: wi, index: n, class: s.class(w.Classes[i%len(w.Classes)]), queue: queues[i%len(queues)]})
			n++
		}
	}
	return out
}

// mainResource is what utilisation is measured in: GPUs when a flavor offers them, else CPUs.
func (s *Scenario) mainResource() corev1.ResourceName {
	for _, f := range s.Flavors {
		if _, ok := s.FlavorCapacity(f)[lab.GPUResource]; ok {
			return lab.GPUResource
		}
	}
	return corev1.ResourceCPU
}

// capacity is the total of the main resource over every flavor's nodes.
func (s *Scenario) capacity() float64 {
	res, total := s.mainResource(), 0.0
	for _, f := range s.Flavors {
		q := s.FlavorCapacity(f)[res]
		total += float64(q.MilliValue()) / 1000
	}
	return total
}

// jobFor builds the Job of a submission: the class's pods and requests, its run time on the fake
// nodes, the team's LocalQueue and the class's priority. Both systems get identical Jobs; each one's
// webhook suspends it (and, for dispatch, sets spec.managedBy).
func jobFor(sub submission) *batchv1.Job {
	labels := map[string]string{kueue.QueueNameLabel: LocalQueueName}
	if sub.class.Priority != 0 {
		labels[kueue.PriorityClassLabel] = PriorityClassName(sub.class.Priority)
	}
	limits := corev1.ResourceList{}
	if q, ok := sub.class.Requests[lab.GPUResource]; ok {
		limits[lab.GPUResource] = q
	}
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: TeamNamespace(sub.queue), Name: fmt.Sprintf("%s-%d", sub.class.Name, sub.index), Labels: labels},
		Spec: batchv1.JobSpec{
			Parallelism:  ptr.To(sub.class.Pods),
			Completions:  ptr.To(sub.class.Pods),
			BackoffLimit: ptr.To[int32](0),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{lab.RunTimeAnnotation: sub.class.RunTime.Duration.String()}},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{
						Name: "work", Image: "registry.k8s.io/e2e-test-images/agnhost:2.53",
						Resources: corev1.ResourceRequirements{Requests: sub.class.Requests, Limits: limits},
					}},
				},
			},
		},
	}
}

// amount is a job's total request of res over its pods, as utilisation counts it.
func (c Class) amount(res corev1.ResourceName) float64 {
	q := c.Requests[res]
	return float64(q.MilliValue()) / 1000 * float64(c.Pods)
}

// creator creates a submission's job: on the management cluster, or where a Placer puts it.
type creator func(ctx context.Context, sub submission, job *batchv1.Job) error

// createIn creates every job with cs: on the management cluster, as a user of a queue does, or in
// the one cluster cs talks to.
func createIn(cs kubernetes.Interface) creator {
	return func(ctx context.Context, _ submission, job *batchv1.Job) error {
		_, err := cs.BatchV1().Jobs(job.Namespace).Create(ctx, job, metav1.CreateOptions{})
		return err
	}
}

// placedCreator creates each job in the cluster p picks, with the client of that cluster.
func placedCreator(p Placer, clients map[string]kubernetes.Interface) creator {
	return func(ctx context.Context, sub submission, job *batchv1.Job) error {
		cluster, err := p.Place(sub, job)
		if err != nil {
			return err
		}
		cs, ok := clients[cluster]
		if !ok {
			return fmt.Errorf("no load client for cluster %q", cluster)
		}
		return createIn(cs)(ctx, sub, job)
	}
}

// generate submits the scenario's waves, each starting its After past start, at the wave's rate (a
// burst when none) with loadWorkers calls in flight, and records every job with rec. It returns
// each wave's span: from its first create call until its last one returned (0 for a wave the
// context cut short).
func generate(ctx context.Context, create creator, s *Scenario, rec *Recorder, start time.Time) ([]time.Duration, error) {
	res := s.mainResource()
	var wg sync.WaitGroup
	errs := make(chan error, 1)
	spans := make([]time.Duration, len(s.Waves))
	for wi, subs := range plan(s) {
		w := s.Waves[wi]
		wg.Go(func() {
			select {
			case <-time.After(time.Until(start.Add(w.After.Duration))):
			case <-ctx.Done():
				return
			}
			var lim *rate.Limiter
			if w.Rate > 0 {
				lim = rate.NewLimiter(rate.Limit(w.Rate), 1)
			}
			todo := make(chan submission)
			var inner sync.WaitGroup
			began := time.Now()
			for range loadWorkers {
				inner.Go(func() {
					for sub := range todo {
						job := jobFor(sub)
						r := rec.Expect(job.Namespace+"/"+job.Name, sub.class.Name, sub.queue, sub.class.amount(res))
						submitted := time.Now()
						err := create(ctx, sub, job)
						created := time.Now()
						rec.Mark(r.Key, func(r *Record) { r.Submitted, r.Created = submitted, created })
						if err != nil {
							select {
							case errs <- fmt.Errorf("create job %s/%s: %w", job.Namespace, job.Name, err):
							default:
							}
						}
					}
				})
			}
			for _, sub := range subs {
				if lim != nil {
					if err := lim.Wait(ctx); err != nil {
						break
					}
				}
				select {
				case todo <- sub:
				case <-ctx.Done():
				}
			}
			close(todo)
			inner.Wait()
			if ctx.Err() == nil {
				spans[wi] = time.Since(began) // a wave cut short has no span
			}
		})
	}
	wg.Wait()
	select {
	case err := <-errs:
		return spans, err
	default:
		return spans, nil
	}
}
