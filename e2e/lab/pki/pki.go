// Package pki makes the certificate bundle one lab cluster's control plane starts with (CA, API
// server serving certificate, client certificates, service-account keys), in Go, so the lab needs no
// openssl. The certificates themselves come from internal/pki, which the manager uses too.
//
// Keys are ECDSA P-256: generating them takes microseconds, which keeps `fleetq-lab up` fast, and every
// Kubernetes component accepts them (service-account tokens are then signed with ES256).
package pki

import (
	"fmt"
	"time"

	"github.com/fleetq/fleetq/internal/pki"
)

// validity is long enough that no lab, however long it runs, sees a certificate expire.
const validity = 10 * 365 * 24 * time.Hour

// KeyPair is a certificate with its private key, both PEM-encoded, ready for files and kubeconfigs.
type KeyPair = pki.KeyPair

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
	ca, err := pki.NewCA(cluster+"-ca", validity)
	if err != nil {
		return nil, fmt.Errorf("cluster %q: %w", cluster, err)
	}
	serving, err := ca.NewServing("kube-apiserver", hosts, validity)
	if err != nil {
		return nil, fmt.Errorf("cluster %q: %w", cluster, err)
	}
	b := &Bundle{CA: ca, Serving: serving, Clients: map[string]*KeyPair{}}
	for _, c := range clients {
		kp, err := ca.NewClient(c.User, c.Groups, validity)
		if err != nil {
			return nil, fmt.Errorf("cluster %q: client %q: %w", cluster, c.Name, err)
		}
		b.Clients[c.Name] = kp
	}
	b.ServiceAccountKeyPEM, b.ServiceAccountPubPEM, err = pki.NewKeyPEM()
	if err != nil {
		return nil, fmt.Errorf("cluster %q: service-account key: %w", cluster, err)
	}
	return b, nil
}
