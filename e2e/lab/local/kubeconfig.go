package local

import (
	"fmt"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/fleetq/fleetq/e2e/lab/pki"
)

// Kubeconfig renders a kubeconfig for one cluster and one client identity with every certificate and
// key embedded: MultiKueue (and fleetq's dispatch) refuse kubeconfigs that point at files, and an
// embedded one can be copied into a Secret as is.
func Kubeconfig(cluster, server string, ca []byte, client *pki.KeyPair, user string) ([]byte, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[cluster] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: client.CertPEM, ClientKeyData: client.KeyPEM}
	cfg.Contexts[cluster] = &clientcmdapi.Context{Cluster: cluster, AuthInfo: user}
	cfg.CurrentContext = cluster
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return nil, fmt.Errorf("cluster %q: kubeconfig for %q: %w", cluster, user, err)
	}
	return data, nil
}
