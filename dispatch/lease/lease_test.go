package lease

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	fleetq "github.com/fleetq/fleetq/api/fleetq/v1alpha1"
	"github.com/fleetq/fleetq/dispatch/registry"
)

func TestASecondManagerWithTheSameOriginIsRefusedNotAReplica(t *testing.T) {
	now := time.Unix(10000, 0)
	clk := clocktesting.NewFakePassiveClock(now)
	key := client.ObjectKey{Namespace: "fleetq-system", Name: fleetq.ManagerLeaseName("multikueue")}
	held := func(holder string, renewedAgo time.Duration) *coordinationv1.Lease {
		return &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity: ptr.To(holder), LeaseDurationSeconds: ptr.To[int32](120),
				RenewTime: ptr.To(metav1.NewMicroTime(now.Add(-renewedAgo))),
			},
		}
	}
	cases := map[string]struct {
		existing    *coordinationv1.Lease
		wantForeign bool
	}{
		"no lease yet: created":                        {},
		"another replica of this manager (fail-over)":  {existing: held("cluster-a/manager-0", time.Second)},
		"another management cluster's manager, live":   {existing: held("cluster-b/manager-0", time.Second), wantForeign: true},
		"another management cluster's manager, stale":  {existing: held("cluster-b/manager-0", 10*time.Minute)},
		"a holder from before holders named a cluster": {existing: held("manager-0", time.Second)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			scheme := runtime.NewScheme()
			if err := clientgoscheme.AddToScheme(scheme); err != nil {
				t.Fatal(err)
			}
			b := fake.NewClientBuilder().WithScheme(scheme)
			if tc.existing != nil {
				b.WithObjects(tc.existing)
			}
			c := b.Build()
			r := &Renewer{Clock: clk, Log: logr.Discard(), Namespace: key.Namespace, Origin: "multikueue", ManagerID: "cluster-a", Identity: "manager-1", Duration: 2 * time.Minute}
			err := r.renew(context.Background(), &registry.Worker{Name: "us-east", Client: c})
			l := &coordinationv1.Lease{}
			if gerr := c.Get(context.Background(), key, l); gerr != nil {
				t.Fatal(gerr)
			}
			if tc.wantForeign {
				if !errors.Is(err, errForeignHolder) || !strings.Contains(err.Error(), "give each manager its own multiCluster.origin") {
					t.Fatalf("error = %v, want the foreign holder named with the fix", err)
				}
				if got := *l.Spec.HolderIdentity; got != "cluster-b/manager-0" {
					t.Errorf("the other manager's lease was taken: holder %q", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := *l.Spec.HolderIdentity; got != "cluster-a/manager-1" {
				t.Errorf("holder = %q, want this replica", got)
			}
			if !l.Spec.RenewTime.Time.Equal(now) {
				t.Errorf("renewTime = %v, want now", l.Spec.RenewTime)
			}
		})
	}
}
