package bench

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Meta is everything a reader needs to reproduce a report: machine, versions, knobs, command.
type Meta struct {
	Command   string    `json:"command"`
	Started   time.Time `json:"started"`
	Duration  string    `json:"duration"`
	Machine   Machine   `json:"machine"`
	Versions  []string  `json:"versions"`
	Knobs     Knobs     `json:"knobs"`
	LoadQPS   float32   `json:"loadQPS"`
	LoadBurst int       `json:"loadBurst"`
	Runs      int       `json:"runs"`
	Scale     float64   `json:"scale"`
	Scenarios []string  `json:"scenarios"`
	// APIServer says how the lab's API servers ran (identical for both systems).
	APIServer string   `json:"apiServer"`
	Notes     []string `json:"notes,omitempty"`
}

// Machine describes the host.
type Machine struct {
	Kernel string  `json:"kernel"`
	CPU    string  `json:"cpu"`
	Cores  int     `json:"cores"`
	MemGiB float64 `json:"memGiB"`
	Go     string  `json:"go"`
}

// Report is the runs of every scenario and system.
type Report struct {
	Meta      Meta
	Scenarios []*Scenario
	Results   []*RunResult
}

func (r *Report) results(scenario, system string) []*RunResult {
	var out []*RunResult
	for _, res := range r.Results {
		if res.Scenario == scenario && res.System == system {
			out = append(out, res)
		}
	}
	return out
}

func (r *Report) systems() []string {
	seen := map[string]bool{}
	var out []string
	for _, res := range r.Results {
		if !seen[res.System] {
			seen[res.System] = true
			out = append(out, res.System)
		}
	}
	sort.Slice(out, func(i, j int) bool { return systemRank(out[i]) < systemRank(out[j]) })
	return out
}

// systemRank orders report columns: fleetq, Kueue, then the direct ceiling.
func systemRank(name string) int {
	switch name {
	case "fleetq":
		return 0
	case "kueue":
		return 1
	}
	return 2
}

// ceilingFigures are those compared with the direct ceiling: how close fleetq gets to creating
// the jobs where they run.
var ceilingFigures = map[string]bool{
	"dispatched/s (running)": true, "makespan (first submit→last finished)": true,
	"submit→running p50": true, "submit→running p95": true, "submit→running p99": true,
}

// comparison is one ratio column of a scenario's table.
type comparison struct {
	title string
	cell  func(fd figureDef, sp map[string]map[string]Spread) string
}

// comparisons are the ratio columns the report's systems allow: fleetq's advantage over Kueue,
// and fleetq / direct for the ceiling figures.
func comparisons(systems []string) []comparison {
	has := map[string]bool{}
	for _, s := range systems {
		has[s] = true
	}
	var out []comparison
	if has["fleetq"] && has["kueue"] {
		out = append(out, comparison{"fleetq advantage over Kueue (× ; >1 = fleetq better)", func(fd figureDef, sp map[string]map[string]Spread) string {
			return ratio(fd, sp["fleetq"][fd.Name], sp["kueue"][fd.Name])
		}})
	}
	if has["fleetq"] && has[DirectName] {
		out = append(out, comparison{"fleetq / direct (the ceiling)", func(fd figureDef, sp map[string]map[string]Spread) string {
			if !ceilingFigures[fd.Name] {
				return ""
			}
			return ofCeiling(fd, sp["fleetq"][fd.Name], sp[DirectName][fd.Name])
		}})
	}
	return out
}

// ofCeiling is fleetq's figure over direct's, and for a time also the difference (a steady
// arrival's target is a difference: p95 within 1 s); a lower bound on fleetq's side (it timed out)
// makes both lower bounds too.
func ofCeiling(fd figureDef, fleetq, direct Spread) string {
	if fleetq.N == 0 || direct.N == 0 || direct.Median == 0 {
		return ""
	}
	ge := ""
	switch {
	case direct.LowerBound:
		return "?"
	case fleetq.LowerBound:
		ge = "≥ "
	}
	out := fmt.Sprintf("%s%.2f", ge, fleetq.Median/direct.Median)
	if fd.Unit == "s" {
		out += fmt.Sprintf(" (%s%+.2f s)", ge, fleetq.Median-direct.Median)
	}
	return out
}

