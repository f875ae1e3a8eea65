package bench

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// bareNamespace holds the Jobs a run creates before its system is installed, to time submission
// with nothing else using the management cluster.
const bareNamespace = "bench-bare"

// measuresSubmission says whether a run times its first wave against a bare management cluster:
// only a burst submitted there (not a steady wave, whose span is its rate's; not a Placer's jobs,
// created in the workers; not a chain, whose single job waits on purpose).
func measuresSubmission(s *Scenario, sys System) bool {
	_, placed := sys.(Placer)
	return !placed && s.Chain == 0 && s.Waves[0].Rate == 0
}

// bareSubmit times the creates of the scenario's first wave on a management cluster with no system
// installed: the same Jobs, suspended as a queue's webhook leaves them, through the same load
// client, in a namespace of their own. It removes them again and waits until they are gone, so the
// run that follows starts from the same cluster. Issue 19's submission cost is the run's first-wave
// span over this one.
func bareSubmit(ctx context.Context, cs kubernetes.Interface, s *Scenario) (time.Duration, error) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: bareNamespace}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return 0, fmt.Errorf("bare submission: namespace: %w", err)
	}
	first := *s
	first.Waves = []Wave{{Count: s.Waves[0].Count, Classes: s.Waves[0].Classes, Queues: s.Waves[0].Queues}}
	create := func(ctx context.Context, sub submission, job *batchv1.Job) error {
		job.Namespace, job.Spec.Suspend = bareNamespace, ptr.To(true)
		return createIn(cs)(ctx, sub, job)
	}
	spans, err := generate(ctx, create, &first, NewRecorder(), time.Now())
	if err != nil {
		return 0, fmt.Errorf("bare submission: %w", err)
	}
	jobs := cs.BatchV1().Jobs(bareNamespace)
	if err := jobs.DeleteCollection(ctx, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}, metav1.ListOptions{}); err != nil {
		return 0, fmt.Errorf("bare submission: remove its jobs: %w", err)
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		l, err := jobs.List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil && len(l.Items) == 0, nil
	})
	if err != nil {
		return 0, fmt.Errorf("bare submission: its jobs are not gone: %w", err)
	}
	return spans[0], nil
}
