// Package pki makes certificates and keys in Go (no openssl): certificate authorities, serving
// and client certificates, and parses them back. The lab uses it for its clusters and the
// manager for its self-managed webhook certificate.
//
// Keys are ECDSA P-256: generating them takes microseconds and every Kubernetes component
// accepts them.
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

// backdate lets a clock a few minutes behind another process's still accept a fresh certificate.
const backdate = time.Hour

// KeyPair is a certificate with its private key, both PEM-encoded, ready for files and kubeconfigs.
type KeyPair struct {
	CertPEM []byte
	KeyPEM  []byte

	cert *x509.Certificate
	key  crypto.Signer
}

// Certificate returns the parsed certificate, for callers that check expiry or pool it.
func (k *KeyPair) Certificate() *x509.Certificate { return k.cert }

// Parse reads a KeyPair back from PEM, e.g. a CA kept in a Secret.
func Parse(certPEM, keyPEM []byte) (*KeyPair, error) {
	cb, _ := pem.Decode(certPEM)
	if cb == nil || cb.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("no PEM certificate found")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parse certificate: %w", err)
	}
	kb, _ := pem.Decode(keyPEM)
	if kb == nil {
		return nil, fmt.Errorf("no PEM private key found")
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parse private key: %w", err)
	}
	if !key.PublicKey.Equal(cert.PublicKey) {
		return nil, fmt.Errorf("private key does not match certificate %q", cert.Subject.CommonName)
	}
	return &KeyPair{CertPEM: certPEM, KeyPEM: keyPEM, cert: cert, key: key}, nil
}

// NewCA makes a self-signed certificate authority valid for validity.
func NewCA(name string, validity time.Duration) (*KeyPair, error) {
	key, err := newKey()
	if err != nil {
		return nil, fmt.Errorf("CA %q: %w", name, err)
	}
	tmpl, err := template(pkix.Name{CommonName: name}, validity)
	if err != nil {
		return nil, fmt.Errorf("CA %q: %w", name, err)
	}
	tmpl.IsCA = true
	tmpl.BasicConstraintsValid = true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature
	return sign(tmpl, tmpl, key, key)
}

// NewServing makes a server certificate for hosts (IP addresses or DNS names) signed by ca.
func (ca *KeyPair) NewServing(name string, hosts []string, validity time.Duration) (*KeyPair, error) {
	if len(hosts) == 0 {
		return nil, fmt.Errorf("serving certificate %q: no hosts", name)
	}
	key, err := newKey()
	if err != nil {
		return nil, fmt.Errorf("serving certificate %q: %w", name, err)
	}
	tmpl, err := template(pkix.Name{CommonName: name}, validity)
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
func (ca *KeyPair) NewClient(user string, groups []string, validity time.Duration) (*KeyPair, error) {
	if user == "" {
		return nil, fmt.Errorf("client certificate: empty user name")
	}
	key, err := newKey()
	if err != nil {
		return nil, fmt.Errorf("client certificate %q: %w", user, err)
	}
	tmpl, err := template(pkix.Name{CommonName: user, Organization: groups}, validity)
	if err != nil {
		return nil, fmt.Errorf("client certificate %q: %w", user, err)
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	return sign(tmpl, ca.cert, key, ca.key)
}

// NewKeyPEM makes a bare private key and its public key in PEM (service-account token signing).
func NewKeyPEM() (keyPEM, pubPEM []byte, err error) {
	key, err := newKey()
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err = encodeKey(key)
	if err != nil {
		return nil, nil, err
	}
	pub, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return nil, nil, err
	}
	return keyPEM, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), nil
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

func template(subject pkix.Name, validity time.Duration) (*x509.Certificate, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("serial number: %w", err)
	}
	now := time.Now()
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      subject,
		NotBefore:    now.Add(-backdate),
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