// spreads summarises every figure of one scenario and system over its runs.
func (r *Report) spreads(scenario, system string) map[string]Spread {
	values, bounds := map[string][]float64{}, map[string]bool{}
	for _, res := range r.results(scenario, system) {
		figs, lb := compute(res)
		for k, v := range figs {
			values[k] = append(values[k], v)
			bounds[k] = bounds[k] || lb[k]
		}
	}
	out := map[string]Spread{}
	for k, v := range values {
		sp := SpreadOf(v)
		sp.LowerBound = bounds[k]
		out[k] = sp
	}
	return out
}

// Write writes report.md, summary.csv, runs.csv, meta.json, per-run workload CSVs and the plots
// into dir.
func (r *Report) Write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	meta, err := json.MarshalIndent(r.Meta, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "meta.json"), meta, 0o644); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	if err := r.writeCSVs(dir); err != nil {
		return err
	}
	for _, s := range r.Scenarios {
		if err := r.plot(dir, s); err != nil {
			return err
		}
	}
	md := r.Markdown()
	if err := os.WriteFile(filepath.Join(dir, "report.md"), []byte(md), 0o644); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return nil
}

// Markdown renders the report: setup, then one comparison table per scenario.
func (r *Report) Markdown() string {
	var b strings.Builder
	m := r.Meta
	fmt.Fprintf(&b, "# fleetq vs Kueue %s: lab benchmark\n\n", KueueVersion)
	fmt.Fprintf(&b, "- Command: `%s`\n", m.Command)
	fmt.Fprintf(&b, "- Started %s, took %s; %d run(s) per scenario and system, scale %g; each figure is the median of the runs with (min–max).\n",
		m.Started.Format(time.RFC3339), m.Duration, m.Runs, m.Scale)
	fmt.Fprintf(&b, "- Machine: %s, %d cores, %.0f GiB, %s, %s\n", m.Machine.CPU, m.Machine.Cores, m.Machine.MemGiB, m.Machine.Kernel, m.Machine.Go)
	fmt.Fprintf(&b, "- Versions: %s\n", strings.Join(m.Versions, ", "))
	fmt.Fprintf(&b, "- Client limits, same for both systems (manager → management, manager → workers, agents / worker Kueues): QPS %g, burst %d. Load client: QPS %g, burst %d, %d calls in flight.\n",
		m.Knobs.QPS, m.Knobs.Burst, m.LoadQPS, m.LoadBurst, loadWorkers)
	fmt.Fprintf(&b, "- API servers: %s\n", m.APIServer)
	for _, n := range m.Notes {
		fmt.Fprintf(&b, "- %s\n", n)
	}
	systems := r.systems()
	for _, s := range r.Scenarios {
		fmt.Fprintf(&b, "\n## %s\n\n%s\n\n", s.Name, s.Description)
		loads := []string{}
		for _, res := range r.Results {
			if res.Scenario == s.Name {
				loads = append(loads, fmt.Sprintf("%s %.1f→%.1f", res.System, res.LoadBefore, res.LoadAfter))
			}
		}
		fmt.Fprintf(&b, "Each run may take %s from its first submission; one that takes longer is measured as far as it got. Load average (1 min) before→after each run: %s.\n\n",
			s.Timeout.Duration, strings.Join(loads, ", "))
		for _, res := range r.Results {
			if res.Scenario == s.Name && !res.Finished {
				fmt.Fprintf(&b, "**%s timed out** after the scenario's %s: %s. Its rates are over the whole run; figures marked ≥ are lower bounds: latency percentiles count the workloads still waiting with their wait so far, and costs (CPU, requests per submitted workload) count only what it did so far — per admitted workload compares like with like.\n\n",
					res.System, s.Timeout.Duration, progressOf(res))
			}
		}
		sp := map[string]map[string]Spread{}
		for _, sys := range systems {
			sp[sys] = r.spreads(s.Name, sys)
		}
		cmps := comparisons(systems)
		fmt.Fprintf(&b, "| figure |")
		for _, sys := range systems {
			fmt.Fprintf(&b, " %s |", sys)
		}
		for _, c := range cmps {
			fmt.Fprintf(&b, " %s |", c.title)
		}
		fmt.Fprintf(&b, "\n|---|%s\n", strings.Repeat("---|", len(systems)+len(cmps)))
		for _, fd := range Figures {
			present := false
			for _, sys := range systems {
				if _, ok := sp[sys][fd.Name]; ok {
					present = true
				}
			}
			if !present {
				continue
			}
			name := fd.Name
			if fd.Unit != "" {
				name += " (" + fd.Unit + ")"
			}
			fmt.Fprintf(&b, "| %s |", name)
			for _, sys := range systems {
				v, ok := sp[sys][fd.Name]
				if !ok {
					fmt.Fprintf(&b, " – |")
					continue
				}
				fmt.Fprintf(&b, " %s |", formatSpread(v))
			}
			for _, c := range cmps {
				fmt.Fprintf(&b, " %s |", c.cell(fd, sp))
			}
			fmt.Fprintln(&b)
		}
		for _, sys := range systems {
			if res := r.results(s.Name, sys); len(res) > 0 {
				fmt.Fprintf(&b, "\n%s", writesTable(sys, res[0]))
				fmt.Fprintf(&b, "%s", webhooksTable(sys, res[0]))
			}
		}
		fmt.Fprintf(&b, "\n![submit→running CDF](%s-cdf.png) ![pending workloads](%s-pending.png) ![quota utilisation](%s-utilisation.png)\n", s.Name, s.Name, s.Name)
	}
	return b.String()
}

