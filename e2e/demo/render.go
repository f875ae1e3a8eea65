package demo

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
	"unicode/utf8"
)

// FrameOptions size and style a frame.
type FrameOptions struct {
	// Width and Height are the terminal's; a frame never exceeds them (Height 0: no limit).
	Width, Height int
	// Color adds ANSI colours.
	Color bool
	// Server is the management cluster's API server, for the header.
	Server string
}

// ANSI styles.
const (
	ansiReset  = "\x1b[0m"
	ansiBold   = "\x1b[1m"
	ansiDim    = "\x1b[2m"
	ansiRed    = "\x1b[31m"
	ansiGreen  = "\x1b[32m"
	ansiYellow = "\x1b[33m"
	ansiBlue   = "\x1b[34m"
	ansiCyan   = "\x1b[36m"
)

func (o FrameOptions) paint(style, text string) string {
	if !o.Color || style == "" || text == "" {
		return text
	}
	return style + text + ansiReset
}

// minWidth is the narrowest frame: below it columns would overlap.
const minWidth = 72

// RenderFrame draws the whole screen for s as lines, none wider than o.Width and no more than
// o.Height-1 of them (the cursor needs the last row). It is a pure function of its inputs.
func RenderFrame(s *State, o FrameOptions) []string {
	w := max(o.Width, minWidth)
	var head, story, queues, jobs []string

	title := fmt.Sprintf("fleetq demo · %s story · %s", s.Scenario, since(s.Now.Sub(s.Start)))
	right := ""
	if o.Server != "" {
		right = "management " + o.Server
	}
	head = append(head, o.paint(ansiBold, fit(title, w-runes(right)-1))+pad("", w-runes(fit(title, w-runes(right)-1))-runes(right))+o.paint(ansiDim, right))
	var ws []string
	for _, wk := range s.Workers {
		if wk.Active {
			ws = append(ws, wk.Name+" "+o.paint(ansiGreen, "● connected"))
		} else {
			msg := "○ not connected"
			if wk.Message != "" {
				msg += ": " + wk.Message
			}
			ws = append(ws, wk.Name+" "+o.paint(ansiRed, msg))
		}
	}
	if len(ws) == 0 {
		ws = []string{o.paint(ansiYellow, "none registered yet")}
	}
	head = append(head, clip("workers  "+strings.Join(ws, "   "), w))

	story = append(story, "", o.paint(ansiBold, "STORY"))
	for _, m := range s.Milestones {
		if m.Reached {
			line := fmt.Sprintf(" %s %s", o.paint(ansiGreen, "✓"), fit(m.Title, w-11))
			story = append(story, padRight(line, w-7)+o.paint(ansiDim, fmt.Sprintf("%7s", since(m.At))))
		} else {
			story = append(story, o.paint(ansiDim, " · "+fit(m.Title, w-3)))
		}
		if m.Reached && m.Detail != "" {
			for _, l := range wrap(m.Detail, w-5, 3) {
				story = append(story, o.paint(ansiYellow, "     "+l))
			}
		}
	}

	// The bar takes what the fixed columns leave, 12 to 24 cells.
	cells := min(max(w-56, 12), 24)
	legend := "GPUS"
	if cells >= 22 {
		legend = "GPUS █ own ▓ borrowed"
	}
	queues = append(queues, "", o.paint(ansiBold, fmt.Sprintf("%-17s %-6s %-*s %6s %9s %5s %5s", "CLUSTERQUEUE", "FLAVOR", cells+2, legend, "USED", "BORROWED", "PEND", "ADMIT")))
	for _, q := range s.Queues {
		for i, f := range q.Flavors {
			name, pending, reserving := "", "", ""
			if i == 0 {
				name, pending, reserving = q.Name, fmt.Sprint(q.Pending), fmt.Sprint(q.Admitted)
			}
			borrowed := "-"
			if f.BorrowingLimit >= 0 {
				borrowed = fmt.Sprintf("%d of ≤%d", f.Borrowed, f.BorrowingLimit)
			} else if f.Borrowed > 0 {
				borrowed = fmt.Sprint(f.Borrowed)
			}
			bStyle := ""
			if f.Borrowed > 0 {
				bStyle = ansiYellow
			}
			queues = append(queues, fmt.Sprintf("%-17s %-6s %s %6s %s %5s %5s", fit(name, 17), fit(flavorModel(f.Flavor), 6), bar(f, cells, o),
				fmt.Sprintf("%d/%d", f.Used, f.Nominal), o.paint(bStyle, fmt.Sprintf("%9s", borrowed)), pending, reserving))
		}
	}

	jobs = append(jobs, "", o.paint(ansiBold, fmt.Sprintf("%-20s %-9s %-11s %-8s %7s  %s", "JOB", "GPUS", "STATE", "CLUSTER", "WAITED", "WHY / WHERE")))
	whyWidth := w - (20 + 1 + 9 + 1 + 11 + 1 + 8 + 1 + 7 + 2)
	for _, j := range s.Jobs {
		cluster := j.Cluster
		if cluster == "" {
			cluster = "-"
		}
		waited := "-"
		switch {
		case !j.Admitted.IsZero():
			waited = since(j.Admitted.Sub(j.Submitted))
		case !j.Phase.done():
			waited = since(s.Now.Sub(j.Submitted)) + "…"
		}
		jobs = append(jobs, fmt.Sprintf("%-20s %-9s %s %-8s %7s  %s", fit(j.Spec.Key(), 20), j.Spec.Shape(),
			o.paint(phaseStyle(j.Phase), fmt.Sprintf("%-11s", j.Phase)), fit(cluster, 8), waited, o.paint(whyStyle(j), fit(why(j), whyWidth))))
	}

	// Fit the terminal: the header and queues always; then the jobs; the story whole or as one
	// line; the most recent events in what is left.
	nEvents := 8
	if o.Height > 0 {
		rest := o.Height - 1 - len(head) - len(queues)
		compact := []string{"", compactStory(s, w, o)}
		switch {
		case rest >= len(jobs)+len(story)+3:
		case rest >= len(jobs)+len(compact):
			story = compact
		default:
			story = compact
			jobs = clampJobs(s, jobs, max(rest-len(story)-1, 4), o)
		}
		nEvents = min(rest-len(jobs)-len(story)-2, 12)
	}
	lines := append(append(append(append([]string{}, head...), story...), queues...), jobs...)
	if evs := s.Events; nEvents > 0 {
		lines = append(lines, "", o.paint(ansiBold, "EVENTS"))
		if len(evs) > nEvents {
			evs = evs[len(evs)-nEvents:]
		}
		for _, e := range evs {
			lines = append(lines, o.paint(eventStyle(e.Kind), fit(FormatEvent(e), w)))
		}
	}
	if o.Height > 0 && len(lines) > o.Height-1 {
		lines = lines[:max(o.Height-1, 1)]
	}
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	return lines
}

