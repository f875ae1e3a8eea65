package lease

import (
	"context"
	"errors"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

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

func TestRenewalFailuresNameTheFix(t *testing.T) {
	gr := coordinationv1.Resource("leases")
	cases := map[string]struct {
		err  error
		want string
	}{
		"agent namespace missing in the worker": {
			err:  apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "fleetq-system"),
			want: "namespace fleetq-system does not exist in the worker: install the agent there",
		},
		"worker identity may not write leases": {
			err:  apierrors.NewForbidden(gr, "fleetq-manager-multikueue", errors.New("RBAC")),
			want: "may not get, create and update coordination.k8s.io leases in namespace fleetq-system",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			scheme := runtime.NewScheme()
			if err := clientgoscheme.AddToScheme(scheme); err != nil {
				t.Fatal(err)
			}
			c := fake.NewClientBuilder().WithScheme(scheme).WithInterceptorFuncs(interceptor.Funcs{
				Create: func(context.Context, client.WithWatch, client.Object, ...client.CreateOption) error { return tc.err },
			}).Build()
			r := &Renewer{Clock: clocktesting.NewFakePassiveClock(time.Unix(10000, 0)), Log: logr.Discard(), Namespace: "fleetq-system",
				Origin: "multikueue", ManagerID: "cluster-a", Identity: "manager-1", Duration: time.Minute}
			err := r.renew(context.Background(), &registry.Worker{Name: "us-east", Client: c})
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "in worker us-east") {
				t.Fatalf("error = %v, want it to name the worker and say %q", err, tc.want)
			}
		})
	}
}

// workers is a registry of connected workers for the Renewer, recording each outcome.
type workers struct {
	mu       sync.Mutex
	byName   map[string]*registry.Worker
	outcomes map[string][]string
}

func (f *workers) Names() []string {
	var out []string
	for n := range f.byName {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func (f *workers) Get(name string) (*registry.Worker, registry.Health) {
	return f.byName[name], registry.Health{Active: true}
}

func (f *workers) Lease(string) registry.LeaseHealth { return registry.LeaseHealth{} }

func (f *workers) LeaseRenewal(name, reason string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err == nil {
		reason = registry.ReasonLeaseRenewed
	}
	f.outcomes[name] = append(f.outcomes[name], reason)
}

func (f *workers) seen(name string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.outcomes[name]...)
}

func TestAFrozenWorkerDoesNotHoldUpTheOthersRenewals(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	var frozenCalls atomic.Int32
	frozen := fake.NewClientBuilder().WithScheme(scheme).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, _ client.WithWatch, _ client.ObjectKey, _ client.Object, _ ...client.GetOption) error {
			frozenCalls.Add(1)
			<-ctx.Done() // a SIGSTOPped API server: the request hangs until it times out
			return ctx.Err()
		},
	}).Build()
	healthy := fake.NewClientBuilder().WithScheme(scheme).Build()
	ws := &workers{byName: map[string]*registry.Worker{
		"us-east": {Name: "us-east", Client: frozen},
		"eu-west": {Name: "eu-west", Client: healthy},
	}, outcomes: map[string][]string{}}
	r := &Renewer{Registry: ws, Clock: clocktesting.NewFakePassiveClock(time.Unix(10000, 0)), Log: logr.Discard(),
		Namespace: "fleetq-system", Origin: "multikueue", ManagerID: "cluster-a", Identity: "manager-1", Duration: time.Hour}
	ctx, cancel := context.WithCancel(context.Background())

	for round := 1; round <= 3; round++ {
		r.RenewAll(ctx)
		deadline := time.Now().Add(30 * time.Second)
		for len(ws.seen("eu-west")) < round {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: eu-west renewed %d times while us-east hangs, want %d", round, len(ws.seen("eu-west")), round)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	if n := frozenCalls.Load(); n != 1 {
		t.Errorf("us-east was asked %d times, want once: a renewal still waiting is not started again", n)
	}
	cancel()
	r.Wait()
	if got := ws.seen("us-east"); len(got) != 0 {
		t.Errorf("us-east outcomes %v, want none recorded for a renewal cut short by shutdown", got)
	}
}
