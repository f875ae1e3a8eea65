// Package fencing decides when a worker's agent must stop running copied workloads because the
// manager stopped renewing its Lease: at most one copy of a job may run, and after its own
// workerLostTimeout the manager dispatches the job elsewhere.
//
// Renewals are measured with the agent's own clock: the agent notes the time at which it saw the
// Lease's renewTime change, and fences once leaseDurationSeconds (the manager's fenceTimeout) have
// passed on its clock without a further change. The manager's clock never enters the comparison, so
// clock skew between the clusters does not matter.
//
// At start, and whenever the Lease appears, the agent has not seen a renewal yet; it counts the
// first sighting as one, so copies it admitted before a restart run for at most one more lease
// duration before they are fenced, if the manager stays silent. While there is no Lease there is
// nothing to fence against (no manager has connected yet, or it removed this worker): the agent
// admits and never fences, and reports the copies it runs that way (State.NoLease: a metric and a
// warning on each copy), since a manager writing its Lease to another namespace looks the same. A
// Lease without leaseDurationSeconds never fences either.
package fencing

import (
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/utils/clock"
)

// State is what the Observer concludes.
type State struct {
	// Fenced is true once no renewal was seen for the lease's duration.
	Fenced bool
	// Deadline is when the agent fences unless it sees a renewal first; zero when it never will
	// (no Lease, or no duration).
	Deadline time.Time
	// Message explains the state for conditions and logs.
	Message string
	// NoLease is true while the manager's Lease does not exist: copies then run with nothing to
	// fence them, which the agent reports (a manager writing its Lease to another namespace
	// than the agent reads is the usual cause).
	NoLease bool
}

// Observer tracks renewals of one Lease by the agent's clock. It is safe for concurrent use.
type Observer struct {
	clock clock.PassiveClock
	name  string

	mu        sync.Mutex
	exists    bool
	renewTime time.Time
	holder    string
	seenAt    time.Time
	duration  time.Duration
}

// NewObserver observes the Lease with the given name, using clk to time renewals.
func NewObserver(clk clock.PassiveClock, leaseName string) *Observer {
	return &Observer{clock: clk, name: leaseName}
}

// Observe records the Lease as the agent reads it now; nil means it does not exist.
func (o *Observer) Observe(lease *coordinationv1.Lease) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if lease == nil {
		o.exists = false
		return
	}
	var renew time.Time
	switch {
	case lease.Spec.RenewTime != nil:
		renew = lease.Spec.RenewTime.Time
	case lease.Spec.AcquireTime != nil:
		renew = lease.Spec.AcquireTime.Time
	}
	holder := ""
	if lease.Spec.HolderIdentity != nil {
		holder = *lease.Spec.HolderIdentity
	}
	if !o.exists || !renew.Equal(o.renewTime) || holder != o.holder {
		o.seenAt = o.clock.Now()
	}
	o.exists, o.renewTime, o.holder = true, renew, holder
	o.duration = 0
	if lease.Spec.LeaseDurationSeconds != nil && *lease.Spec.LeaseDurationSeconds > 0 {
		o.duration = time.Duration(*lease.Spec.LeaseDurationSeconds) * time.Second
	}
}

// State says whether the agent is fenced now.
func (o *Observer) State() State {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.exists {
		return State{NoLease: true, Message: fmt.Sprintf("no lease %s: nothing to fence against", o.name)}
	}
	if o.duration <= 0 {
		return State{Message: fmt.Sprintf("lease %s has no leaseDurationSeconds: never fenced", o.name)}
	}
	now := o.clock.Now()
	deadline := o.seenAt.Add(o.duration)
	if now.Before(deadline) {
		return State{Deadline: deadline, Message: fmt.Sprintf("lease %s renewal seen %s ago (fence after %s)", o.name, now.Sub(o.seenAt).Round(time.Second), o.duration)}
	}
	return State{Fenced: true, Deadline: deadline, Message: fmt.Sprintf(
		"the manager did not renew lease %s for %s (its leaseDurationSeconds), as measured by the agent's clock", o.name, now.Sub(o.seenAt).Round(time.Second))}
}
