package differential

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/fleetq/fleetq/e2e/bench"
	"github.com/fleetq/fleetq/manager/setup"
)

// Summary aggregates many scenarios' results.
type Summary struct {
	Total, Agreed, Differed, Failed int
	// ByKind counts differences per kind.
	ByKind map[Kind]int
	// Mean is the mean wall time per scenario (both systems play at once).
	Mean time.Duration
	// Exercised counts what Kueue did over all steps played, to show the scenarios reach
	// contention: Workloads that held quota at some step, evictions, Workloads left waiting at
	// the end of their scenario, and reservations over the queue's nominal quota (borrowing).
	Reserved, Evictions, Waiting, Borrowed int
}

// Summarize counts agreements and differences.
func Summarize(results []*Result) Summary {
	s := Summary{ByKind: map[Kind]int{}}
	var total time.Duration
	for _, r := range results {
		s.Total++
		total += r.Duration
		s.count(r)
		switch {
		case r.Error != "":
			s.Failed++
		case r.Difference != nil:
			s.Differed++
			s.ByKind[r.Difference.Kind]++
		default:
			s.Agreed++
		}
	}
	if s.Total > 0 {
		s.Mean = total / time.Duration(s.Total)
	}
	return s
}

func (s *Summary) count(r *Result) {
	reserved := map[string]bool{}
	for i, st := range r.Kueue {
		s.Evictions += len(st.Evictions)
		queues := r.Scenario.QueuesAt(i)
		for _, name := range st.State.reserved() {
			if !reserved[name] && overNominal(r.Scenario, queues, st.State, []string{name}) {
				s.Borrowed++
			}
			reserved[name] = true
		}
	}
	s.Reserved += len(reserved)
	if n := len(r.Kueue); n > 0 {
		last := r.Kueue[n-1].State
		s.Waiting += len(last.live()) - len(last.reserved())
	}
}

// AgreementRate is the share of the scenarios played to the end on which both systems agreed.
func (s Summary) AgreementRate() float64 {
	if played := s.Agreed + s.Differed; played > 0 {
		return float64(s.Agreed) / float64(played)
	}
	return 0
}

// WriteSummary writes the summary and one line per differing or failed scenario, in Markdown.
func WriteSummary(w io.Writer, results []*Result) {
	s := Summarize(results)
	fmt.Fprintf(w, "# Differential conformance: fleetq against Kueue %s\n\n", bench.KueueVersion)
	fmt.Fprintf(w, "| scenarios | agreed | differed | could not run | agreement | mean time per scenario |\n|---|---|---|---|---|---|\n")
	fmt.Fprintf(w, "| %d | %d | %d | %d | %.1f %% | %s |\n\n", s.Total, s.Agreed, s.Differed, s.Failed, 100*s.AgreementRate(), s.Mean.Round(100*time.Millisecond))
	fmt.Fprintf(w, "Over the steps played, Kueue reserved quota for %d Workloads (%d of them over their queue's nominal quota, borrowing), evicted %d times, and left %d waiting at the end.\n\n", s.Reserved, s.Borrowed, s.Evictions, s.Waiting)
	if len(s.ByKind) > 0 {
		kinds := make([]string, 0, len(s.ByKind))
		for k := range s.ByKind {
			kinds = append(kinds, string(k))
		}
		sort.Strings(kinds)
		fmt.Fprintf(w, "| difference | scenarios |\n|---|---|\n")
		for _, k := range kinds {
			fmt.Fprintf(w, "| %s | %d |\n", k, s.ByKind[Kind(k)])
		}
		fmt.Fprintln(w)
	}
	for _, r := range results {
		switch {
		case r.Error != "":
			fmt.Fprintf(w, "- seed %d could not run: %s\n", r.Scenario.Seed, r.Error)
		case r.Difference != nil:
			fmt.Fprintf(w, "- seed %d (%s): %s — reproduction in seed-%d/\n", r.Scenario.Seed, r.Scenario, r.Difference, r.Scenario.Seed)
		}
	}
}

