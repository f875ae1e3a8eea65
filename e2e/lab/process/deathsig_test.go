package process

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"

	"github.com/fleetq/fleetq/e2e/lab"
)

// asOwner makes the test binary start an owned sleeper, print its state and wait to be killed.
const asOwner = "FLEETQ_PROCESS_TEST_AS_OWNER"

func TestMain(m *testing.M) {
	if dir := os.Getenv(asOwner); dir != "" {
		os.Exit(runOwner(dir))
	}
	os.Exit(m.Run())
}

func runOwner(dir string) int {
	sleep, err := lookPath("sleep")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	// Start from a goroutine that then exits on a thread it retires, the case Pdeathsig gets wrong when
	// the child is forked from an arbitrary thread.
	started := make(chan *Process)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		p := &Process{Owner: "test", State: lab.ProcessState{Name: "sleep", Args: []string{sleep, "600"}, Log: filepath.Join(dir, "sleep.log")}}
		if err := p.Start(true); err != nil {
			fmt.Fprintln(os.Stderr, err)
			started <- nil
			return
		}
		started <- p
	}()
	p := <-started
	if p == nil {
		return 2
	}
	if err := json.NewEncoder(os.Stdout).Encode(p.State); err != nil {
		return 2
	}
	select {} // until killed
}

// An owned process dies with its owner, even when the owner is killed without a chance to clean up.
func TestOwnedProcessDiesWithOwner(t *testing.T) {
	owner := exec.Command(os.Args[0])
	owner.Env = append(os.Environ(), asOwner+"="+t.TempDir())
	out, err := owner.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	owner.Stderr = os.Stderr
	if err := owner.Start(); err != nil {
		t.Fatal(err)
	}
	var child lab.ProcessState
	if err := json.NewDecoder(bufio.NewReader(out)).Decode(&child); err != nil {
		_ = owner.Process.Kill()
		t.Fatalf("owner did not report its child: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-child.PID, syscall.SIGKILL) })
	if !Running(child) {
		t.Fatalf("child (pid %d) not running while its owner lives", child.PID)
	}

	if err := owner.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = owner.Wait()
	if err := poll(context.Background(), func() bool { return !Running(child) }, "owned child outlived its killed owner"); err != nil {
		t.Fatalf("%v (pid %d)", err, child.PID)
	}
}
