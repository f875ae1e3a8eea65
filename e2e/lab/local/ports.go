package local

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"syscall"
)

// portPicker hands out distinct free loopback ports. It keeps each port's listener open until release,
// so clusters starting in parallel never get the same port; between release and the server binding it
// another program could take it, which startup detects and retries.
type portPicker struct {
	listeners []net.Listener
}

func (pp *portPicker) pick() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pick a free port on 127.0.0.1: %w", err)
	}
	pp.listeners = append(pp.listeners, l)
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (pp *portPicker) release() {
	for _, l := range pp.listeners {
		l.Close()
	}
	pp.listeners = nil
}

// CheckPortFree reports whether port can be bound on 127.0.0.1 right now.
func CheckPortFree(port int) error {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return fmt.Errorf("port %d on 127.0.0.1 is in use by another program", port)
		}
		return fmt.Errorf("port %d on 127.0.0.1 cannot be used: %w", port, err)
	}
	return l.Close()
}