func formatSpread(s Spread) string {
	ge := ""
	if s.LowerBound {
		ge = "≥ "
	}
	if s.N <= 1 || s.Min == s.Max {
		return ge + format(s.Median)
	}
	return fmt.Sprintf("%s%s (%s–%s)", ge, format(s.Median), format(s.Min), format(s.Max))
}

func format(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
}

// ratio is fleetq's advantage over Kueue: fleetq/kueue for higher-is-better figures, kueue/fleetq for
// lower-is-better ones.
func ratio(fd figureDef, fleetq, kueue Spread) string {
	switch {
	case fd.Better == 0 || fleetq.N == 0 || kueue.N == 0:
		return ""
	case fd.Better > 0 && kueue.Median > 0:
		return fmt.Sprintf("%.2f×", fleetq.Median/kueue.Median)
	case fd.Better < 0 && fleetq.Median > 0:
		// A lower bound on Kueue's side makes fleetq's advantage a lower bound; on fleetq's
		// side an upper bound; on both, unknown.
		switch {
		case kueue.LowerBound && fleetq.LowerBound:
			return "?"
		case kueue.LowerBound:
			return fmt.Sprintf("≥ %.2f×", kueue.Median/fleetq.Median)
		case fleetq.LowerBound:
			return fmt.Sprintf("≤ %.2f×", kueue.Median/fleetq.Median)
		}
		return fmt.Sprintf("%.2f×", kueue.Median/fleetq.Median)
	}
	return ""
}

// writesTable lists the first run's most frequent writes per role and cluster kind, to show where
// the API writes go.
func writesTable(system string, r *RunResult) string {
	type row struct {
		where, what string
		n           float64
	}
	var rows []row
	for cluster, byRole := range r.Writes {
		where := "workers"
		if cluster == ManagementCluster {
			where = "management"
		}
		for role, byRes := range byRole {
			if role == "other" {
				continue
			}
			for what, n := range byRes {
				rows = append(rows, row{role + " → " + where, what, n})
			}
		}
	}
	merged := map[[2]string]float64{}
	for _, x := range rows {
		merged[[2]string{x.where, x.what}] += x.n
	}
	rows = rows[:0]
	for k, n := range merged {
		rows = append(rows, row{k[0], k[1], n})
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].where != rows[j].where {
			return rows[i].where < rows[j].where
		}
		return rows[i].n > rows[j].n
	})
	if len(rows) == 0 {
		return "" // direct: no client of its own
	}
	var b strings.Builder
	fmt.Fprintf(&b, "<details><summary>%s: API writes by client and resource (first run, %d workloads)</summary>\n\n| client → cluster | verb resource | writes | per workload |\n|---|---|---|---|\n", system, len(r.Records))
	shown := map[string]int{}
	for _, x := range rows {
		if shown[x.where] >= 8 {
			continue
		}
		shown[x.where]++
		fmt.Fprintf(&b, "| %s | %s | %.0f | %.2f |\n", x.where, x.what, x.n, x.n/float64(max(1, len(r.Records))))
	}
	fmt.Fprintf(&b, "\n</details>\n")
	return b.String()
}

