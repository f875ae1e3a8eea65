package integration

import (
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
)

// Served keeps the adapters whose kinds a cluster's API server serves (their CRDs are
// installed), asking its discovery API once per group version.
func Served(dc discovery.ServerResourcesInterface, adapters []Adapter) ([]Adapter, error) {
	lists := map[string]*metav1.APIResourceList{}
	var out []Adapter
	for _, a := range adapters {
		gv := a.GVK().GroupVersion().String()
		list, ok := lists[gv]
		if !ok {
			var err error
			list, err = dc.ServerResourcesForGroupVersion(gv)
			if err != nil && !apierrors.IsNotFound(err) {
				return nil, fmt.Errorf("discovering %s: %w", gv, err)
			}
			lists[gv] = list
		}
		if list != nil && slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Kind == a.GVK().Kind }) {
			out = append(out, a)
		}
	}
	return out, nil
}
