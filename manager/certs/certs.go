// Package certs gives the manager's webhook server its certificate without cert-manager: a CA
// and a serving certificate kept in a Secret of the manager's namespace (shared by every
// replica), written to the server's certificate directory, renewed at two thirds of its life,
// and trusted by the webhook configurations, whose caBundle it keeps in sync.
package certs

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetq/fleetq/config"
	"github.com/fleetq/fleetq/internal/pki"
	"github.com/fleetq/fleetq/manager/webhooks"
)

// Secret keys, the same as a kubernetes.io/tls Secret plus the CA.
const (
	SecretName = "fleetq-webhook-server-cert"
	keyCACert  = "ca.crt"
	keyCAKey   = "ca.key"
	keyTLSCert = corev1.TLSCertKey
	keyTLSKey  = corev1.TLSPrivateKeyKey
	caValidity = 10 * 365 * 24 * time.Hour
)

// Manager keeps the webhook certificate and configurations current.
type Manager struct {
	// Client talks to the API server directly: it runs before the manager's caches start.
	Client  client.Client
	Config  *config.Configuration
	CertDir string
	Clock   clock.PassiveClock
	Log     logr.Logger
	// JobKinds are the integrated kinds whose jobs the job webhooks see.
	JobKinds []webhooks.JobKind

	// self is the manager's user name once the API server said it (webhooks.Self).
	self string
}

// Hosts are the names the webhook server must be reachable by.
func Hosts(cfg *config.Configuration) []string {
	if cfg.Webhook.URL != "" {
		u, err := url.Parse(cfg.Webhook.URL)
		if err == nil {
			return []string{u.Hostname()}
		}
	}
	svc := cfg.Webhook.ServiceName + "." + cfg.Namespace + ".svc"
	return []string{svc, svc + ".cluster.local"}
}

// Ensure makes the certificate exist and be valid for at least a third of its life, writes it
// to CertDir and brings the webhook configurations up to date. It is safe to call from every
// replica at once: the Secret is created once and updated with optimistic concurrency.
func (m *Manager) Ensure(ctx context.Context) (notAfter time.Time, err error) {
	ca, serving, err := m.ensureSecret(ctx)
	if err != nil {
		return time.Time{}, err
	}
	if err := os.MkdirAll(m.CertDir, 0o700); err != nil {
		return time.Time{}, fmt.Errorf("webhook cert dir %s: %w", m.CertDir, err)
	}
	if err := writeIfChanged(filepath.Join(m.CertDir, keyTLSCert), serving.CertPEM, 0o644); err != nil {
		return time.Time{}, err
	}
	if err := writeIfChanged(filepath.Join(m.CertDir, keyTLSKey), serving.KeyPEM, 0o600); err != nil {
		return time.Time{}, err
	}
	if err := m.ensureConfigurations(ctx, ca.CertPEM); err != nil {
		return time.Time{}, err
	}
	return serving.Certificate().NotAfter, nil
}

func (m *Manager) ensureSecret(ctx context.Context) (ca, serving *pki.KeyPair, err error) {
	key := types.NamespacedName{Namespace: m.Config.Namespace, Name: SecretName}
	for attempt := 0; attempt < 5; attempt++ {
		sec := &corev1.Secret{}
		err := m.Client.Get(ctx, key, sec)
		switch {
		case apierrors.IsNotFound(err):
			sec = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}, Type: corev1.SecretTypeTLS}
			ca, serving, err = m.issue(nil)
			if err != nil {
				return nil, nil, err
			}
			sec.Data = secretData(ca, serving)
			if err := m.Client.Create(ctx, sec); err != nil {
				if apierrors.IsAlreadyExists(err) {
					continue // another replica won; use its certificate
				}
				return nil, nil, fmt.Errorf("creating secret %s: %w", key, err)
			}
			m.Log.Info("Created webhook certificate", "secret", key, "notAfter", serving.Certificate().NotAfter)
			return ca, serving, nil
		case err != nil:
			return nil, nil, fmt.Errorf("reading secret %s: %w", key, err)
		}
		ca, _ = pki.Parse(sec.Data[keyCACert], sec.Data[keyCAKey])
		serving, _ = pki.Parse(sec.Data[keyTLSCert], sec.Data[keyTLSKey])
		if ca != nil && serving != nil && m.fresh(ca, serving) {
			return ca, serving, nil
		}
		ca, serving, err = m.issue(ca)
		if err != nil {
			return nil, nil, err
		}
		sec.Data = secretData(ca, serving)
		if err := m.Client.Update(ctx, sec); err != nil {
			if apierrors.IsConflict(err) {
				continue
			}
			return nil, nil, fmt.Errorf("renewing secret %s: %w", key, err)
		}
		m.Log.Info("Renewed webhook certificate", "secret", key, "notAfter", serving.Certificate().NotAfter)
		return ca, serving, nil
	}
	return nil, nil, fmt.Errorf("secret %s: too many concurrent updates", key)
}