// clampJobs keeps at most keep lines of the jobs table (its blank line and header included), hiding
// finished jobs first, then the last rows, and says how many it hid.
func clampJobs(s *State, rows []string, keep int, o FrameOptions) []string {
	if len(rows) <= keep {
		return rows
	}
	out := rows[:2:2]
	room := keep - 2 - 1
	over := len(rows) - 2 - room
	hiddenDone, hidden := 0, 0
	for i, j := range s.Jobs {
		if over > 0 && j.Phase.done() {
			over--
			hiddenDone++
			continue
		}
		if len(out)-2 >= room {
			hidden++
			continue
		}
		out = append(out, rows[2+i])
	}
	msg := fmt.Sprintf(" … %d more jobs", hidden+hiddenDone)
	if hiddenDone > 0 {
		msg += fmt.Sprintf(" (%d finished)", hiddenDone)
	}
	return append(out, o.paint(ansiDim, msg+"; a taller terminal shows them"))
}

// compactStory is the story in one line: a mark per milestone and the latest one reached.
func compactStory(s *State, w int, o FrameOptions) string {
	var marks strings.Builder
	latest := "the story begins"
	for _, m := range s.Milestones {
		if m.Reached {
			marks.WriteString(o.paint(ansiGreen, "✓"))
			latest = m.Title
		} else {
			marks.WriteString(o.paint(ansiDim, "·"))
		}
	}
	prefix := "STORY " + marks.String() + " "
	return o.paint(ansiBold, "STORY ") + marks.String() + " " + fit(latest, w-visible(prefix))
}

// why is the last column of a job's row: the reason it waits, where it ran, who preempted it.
func why(j *JobView) string {
	switch j.Phase {
	case PhaseRunning, PhaseAdmitted, PhaseDispatching:
		s := ""
		if j.Borrowing {
			s = "on borrowed quota"
		}
		if j.Phase == PhaseDispatching && j.Detail != "" {
			s = join(s, j.Detail)
		}
		if j.Preemptions > 0 {
			s = join(s, fmt.Sprintf("run %d (preempted %s)", len(j.Ran)+btoi(j.Phase != PhaseRunning), times(j.Preemptions)))
		}
		return s
	case PhaseFinished, PhaseFailed:
		s := ranOn(j.Ran)
		if j.Preemptions > 0 {
			s = join(s, fmt.Sprintf("preempted %s", times(j.Preemptions)))
		}
		if j.Phase == PhaseFailed {
			s = join(s, j.Detail)
		}
		return s
	}
	return j.Detail
}

