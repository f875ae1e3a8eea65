package bench

import (
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
	{"deletion→next unsuspended p50", "s", -1},
	{"deletion→next unsuspended p95", "s", -1},
	{"manager writes/admitted wl", "", -1},
}

// Compute turns a run into its figures (absent ones are left out).
func Compute(r *RunResult) map[string]float64 {
	f := map[string]float64{}
	n := float64(len(r.Records))
	f["workloads"] = n
	var admitted, running, finished, toAdmit, toRun []float64
	var lastAdmit, lastRun, lastFinish time.Time
	evictions := 0
	for _, rec := range r.Records {
		evictions += rec.Evictions
		if !rec.Admitted.IsZero() {
			admitted = append(admitted, 1)
			toAdmit = append(toAdmit, rec.Admitted.Sub(rec.Submitted).Seconds())
			lastAdmit = later(lastAdmit, rec.Admitted)
		}
		if !rec.Running.IsZero() {
			running = append(running, 1)
			toRun = append(toRun, rec.Running.Sub(rec.Submitted).Seconds())
			lastRun = later(lastRun, rec.Running)
		}
		if !rec.Finished.IsZero() {
			finished = append(finished, 1)
			lastFinish = later(lastFinish, rec.Finished)
		}
	}
	f["finished"] = float64(len(finished))
	f["evictions"] = float64(evictions)
	if len(admitted) > 0 {
		f["admitted/s"] = float64(len(admitted)) / lastAdmit.Sub(r.Start).Seconds()
		f["time to admission p50"] = Percentile(toAdmit, 50)
		f["time to admission p95"] = Percentile(toAdmit, 95)
		f["time to admission p99"] = Percentile(toAdmit, 99)
	}
	if len(running) > 0 {
		f["dispatched/s (running)"] = float64(len(running)) / lastRun.Sub(r.Start).Seconds()
		f["submit→running p50"] = Percentile(toRun, 50)
		f["submit→running p95"] = Percentile(toRun, 95)
		f["submit→running p99"] = Percentile(toRun, 99)
	}
	if r.Finished && !lastFinish.IsZero() {
		f["makespan (first submit→last finished)"] = lastFinish.Sub(r.Start).Seconds()
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
		f["manager requests/wl (management)"] = mgmtAll / n
		f["manager writes/wl (management)"] = mgmtW / n
		if len(r.Audit) > 1 {
			f["manager requests/wl (workers)"] = remAll / n
			f["manager writes/wl (workers)"] = remW / n
			f["agent requests/wl (workers)"] = agAll / n
			f["agent writes/wl (workers)"] = agW / n
		}
		f["all clients requests/wl (apiserver_request_total, all clusters)"] = all / n
		f["all clients writes/wl (apiserver_request_total, all clusters)"] = allW / n
		if len(admitted) > 0 {
			f["manager writes/admitted wl"] = mgmtW / float64(len(admitted))
		}
	}
	if r.Capacity > 0 && r.Finished {
		f["mean quota utilisation"] = MeanUtilisation(Timeline(r, r.Capacity, time.Second))
	}
	if len(r.ChainGaps) > 0 {
		var gaps []float64
		for _, g := range r.ChainGaps {
			gaps = append(gaps, g.Seconds())
		}
		f["deletion→next unsuspended p50"] = Percentile(gaps, 50)
		f["deletion→next unsuspended p95"] = Percentile(gaps, 95)
	}
	return f
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
