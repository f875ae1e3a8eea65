package chaos

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
)

// The invariants a run checks, as the report names them.
const (
	OneCopy      = "one copy at a time"
	QuotaHeld    = "quota within limits"
	EveryJobEnds = "every job finishes once or waits with a reason"
	NoCopyLeft   = "no copy left after its workload"
	Recovery     = "the fleet recovers"
)

// Invariants lists them in the report's order.
var Invariants = []string{OneCopy, QuotaHeld, EveryJobEnds, NoCopyLeft, Recovery}

// Injected is a fault as it happened.
type Injected struct {
	Fault
	Start, Healed time.Time
	// Recovered is when the fleet was healthy again after the heal (zero: never, within the
	// bound).
	Recovered time.Time
	// Err is why the fault could not be injected or healed.
	Err error
}

// Violation is one broken invariant, first seen at At.
type Violation struct {
	Invariant string
	At        time.Time
	Text      string
}

// Report is what a run saw; safe for concurrent use while it runs.
type Report struct {
	Seed   uint64
	Length time.Duration
	Start  time.Time

	mu         sync.Mutex
	faults     []Injected
	violations []Violation
	seen       map[string]int
	// Jobs counts the submitted jobs; Finished and Pending their outcomes; Terminations the
	// pods seen Terminating (each slowed by TerminationDelay).
	Jobs, Finished, Pending, Terminations int
	// Restarts are components that exited by themselves and were started again, as the kubelet
	// would; a crash among them is also a violation.
	Restarts []Restart
	// SubmitErrors are job creations that failed even after retries (the user saw an error; no
	// job was lost silently).
	SubmitErrors []string
}

// NewReport starts an empty report.
func NewReport(seed uint64, length time.Duration) *Report {
	return &Report{Seed: seed, Length: length, Start: time.Now(), seen: map[string]int{}}
}

// Violate records a violation of an invariant: the first time key is seen it is added with the
// time; later calls with the same key update its text (an overlap's window grows) but keep
// when it was first seen.
func (r *Report) Violate(invariant, key, text string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := invariant + "\x00" + key
	if i, ok := r.seen[k]; ok {
		r.violations[i].Text = text
		return
	}
	r.seen[k] = len(r.violations)
	r.violations = append(r.violations, Violation{Invariant: invariant, At: time.Now(), Text: text})
}

// Injected records a fault once it is over.
func (r *Report) Injected(f Injected) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.faults = append(r.faults, f)
}

// FaultErrors lists the faults that could not be injected or healed: a run with any did not
// test what it claims.
func (r *Report) FaultErrors() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, f := range r.faults {
		if f.Err != nil {
			out = append(out, fmt.Sprintf("%s: %v", f.Fault, f.Err))
		}
	}
	return out
}

// Violations lists what was broken, in the order first seen.
func (r *Report) Violations() []Violation {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Violation(nil), r.violations...)
}

// Table formats the run: faults injected by kind with the longest time to recover, jobs and
// their outcomes, and violations per invariant, then each violation with its time.
func (r *Report) Table() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "chaos run: seed %d, %s of faults, %s in all\n\n", r.Seed, r.Length, time.Since(r.Start).Round(time.Second))
	fmt.Fprintf(&b, "%-50s %8s %8s %18s\n", "fault", "injected", "failed", "longest recovery")
	byKind := map[Kind][]Injected{}
	for _, f := range r.faults {
		byKind[f.Kind] = append(byKind[f.Kind], f)
	}
	for _, k := range Kinds {
		var longest time.Duration
		failed, never := 0, false
		for _, f := range byKind[k] {
			if f.Err != nil {
				failed++
				continue
			}
			if f.Recovered.IsZero() {
				never = true
				continue
			}
			longest = max(longest, f.Recovered.Sub(f.Healed))
		}
		rec := longest.Round(100 * time.Millisecond).String()
		if never {
			rec = "not recovered"
		}
		fmt.Fprintf(&b, "%-50s %8d %8d %18s\n", k, len(byKind[k]), failed, rec)
	}
	fmt.Fprintf(&b, "%-50s %8d %8s %18s\n", fmt.Sprintf("pods slow to terminate (%s each)", TerminationDelay), r.Terminations, "-", "-")
	fmt.Fprintf(&b, "%-50s %8d %8s %18s\n", fmt.Sprintf("components that exited by themselves, restarted after %s", restartDelay), len(r.Restarts), "-", "-")
	fmt.Fprintf(&b, "\njobs: %d submitted, %d finished exactly once, %d pending with a reason, %d creations refused\n\n", r.Jobs, r.Finished, r.Pending, len(r.SubmitErrors))
	count := map[string]int{}
	for _, v := range r.violations {
		count[v.Invariant]++
	}
	fmt.Fprintf(&b, "%-50s %10s\n", "invariant", "violations")
	for _, inv := range Invariants {
		fmt.Fprintf(&b, "%-50s %10d\n", inv, count[inv])
	}
	if len(r.violations) > 0 {
		b.WriteString("\n")
		vs := append([]Violation(nil), r.violations...)
		sort.SliceStable(vs, func(i, j int) bool { return vs[i].At.Before(vs[j].At) })
		for _, v := range vs {
			fmt.Fprintf(&b, "+%-8s %s: %s\n", v.At.Sub(r.Start).Round(time.Second), v.Invariant, v.Text)
		}
	}
	if len(r.Restarts) > 0 {
		b.WriteString("\nrestarts:\n")
		for _, rs := range r.Restarts {
			fmt.Fprintf(&b, "  +%-8s %s: %s\n", rs.At.Sub(r.Start).Round(time.Second), rs.Component, rs.Why)
		}
	}
	if len(r.SubmitErrors) > 0 {
		b.WriteString("\nrefused creations:\n")
		for _, e := range r.SubmitErrors {
			b.WriteString("  " + e + "\n")
		}
	}
	return b.String()
}
