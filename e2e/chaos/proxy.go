package chaos

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
)

// Proxy forwards TCP connections from a loopback port to the first of its targets that accepts
// one. It stands between the manager and a worker's API server, so a partition can cut that path
// alone (the agent and the test's watchers reach the worker directly), and before the manager
// replicas' webhook servers, as a Service before two pods.
type Proxy struct {
	targets []string
	l       net.Listener

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	// cut holds new connections without forwarding a byte (a partition drops packets; clients
	// time out rather than being refused) until Heal closes them.
	cut  bool
	held []net.Conn
}

// Listen starts a proxy on a free loopback port.
func Listen(targets ...string) (*Proxy, error) {
	if len(targets) == 0 {
		return nil, errors.New("proxy: no target")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("proxy to %v: %w", targets, err)
	}
	p := &Proxy{targets: targets, l: l, conns: map[net.Conn]struct{}{}}
	go p.serve()
	return p, nil
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.l.Addr().String() }

func (p *Proxy) serve() {
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.cut {
			p.held = append(p.held, c)
			p.mu.Unlock()
			continue
		}
		p.mu.Unlock()
		go p.forward(c)
	}
}

func (p *Proxy) forward(c net.Conn) {
	var up net.Conn
	var err error
	for _, t := range p.targets {
		if up, err = net.Dial("tcp", t); err == nil {
			break
		}
	}
	if err != nil {
		_ = c.Close()
		return
	}
	p.mu.Lock()
	if p.cut {
		p.mu.Unlock()
		_ = c.Close()
		_ = up.Close()
		return
	}
	p.conns[c], p.conns[up] = struct{}{}, struct{}{}
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go pipe(up, c)
	go pipe(c, up)
	<-done
	_ = c.Close()
	_ = up.Close()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, up)
	p.mu.Unlock()
}

// Cut partitions the path: open connections break, new ones hang.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		_ = c.Close()
	}
}

// Heal ends a partition: held connections are closed (their clients retry) and new ones forward.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
	for _, c := range p.held {
		_ = c.Close()
	}
	p.held = nil
}

// Close stops the proxy and every connection through it.
func (p *Proxy) Close() error {
	err := p.l.Close()
	p.Cut()
	p.Heal()
	return err
}
