/*
Copyright 2026 The fleetq Authors.

Licensed under the Apache License, Version 2.0.
*/

package crd_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// change is one request of an acceptance case: a manifest created, or replacing the object of the
// same kind and name, optionally through the status subresource.
type change struct {
	manifest string
	status   bool
}

// TestValidChangesAreAccepted guards the rules against over-reach: each case is a sequence of valid
// requests, close to a rejected one, that must all be accepted.
func TestValidChangesAreAccepted(t *testing.T) {
	reserved := goodWorkload + reservedStatus
	cases := map[string][]change{
		"clusterqueue: lendingLimit equal to nominalQuota, zero borrowingLimit, zero weight": {{
			manifest: strings.Replace(goodClusterQueue, "nominalQuota: 4Gi}", "nominalQuota: 4Gi, lendingLimit: 4096Mi, borrowingLimit: 0}", 1) + "  fairSharing: {weight: 0}\n",
		}},
		"clusterqueue: cohort and cohortName equal, Never policies": {{
			manifest: strings.Replace(goodClusterQueue, "  cohortName: team\n", "  cohortName: team\n  cohort: team\n", 1) +
				"  preemption: {reclaimWithinCohort: Never, borrowWithinCohort: {policy: Never}}\n  flavorFungibility: {whenCanBorrow: TryNextFlavor, whenCanPreempt: TryNextFlavor, preference: BorrowingOverPreemption}\n",
		}},
		"clusterqueue: no cohort and no limits, several groups and flavors": {{
			manifest: strings.Replace(goodClusterQueue, "  cohortName: team\n", "", 1) + `    - name: spot
      resources:
      - {name: cpu, nominalQuota: 0}
      - {name: memory, nominalQuota: "0"}
  - coveredResources: [example.com/gpu]
    flavors:
    - name: a100
      resources:
      - {name: example.com/gpu, nominalQuota: 8}
`,
		}},
		"resourceflavor: same taint key with two effects, empty-key Exists toleration": {{
			manifest: "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {name: rf}\nspec:\n  nodeLabels: {pool: a}\n  nodeTaints:\n  - {key: spot, value: \"true\", effect: NoSchedule}\n  - {key: spot, value: \"true\", effect: NoExecute}\n  tolerations:\n  - {operator: Exists}\n  - {key: spot, operator: Equal, value: \"true\", effect: NoExecute, tolerationSeconds: 30}\n",
		}},
		"localqueue: other fields change, clusterQueue kept": {
			{manifest: "apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata: {name: lq}\nspec: {clusterQueue: research-cq}\n"},
			{manifest: "apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata: {name: lq}\nspec: {clusterQueue: research-cq, stopPolicy: HoldAndDrain}\n"},
		},
		"workload: zero, limit-only, init-container and pod-level resources": {{
			manifest: strings.Replace(goodWorkload, "        containers:\n", "        resources: {requests: {cpu: \"3\"}, limits: {memory: 2Gi}}\n        initContainers:\n        - {name: setup, image: busybox, resources: {requests: {cpu: 0}, limits: {memory: 64Mi}}}\n        containers:\n", 1),
		}},
		"workload: status and spec.active change while quota is reserved": {
			{manifest: reserved},
			{manifest: reserved, status: true},
			{manifest: strings.Replace(reserved, "  conditions:\n", "  conditions:\n  - {type: Admitted, status: \"True\", reason: Admitted, message: admitted, lastTransitionTime: \"2026-01-02T03:04:06Z\"}\n", 1), status: true},
			{manifest: strings.Replace(goodWorkload, "spec:\n", "spec:\n  active: false\n", 1)},
		},
		"workload: pod sets change once the reservation is released": {
			{manifest: reserved},
			{manifest: reserved, status: true},
			{manifest: goodWorkload + "status: {conditions: [{type: QuotaReserved, status: \"False\", reason: Pending, message: evicted, lastTransitionTime: \"2026-01-02T03:05:00Z\"}]}\n", status: true},
			{manifest: strings.Replace(goodWorkload, "count: 2", "count: 3", 1)},
		},
		"workload: clusterName cleared on eviction, then set to another cluster": {
			{manifest: goodWorkload},
			{manifest: goodWorkload + "status: {nominatedClusterNames: [worker-1, worker-2]}\n", status: true},
			{manifest: goodWorkload + "status: {clusterName: worker-1}\n", status: true},
			{manifest: goodWorkload + "status: {}\n", status: true},
			{manifest: goodWorkload + "status: {clusterName: worker-2}\n", status: true},
		},
		"multikueue: Path kubeconfig, config with twenty clusters": {
			{manifest: "apiVersion: kueue.x-k8s.io/v1beta2\nkind: MultiKueueCluster\nmetadata: {name: worker-1}\nspec:\n  clusterSource:\n    kubeConfig: {location: /etc/multikueue/kubeconfigs/worker-1, locationType: Path}\n"},
			{manifest: "apiVersion: kueue.x-k8s.io/v1beta2\nkind: MultiKueueConfig\nmetadata: {name: mkconf}\nspec:\n  clusters: [" + clusterNames(20) + "]\n"},
		},
	}
	names := make([]string, 0, len(cases))
	for name := range cases {
		names = append(names, name)
	}
	sort.Strings(names)
	for i, name := range names {
		t.Run(name, func(t *testing.T) {
			ns := fmt.Sprintf("acceptance-%d", i)
			if err := k8sClient.Create(ctx(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
				t.Fatalf("create namespace %q: %v", ns, err)
			}
			existing := map[string]*unstructured.Unstructured{}
			for step, c := range cases[name] {
				if _, err := send(t, ns, c.manifest, c.status, existing); err != nil {
					t.Fatalf("step %d rejected: %v", step, err)
				}
			}
		})
	}
}

// TestKueueWrittenObjectsAreStoredUnpruned creates the Kueue-written objects of api/v1beta2/testdata
// (status through the status subresource), reads them back and checks the API server kept every
// field: a field missing from our schema would be pruned silently.
func TestKueueWrittenObjectsAreStoredUnpruned(t *testing.T) {
	if err := k8sClient.Create(ctx(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "rt-research"}}); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile("../../api/v1beta2/testdata/kueue-written.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range decodeManifests(t, raw) {
		want := jsonShaped(t, obj.Object)
		t.Run(obj.GetKind()+"/"+obj.GetName(), func(t *testing.T) {
			createWithStatus(t, obj.GetNamespace(), obj)
			stored := &unstructured.Unstructured{}
			stored.SetGroupVersionKind(obj.GroupVersionKind())
			if err := k8sClient.Get(ctx(t), client.ObjectKeyFromObject(obj), stored); err != nil {
				t.Fatal(err)
			}
			if lost := lostFields(want, jsonShaped(t, stored.Object), ""); lost != "" {
				t.Errorf("fields pruned or changed by the API server:\n%s", lost)
			}
		})
	}
}