// fresh reports whether the serving certificate covers the hosts, chains to the CA and has at
// least a third of its life left (the CA too).
func (m *Manager) fresh(ca, serving *pki.KeyPair) bool {
	now := m.Clock.Now()
	for _, kp := range []*pki.KeyPair{ca, serving} {
		c := kp.Certificate()
		if now.After(c.NotAfter.Add(-c.NotAfter.Sub(c.NotBefore) / 3)) {
			return false
		}
	}
	if !bytes.Equal(serving.Certificate().RawIssuer, ca.Certificate().RawSubject) {
		return false
	}
	for _, h := range Hosts(m.Config) {
		if serving.Certificate().VerifyHostname(h) != nil {
			return false
		}
	}
	return true
}

// issue signs a new serving certificate, with a new CA when the old one is missing or old.
func (m *Manager) issue(ca *pki.KeyPair) (*pki.KeyPair, *pki.KeyPair, error) {
	now := m.Clock.Now()
	if ca == nil || now.After(ca.Certificate().NotAfter.Add(-caValidity/3)) {
		var err error
		if ca, err = pki.NewCA("fleetq-webhook-ca", caValidity); err != nil {
			return nil, nil, err
		}
	}
	serving, err := ca.NewServing("fleetq-webhook", Hosts(m.Config), m.Config.Webhook.CertValidity.Duration)
	if err != nil {
		return nil, nil, err
	}
	return ca, serving, nil
}

func secretData(ca, serving *pki.KeyPair) map[string][]byte {
	return map[string][]byte{keyCACert: ca.CertPEM, keyCAKey: ca.KeyPEM, keyTLSCert: serving.CertPEM, keyTLSKey: serving.KeyPEM}
}

// ensureConfigurations creates the webhook configurations or patches them to the desired
// webhooks and caBundle.
func (m *Manager) ensureConfigurations(ctx context.Context, caBundle []byte) error {
	if m.self == "" {
		// Without it the job webhooks validate the manager's own updates too: slower, not wrong.
		self, err := webhooks.Self(ctx, m.Client)
		if err != nil {
			m.Log.Info("The job webhooks will validate the manager's own updates too", "error", err.Error())
		}
		m.self = self
	}
	wantM, wantV := webhooks.Configurations(m.Config, caBundle, m.JobKinds, m.self)
	curM := &admissionregistrationv1.MutatingWebhookConfiguration{}
	if err := m.ensure(ctx, curM, wantM, func() bool { return equality.Semantic.DeepEqual(curM.Webhooks, wantM.Webhooks) }, func() { curM.Webhooks = wantM.Webhooks }); err != nil {
		return err
	}
	curV := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	return m.ensure(ctx, curV, wantV, func() bool { return equality.Semantic.DeepEqual(curV.Webhooks, wantV.Webhooks) }, func() { curV.Webhooks = wantV.Webhooks })
}

func (m *Manager) ensure(ctx context.Context, cur, want client.Object, same func() bool, apply func()) error {
	err := m.Client.Get(ctx, client.ObjectKeyFromObject(want), cur)
	if apierrors.IsNotFound(err) {
		if err := m.Client.Create(ctx, want); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating %s: %w", want.GetName(), err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading %s: %w", want.GetName(), err)
	}
	if same() {
		return nil
	}
	orig := cur.DeepCopyObject().(client.Object)
	apply()
	if err := m.Client.Patch(ctx, cur, client.MergeFrom(orig)); err != nil {
		return fmt.Errorf("updating %s: %w", want.GetName(), err)
	}
	return nil
}

// Start renews the certificate when a third of its life is left, until ctx ends; every replica
// runs it, so each keeps its own files current.
func (m *Manager) Start(ctx context.Context) error {
	for {
		notAfter, err := m.Ensure(ctx)
		wait := time.Hour
		if err != nil {
			m.Log.Error(err, "Webhook certificate check failed; retrying in a minute")
			wait = time.Minute
		} else if left := notAfter.Sub(m.Clock.Now()) / 3; left < wait {
			wait = max(left, time.Second)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}

// NeedLeaderElection is false: every replica serves webhooks and needs the files.
func (m *Manager) NeedLeaderElection() bool { return false }

func writeIfChanged(path string, data []byte, mode os.FileMode) error {
	if cur, err := os.ReadFile(path); err == nil && bytes.Equal(cur, data) {
		return nil
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
