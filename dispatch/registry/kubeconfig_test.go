package registry

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPathKubeconfigsAreReadOnlyFromTheConfiguredDirectory(t *testing.T) {
	dir := t.TempDir()
	kc := filepath.Join(dir, "worker-1")
	if err := os.WriteFile(kc, []byte("kubeconfig"), 0o600); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(outside, []byte("not yours"), 0o600); err != nil {
		t.Fatal(err)
	}
	escape := filepath.Join(dir, "escape")
	if err := os.Symlink(outside, escape); err != nil {
		t.Fatal(err)
	}
	if got, err := kubeconfigPath(dir, kc); err != nil || got != kc {
		t.Errorf("a kubeconfig in the directory: %q, %v", got, err)
	}
	for name, tc := range map[string]struct{ dir, location, want string }{
		"Path disabled":  {"", kc, "locationType Path is disabled: set multiCluster.kubeconfigDir"},
		"any other file": {dir, "/etc/passwd", "outside multiCluster.kubeconfigDir"},
		"dot-dot out":    {dir, filepath.Join(dir, "..", filepath.Base(filepath.Dir(outside)), "secret"), "outside multiCluster.kubeconfigDir"},
		"a symlink out":  {dir, escape, "outside multiCluster.kubeconfigDir"},
		"relative":       {dir, "worker-1", "is not an absolute path"},
		"missing":        {dir, filepath.Join(dir, "nope"), "no such file"},
	} {
		if _, err := kubeconfigPath(tc.dir, tc.location); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", name, err, tc.want)
		}
	}
}
