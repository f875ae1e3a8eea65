package pki

import (
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/util/keyutil"
)

func TestNewBundle(t *testing.T) {
	clients := []Client{
		{Name: "admin", User: "fleetq-lab-admin", Groups: []string{"system:masters"}},
		{Name: "scheduler", User: "system:kube-scheduler"},
	}
	b, err := NewBundle("us-east", ServingHosts, clients)
	if err != nil {
		t.Fatalf("NewBundle: %v", err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(b.CA.Certificate())

	t.Run("serving certificate verifies for loopback names", func(t *testing.T) {
		for _, host := range []string{"127.0.0.1", "localhost", "::1"} {
			_, err := b.Serving.Certificate().Verify(x509.VerifyOptions{
				DNSName: host, Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			})
			if err != nil {
				t.Errorf("verify serving certificate for %s: %v", host, err)
			}
		}
		if _, err := tls.X509KeyPair(b.Serving.CertPEM, b.Serving.KeyPEM); err != nil {
			t.Errorf("serving key pair does not load: %v", err)
		}
	})

	t.Run("client certificates carry user and groups", func(t *testing.T) {
		type identity struct {
			User   string
			Groups []string
		}
		got := map[string]identity{}
		for name, kp := range b.Clients {
			c := kp.Certificate()
			if _, err := c.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
				t.Errorf("verify client %q: %v", name, err)
			}
			got[name] = identity{User: c.Subject.CommonName, Groups: c.Subject.Organization}
		}
		want := map[string]identity{
			"admin":     {User: "fleetq-lab-admin", Groups: []string{"system:masters"}},
			"scheduler": {User: "system:kube-scheduler"},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("client identities (-want +got):\n%s", diff)
		}
	})

	t.Run("service-account keys parse the way Kubernetes parses them and match", func(t *testing.T) {
		priv, err := keyutil.ParsePrivateKeyPEM(b.ServiceAccountKeyPEM)
		if err != nil {
			t.Fatalf("parse service-account private key: %v", err)
		}
		pubs, err := keyutil.ParsePublicKeysPEM(b.ServiceAccountPubPEM)
		if err != nil || len(pubs) != 1 {
			t.Fatalf("parse service-account public key: %v (%d keys)", err, len(pubs))
		}
		if !priv.(*ecdsa.PrivateKey).PublicKey.Equal(pubs[0]) {
			t.Errorf("service-account public key does not match the private key")
		}
	})
}