// webhooksTable lists the first run's admission webhook calls per cluster, webhook and
// operation, with the API server's mean wait for each: what submission waits on.
func webhooksTable(system string, r *RunResult) string {
	type row struct {
		cluster, hook string
		t             WebhookTime
	}
	var rows []row
	for cluster, hooks := range r.Webhooks {
		for hook, t := range hooks {
			rows = append(rows, row{cluster, hook, t})
		}
	}
	if len(rows) == 0 {
		return ""
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].cluster != rows[j].cluster {
			return rows[i].cluster < rows[j].cluster
		}
		return rows[i].hook < rows[j].hook
	})
	var b strings.Builder
	fmt.Fprintf(&b, "<details><summary>%s: admission webhook calls (first run, %d workloads)</summary>\n\n| cluster | webhook operation | calls | per workload | mean (ms) |\n|---|---|---|---|---|\n", system, len(r.Records))
	for _, x := range rows {
		fmt.Fprintf(&b, "| %s | %s | %.0f | %.2f | %.1f |\n", x.cluster, x.hook, x.t.Calls, x.t.Calls/float64(max(1, len(r.Records))), 1000*x.t.Seconds/x.t.Calls)
	}
	fmt.Fprintf(&b, "\n</details>\n")
	return b.String()
}

func (r *Report) writeCSVs(dir string) error {
	summary := [][]string{{"scenario", "system", "figure", "unit", "median", "min", "max", "runs", "lower_bound"}}
	runs := [][]string{{"scenario", "system", "run", "figure", "value", "lower_bound"}}
	for _, s := range r.Scenarios {
		for _, sys := range r.systems() {
			sp := r.spreads(s.Name, sys)
			for _, fd := range Figures {
				v, ok := sp[fd.Name]
				if !ok {
					continue
				}
				summary = append(summary, []string{s.Name, sys, fd.Name, fd.Unit, fmtF(v.Median), fmtF(v.Min), fmtF(v.Max), strconv.Itoa(v.N), strconv.FormatBool(v.LowerBound)})
			}
			for i, res := range r.results(s.Name, sys) {
				figs, lb := compute(res)
				for _, fd := range Figures {
					if v, ok := figs[fd.Name]; ok {
						runs = append(runs, []string{s.Name, sys, strconv.Itoa(i + 1), fd.Name, fmtF(v), strconv.FormatBool(lb[fd.Name])})
					}
				}
				if err := writeCSV(filepath.Join(dir, fmt.Sprintf("workloads-%s-%s-run%d.csv", s.Name, sys, i+1)), workloadRows(res)); err != nil {
					return err
				}
			}
		}
	}
	if err := writeCSV(filepath.Join(dir, "summary.csv"), summary); err != nil {
		return err
	}
	return writeCSV(filepath.Join(dir, "runs.csv"), runs)
}

// progressOf says how far a run got: "412 of 1000 running, 380 finished".
func progressOf(r *RunResult) string {
	running, finished := 0, 0
	for _, rec := range r.Records {
		if !rec.Running.IsZero() {
			running++
		}
		if !rec.Finished.IsZero() {
			finished++
		}
	}
	return fmt.Sprintf("%d of %d ran, %d finished", running, len(r.Records), finished)
}

// workloadRows are one run's per-workload timestamps, in seconds since the run's first submission.
func workloadRows(r *RunResult) [][]string {
	rows := [][]string{{"job", "class", "queue", "amount", "submitted", "created", "quota_reserved", "admitted", "dispatched", "running", "unsuspended", "finished", "cluster", "evictions"}}
	rel := func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return strconv.FormatFloat(t.Sub(r.Start).Seconds(), 'f', 3, 64)
	}
	for _, rec := range r.Records {
		rows = append(rows, []string{rec.Key, rec.Class, strconv.Itoa(rec.Queue), fmtF(rec.Amount), rel(rec.Submitted), rel(rec.Created),
			rel(rec.QuotaReserved), rel(rec.Admitted), rel(rec.Dispatched), rel(rec.Running), rel(rec.Unsuspended), rel(rec.Finished), rec.Cluster, strconv.Itoa(rec.Evictions)})
	}
	return rows
}

func fmtF(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }

func writeCSV(path string, rows [][]string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	w := csv.NewWriter(f)
	if err := w.WriteAll(rows); err != nil {
		f.Close()
		return fmt.Errorf("report %s: %w", path, err)
	}
	return f.Close()
}
