package bench

import (
	"fmt"
	"math"
	"sort"
	"time"
)

// Figure names, in the order the report lists them. Better says which direction wins.
type figureDef struct {
	Name   string
	Unit   string
	Better int // +1 higher is better, -1 lower is better, 0 informational
}

// Figures lists every figure a run yields.
var Figures = []figureDef{
	{"workloads", "", 0},
	{"finished", "", 0},
	{"admitted/s", "1/s", +1},
	{"dispatched/s (running)", "1/s", +1},
	{"time to admission p50", "s", -1},
	{"time to admission p95", "s", -1},
	{"time to admission p99", "s", -1},
	{"submit→running p50", "s", -1},
	{"submit→running p95", "s", -1},
	{"submit→running p99", "s", -1},
	{"makespan (first submit→last finished)", "s", -1},
	{"first wave's creates", "s", -1},
	{"first wave's creates, nothing installed", "s", 0},
	{"submission slowdown (creates / nothing installed)", "×", -1},
	{"admission webhook calls/wl (all clusters)", "", -1},
	{"admission webhook time per call", "ms", -1},
	{"evictions", "", 0},
	{"mean quota utilisation", "%", +1},
	{"manager CPU", "s", -1},
	{"manager peak RSS", "MiB", -1},
	{"agents CPU (all workers)", "s", -1},
	{"kube-apiservers CPU (all clusters)", "s", -1},
	{"manager requests/wl (management)", "", -1},
	{"manager writes/wl (management)", "", -1},
	{"manager requests/wl (workers)", "", -1},
	{"manager writes/wl (workers)", "", -1},
	{"agent requests/wl (workers)", "", -1},
	{"agent writes/wl (workers)", "", -1},
	{"all clients requests/wl (apiserver_request_total, all clusters)", "", -1},
	{"all clients writes/wl (apiserver_request_total, all clusters)", "", -1},
	{"pending when settled", "", 0},
	{"load reserved (first submit→last reservation)", "s", -1},
	{"one job's quota, the load waiting elsewhere, p50", "s", -1},
	{"one job's quota, the load waiting elsewhere, max", "s", -1},
	{"manager restart→first admission", "s", -1},
	{"manager restart→webhook took the job", "s", 0},
	{"manager peak RSS after restart", "MiB", -1},
	{"deletion→next unsuspended p50", "s", -1},
	{"deletion→next unsuspended p95", "s", -1},
	{"manager writes/admitted wl", "", -1},
}

// cumulativeFigures only grow as a run goes on (costs, and costs per submitted workload).
var cumulativeFigures = []string{
	"manager CPU", "manager peak RSS", "agents CPU (all workers)", "kube-apiservers CPU (all clusters)",
	"manager requests/wl (management)", "manager writes/wl (management)",
	"manager requests/wl (workers)", "manager writes/wl (workers)",
	"agent requests/wl (workers)", "agent writes/wl (workers)",
	"all clients requests/wl (apiserver_request_total, all clusters)",
	"all clients writes/wl (apiserver_request_total, all clusters)",
	"admission webhook calls/wl (all clusters)",
}

// Compute turns a run into its figures (absent ones are left out).
func Compute(r *RunResult) map[string]float64 {
	f, _ := compute(r)
	return f
}

// latencies collects one latency per workload; a workload still waiting when a timed-out run
// ended counts with its wait so far (censored), so percentiles stay honest lower bounds instead
// of describing only the workloads that made it.
type latencies struct {
	xs          []float64
	done        int
	last        time.Time
	minCensored float64
	censored    bool
}

func (l *latencies) add(submitted, at, end time.Time, timedOut bool) {
	switch {
	case !at.IsZero():
		l.xs = append(l.xs, at.Sub(submitted).Seconds())
		l.done++
		l.last = later(l.last, at)
	case timedOut && !submitted.IsZero():
		w := end.Sub(submitted).Seconds()
		l.xs = append(l.xs, w)
		if !l.censored || w < l.minCensored {
			l.minCensored = w
		}
		l.censored = true
	}
}

// percentiles sets name p50/p95/p99; one is a lower bound when a censored wait is at or below
// it (that workload's real latency, still to come, could move it up).
func (l *latencies) percentiles(f map[string]float64, lb map[string]bool, name string) {
	for _, p := range []float64{50, 95, 99} {
		key := fmt.Sprintf("%s p%g", name, p)
		f[key] = Percentile(l.xs, p)
		if l.censored && l.minCensored <= f[key] {
			lb[key] = true
		}
	}
}

