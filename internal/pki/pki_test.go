package pki

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestServingCertificateVerifiesAgainstItsCA(t *testing.T) {
	ca, err := NewCA("test-ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := ca.NewServing("webhook", []string{"127.0.0.1", "svc.ns.svc"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Certificate())
	for _, host := range []string{"127.0.0.1", "svc.ns.svc"} {
		if _, err := srv.Certificate().Verify(x509.VerifyOptions{Roots: pool, DNSName: host}); err != nil {
			t.Errorf("verify for %s: %v", host, err)
		}
	}
	if _, err := srv.Certificate().Verify(x509.VerifyOptions{Roots: pool, DNSName: "other"}); err == nil {
		t.Error("certificate verified for a host it does not name")
	}
	if _, err := tls.X509KeyPair(srv.CertPEM, srv.KeyPEM); err != nil {
		t.Errorf("PEM pair unusable by crypto/tls: %v", err)
	}
}

func TestParseRoundTripAndMismatch(t *testing.T) {
	ca, err := NewCA("a", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	other, err := NewCA("b", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse(ca.CertPEM, ca.KeyPEM)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if back.Certificate().Subject.CommonName != "a" {
		t.Errorf("parsed CN = %q", back.Certificate().Subject.CommonName)
	}
	if _, err := back.NewClient("u", nil, time.Hour); err != nil {
		t.Errorf("parsed CA cannot sign: %v", err)
	}
	if _, err := Parse(ca.CertPEM, other.KeyPEM); err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Errorf("mismatched key: got %v", err)
	}
	if _, err := Parse([]byte("junk"), ca.KeyPEM); err == nil {
		t.Error("junk certificate parsed")
	}
}

func TestValidity(t *testing.T) {
	ca, err := NewCA("a", 90*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if left := time.Until(ca.Certificate().NotAfter); left < 89*time.Minute || left > 91*time.Minute {
		t.Errorf("CA valid for %v more, want ~90m", left)
	}
	if _, err := ca.NewServing("x", nil, time.Hour); err == nil {
		t.Error("serving certificate without hosts accepted")
	}
}

func TestErrors(t *testing.T) {
	ca, err := NewCA("test-ca", time.Hour)
	if err != nil {
		t.Fatalf("NewCA: %v", err)
	}
	cases := map[string]func() error{
		"serving certificate without hosts": func() error { _, err := ca.NewServing("x", nil, time.Hour); return err },
		"client without user":               func() error { _, err := ca.NewClient("", nil, time.Hour); return err },
		"write into a missing directory": func() error {
			_, _, err := ca.WriteFiles(filepath.Join(t.TempDir(), "missing"), "ca")
			return err
		},
	}
	for name, f := range cases {
		t.Run(name, func(t *testing.T) {
			if err := f(); err == nil {
				t.Errorf("got no error")
			}
		})
	}
}

func TestWriteFiles(t *testing.T) {
	ca, err := NewCA("test-ca", time.Hour)
	if err != nil {
		t.Fatalf("NewCA: %v", err)
	}
	dir := t.TempDir()
	certPath, keyPath, err := ca.WriteFiles(dir, "ca")
	if err != nil {
		t.Fatalf("WriteFiles: %v", err)
	}
	info, err := os.Stat(keyPath)
	if err != nil {
		t.Fatalf("stat key: %v", err)
	}
	if perm := info.Mode().Perm(); perm != 0o600 {
		t.Errorf("key file mode = %o, want 600", perm)
	}
	if _, err := tls.LoadX509KeyPair(certPath, keyPath); err != nil {
		t.Errorf("written pair does not load: %v", err)
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	if diff := cmp.Diff([]string{"ca.crt", "ca.key"}, names); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
}
