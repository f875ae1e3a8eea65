package framework

import (
	"context"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/fleetq/fleetq/e2e/lab"
)

// LoadCRDs reads every CustomResourceDefinition of dir (lab.LoadCRDs).
func LoadCRDs(dir string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	return lab.LoadCRDs(dir)
}

// InstallCRDs creates or updates the CRDs on a cluster and waits until each is served
// (lab.InstallCRDs).
func InstallCRDs(ctx context.Context, c ClusterProxy, crds []*apiextensionsv1.CustomResourceDefinition) error {
	return lab.InstallCRDs(ctx, c.Client(), c.Name(), crds)
}
