// Package pki makes the certificates and keys one lab cluster needs, in Go, so the lab needs no openssl.
//
// Keys are ECDSA P-256: generating them takes microseconds, which keeps `fleetq-lab up` fast, and every
// Kubernetes component accepts them (service-account tokens are then signed with ES256).
package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// validity is long enough that no lab, however long it runs, sees a certificate expire.
const validity = 10 * 365 * 24 * time.Hour

// KeyPair is a certificate with its private key, both PEM-encoded, ready for files and kubeconfigs.
type KeyPair struct {
	CertPEM []byte
	KeyPEM  []byte

	cert *x509.Certificate
	key  crypto.Signer
}

// Certificate returns the parsed certificate, for callers that check or pool it.
func (k *KeyPair) Certificate() *x509.Certificate { return k.cert }

// Client describes one client identity: Kubernetes takes the user from CN and groups from O.
type Client struct {
	// Name is the file stem the pair is written under (admin, controller-manager, ...).
	Name string
	// User is the certificate's common name, the Kubernetes user name.
	User string
	// Groups become the certificate's organizations, the Kubernetes groups.
	Groups []string
}

// Bundle is everything one cluster's control plane is started with.
type Bundle struct {
	// CA signs every other certificate; the API server trusts clients it signed, and the
	// controller-manager signs CSRs with it.
	CA *KeyPair
	// Serving is the API server's serving certificate.
	Serving *KeyPair
	// Clients maps Client.Name to its pair.
	Clients map[string]*KeyPair
	// ServiceAccountKeyPEM and ServiceAccountPubPEM sign and verify service-account tokens.
	ServiceAccountKeyPEM []byte
	ServiceAccountPubPEM []byte
}

// ServingHosts are the names and addresses the API server answers on in the lab: loopback only, plus
// the first address of the service range, which in-cluster clients of the "kubernetes" Service use.
var ServingHosts = []string{"127.0.0.1", "localhost", "::1", "10.0.0.1", "kubernetes", "kubernetes.default",
	"kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}

// NewBundle makes a CA named after the cluster, a serving certificate for hosts, the given client
// certificates and a service-account key pair.
func NewBundle(cluster string, hosts []string, clients []Client) (*Bundle, error) {
	ca, err := NewCA(cluster + "-ca")
	if err != nil {
		return nil, fmt.Errorf("cluster %q: %w", cluster, err)
	}
	serving, err := ca.NewServing("kube-apiserver", hosts)
	if err != nil {
		return nil, fmt.Errorf("cluster %q: %w", cluster, err)
	}
	b := &Bundle{CA: ca, Serving: serving, Clients: map[string]*KeyPair{}}
	for _, c := range clients {
		kp, err := ca.NewClient(c.User, c.Groups)
		if err != nil {
			return nil, fmt.Errorf("cluster %q: client %q: %w", cluster, c.Name, err)
		}
		b.Clients[c.Name] = kp
	}
	saKey, err := newKey()
	if err != nil {
		return nil, fmt.Errorf("cluster %q: service-account key: %w", cluster, err)
	}
	b.ServiceAccountKeyPEM, err = encodeKey(saKey)
	if err != nil {
		return nil, fmt.Errorf("cluster %q: service-account key: %w", cluster, err)
	}
	pub, err := x509.MarshalPKIXPublicKey(saKey.Public())
	if err != nil {
		return nil, fmt.Errorf("cluster %q: service-account public key: %w", cluster, err)
	}
	b.ServiceAccountPubPEM = pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub})
	return b, nil
}

// NewCA makes a self-signed certificate authority.
func NewCA(name string) (*KeyPair, error) {
	key, err := newKey()
	if err != nil {
		return nil, fmt.Errorf("CA %q: %w", name, err)
	}
	tmpl, err := template(pkix.Name{CommonName: name})
	if err != nil {
		return nil, fmt.Errorf("CA %q: %w", name, err)
	}
	tmpl.IsCA = true
	tmpl.BasicConstraintsValid = true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature
	return sign(tmpl, tmpl, key, key)
}

// NewServing makes a server certificate for hosts (IP addresses or DNS names) signed by ca.
func (ca *KeyPair) NewServing(name string, hosts []string) (*KeyPair, error) {
	if len(hosts) == 0 {
		return nil, fmt.Errorf("serving certificate %q: no hosts", name)
	}
	key, err := newKey()
	if err != nil {
		return nil, fmt.Errorf("serving certificate %q: %w", name, err)
	}
	tmpl, err := template(pkix.Name{CommonName: name})
	if err != nil {
		return nil, fmt.Errorf("serving certificate %q: %w", name, err)
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	return sign(tmpl, ca.cert, key, ca.key)
}

// NewClient makes a client certificate for user in groups, signed by ca.
func (ca *KeyPair) NewClient(user string, groups []string) (*KeyPair, error) {
	if user == "" {
		return nil, fmt.Errorf("client certificate: empty user name")
	}
	key, err := newKey()
	if err != nil {
		return nil, fmt.Errorf("client certificate %q: %w", user, err)
	}
	tmpl, err := template(pkix.Name{CommonName: user, Organization: groups})
	if err != nil {
		return nil, fmt.Errorf("client certificate %q: %w", user, err)
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	return sign(tmpl, ca.cert, key, ca.key)
}

// WriteFiles writes the pair as <dir>/<stem>.crt and <dir>/<stem>.key and returns both paths.
func (k *KeyPair) WriteFiles(dir, stem string) (certPath, keyPath string, err error) {
	certPath = filepath.Join(dir, stem+".crt")
	keyPath = filepath.Join(dir, stem+".key")
	if err := os.WriteFile(certPath, k.CertPEM, 0o644); err != nil {
		return "", "", fmt.Errorf("write %s: %w", certPath, err)
	}
	if err := os.WriteFile(keyPath, k.KeyPEM, 0o600); err != nil {
		return "", "", fmt.Errorf("write %s: %w", keyPath, err)
	}
	return certPath, keyPath, nil
}

func newKey() (*ecdsa.PrivateKey, error) {
	return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
}

func encodeKey(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

func template(subject pkix.Name) (*x509.Certificate, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("serial number: %w", err)
	}
	// Back-dated a little so a clock that differs by seconds between processes never sees a future cert.
	now := time.Now().Add(-time.Hour)
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      subject,
		NotBefore:    now,
		NotAfter:     now.Add(validity),
	}, nil
}

func sign(tmpl, parent *x509.Certificate, key *ecdsa.PrivateKey, parentKey crypto.Signer) (*KeyPair, error) {
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), parentKey)
	if err != nil {
		return nil, fmt.Errorf("sign %q: %w", tmpl.Subject.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse %q: %w", tmpl.Subject.CommonName, err)
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return nil, fmt.Errorf("encode key of %q: %w", tmpl.Subject.CommonName, err)
	}
	return &KeyPair{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  keyPEM,
		cert:    cert,
		key:     key,
	}, nil
}
