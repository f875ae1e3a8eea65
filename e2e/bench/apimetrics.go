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

// APIMetrics are the counters the bench reads from an API server's /metrics.
type APIMetrics struct {
	// Requests is apiserver_request_total summed by verb (every client: the metric has no client
	// label; the audit log has).
	Requests RequestCounts
	// Webhooks is apiserver_admission_webhook_admission_duration_seconds per webhook and
	// operation ("mjob.fleetq.dev CREATE").
	Webhooks Webhooks
}

// WebhookTime is how often an API server called admission webhooks and how long it waited.
type WebhookTime struct {
	Calls, Seconds float64
}

// Webhooks are webhook calls by webhook name and operation.
type Webhooks map[string]WebhookTime

// Minus is w - o per webhook and operation.
func (w Webhooks) Minus(o Webhooks) Webhooks {
	out := Webhooks{}
	for k, t := range w {
		if d := (WebhookTime{Calls: t.Calls - o[k].Calls, Seconds: t.Seconds - o[k].Seconds}); d.Calls != 0 {
			out[k] = d
		}
	}
	return out
}

// Total sums every webhook and operation.
func (w Webhooks) Total() WebhookTime {
	var t WebhookTime
	for _, x := range w {
		t.Calls, t.Seconds = t.Calls+x.Calls, t.Seconds+x.Seconds
	}
	return t
}

// webhookMetric is the API server's histogram of the time each admission webhook call took.
const webhookMetric = "apiserver_admission_webhook_admission_duration_seconds"

// ScrapeMetrics reads an API server's /metrics: request counts by verb, webhook calls by webhook and
// operation.
func ScrapeMetrics(ctx context.Context, cs kubernetes.Interface) (APIMetrics, error) {
	body, err := cs.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return APIMetrics{}, fmt.Errorf("apiserver /metrics: %w", err)
	}
	return parseMetrics(strings.NewReader(string(body)))
}

// parseMetrics sums apiserver_request_total samples by their verb label, and the webhook
// histogram's _count and _sum per webhook and operation (over its types and outcomes).
func parseMetrics(r io.Reader) (APIMetrics, error) {
	out := APIMetrics{Requests: RequestCounts{}, Webhooks: Webhooks{}}
	hook := func(labels string) string { return labelValue(labels, "name") + " " + labelValue(labels, "operation") }
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		name, _, ok := strings.Cut(line, "{")
		if !ok {
			continue
		}
		var add func(labels string, v float64)
		switch name {
		case "apiserver_request_total":
			add = func(labels string, v float64) { out.Requests[strings.ToLower(labelValue(labels, "verb"))] += v }
		case webhookMetric + "_count":
			add = func(labels string, v float64) {
				t := out.Webhooks[hook(labels)]
				t.Calls += v
				out.Webhooks[hook(labels)] = t
			}
		case webhookMetric + "_sum":
			add = func(labels string, v float64) {
				t := out.Webhooks[hook(labels)]
				t.Seconds += v
				out.Webhooks[hook(labels)] = t
			}
		default:
			continue
		}
		end := strings.LastIndexByte(line, '}')
		if end < 0 {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(line[end+1:]), 64)
		if err != nil {
			return APIMetrics{}, fmt.Errorf("%s: %q: %w", name, line, err)
		}
		add(line[:end], v)
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
