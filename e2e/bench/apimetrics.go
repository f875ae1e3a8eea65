package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
)

// writeVerbs are the audit and metrics verbs that change state.
// (apiserver_request_total's verbs are lowered: post, put, apply.)
var writeVerbs = map[string]bool{
	"create": true, "update": true, "patch": true, "delete": true, "deletecollection": true,
	"post": true, "put": true, "apply": true,
}

// RequestCounts are API requests by verb.
type RequestCounts map[string]float64

// Total is the sum over verbs.
func (c RequestCounts) Total() float64 {
	t := 0.0
	for _, v := range c {
		t += v
	}
	return t
}

// Writes is the sum over verbs that change state.
func (c RequestCounts) Writes() float64 {
	t := 0.0
	for v, n := range c {
		if writeVerbs[v] {
			t += n
		}
	}
	return t
}

// Minus is c - o per verb.
func (c RequestCounts) Minus(o RequestCounts) RequestCounts {
	out := RequestCounts{}
	for v, n := range c {
		if d := n - o[v]; d != 0 {
			out[v] = d
		}
	}
	return out
}

// scrapeRequests reads apiserver_request_total from an API server's /metrics, summed by verb (every
// client: the metric has no client label; the audit log has).
func scrapeRequests(ctx context.Context, cs kubernetes.Interface) (RequestCounts, error) {
	body, err := cs.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("apiserver /metrics: %w", err)
	}
	return parseRequestTotal(strings.NewReader(string(body)))
}

// parseRequestTotal sums apiserver_request_total samples by their verb label.
func parseRequestTotal(r io.Reader) (RequestCounts, error) {
	out := RequestCounts{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		end := strings.LastIndexByte(line, '}')
		if end < 0 {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(line[end+1:]), 64)
		if err != nil {
			return nil, fmt.Errorf("apiserver_request_total: %q: %w", line, err)
		}
		verb := labelValue(line[:end], "verb")
		out[strings.ToLower(verb)] += v
	}
	return out, sc.Err()
}

func labelValue(labels, name string) string {
	i := strings.Index(labels, name+`="`)
	if i < 0 {
		return ""
	}
	rest := labels[i+len(name)+2:]
	j := strings.IndexByte(rest, '"')
	if j < 0 {
		return ""
	}
	return rest[:j]
}

// auditEvent is the part of an audit.k8s.io/v1 Event the bench reads.
type auditEvent struct {
	Stage                    string    `json:"stage"`
	Verb                     string    `json:"verb"`
	UserAgent                string    `json:"userAgent"`
	RequestReceivedTimestamp time.Time `json:"requestReceivedTimestamp"`
	ObjectRef                *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
}

// AuditCounts are requests by client role (as System.Role classifies user agents; "other" for the
// rest) and verb, within a time window.
type AuditCounts map[string]RequestCounts

// ResourceWrites counts writes per role and resource[/subresource], to explain the totals.
type ResourceWrites map[string]map[string]float64

// readAudit counts the requests of an audit log received in [from, to]: each request once (its
// ResponseComplete event, or ResponseStarted for watches, which complete much later).
func readAudit(path string, from, to time.Time, role func(ua string) string) (AuditCounts, ResourceWrites, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("audit log: %w", err)
	}
	defer f.Close()
	counts, writes := AuditCounts{}, ResourceWrites{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev auditEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return nil, nil, fmt.Errorf("audit log %s: %w", path, err)
		}
		switch {
		case ev.Verb == "watch" && ev.Stage != "ResponseStarted":
			continue
		case ev.Verb != "watch" && ev.Stage != "ResponseComplete" && ev.Stage != "Panic":
			continue
		}
		if ev.RequestReceivedTimestamp.Before(from) || ev.RequestReceivedTimestamp.After(to) {
			continue
		}
		r := role(ev.UserAgent)
		if r == "" {
			r = "other"
		}
		if counts[r] == nil {
			counts[r] = RequestCounts{}
		}
		counts[r][ev.Verb]++
		if writeVerbs[ev.Verb] && ev.ObjectRef != nil {
			if writes[r] == nil {
				writes[r] = map[string]float64{}
			}
			res := ev.ObjectRef.Resource
			if ev.ObjectRef.Subresource != "" {
				res += "/" + ev.ObjectRef.Subresource
			}
			writes[r][ev.Verb+" "+res]++
		}
	}
	return counts, writes, sc.Err()
}

// ProcStat is a process's CPU time and peak resident memory.
type ProcStat struct {
	CPUSeconds float64
	PeakRSSMiB float64
}

// clockTicks is USER_HZ, 100 on every Linux the lab runs on.
const clockTicks = 100

// readProcStat reads utime+stime from /proc/<pid>/stat and VmHWM from /proc/<pid>/status.
func readProcStat(pid int) (ProcStat, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ProcStat{}, fmt.Errorf("pid %d: %w", pid, err)
	}
	// The command name may hold spaces: fields start after the last ')'.
	s := string(data)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return ProcStat{}, fmt.Errorf("pid %d: short /proc stat", pid)
	}
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	st := ProcStat{CPUSeconds: (utime + stime) / clockTicks}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return st, fmt.Errorf("pid %d: %w", pid, err)
	}
	for line := range strings.SplitSeq(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			st.PeakRSSMiB = kb / 1024
		}
	}
	return st, nil
}