// rate is completions per second from the start until the last one, or until the end of a run
// that timed out (its window, not its best moment).
func (l *latencies) rate(r *RunResult) float64 {
	until := l.last
	if !r.Finished {
		until = r.End
	}
	return float64(l.done) / until.Sub(r.Start).Seconds()
}

// compute returns a run's figures and, for a run that timed out, the ones that are only lower
// bounds (latency percentiles counting workloads still waiting with their wait so far).
func compute(r *RunResult) (map[string]float64, map[string]bool) {
	f, lb := map[string]float64{}, map[string]bool{}
	n := float64(len(r.Records))
	f["workloads"] = n
	var admitted, running latencies
	var lastFinish time.Time
	finished, evictions := 0, 0
	timedOut := !r.Finished
	for _, rec := range r.Records {
		evictions += rec.Evictions
		admitted.add(rec.Submitted, rec.Admitted, r.End, timedOut)
		running.add(rec.Submitted, rec.Running, r.End, timedOut)
		if !rec.Finished.IsZero() {
			finished++
			lastFinish = later(lastFinish, rec.Finished)
		}
	}
	f["finished"] = float64(finished)
	f["evictions"] = float64(evictions)
	if admitted.done > 0 {
		f["admitted/s"] = admitted.rate(r)
		admitted.percentiles(f, lb, "time to admission")
	}
	if running.done > 0 {
		f["dispatched/s (running)"] = running.rate(r)
		running.percentiles(f, lb, "submit→running")
	}
	if r.Finished && !lastFinish.IsZero() {
		f["makespan (first submit→last finished)"] = lastFinish.Sub(r.Start).Seconds()
	}
	if r.SubmitSpan > 0 {
		f["first wave's creates"] = r.SubmitSpan.Seconds()
		if r.BareSubmitSpan > 0 {
			f["first wave's creates, nothing installed"] = r.BareSubmitSpan.Seconds()
			f["submission slowdown (creates / nothing installed)"] = r.SubmitSpan.Seconds() / r.BareSubmitSpan.Seconds()
		}
	}
	var hooks WebhookTime
	for _, w := range r.Webhooks {
		t := w.Total()
		hooks.Calls, hooks.Seconds = hooks.Calls+t.Calls, hooks.Seconds+t.Seconds
	}
	if hooks.Calls > 0 && n > 0 {
		f["admission webhook calls/wl (all clusters)"] = hooks.Calls / n
		f["admission webhook time per call"] = 1000 * hooks.Seconds / hooks.Calls
	}
	for _, p := range r.Procs {
		switch p.Role {
		case "manager":
			f["manager CPU"] += p.CPUSeconds
			f["manager peak RSS"] = max(f["manager peak RSS"], p.PeakRSSMiB)
		case "agent":
			f["agents CPU (all workers)"] += p.CPUSeconds
		case "apiserver":
			f["kube-apiservers CPU (all clusters)"] += p.CPUSeconds
		}
	}
	if n > 0 {
		var mgmtAll, mgmtW, remAll, remW, agAll, agW, all, allW float64
		for cluster, byRole := range r.Audit {
			for role, c := range byRole {
				switch {
				case role == "manager" && cluster == ManagementCluster:
					mgmtAll, mgmtW = mgmtAll+c.Total(), mgmtW+c.Writes()
				case role == "manager":
					remAll, remW = remAll+c.Total(), remW+c.Writes()
				case role == "agent":
					agAll, agW = agAll+c.Total(), agW+c.Writes()
				}
			}
		}
		for _, c := range r.Requests {
			all, allW = all+c.Total(), allW+c.Writes()
		}
		// A system with no manager of its own (direct) has no manager or agent requests to count.
		dispatcher := r.System != DirectName
		if dispatcher {
			f["manager requests/wl (management)"] = mgmtAll / n
			f["manager writes/wl (management)"] = mgmtW / n
		}
		if dispatcher && len(r.Audit) > 1 {
			f["manager requests/wl (workers)"] = remAll / n
			f["manager writes/wl (workers)"] = remW / n
			f["agent requests/wl (workers)"] = agAll / n
			f["agent writes/wl (workers)"] = agW / n
		}
		f["all clients requests/wl (apiserver_request_total, all clusters)"] = all / n
		f["all clients writes/wl (apiserver_request_total, all clusters)"] = allW / n
		if admitted.done > 0 {
			f["manager writes/admitted wl"] = mgmtW / float64(admitted.done)
		}
	}
	if timedOut {
		// The workloads still to come would add CPU, memory and requests: what a run that timed
		// out used, even divided by every submitted workload, is a lower bound of the whole run's.
		for _, k := range cumulativeFigures {
			if _, ok := f[k]; ok {
				lb[k] = true
			}
		}
	}
	if r.Capacity > 0 && r.Finished && holdsQuota(r) {
		f["mean quota utilisation"] = MeanUtilisation(Timeline(r, r.Capacity, time.Second))
	}
	if sc := r.Scale; sc != nil && !sc.Settled.IsZero() {
		f["pending when settled"] = float64(sc.Pending)
		f["load reserved (first submit→last reservation)"] = sc.Settled.Sub(r.Start).Seconds()
		if len(sc.Probes) > 0 {
			ps := seconds(sc.Probes)
			f["one job's quota, the load waiting elsewhere, p50"] = Percentile(ps, 50)
			f["one job's quota, the load waiting elsewhere, max"] = Percentile(ps, 100)
		}
		if sc.Restart > 0 {
			f["manager restart→first admission"] = sc.Restart.Seconds()
			lb["manager restart→first admission"] = sc.RestartTimedOut
			f["manager restart→webhook took the job"] = sc.RestartCreated.Seconds()
			f["manager peak RSS after restart"] = sc.RestartPeakRSSMiB
		}
	}
	if len(r.ChainGaps) > 0 {
		gaps := seconds(r.ChainGaps)
		f["deletion→next unsuspended p50"] = Percentile(gaps, 50)
		f["deletion→next unsuspended p95"] = Percentile(gaps, 95)
	}
	return f, lb
}