// WriteReproduction writes what a person needs to replay a differing scenario by hand, into dir:
// result.json (everything recorded), queues.yaml (the objects to apply first) and steps.md (each
// step up to the difference, with the Workloads' manifests).
func WriteReproduction(dir string, r *Result) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "result.json"), data, 0o644); err != nil {
		return err
	}
	n := NamesFor(r.Scenario)
	queues, err := manifests(r.Scenario.Objects(n))
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "queues.yaml"), queues, 0o644); err != nil {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Seed %d\n\n%s\n\nApply queues.yaml, then each step; after each, wait until nothing changes and clear the reservation of every evicted Workload (the job's part).\n\n", r.Scenario.Seed, r.Scenario)
	last := len(r.Scenario.Steps) - 1
	if r.Difference != nil {
		last = r.Difference.Step
	}
	for i, st := range r.Scenario.Steps[:last+1] {
		fmt.Fprintf(&b, "## Step %d: %s\n\n", i, describe(st, n))
		if st.Kind == Create {
			var objs []client.Object
			for _, w := range st.Workloads {
				objs = append(objs, r.Scenario.WorkloadObject(n, w))
			}
			m, err := manifests(objs)
			if err != nil {
				return err
			}
			fmt.Fprintf(&b, "```yaml\n%s```\n\n", m)
		}
		if i < len(r.Kueue) && i < len(r.Fleetq) {
			fmt.Fprintf(&b, "| workload | kueue | fleetq |\n|---|---|---|\n")
			for _, name := range sortedNames(r.Kueue[i].State, r.Fleetq[i].State) {
				k, f := r.Kueue[i].State[name], r.Fleetq[i].State[name]
				fmt.Fprintf(&b, "| %s | %s%s | %s%s |\n", name, k, why(k), f, why(f))
			}
			fmt.Fprintf(&b, "\nEvicted: kueue %s; fleetq %s\n\n", evictionList(r.Kueue[i].Evictions), evictionList(r.Fleetq[i].Evictions))
		}
	}
	if r.Difference != nil {
		fmt.Fprintf(&b, "## Difference\n\n%s\n", r.Difference)
	}
	return os.WriteFile(filepath.Join(dir, "steps.md"), []byte(b.String()), 0o644)
}

func why(d Decision) string {
	if d.Why == "" {
		return ""
	}
	return ": " + strings.ReplaceAll(d.Why, "|", "/")
}

func describe(st Step, n Names) string {
	switch st.Kind {
	case Create:
		var names []string
		for _, w := range st.Workloads {
			names = append(names, w.Name)
		}
		return "create " + strings.Join(names, ", ") + " (one a second, in this order)"
	case Finish:
		if st.Target == "" {
			return "finish (nothing held quota)"
		}
		return "mark " + st.Target + " Finished"
	case Delete:
		if st.Target == "" {
			return "delete (nothing left)"
		}
		return "delete " + st.Target
	case EditQuota:
		return fmt.Sprintf("set the nominal quota of clusterqueue %s, flavor %s, to %v", n.ClusterQueue(st.Queue), n.Prefix+st.Flavor, st.Nominal)
	}
	return string(st.Kind)
}

func sortedNames(a, b State) []string {
	seen := map[string]bool{}
	for k := range a {
		seen[k] = true
	}
	for k := range b {
		seen[k] = true
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// manifests renders objects as a multi-document YAML a person can kubectl apply.
func manifests(objs []client.Object) ([]byte, error) {
	var out []byte
	for _, o := range objs {
		gvks, _, err := setup.Scheme().ObjectKinds(o)
		if err != nil {
			return nil, err
		}
		o.GetObjectKind().SetGroupVersionKind(gvks[0])
		data, err := yaml.Marshal(o)
		if err != nil {
			return nil, err
		}
		out = append(out, "---\n"...)
		out = append(out, data...)
	}
	return out, nil
}
