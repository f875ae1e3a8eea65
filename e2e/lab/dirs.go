package lab

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Module is fleetq's module path; a go.mod declaring it marks the repository root.
const Module = "github.com/fleetq/fleetq"

// Environment variables that point the lab at its directories.
const (
	// EnvLabDir overrides the default lab directory.
	EnvLabDir = "FLEETQ_LAB_DIR"
	// EnvBinDir names the directory holding the pinned control-plane binaries (`make tools`).
	EnvBinDir = "FLEETQ_BIN_DIR"
)

// Binary names the lab starts.
const (
	Etcd                  = "etcd"
	KubeAPIServer         = "kube-apiserver"
	KubeControllerManager = "kube-controller-manager"
	KubeScheduler         = "kube-scheduler"
	Kwok                  = "kwok"
)

// BinariesFor lists the binaries a cluster in mode needs.
func BinariesFor(mode Mode) []string {
	if mode == ModeAPIServer {
		return []string{Etcd, KubeAPIServer}
	}
	return []string{Etcd, KubeAPIServer, KubeControllerManager, KubeScheduler, Kwok}
}

// RepoRoot walks up from the working directory to the directory whose go.mod declares Module.
func RepoRoot() (string, bool) {
	dir, err := os.Getwd()
	if err != nil {
		return "", false
	}
	for {
		if isRepoRoot(dir) {
			return dir, true
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", false
		}
		dir = parent
	}
}

func isRepoRoot(dir string) bool {
	f, err := os.Open(filepath.Join(dir, "go.mod"))
	if err != nil {
		return false
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if line := strings.TrimSpace(s.Text()); strings.HasPrefix(line, "module ") {
			return strings.TrimSpace(strings.TrimPrefix(line, "module ")) == Module
		}
	}
	return false
}

// ResolveDir picks the lab directory: flag if set, else $FLEETQ_LAB_DIR, else <repo root>/_lab
// (git-ignored) when run inside the repository, else ~/.fleetq/lab. The result is absolute.
func ResolveDir(flag string) (string, error) {
	dir := flag
	if dir == "" {
		dir = os.Getenv(EnvLabDir)
	}
	if dir == "" {
		if root, ok := RepoRoot(); ok {
			dir = filepath.Join(root, "_lab")
		}
	}
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("lab dir: no --dir, no $%s, not in the fleetq repository, and no home directory: %w", EnvLabDir, err)
		}
		dir = filepath.Join(home, ".fleetq", "lab")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("lab dir %s: %w", dir, err)
	}
	return abs, nil
}

// FindBinDir locates the control-plane binaries: $FLEETQ_BIN_DIR if set (and then only there), else
// <repo root>/bin, else the directory of the running executable (where `make build` puts fleetq-lab).
func FindBinDir() (string, error) {
	if dir := os.Getenv(EnvBinDir); dir != "" {
		return filepath.Abs(dir)
	}
	var tried []string
	if root, ok := RepoRoot(); ok {
		dir := filepath.Join(root, "bin")
		if hasFile(filepath.Join(dir, KubeAPIServer)) {
			return dir, nil
		}
		tried = append(tried, dir)
	}
	if exe, err := os.Executable(); err == nil {
		dir := filepath.Dir(exe)
		if hasFile(filepath.Join(dir, KubeAPIServer)) {
			return dir, nil
		}
		tried = append(tried, dir)
	}
	return "", fmt.Errorf("control-plane binaries not found (looked in %s): run 'make tools' in the fleetq repository, or set $%s",
		strings.Join(tried, ", "), EnvBinDir)
}

// CheckBinaries reports every binary of names missing or not executable in dir.
func CheckBinaries(dir string, names []string) error {
	var errs []error
	for _, n := range names {
		p := filepath.Join(dir, n)
		info, err := os.Stat(p)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("binary %s: not found in %s: run 'make tools' (or set $%s)", n, dir, EnvBinDir))
		case info.IsDir() || info.Mode().Perm()&0o111 == 0:
			errs = append(errs, fmt.Errorf("binary %s: %s is not an executable file", n, p))
		}
	}
	return errors.Join(errs...)
}

func hasFile(p string) bool {
	info, err := os.Stat(p)
	return err == nil && !info.IsDir()
}