// ranOn says where a job's runs were: "ran on us-east", "ran twice on us-east", "ran on us-east,
// then eu-west".
func ranOn(runs []string) string {
	switch {
	case len(runs) == 0:
		return ""
	case len(runs) == 1:
		return "ran on " + runs[0]
	}
	for _, r := range runs[1:] {
		if r != runs[0] {
			return "ran on " + strings.Join(runs, ", then ")
		}
	}
	if len(runs) == 2 {
		return "ran twice on " + runs[0]
	}
	return fmt.Sprintf("ran %d times on %s", len(runs), runs[0])
}

// plural is "1 job", "2 jobs".
func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

func join(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "; " + b
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func times(n int) string {
	if n == 1 {
		return "once"
	}
	return fmt.Sprintf("%d times", n)
}

func whyStyle(j *JobView) string {
	switch {
	case j.NoPlacement:
		return ansiYellow
	case j.Phase == PhasePreempted:
		return ansiRed
	case j.Borrowing:
		return ansiYellow
	}
	return ansiDim
}

func phaseStyle(p Phase) string {
	switch p {
	case PhaseRunning:
		return ansiGreen
	case PhaseDispatching, PhaseAdmitted:
		return ansiCyan
	case PhasePending, PhaseBackoff, PhaseSubmitted:
		return ansiYellow
	case PhasePreempted, PhaseEvicted, PhaseFailed:
		return ansiRed
	case PhaseFinished:
		return ansiDim
	}
	return ""
}

func eventStyle(k EventKind) string {
	switch k {
	case EventStep:
		return ansiBold
	case EventMilestone:
		return ansiGreen
	case EventPreempted, EventWorker:
		return ansiRed
	case EventRequeued, EventExplained:
		return ansiYellow
	case EventFinished:
		return ansiDim
	case EventRunning:
		return ansiBlue
	}
	return ""
}

// flavorModel shortens a flavor name for its column ("a100-flavor" → "A100").
func flavorModel(flavor string) string {
	return strings.ToUpper(strings.TrimSuffix(flavor, "-flavor"))
}

// bar draws a flavor's usage over nominal+borrowingLimit cells: █ used within nominal, ▓ borrowed,
// ░ free nominal, · room it may still borrow.
func bar(f FlavorView, cells int, o FrameOptions) string {
	capacity := f.Nominal + max(f.BorrowingLimit, 0)
	if capacity <= 0 {
		return "[" + strings.Repeat(" ", cells) + "]"
	}
	at := func(v int64) int { return int((v*int64(cells) + capacity/2) / capacity) }
	nominal := at(f.Nominal)
	own := at(min(f.Used, f.Nominal))
	used := min(at(f.Used), cells)
	var b strings.Builder
	b.WriteString(o.paint(ansiGreen, strings.Repeat("█", own)))
	b.WriteString(o.paint(ansiYellow, strings.Repeat("▓", max(used-own, 0))))
	b.WriteString(o.paint(ansiDim, strings.Repeat("░", max(nominal-max(used, own), 0))))
	b.WriteString(o.paint(ansiDim, strings.Repeat("·", cells-max(nominal, used))))
	return "[" + b.String() + "]"
}

// FormatEvent is one event as a log line: "+12.3s  text".
func FormatEvent(e Event) string { return fmt.Sprintf("%7s  %s", "+"+since(e.At), e.Text) }

// StatusLine is the one-line state plain output prints periodically.
func StatusLine(s *State) string {
	var qs []string
	for _, q := range s.Queues {
		var fs []string
		for _, f := range q.Flavors {
			t := fmt.Sprintf("%s %d/%d", flavorModel(f.Flavor), f.Used, f.Nominal)
			if f.Borrowed > 0 {
				t += fmt.Sprintf(" (%d borrowed)", f.Borrowed)
			}
			fs = append(fs, t)
		}
		qs = append(qs, q.Name+" "+strings.Join(fs, ", "))
	}
	counts := map[Phase]int{}
	for _, j := range s.Jobs {
		counts[j.Phase]++
	}
	var cs []string
	for _, p := range []Phase{PhaseRunning, PhaseDispatching, PhaseAdmitted, PhasePending, PhaseBackoff, PhasePreempted, PhaseFinished, PhaseFailed} {
		if counts[p] > 0 {
			cs = append(cs, fmt.Sprintf("%d %s", counts[p], p))
		}
	}
	return fmt.Sprintf("%7s  [status] %s · jobs: %s", "+"+since(s.Now.Sub(s.Start)), strings.Join(qs, " · "), strings.Join(cs, ", "))
}

// Summary is the story's outcome, printed at the end and returned to tests.
type Summary struct {
	Scenario string
	// Elapsed runs from the first submission to the last job's end.
	Elapsed time.Duration
	// Finished and Failed count the jobs that can run; Total is how many can.
	Finished, Failed, Total int
	// Stuck are the jobs left pending on purpose, with why.
	Stuck []*JobView
	// Runs counts runs per worker and GPU model ("us-east A100").
	Runs map[string]int
	// Preempted lists the preempted jobs; Preemptions counts preemptions.
	Preempted   []string
	Preemptions int
	// PeakBorrowed is the most GPUs each team borrowed per flavor ("research A100" → 8).
	PeakBorrowed map[string]int64
	// Waits are each job's time from submission to its first admission, sorted.
	Waits []time.Duration
	// LongestWait is the job that waited longest.
	LongestWait string
}

// Summarize computes the summary of s.
func Summarize(s *State) Summary {
	sum := Summary{Scenario: s.Scenario, Runs: map[string]int{}, PeakBorrowed: map[string]int64{}}
	var last time.Time
	var longest time.Duration
	for _, j := range s.Jobs {
		if j.Spec.Stuck {
			sum.Stuck = append(sum.Stuck, j)
			continue
		}
		sum.Total++
		switch j.Phase {
		case PhaseFinished:
			sum.Finished++
		case PhaseFailed:
			sum.Failed++
		}
		if j.Ended.After(last) {
			last = j.Ended
		}
		for _, c := range j.Ran {
			sum.Runs[c+" "+j.Spec.GPUModel()]++
		}
		if j.Preemptions > 0 {
			sum.Preempted = append(sum.Preempted, j.Spec.Key())
			sum.Preemptions += j.Preemptions
		}
		if !j.Admitted.IsZero() {
			wait := j.Admitted.Sub(j.Submitted)
			sum.Waits = append(sum.Waits, wait)
			if wait > longest {
				longest, sum.LongestWait = wait, j.Spec.Key()
			}
		}
	}
	if !last.IsZero() {
		sum.Elapsed = last.Sub(s.Start)
	}
	for _, q := range s.Queues {
		for _, f := range q.Flavors {
			if b := s.peakBorrowed[q.Name+"/"+f.Flavor]; b > 0 {
				sum.PeakBorrowed[strings.TrimSuffix(q.Name, "-gpu-cq")+" "+flavorModel(f.Flavor)] = b
			}
		}
	}
	sort.Slice(sum.Waits, func(i, j int) bool { return sum.Waits[i] < sum.Waits[j] })
	return sum
}

// Lines renders the summary for the terminal.
func (sum Summary) Lines() []string {
	out := []string{fmt.Sprintf("Summary of the %s story (%s from the first job to the last one's end)", sum.Scenario, since(sum.Elapsed))}
	row := func(k, v string) { out = append(out, fmt.Sprintf("  %-18s %s", k, v)) }
	done := fmt.Sprintf("%d of %d", sum.Finished, sum.Total)
	if sum.Failed > 0 {
		done += fmt.Sprintf(", %d failed", sum.Failed)
	}
	row("jobs finished", done)
	var where []string
	for _, k := range sortedKeys(sum.Runs) {
		cluster, model, _ := strings.Cut(k, " ")
		where = append(where, fmt.Sprintf("%s: %s", cluster, plural(sum.Runs[k], model+" run")))
	}
	if sum.Preemptions > 0 {
		where = append(where, fmt.Sprintf("(%s after preemption)", plural(sum.Preemptions, "re-run")))
	}
	row("where they ran", strings.Join(where, " · "))
	var borrowed []string
	for _, k := range sortedKeys(sum.PeakBorrowed) {
		borrowed = append(borrowed, fmt.Sprintf("%s borrowed up to %d GPUs", k, sum.PeakBorrowed[k]))
	}
	if len(borrowed) == 0 {
		borrowed = []string{"none"}
	}
	row("borrowing", strings.Join(borrowed, " · "))
	pre := fmt.Sprint(sum.Preemptions)
	if len(sum.Preempted) > 0 {
		pre += ": " + strings.Join(sum.Preempted, ", ") + " (requeued, then ran again)"
	}
	row("preemptions", pre)
	if n := len(sum.Waits); n > 0 {
		row("time to admission", fmt.Sprintf("median %s · p90 %s · longest %s (%s)", since(sum.Waits[n/2]), since(sum.Waits[(n*9)/10]), since(sum.Waits[n-1]), sum.LongestWait))
	}
	for _, j := range sum.Stuck {
		row("left pending", fmt.Sprintf("%s (%s): %s", j.Spec.Key(), j.Spec.Shape(), j.Detail))
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// since formats a duration for the screen: 0.4s, 12.3s, 1m05s.
func since(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	if d < time.Minute {
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	d = d.Round(time.Second)
	return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
}

func runes(s string) int { return utf8.RuneCountInString(s) }

// fit cuts s to n runes, marking the cut with "…".
func fit(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if runes(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

func pad(s string, n int) string {
	if k := runes(s); k < n {
		return s + strings.Repeat(" ", n-k)
	}
	return s
}

// visible is the width of s without ANSI escapes.
func visible(s string) int { return runes(stripANSI(s)) }

// padRight pads a possibly coloured s to n visible columns.
func padRight(s string, n int) string {
	if k := visible(s); k < n {
		return s + strings.Repeat(" ", n-k)
	}
	return s
}

// clip cuts a possibly coloured line to n visible columns; a cut line loses its colours.
func clip(s string, n int) string {
	if visible(s) <= n {
		return s
	}
	return fit(stripANSI(s), n)
}

func stripANSI(s string) string {
	var b strings.Builder
	esc := false
	for _, r := range s {
		switch {
		case esc:
			esc = r != 'm'
		case r == '\x1b':
			esc = true
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// wrap breaks s into at most maxLines lines of n runes, at spaces where it can.
func wrap(s string, n, maxLines int) []string {
	var out []string
	for s != "" && len(out) < maxLines {
		if runes(s) <= n {
			out = append(out, s)
			break
		}
		r := []rune(s)
		cut := n
		for i := n; i > n/2; i-- {
			if r[i] == ' ' {
				cut = i
				break
			}
		}
		if len(out) == maxLines-1 {
			out = append(out, fit(s, n))
			break
		}
		out = append(out, string(r[:cut]))
		s = strings.TrimLeft(string(r[cut:]), " ")
	}
	return out
}

// Screen shows a running story: in place on a terminal, as log lines otherwise.
type Screen struct {
	Out io.Writer
	// TTY redraws one frame in place (ANSI); otherwise events are printed as they happen, with a
	// status line every StatusEvery.
	TTY         bool
	Options     FrameOptions
	StatusEvery time.Duration
	// Size, when set, gives the terminal's current width and height before each frame.
	Size func() (width, height int)

	drawn      int
	printed    int
	lastStatus time.Duration
}

// Update shows the state's latest changes.
func (sc *Screen) Update(s *State) {
	if sc.TTY {
		if sc.Size != nil {
			sc.Options.Width, sc.Options.Height = sc.Size()
		}
		sc.redraw(RenderFrame(s, sc.Options))
		return
	}
	for ; sc.printed < len(s.Events); sc.printed++ {
		fmt.Fprintln(sc.Out, FormatEvent(s.Events[sc.printed]))
	}
	every := sc.StatusEvery
	if every == 0 {
		every = 10 * time.Second
	}
	if at := s.Now.Sub(s.Start); at-sc.lastStatus >= every {
		sc.lastStatus = at
		fmt.Fprintln(sc.Out, StatusLine(s))
	}
}

// redraw moves the cursor to the first line of the previous frame and overwrites it.
func (sc *Screen) redraw(lines []string) {
	var b strings.Builder
	if sc.drawn > 0 {
		fmt.Fprintf(&b, "\x1b[%dA\r", sc.drawn)
	}
	for _, l := range lines {
		b.WriteString("\x1b[2K")
		b.WriteString(l)
		b.WriteString("\n")
	}
	b.WriteString("\x1b[J")
	_, _ = io.WriteString(sc.Out, b.String())
	sc.drawn = len(lines)
}

// Final shows the last state and the summary.
func (sc *Screen) Final(s *State) {
	if sc.TTY {
		sc.Update(s)
	} else {
		sc.Update(s)
		fmt.Fprintln(sc.Out, StatusLine(s))
	}
	fmt.Fprintln(sc.Out)
	for _, l := range Summarize(s).Lines() {
		fmt.Fprintln(sc.Out, l)
	}
}
