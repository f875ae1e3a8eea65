package certs

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/fleetq/fleetq/config"
	"github.com/fleetq/fleetq/manager/webhooks"
)

func newManager(t *testing.T, clk *clocktesting.FakeClock, c client.Client, url string) *Manager {
	t.Helper()
	cfg := &config.Configuration{Webhook: config.Webhook{URL: url}}
	cfg.SetDefaults()
	cfg.Webhook.CertValidity = &metav1.Duration{Duration: 30 * time.Hour}
	jobs := []webhooks.JobKind{{Kind: "Job", Group: "batch", Version: "v1", Resource: "jobs", MutatePath: "/mutate-batch-v1-job", ValidatePath: "/validate-batch-v1-job"}}
	return &Manager{Client: c, Config: cfg, CertDir: t.TempDir(), Clock: clk, Log: logr.Discard(), JobKinds: jobs}
}

func servingCert(t *testing.T, dir string) *x509.Certificate {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, corev1.TLSCertKey))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := pem.Decode(raw)
	cert, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

func TestEnsureCreatesRenewsAndShares(t *testing.T) {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	c := fake.NewClientBuilder().WithScheme(s).Build()
	clk := clocktesting.NewFakeClock(time.Now())
	ctx := context.Background()

	m := newManager(t, clk, c, "https://127.0.0.1:9443")
	if _, err := m.Ensure(ctx); err != nil {
		t.Fatalf("Ensure: %v", err)
	}
	first := servingCert(t, m.CertDir)
	if err := first.VerifyHostname("127.0.0.1"); err != nil {
		t.Errorf("serving certificate: %v", err)
	}
	mutating := &admissionregistrationv1.MutatingWebhookConfiguration{}
	if err := c.Get(ctx, client.ObjectKey{Name: webhooks.MutatingConfigurationName}, mutating); err != nil {
		t.Fatalf("mutating configuration: %v", err)
	}
	validating := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := c.Get(ctx, client.ObjectKey{Name: webhooks.ValidatingConfigurationName}, validating); err != nil {
		t.Fatalf("validating configuration: %v", err)
	}
	sec := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "fleetq-system", Name: SecretName}, sec); err != nil {
		t.Fatalf("secret: %v", err)
	}
	for _, wh := range validating.Webhooks {
		if !bytes.Equal(wh.ClientConfig.CABundle, sec.Data["ca.crt"]) {
			t.Errorf("webhook %s does not trust the CA in the Secret", wh.Name)
		}
	}

	// A second replica uses the same certificate rather than making its own.
	other := newManager(t, clk, c, "https://127.0.0.1:9443")
	if _, err := other.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	if !servingCert(t, other.CertDir).Equal(first) {
		t.Error("a second replica wrote a different serving certificate")
	}

	// Before two thirds of its life nothing changes; after, it is renewed under the same CA.
	clk.Step(19 * time.Hour)
	if _, err := m.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	if !servingCert(t, m.CertDir).Equal(first) {
		t.Error("renewed before two thirds of its validity")
	}
	clk.Step(2 * time.Hour)
	if _, err := m.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	renewed := servingCert(t, m.CertDir)
	if renewed.Equal(first) {
		t.Fatal("not renewed after two thirds of its validity")
	}
	if !bytes.Equal(renewed.RawIssuer, first.RawIssuer) {
		t.Error("renewal changed the CA; webhook configurations would stop trusting replicas that did not renew yet")
	}

	// A new address (the manager moved) gets a certificate for it, and the configurations follow.
	moved := newManager(t, clk, c, "https://10.1.2.3:9443")
	if _, err := moved.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	if err := servingCert(t, moved.CertDir).VerifyHostname("10.1.2.3"); err != nil {
		t.Errorf("after a move: %v", err)
	}
	if err := c.Get(ctx, client.ObjectKey{Name: webhooks.ValidatingConfigurationName}, validating); err != nil {
		t.Fatal(err)
	}
	if got := *validating.Webhooks[0].ClientConfig.URL; got != "https://10.1.2.3:9443/validate-batch-v1-job" {
		t.Errorf("webhook URL = %s", got)
	}
}
