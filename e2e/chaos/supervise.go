package chaos

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/fleetq/fleetq/e2e/framework"
	"github.com/fleetq/fleetq/e2e/lab/process"
)

// restartDelay is how long an exited component stays down before it is started again: the
// kubelet's first crash-loop back-off.
const restartDelay = 10 * time.Second

// Restart is one exit of a component by itself and the restart that followed.
type Restart struct {
	Component string
	At        time.Time
	// Why is the exit status and the last lines of its log.
	Why string
	// Crashed is a panic or a fatal error, rather than a deliberate exit (controller-runtime
	// ends the process when it cannot renew its leader lease).
	Crashed bool
}

// supervisor restarts fleetq's components when they exit by themselves, as the kubelet restarts
// a Deployment's container: an agent whose own API server stalls past its leader lease exits,
// and in a real cluster it is back seconds later. A fault that kills a component on purpose
// holds it until the fault heals.
type supervisor struct {
	mu       sync.Mutex
	comps    map[string]*framework.Component
	held     map[*framework.Component]bool
	exited   map[*framework.Component]time.Time
	restarts []Restart
}

func newSupervisor(comps map[string]*framework.Component) *supervisor {
	return &supervisor{comps: comps, held: map[*framework.Component]bool{}, exited: map[*framework.Component]time.Time{}}
}

// hold keeps a component down for a fault until release.
func (s *supervisor) hold(c *framework.Component) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.held[c] = true
}

func (s *supervisor) release(c *framework.Component) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.held, c)
	delete(s.exited, c)
}

// run restarts exited components until ctx ends.
func (s *supervisor) run(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.tick(ctx)
		}
	}
}

func (s *supervisor) tick(ctx context.Context) {
	names := make([]string, 0, len(s.comps))
	for n := range s.comps {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		c := s.comps[name]
		s.mu.Lock()
		if s.held[c] || c.Running() {
			s.mu.Unlock()
			continue
		}
		since, seen := s.exited[c]
		if !seen {
			s.exited[c] = time.Now()
			s.mu.Unlock()
			continue
		}
		s.mu.Unlock()
		if time.Since(since) < restartDelay {
			continue
		}
		tail := process.Tail(c.LogPath(), 5)
		r := Restart{Component: name, At: time.Now(), Why: fmt.Sprintf("%v; log: %s", c.Err(), lastLine(tail)),
			Crashed: strings.Contains(tail, "panic") || strings.Contains(tail, "fatal error")}
		if err := c.Restart(ctx); err != nil {
			r.Why += fmt.Sprintf("; restart failed: %v", err)
		}
		s.mu.Lock()
		delete(s.exited, c)
		s.restarts = append(s.restarts, r)
		s.mu.Unlock()
	}
}

// Restarts lists the restarts so far.
func (s *supervisor) Restarts() []Restart {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Restart(nil), s.restarts...)
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	l := lines[len(lines)-1]
	if len(l) > 300 {
		l = l[:300] + "…"
	}
	return l
}