// TestDiscoveryNamesAndColumns checks what kubectl sees: short names and the kueue category in
// discovery, and the printer columns of `kubectl get` for ClusterQueue, LocalQueue and Workload.
func TestDiscoveryNamesAndColumns(t *testing.T) {
	dc, err := discovery.NewDiscoveryClientForConfig(restConfig)
	if err != nil {
		t.Fatal(err)
	}
	list, err := dc.ServerResourcesForGroupVersion("kueue.x-k8s.io/v1beta2")
	if err != nil {
		t.Fatal(err)
	}
	gotNames := map[string][]string{}
	for _, r := range list.APIResources {
		if strings.Contains(r.Name, "/") {
			continue // subresources
		}
		if diff := cmp.Diff([]string{"kueue"}, r.Categories); diff != "" {
			t.Errorf("%s categories (-want +got):\n%s", r.Name, diff)
		}
		gotNames[r.Name] = r.ShortNames
	}
	wantNames := map[string][]string{
		"admissionchecks":         {"ac"},
		"clusterqueues":           {"cq"},
		"cohorts":                 {"co"},
		"localqueues":             {"queue", "queues", "lq"},
		"multikueueclusters":      {"mkc"},
		"multikueueconfigs":       {"mkconf"},
		"resourceflavors":         {"flavor", "flavors", "rf"},
		"workloadpriorityclasses": {"wpc"},
		"workloads":               {"wl", "kwl", "kueueworkload"},
	}
	if diff := cmp.Diff(wantNames, gotNames); diff != "" {
		t.Errorf("short names (-want +got):\n%s", diff)
	}

	if err := k8sClient.Create(ctx(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "columns"}}); err != nil {
		t.Fatal(err)
	}
	existing := map[string]*unstructured.Unstructured{}
	for _, c := range []change{
		{manifest: strings.NewReplacer("name: cq", "name: columns-cq", "  cohortName: team\n", "  cohort: ai-platform\n").Replace(goodClusterQueue)},
		{manifest: strings.NewReplacer("name: cq", "name: columns-cq", "  cohortName: team\n", "  cohort: ai-platform\n").Replace(goodClusterQueue) + "status: {pendingWorkloads: 3, reservingWorkloads: 2, admittedWorkloads: 1}\n", status: true},
		{manifest: "apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata: {name: team-queue}\nspec: {clusterQueue: columns-cq}\n"},
		{manifest: "apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata: {name: team-queue}\nspec: {clusterQueue: columns-cq}\nstatus: {pendingWorkloads: 3, admittedWorkloads: 1}\n", status: true},
		{manifest: goodWorkload},
		{manifest: goodWorkload + strings.Replace(reservedStatus, "  conditions:\n", "  conditions:\n  - {type: Admitted, status: \"True\", reason: Admitted, message: admitted, lastTransitionTime: \"2026-01-02T03:04:06Z\"}\n", 1), status: true},
	} {
		if _, err := send(t, "columns", c.manifest, c.status, existing); err != nil {
			t.Fatal(err)
		}
	}
	cases := map[string]struct {
		path        string
		wantColumns []string
		wantCells   []any // all cells but the last (Age)
	}{
		"kubectl get clusterqueue": {
			path:        "/apis/kueue.x-k8s.io/v1beta2/clusterqueues/columns-cq",
			wantColumns: []string{"Name", "Cohort", "Strategy", "Pending Workloads", "Admitted Workloads", "Age"},
			wantCells:   []any{"columns-cq", "ai-platform", "BestEffortFIFO", float64(3), float64(1)},
		},
		"kubectl get localqueue": {
			path:        "/apis/kueue.x-k8s.io/v1beta2/namespaces/columns/localqueues/team-queue",
			wantColumns: []string{"Name", "ClusterQueue", "Pending Workloads", "Admitted Workloads", "Age"},
			wantCells:   []any{"team-queue", "columns-cq", float64(3), float64(1)},
		},
		"kubectl get workloads -o wide": {
			path:        "/apis/kueue.x-k8s.io/v1beta2/namespaces/columns/workloads/wl",
			wantColumns: []string{"Name", "Queue", "Reserved in", "Admitted", "Finished", "Age"},
			wantCells:   []any{"wl", "team-queue", "cq", "True", nil},
		},
	}
	httpClient, err := rest.HTTPClientFor(restConfig)
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			table := getTable(t, httpClient, tc.path)
			var columns []string
			for _, c := range table.ColumnDefinitions {
				columns = append(columns, c.Name)
			}
			if diff := cmp.Diff(tc.wantColumns, columns); diff != "" {
				t.Errorf("columns (-want +got):\n%s", diff)
			}
			if len(table.Rows) != 1 || len(table.Rows[0].Cells) != len(tc.wantColumns) {
				t.Fatalf("got rows %v, want one row of %d cells", table.Rows, len(tc.wantColumns))
			}
			if diff := cmp.Diff(tc.wantCells, table.Rows[0].Cells[:len(tc.wantCells)]); diff != "" {
				t.Errorf("cells (-want +got):\n%s", diff)
			}
		})
	}
}

