package main

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
)

// queueKinds are the names `stop` and `resume` take for a queue's kind, as kueuectl's.
var queueKinds = map[string]string{
	"clusterqueue": "ClusterQueue", "clusterqueues": "ClusterQueue", "cq": "ClusterQueue",
	"localqueue": "LocalQueue", "localqueues": "LocalQueue", "lq": "LocalQueue",
}

// setStopPolicy sets a ClusterQueue's or LocalQueue's spec.stopPolicy (kind as the user typed it)
// and says what that does.
func (v *view) setStopPolicy(ctx context.Context, kind, name string, policy kueue.StopPolicy) error {
	k, ok := queueKinds[kind]
	if !ok {
		return fmt.Errorf("%q is not a queue kind: use clusterqueue (cq) or localqueue (lq)", kind)
	}
	var obj client.Object
	key := types.NamespacedName{Name: name}
	var current *kueue.StopPolicy
	switch k {
	case "ClusterQueue":
		cq := &kueue.ClusterQueue{}
		obj = cq
		if err := v.client.Get(ctx, key, cq); err != nil {
			return notFound(err, k, key, "kubectl get clusterqueues")
		}
		current = cq.Spec.StopPolicy
	default:
		key.Namespace = v.namespace
		lq := &kueue.LocalQueue{}
		obj = lq
		if err := v.client.Get(ctx, key, lq); err != nil {
			return notFound(err, k, key, "kubectl get localqueues -n "+v.namespace)
		}
		current = lq.Spec.StopPolicy
	}
	what := map[kueue.StopPolicy]string{
		kueue.None:         "admits workloads again",
		kueue.Hold:         "admits nothing new; what it admitted runs on",
		kueue.HoldAndDrain: "admits nothing new and evicts what it admitted",
	}[policy]
	if current != nil && *current == policy || current == nil && policy == kueue.None {
		fmt.Fprintf(v.out, "%s %s already has stopPolicy %s: it %s\n", k, name, policy, what)
		return nil
	}
	patch := fmt.Appendf(nil, `{"spec":{"stopPolicy":%q}}`, policy)
	if err := v.client.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("setting stopPolicy of %s %s: %w", k, name, err)
	}
	fmt.Fprintf(v.out, "%s %s stopPolicy set to %s: it %s\n", k, name, policy, what)
	return nil
}

func notFound(err error, kind string, key types.NamespacedName, list string) error {
	name := key.Name
	if key.Namespace != "" {
		name = key.String()
	}
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%s %s not found (%s lists them)", kind, name, list)
	}
	return fmt.Errorf("reading %s %s: %w", kind, name, err)
}
