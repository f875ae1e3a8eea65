package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
)

func TestStopAndResume(t *testing.T) {
	queues := func() []client.Object {
		return []client.Object{
			&kueue.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: "research-cq"}},
			&kueue.LocalQueue{ObjectMeta: metav1.ObjectMeta{Namespace: "research", Name: "team-queue"}, Spec: kueue.LocalQueueSpec{ClusterQueue: "research-cq", StopPolicy: ptr.To(kueue.Hold)}},
		}
	}
	cases := []struct {
		name, kind, queue string
		policy            kueue.StopPolicy
		wantCQ, wantLQ    kueue.StopPolicy // "" for unset
		wantOut, wantErr  string
	}{
		{name: "drain a ClusterQueue", kind: "clusterqueue", queue: "research-cq", policy: kueue.HoldAndDrain, wantCQ: kueue.HoldAndDrain, wantLQ: kueue.Hold,
			wantOut: "ClusterQueue research-cq stopPolicy set to HoldAndDrain: it admits nothing new and evicts what it admitted"},
		{name: "hold a ClusterQueue by its short name", kind: "cq", queue: "research-cq", policy: kueue.Hold, wantCQ: kueue.Hold, wantLQ: kueue.Hold,
			wantOut: "stopPolicy set to Hold: it admits nothing new; what it admitted runs on"},
		{name: "resume a LocalQueue of the namespace", kind: "lq", queue: "team-queue", policy: kueue.None, wantLQ: kueue.None,
			wantOut: "LocalQueue team-queue stopPolicy set to None: it admits workloads again"},
		{name: "resume a ClusterQueue that runs", kind: "clusterqueues", queue: "research-cq", policy: kueue.None, wantLQ: kueue.Hold,
			wantOut: "ClusterQueue research-cq already has stopPolicy None"},
		{name: "not a queue kind", kind: "job", queue: "train", policy: kueue.Hold, wantLQ: kueue.Hold,
			wantErr: `"job" is not a queue kind: use clusterqueue (cq) or localqueue (lq)`},
		{name: "missing ClusterQueue", kind: "cq", queue: "nope", policy: kueue.Hold, wantLQ: kueue.Hold,
			wantErr: "ClusterQueue nope not found (kubectl get clusterqueues lists them)"},
		{name: "LocalQueue of another namespace", kind: "localqueue", queue: "inference-queue", policy: kueue.Hold, wantLQ: kueue.Hold,
			wantErr: "LocalQueue research/inference-queue not found (kubectl get localqueues -n research lists them)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := &bytes.Buffer{}
			v := newView(t, queues(), out)
			err := v.setStopPolicy(context.Background(), tc.kind, tc.queue, tc.policy)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("error = %v, want %q", err, tc.wantErr)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out.String(), tc.wantOut) {
				t.Errorf("output %q does not say %q", out.String(), tc.wantOut)
			}
			cq := &kueue.ClusterQueue{}
			lq := &kueue.LocalQueue{}
			if err := v.client.Get(context.Background(), client.ObjectKey{Name: "research-cq"}, cq); err != nil {
				t.Fatal(err)
			}
			if err := v.client.Get(context.Background(), client.ObjectKey{Namespace: "research", Name: "team-queue"}, lq); err != nil {
				t.Fatal(err)
			}
			if got := ptr.Deref(cq.Spec.StopPolicy, ""); got != tc.wantCQ {
				t.Errorf("ClusterQueue stopPolicy = %q, want %q", got, tc.wantCQ)
			}
			if got := ptr.Deref(lq.Spec.StopPolicy, ""); got != tc.wantLQ {
				t.Errorf("LocalQueue stopPolicy = %q, want %q", got, tc.wantLQ)
			}
		})
	}
}
