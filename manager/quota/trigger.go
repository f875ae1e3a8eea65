// Package quota keeps the manager's view of the quota objects — ResourceFlavors, ClusterQueues,
// Cohorts, LocalQueues — in the cache, wakes the queues a change can unblock, and writes their
// status (counts, usage with borrowing, the Active condition with a reason a person can act on).
package quota

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/manager/queue"
)

// Trigger collects the queues whose status counters changed (from the cache and the queues,
// which must not block) and hands them to the status reconcilers in batches.
type Trigger struct {
	mu  sync.Mutex
	cqs map[string]bool
	lqs map[string]bool

	// Period is how often collected changes are handed on; it bounds status write rates.
	Period        time.Duration
	ClusterQueues chan event.TypedGenericEvent[*kueue.ClusterQueue]
	LocalQueues   chan event.TypedGenericEvent[*kueue.LocalQueue]
}

// StatusPeriod is how often queue status counters are written at most: a second behind is
// fresh enough for kubectl get, and at 250 ms a burst cost almost one ClusterQueue and one
// LocalQueue status write per dispatched workload.
const StatusPeriod = time.Second

// NewTrigger returns a Trigger with its channels.
func NewTrigger(period time.Duration) *Trigger {
	return &Trigger{
		cqs:           map[string]bool{},
		lqs:           map[string]bool{},
		Period:        period,
		ClusterQueues: make(chan event.TypedGenericEvent[*kueue.ClusterQueue], 1024),
		LocalQueues:   make(chan event.TypedGenericEvent[*kueue.LocalQueue], 1024),
	}
}

// Changed records that a ClusterQueue's and a LocalQueue's (namespace/name) counters changed.
func (t *Trigger) Changed(clusterQueue, localQueue string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if clusterQueue != "" {
		t.cqs[clusterQueue] = true
	}
	if localQueue != "" {
		t.lqs[localQueue] = true
	}
}

// refresh wakes queues after a change to something they use and recomputes their status.
func (t *Trigger) refresh(q *queue.Queues, clusterQueues []string) {
	q.Wake(clusterQueues...)
	for _, name := range clusterQueues {
		t.Changed(name, "")
	}
}

// NeedLeaderElection: status is written by the leader only.
func (t *Trigger) NeedLeaderElection() bool { return true }

// Start hands on collected changes every Period until ctx ends.
func (t *Trigger) Start(ctx context.Context) error {
	tick := time.NewTicker(t.Period)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		t.mu.Lock()
		cqs, lqs := t.cqs, t.lqs
		t.cqs, t.lqs = map[string]bool{}, map[string]bool{}
		t.mu.Unlock()
		for name := range cqs {
			cq := &kueue.ClusterQueue{}
			cq.Name = name
			select {
			case t.ClusterQueues <- event.TypedGenericEvent[*kueue.ClusterQueue]{Object: cq}:
			case <-ctx.Done():
				return nil
			}
		}
		for key := range lqs {
			lq := &kueue.LocalQueue{}
			lq.Namespace, lq.Name = splitKey(key)
			select {
			case t.LocalQueues <- event.TypedGenericEvent[*kueue.LocalQueue]{Object: lq}:
			case <-ctx.Done():
				return nil
			}
		}
	}
}

func splitKey(key string) (string, string) {
	for i := 0; i < len(key); i++ {
		if key[i] == '/' {
			return key[:i], key[i+1:]
		}
	}
	return "", key
}

// statusPatch is a merge patch that sets the whole status, zero counters included (a diff-based
// patch would omit them and kubectl's columns would stay empty). The manager is the only writer
// of these statuses.
func statusPatch(status any) client.Patch {
	raw, err := json.Marshal(map[string]any{"status": status})
	if err != nil {
		panic(fmt.Sprintf("status of a known type does not marshal: %v", err))
	}
	return client.RawPatch(types.MergePatchType, raw)
}
