package builtin

import (
	"context"
	"fmt"
	"strings"

	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"

	"github.com/fleetq/fleetq/config"
	"github.com/fleetq/fleetq/internal/integration"
	"github.com/fleetq/fleetq/internal/integration/generic"
)

// Configured returns the adapters a configuration's integrations select: the built-in frameworks
// it lists, then one generic adapter per description. Each description is checked against its
// CRD where the cluster serves the kind, and a path the schema lacks fails the start with the
// configuration field, the path and the fix; a kind the cluster does not serve is returned all
// the same (the caller leaves it out, as it does built-in kinds).
func Configured(ctx context.Context, rc *rest.Config, in config.Integrations) ([]integration.Adapter, error) {
	out, err := integration.Select(Adapters(), in.Frameworks)
	if err != nil {
		return nil, err
	}
	if len(in.Generic) == 0 {
		return out, nil
	}
	dc, err := discovery.NewDiscoveryClientForConfig(rc)
	if err != nil {
		return nil, err
	}
	cs, err := apiextensions.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	var errs field.ErrorList
	for i, g := range in.Generic {
		path := field.NewPath("integrations", "generic").Index(i)
		plural, err := pluralOf(dc, g)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if plural != "" && plural != g.ResourceName() {
			errs = append(errs, field.Invalid(path.Child("resource"), g.ResourceName(),
				fmt.Sprintf("the cluster serves %s as %q; set resource: %s (the charts grant access by this name)", g.Kind, plural, plural)))
			plural = ""
		}
		if plural != "" {
			crd, err := cs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, plural+"."+g.Group, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				// Served, but not by a CRD (an aggregated API): there is no schema to check.
			case apierrors.IsForbidden(err):
				return nil, fmt.Errorf("%s: reading the CRD of %s to check its paths: %w; grant get on customresourcedefinitions (the charts do when integrations.generic is set)", path, g.GVK(), err)
			case err != nil:
				return nil, fmt.Errorf("%s: reading the CRD of %s: %w", path, g.GVK(), err)
			default:
				errs = append(errs, generic.CheckSchema(g, crd, path)...)
			}
		}
		out = append(out, generic.New(g))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("integrations.generic does not match the cluster's CRDs: %w", errs.ToAggregate())
	}
	return out, nil
}

// pluralOf is the resource name the cluster serves the kind under, "" when it does not serve it.
func pluralOf(dc discovery.ServerResourcesInterface, g generic.Spec) (string, error) {
	list, err := dc.ServerResourcesForGroupVersion(g.GVK().GroupVersion().String())
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("discovering %s: %w", g.GVK().GroupVersion(), err)
	}
	for _, r := range list.APIResources {
		if r.Kind == g.Kind && !strings.Contains(r.Name, "/") { // not a subresource
			return r.Name, nil
		}
	}
	return "", nil
}