// getTable asks the API server for the server-side table kubectl prints.
func getTable(t *testing.T, httpClient *http.Client, path string) *metav1.Table {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx(t), http.MethodGet, strings.TrimSuffix(restConfig.Host, "/")+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s: %s", path, resp.Status, body)
	}
	table := &metav1.Table{}
	if err := json.Unmarshal(body, table); err != nil {
		t.Fatalf("decode table: %v", err)
	}
	return table
}

// jsonShaped gives an object the shape encoding/json decodes to, so values compare equal.
func jsonShaped(t *testing.T, obj map[string]any) map[string]any {
	t.Helper()
	j, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(j, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// lostFields lists every value of want that is missing from got or differs in it; got may hold
// more (defaults, server-set metadata).
func lostFields(want, got any, path string) string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return fmt.Sprintf("%s: want an object, got %v\n", path, got)
		}
		keys := make([]string, 0, len(w))
		for k := range w {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var out string
		for _, k := range keys {
			if _, ok := g[k]; !ok {
				out += fmt.Sprintf("%s.%s: missing\n", path, k)
				continue
			}
			out += lostFields(w[k], g[k], path+"."+k)
		}
		return out
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return fmt.Sprintf("%s: want %d items, got %v\n", path, len(w), got)
		}
		var out string
		for i := range w {
			out += lostFields(w[i], g[i], fmt.Sprintf("%s[%d]", path, i))
		}
		return out
	default:
		if !reflect.DeepEqual(want, got) {
			return fmt.Sprintf("%s: want %v, got %v\n", path, want, got)
		}
		return ""
	}
}