// seconds converts durations for Percentile.
func seconds(ds []time.Duration) []float64 {
	out := make([]float64, len(ds))
	for i, d := range ds {
		out[i] = d.Seconds()
	}
	return out
}

// holdsQuota says whether any workload of the run held quota: none does with no queue (direct),
// whose utilisation would read 0.
func holdsQuota(r *RunResult) bool {
	for _, rec := range r.Records {
		if len(rec.Holds) > 0 {
			return true
		}
	}
	return false
}

// Percentile is the nearest-rank percentile of xs (0 for none).
func Percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	rank := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[min(max(rank, 0), len(s)-1)]
}

// Spread is the median, min and max of one figure over runs.
type Spread struct {
	Median, Min, Max float64
	N                int
	// LowerBound: some run only bounds the figure from below (it timed out; see compute).
	LowerBound bool
}

// SpreadOf summarises values (the median of an even count is the mean of the middle two).
func SpreadOf(xs []float64) Spread {
	if len(xs) == 0 {
		return Spread{}
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return Spread{Median: m, Min: s[0], Max: s[len(s)-1], N: len(s)}
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// Series are a run's values over time, one point per step from its start.
type Series struct {
	T []float64 // seconds since start
	// Pending is how many submitted workloads were not yet admitted.
	Pending []float64
	// Utilisation is the share (%) of the main resource's capacity held by workloads with quota.
	Utilisation []float64
}

// Timeline samples a run's queue depth and quota utilisation every step, from the records alone
// (no extra API reads during the run).
func Timeline(r *RunResult, capacity float64, step time.Duration) Series {
	var s Series
	end := r.End
	for t := r.Start; !t.After(end); t = t.Add(step) {
		pending, held := 0.0, 0.0
		for _, rec := range r.Records {
			if !rec.Submitted.IsZero() && !rec.Submitted.After(t) && (rec.Admitted.IsZero() || rec.Admitted.After(t)) {
				pending++
			}
			for _, h := range rec.Holds {
				if !h.Start.After(t) && (h.End.IsZero() || h.End.After(t)) {
					held += rec.Amount
				}
			}
		}
		s.T = append(s.T, t.Sub(r.Start).Seconds())
		s.Pending = append(s.Pending, pending)
		u := 0.0
		if capacity > 0 {
			u = 100 * held / capacity
		}
		s.Utilisation = append(s.Utilisation, u)
	}
	return s
}

// MeanUtilisation averages a timeline's utilisation up to the last workload's finish.
func MeanUtilisation(s Series) float64 {
	if len(s.Utilisation) == 0 {
		return 0
	}
	sum := 0.0
	for _, u := range s.Utilisation {
		sum += u
	}
	return sum / float64(len(s.Utilisation))
}
