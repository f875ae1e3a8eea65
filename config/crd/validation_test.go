/*
Copyright 2026 The fleetq Authors.

Licensed under the Apache License, Version 2.0.
*/

package crd_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Valid objects the bad manifests below start from; each case changes one thing.
const (
	goodClusterQueue = `
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: cq
spec:
  cohortName: team
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: 4}
      - {name: memory, nominalQuota: 4Gi}
`
	goodWorkload = `
apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata:
  name: wl
spec:
  queueName: team-queue
  podSets:
  - name: main
    count: 2
    template:
      spec:
        restartPolicy: Never
        containers:
        - name: trainer
          image: registry.k8s.io/e2e-test-images/agnhost:2.53
          resources:
            requests: {cpu: "1", memory: 512Mi}
`
	// reservedStatus is a Workload status holding quota for goodWorkload.
	reservedStatus = `
status:
  conditions:
  - type: QuotaReserved
    status: "True"
    reason: QuotaReserved
    message: Quota reserved in ClusterQueue cq
    lastTransitionTime: "2026-01-02T03:04:05Z"
  admission:
    clusterQueue: cq
    podSetAssignments:
    - name: main
      count: 2
      flavors: {cpu: default, memory: default}
      resourceUsage: {cpu: "2", memory: 1Gi}
`
)

// rulesNotChecked is the extra cause the API server adds when a schema error (enum, size) stops it
// from running the CEL rules.
const rulesNotChecked = "<nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"

// rejection is a manifest the API server must refuse, with the exact field errors it must report.
type rejection struct {
	// before lists manifests created first (a status in them is then written through /status);
	// they must be accepted.
	before []string
	// manifest is created, or replaces the object of the same kind and name created by before.
	manifest string
	// status sends manifest to the status subresource.
	status bool
	// want is every cause of the rejection, as "field: message".
	want []string
}

func TestInvalidManifestsAreRejected(t *testing.T) {
	cases := map[string]rejection{
		// ClusterQueue.
		"clusterqueue: covered resource is not a qualified name": {
			manifest: strings.NewReplacer("[cpu, memory]", "[cpu, memory/]", "{name: memory,", "{name: memory/,").Replace(goodClusterQueue),
			want:     []string{`spec.resourceGroups[0].coveredResources[1]: Invalid value: "memory/": must be a qualified resource name such as cpu, memory or example.com/gpu: an optional DNS-subdomain prefix and '/', then up to 63 alphanumerics, '-', '_' or '.'`},
		},
		"clusterqueue: resource covered by two resource groups": {
			manifest: goodClusterQueue + `
  - coveredResources: [memory]
    flavors:
    - name: other
      resources:
      - {name: memory, nominalQuota: 1Gi}
`,
			want: []string{`spec.resourceGroups: Invalid value: a resource is covered more than once; list each resource once, in the coveredResources of a single resource group`},
		},
		"clusterqueue: resource covered twice by one resource group": {
			manifest: strings.NewReplacer("[cpu, memory]", "[cpu, cpu]", "{name: memory, nominalQuota: 4Gi}", "{name: cpu, nominalQuota: 4}").Replace(goodClusterQueue),
			want: []string{
				`spec.resourceGroups[0].flavors[0].resources[1]: Duplicate value: {"name":"cpu"}`,
				`spec.resourceGroups: Invalid value: a resource is covered more than once; list each resource once, in the coveredResources of a single resource group`,
			},
		},
		"clusterqueue: flavor in two resource groups": {
			manifest: goodClusterQueue + `
  - coveredResources: [example.com/gpu]
    flavors:
    - name: default
      resources:
      - {name: example.com/gpu, nominalQuota: 8}
`,
			want: []string{`spec.resourceGroups: Invalid value: a flavor appears in more than one resource group; a flavor provides the resources of a single group, so merge the groups or use another flavor`},
		},
		"clusterqueue: flavor lists resources in another order": {
			manifest: strings.Replace(goodClusterQueue, "[cpu, memory]", "[memory, cpu]", 1),
			want:     []string{`spec.resourceGroups[0].flavors: Invalid value: each flavor must list exactly the resources of coveredResources, in the same order; fix the flavor's resources or coveredResources`},
		},
		"clusterqueue: flavor misses a covered resource": {
			manifest: strings.Replace(goodClusterQueue, "      - {name: memory, nominalQuota: 4Gi}\n", "", 1),
			want:     []string{`spec.resourceGroups[0].flavors: Invalid value: each flavor must list exactly the resources of coveredResources, in the same order; fix the flavor's resources or coveredResources`},
		},
		"clusterqueue: negative nominalQuota": {
			manifest: strings.Replace(goodClusterQueue, "{name: cpu, nominalQuota: 4}", "{name: cpu, nominalQuota: -1}", 1),
			want:     []string{`spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: Invalid value: must not be negative; set 0 or a positive quantity such as 4 or 4Gi`},
		},
		"clusterqueue: negative nominalQuota with a unit": {
			manifest: strings.Replace(goodClusterQueue, "nominalQuota: 4Gi", "nominalQuota: -4Gi", 1),
			want:     []string{`spec.resourceGroups[0].flavors[0].resources[1].nominalQuota: Invalid value: must not be negative; set 0 or a positive quantity such as 4 or 4Gi`},
		},
		"clusterqueue: negative borrowingLimit": {
			manifest: strings.Replace(goodClusterQueue, "nominalQuota: 4}", "nominalQuota: 4, borrowingLimit: -1}", 1),
			want:     []string{`spec.resourceGroups[0].flavors[0].resources[0].borrowingLimit: Invalid value: must not be negative; set 0 to forbid borrowing, or remove it for no limit`},
		},
		"clusterqueue: negative lendingLimit": {
			manifest: strings.Replace(goodClusterQueue, "nominalQuota: 4Gi}", "nominalQuota: 4Gi, lendingLimit: -1Mi}", 1),
			want:     []string{`spec.resourceGroups[0].flavors[0].resources[1].lendingLimit: Invalid value: must not be negative; set 0 to lend nothing, or remove it to lend all unused quota`},
		},
		"clusterqueue: lendingLimit above nominalQuota": {
			manifest: strings.Replace(goodClusterQueue, "nominalQuota: 4}", "nominalQuota: 4, lendingLimit: 5}", 1),
			want:     []string{`spec.resourceGroups[0].flavors[0].resources[0].lendingLimit: Invalid value: must be less than or equal to nominalQuota (4); lower lendingLimit or raise nominalQuota`},
		},
		"clusterqueue: lendingLimit above nominalQuota in other units": {
			manifest: strings.Replace(goodClusterQueue, "nominalQuota: 4Gi}", "nominalQuota: 4Gi, lendingLimit: 4097Mi}", 1),
			want:     []string{`spec.resourceGroups[0].flavors[0].resources[1].lendingLimit: Invalid value: must be less than or equal to nominalQuota (4Gi); lower lendingLimit or raise nominalQuota`},
		},
		"clusterqueue: borrowingLimit without a cohort": {
			manifest: strings.NewReplacer("  cohortName: team\n", "", "nominalQuota: 4}", "nominalQuota: 4, borrowingLimit: 2}").Replace(goodClusterQueue),
			want:     []string{`spec.resourceGroups: Forbidden: borrowingLimit is set but the ClusterQueue has no cohort to borrow from; set spec.cohortName, or remove borrowingLimit`},
		},
		"clusterqueue: lendingLimit without a cohort": {
			manifest: strings.NewReplacer("  cohortName: team\n", "", "nominalQuota: 4}", "nominalQuota: 4, lendingLimit: 2}").Replace(goodClusterQueue),
			want:     []string{`spec.resourceGroups: Forbidden: lendingLimit is set but the ClusterQueue has no cohort to lend to; set spec.cohortName, or remove lendingLimit`},
		},
		"clusterqueue: cohort alias differs from cohortName": {
			manifest: strings.Replace(goodClusterQueue, "  cohortName: team\n", "  cohortName: team\n  cohort: ai-platform\n", 1),
			want:     []string{`spec.cohort: Invalid value: cohort ("ai-platform") and cohortName ("team") differ; cohort is an alias of cohortName: set only cohortName, or set both to the same value`},
		},
		"clusterqueue: borrowWithinCohort preemption while reclaimWithinCohort is Never": {
			manifest: goodClusterQueue + `  preemption:
    reclaimWithinCohort: Never
    borrowWithinCohort: {policy: LowerPriority}
`,
			want: []string{`spec.preemption.borrowWithinCohort.policy: Invalid value: must be Never when reclaimWithinCohort is Never; set reclaimWithinCohort to LowerPriority or Any, or set borrowWithinCohort.policy to Never`},
		},
		"clusterqueue: flavorFungibility preference without TryNextFlavor": {
			manifest: goodClusterQueue + `  flavorFungibility:
    whenCanBorrow: MayStopSearch
    preference: PreemptionOverBorrowing
`,
			want: []string{`spec.flavorFungibility.preference: Invalid value: may only be set when both whenCanBorrow and whenCanPreempt are TryNextFlavor; set both to TryNextFlavor or remove preference`},
		},
		"clusterqueue: negative fairSharing weight": {
			manifest: goodClusterQueue + "  fairSharing: {weight: \"-0.5\"}\n",
			want:     []string{`spec.fairSharing.weight: Invalid value: must not be negative; use 0 to always yield unused quota, or a positive weight such as 1`},
		},
		"clusterqueue: fairSharing weight that collapses to 0": {
			manifest: goodClusterQueue + "  fairSharing: {weight: 1n}\n",
			want:     []string{`spec.fairSharing.weight: Invalid value: when not 0, must be greater than 10^-9 (1n): smaller weights collapse to 0 in share computations; use 0 or a larger weight`},
		},
		"clusterqueue: unknown queueingStrategy": {
			manifest: goodClusterQueue + "  queueingStrategy: FIFO\n",
			want:     []string{`spec.queueingStrategy: Unsupported value: "FIFO": supported values: "StrictFIFO", "BestEffortFIFO"`, rulesNotChecked},
		},
		"clusterqueue: unknown stopPolicy": {
			manifest: goodClusterQueue + "  stopPolicy: Drain\n",
			want:     []string{`spec.stopPolicy: Unsupported value: "Drain": supported values: "None", "Hold", "HoldAndDrain"`, rulesNotChecked},
		},
		"clusterqueue: namespaceSelector In without values": {
			manifest: goodClusterQueue + "  namespaceSelector:\n    matchExpressions:\n    - {key: team, operator: In}\n",
			want:     []string{`spec.namespaceSelector.matchExpressions: Invalid value: each expression needs operator In or NotIn with at least one value, or Exists or DoesNotExist with no values; fix the operator or the values`},
		},
		"clusterqueue: quota quantity longer than 64 characters": {
			manifest: strings.Replace(goodClusterQueue, "nominalQuota: 4Gi}", `nominalQuota: "`+strings.Repeat("1", 65)+`"}`, 1),
			want:     []string{`spec.resourceGroups[0].flavors[0].resources[1].nominalQuota: Too long: may not be more than 64 bytes`, rulesNotChecked},
		},

		// Cohort.
		"cohort: borrowingLimit without a parent": {
			manifest: strings.NewReplacer("kind: ClusterQueue", "kind: Cohort", "  cohortName: team\n", "", "nominalQuota: 4}", "nominalQuota: 4, borrowingLimit: 2}").Replace(goodClusterQueue),
			want:     []string{`spec.resourceGroups: Forbidden: borrowingLimit is set but the Cohort has no parent to borrow from; set spec.parentName, or remove borrowingLimit`},
		},

		"cohort: lendingLimit without a parent": {
			manifest: strings.NewReplacer("kind: ClusterQueue", "kind: Cohort", "  cohortName: team\n", "", "nominalQuota: 4}", "nominalQuota: 4, lendingLimit: 2}").Replace(goodClusterQueue),
			want:     []string{`spec.resourceGroups: Forbidden: lendingLimit is set but the Cohort has no parent to lend to; set spec.parentName, or remove lendingLimit`},
		},
		"cohort: resource covered by two resource groups": {
			manifest: strings.NewReplacer("kind: ClusterQueue", "kind: Cohort", "  cohortName: team\n", "").Replace(goodClusterQueue) + `
  - coveredResources: [cpu]
    flavors:
    - name: other
      resources:
      - {name: cpu, nominalQuota: 1}
`,
			want: []string{`spec.resourceGroups: Invalid value: a resource is covered more than once; list each resource once, in the coveredResources of a single resource group`},
		},

		// LocalQueue.
		"localqueue: clusterQueue is not a DNS subdomain": {
			manifest: "apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata: {name: lq}\nspec: {clusterQueue: Research_CQ}\n",
			want:     []string{`spec.clusterQueue: Invalid value: "Research_CQ": must be the name of a ClusterQueue: a lowercase DNS subdomain (letters, digits, '-' and '.', at most 253 characters) such as research-cq`},
		},
		"localqueue: clusterQueue changed": {
			before:   []string{"apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata: {name: lq}\nspec: {clusterQueue: research-cq}\n"},
			manifest: "apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata: {name: lq}\nspec: {clusterQueue: inference-cq}\n",
			want:     []string{`spec.clusterQueue: Invalid value: "inference-cq": is immutable; delete the LocalQueue and create it again to point it at another ClusterQueue`},
		},

		// ResourceFlavor.
		"resourceflavor: unknown taint effect": {
			manifest: "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {name: rf}\nspec:\n  nodeTaints:\n  - {key: spot, value: \"true\", effect: NoRun}\n",
			want:     []string{`spec.nodeTaints[0].effect: Invalid value: "NoRun" is not a taint effect; use NoSchedule, PreferNoSchedule or NoExecute`},
		},
		"resourceflavor: taint key and effect repeated": {
			manifest: "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {name: rf}\nspec:\n  nodeTaints:\n  - {key: spot, value: \"true\", effect: NoSchedule}\n  - {key: spot, value: \"false\", effect: NoSchedule}\n",
			want:     []string{`spec.nodeTaints: Invalid value: each key and effect pair may appear only once; remove the duplicate taint`},
		},
		"resourceflavor: more than 8 taints": {
			manifest: "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {name: rf}\nspec:\n  nodeTaints:\n" + taints(9),
			want:     []string{`spec.nodeTaints: Too many: 9: must have at most 8 items`, rulesNotChecked},
		},
		"resourceflavor: tolerationSeconds without NoExecute": {
			manifest: "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {name: rf}\nspec:\n  tolerations:\n  - {key: spot, operator: Exists, effect: NoSchedule, tolerationSeconds: 60}\n",
			want:     []string{`spec.tolerations[0].tolerationSeconds: Invalid value: is only allowed with effect NoExecute; set effect to NoExecute or remove tolerationSeconds`},
		},
		"resourceflavor: toleration without key and operator Equal": {
			manifest: "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {name: rf}\nspec:\n  tolerations:\n  - {operator: Equal, value: \"true\"}\n",
			want:     []string{`spec.tolerations[0].operator: Invalid value: must be Exists when key is empty (an empty key matches every taint); set a key or use operator Exists`},
		},
		"resourceflavor: toleration Exists with a value": {
			manifest: "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {name: rf}\nspec:\n  tolerations:\n  - {key: spot, operator: Exists, value: \"true\"}\n",
			want:     []string{`spec.tolerations[0].value: Invalid value: must be empty when operator is Exists; remove the value or use operator Equal`},
		},
		"resourceflavor: topologyName without nodeLabels": {
			manifest: "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {name: rf}\nspec: {topologyName: datacenter}\n",
			want:     []string{`spec.nodeLabels: Required value: at least one node label is required when topologyName is set; add the labels that select the topology's nodes`},
		},

		"resourceflavor: topology flavor changed": {
			before:   []string{"apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {name: rf}\nspec: {topologyName: datacenter, nodeLabels: {pool: a}}\n"},
			manifest: "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {name: rf}\nspec: {topologyName: datacenter, nodeLabels: {pool: b}}\n",
			want:     []string{`spec: Invalid value: is immutable once topologyName is set; create a new ResourceFlavor instead`},
		},
		"resourceflavor: unknown toleration operator": {
			manifest: "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {name: rf}\nspec:\n  tolerations:\n  - {key: spot, operator: In, value: \"true\"}\n",
			want:     []string{`spec.tolerations[0].operator: Invalid value: must be Equal (the default) or Exists`},
		},
		"resourceflavor: unknown toleration effect": {
			manifest: "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {name: rf}\nspec:\n  tolerations:\n  - {key: spot, operator: Exists, effect: NoRun}\n",
			want:     []string{`spec.tolerations[0].effect: Invalid value: must be NoSchedule, PreferNoSchedule, NoExecute or empty (all effects)`},
		},

		// Workload.
		"workload: no pod sets": {
			manifest: "apiVersion: kueue.x-k8s.io/v1beta2\nkind: Workload\nmetadata: {name: wl}\nspec: {queueName: team-queue, podSets: []}\n",
			want:     []string{`spec.podSets: Invalid value: 0: spec.podSets in body should have at least 1 items`},
		},
		"workload: more than 18 pod sets": {
			manifest: "apiVersion: kueue.x-k8s.io/v1beta2\nkind: Workload\nmetadata: {name: wl}\nspec:\n  podSets:\n" + podSets(19),
			want:     []string{`spec.podSets: Too many: 19: must have at most 18 items`, rulesNotChecked},
		},
		"workload: two pod sets with the same name": {
			manifest: goodWorkload + `  - name: main
    count: 1
    template: {spec: {containers: [{name: c, image: busybox}]}}
`,
			want: []string{`spec.podSets[1]: Duplicate value: {"name":"main"}`},
		},
		"workload: minCount on two pod sets": {
			manifest: strings.Replace(goodWorkload, "    count: 2\n", "    count: 2\n    minCount: 1\n", 1) + `  - name: workers
    count: 4
    minCount: 2
    template: {spec: {containers: [{name: c, image: busybox}]}}
`,
			want: []string{`spec.podSets: Invalid value: at most one pod set may set minCount (partial admission); remove minCount from the others`},
		},
		"workload: minCount above count": {
			manifest: strings.Replace(goodWorkload, "    count: 2\n", "    count: 2\n    minCount: 3\n", 1),
			want:     []string{`spec.podSets[0].minCount: Invalid value: must be less than or equal to count; lower minCount or raise count`},
		},
		"workload: negative container request": {
			manifest: strings.Replace(goodWorkload, `cpu: "1"`, `cpu: "-1"`, 1),
			want:     []string{`spec.podSets[0].template.spec.containers: Invalid value: a container requests or limits a negative quantity; set every request and limit of containers to 0 or more`},
		},
		"workload: negative init container limit": {
			manifest: strings.Replace(goodWorkload, "        containers:\n", "        initContainers:\n        - {name: setup, image: busybox, resources: {limits: {memory: -1}}}\n        containers:\n", 1),
			want:     []string{`spec.podSets[0].template.spec.initContainers: Invalid value: a container requests or limits a negative quantity; set every request and limit of initContainers to 0 or more`},
		},
		"workload: negative pod-level request": {
			manifest: strings.Replace(goodWorkload, "        restartPolicy: Never\n", "        restartPolicy: Never\n        resources: {requests: {cpu: -500m}}\n", 1),
			want:     []string{`spec.podSets[0].template.spec.resources: Invalid value: pod-level resource requests and limits must not be negative; set them to 0 or a positive quantity`},
		},
		"workload: container requests the reserved pods resource": {
			manifest: strings.Replace(goodWorkload, `memory: 512Mi}`, `memory: 512Mi, pods: "1"}`, 1),
			want:     []string{`spec.podSets[0].template.spec.containers: Invalid value: a container uses the resource name pods, which is reserved for Kueue internal accounting; remove it from the requests and limits of containers`},
		},
		"workload: priorityClassRef without priority": {
			manifest: goodWorkload + "  priorityClassRef: {group: kueue.x-k8s.io, kind: WorkloadPriorityClass, name: high}\n",
			want:     []string{`spec.priority: Required value: must be set when priorityClassRef is set; set priority to the value of the referenced priority class`},
		},
		"workload: priorityClassRef kind does not match its group": {
			manifest: goodWorkload + "  priority: 100\n  priorityClassRef: {group: scheduling.k8s.io, kind: WorkloadPriorityClass, name: high}\n",
			want:     []string{`spec.priorityClassRef.kind: Invalid value: must be PriorityClass when group is scheduling.k8s.io`},
		},
		"workload: pod sets changed while quota is reserved": {
			before:   []string{goodWorkload + reservedStatus},
			manifest: strings.Replace(goodWorkload, "count: 2", "count: 3", 1),
			want:     []string{`spec.podSets: Invalid value: cannot change while quota is reserved (condition QuotaReserved is True); deactivate the workload (spec.active: false) and wait for the reservation to be released, or create a new Workload`},
		},
		"workload: queueName changed while quota is reserved": {
			before:   []string{goodWorkload + reservedStatus},
			manifest: strings.Replace(goodWorkload, "queueName: team-queue", "queueName: other-queue", 1),
			want:     []string{`spec.queueName: Invalid value: cannot change while quota is reserved (condition QuotaReserved is True); deactivate the workload (spec.active: false) and wait for the reservation to be released`},
		},
		"workload: QuotaReserved without admission": {
			before:   []string{goodWorkload},
			manifest: goodWorkload + strings.Split(reservedStatus, "  admission:")[0],
			status:   true,
			want:     []string{`status.admission: Required value: must be set while the QuotaReserved condition is True; set admission together with the condition`},
		},
		"workload: admission without an assignment per pod set": {
			before:   []string{goodWorkload},
			manifest: goodWorkload + strings.Split(reservedStatus, "    podSetAssignments:")[0] + "    podSetAssignments: []\n",
			status:   true,
			want:     []string{`status.admission.podSetAssignments: Invalid value: must have one entry per spec.podSets entry while quota is reserved`},
		},
		"workload: clusterName changed": {
			before:   []string{goodWorkload + "status: {clusterName: worker-1}\n"},
			manifest: goodWorkload + "status: {clusterName: worker-2}\n",
			status:   true,
			want:     []string{`status.clusterName: Invalid value: cannot change once set; clear it (evict the workload) before assigning another cluster`},
		},
		"workload: clusterName together with nominatedClusterNames": {
			before:   []string{goodWorkload},
			manifest: goodWorkload + "status: {clusterName: worker-1, nominatedClusterNames: [worker-1, worker-2]}\n",
			status:   true,
			want:     []string{`status.nominatedClusterNames: Invalid value: must be empty when clusterName is set; clear nominatedClusterNames when assigning the cluster`},
		},

		"workload: priorityClassRef kind does not match the kueue group": {
			manifest: goodWorkload + "  priority: 100\n  priorityClassRef: {group: kueue.x-k8s.io, kind: PriorityClass, name: high}\n",
			want:     []string{`spec.priorityClassRef.kind: Invalid value: must be WorkloadPriorityClass when group is kueue.x-k8s.io`},
		},
		"workload: init container requests the reserved pods resource": {
			manifest: strings.Replace(goodWorkload, "        containers:\n", "        initContainers:\n        - {name: setup, image: busybox, resources: {limits: {pods: 1}}}\n        containers:\n", 1),
			want:     []string{`spec.podSets[0].template.spec.initContainers: Invalid value: a container uses the resource name pods, which is reserved for Kueue internal accounting; remove it from the requests and limits of initContainers`},
		},
		"workload: pod-level request of the reserved pods resource": {
			manifest: strings.Replace(goodWorkload, "        restartPolicy: Never\n", "        restartPolicy: Never\n        resources: {requests: {pods: 1}}\n", 1),
			want:     []string{`spec.podSets[0].template.spec.resources: Invalid value: the resource name pods is reserved for Kueue internal accounting; remove it from pod-level requests and limits`},
		},
		"workload: topology slice without a value per level": {
			before:   []string{goodWorkload},
			manifest: goodWorkload + strings.Replace(reservedStatus, "      resourceUsage: {cpu: \"2\", memory: 1Gi}\n", "      resourceUsage: {cpu: \"2\", memory: 1Gi}\n"+topology("[rack, host]", "[{universalValue: r1}]", "universalPodCount: 2"), 1),
			status:   true,
			want:     []string{`status.admission.podSetAssignments[0].topologyAssignment.slices: Invalid value: each slice needs one valuesPerLevel entry per level`},
		},
		"workload: topology slice with podCounts and universalPodCount": {
			before:   []string{goodWorkload},
			manifest: goodWorkload + strings.Replace(reservedStatus, "      resourceUsage: {cpu: \"2\", memory: 1Gi}\n", "      resourceUsage: {cpu: \"2\", memory: 1Gi}\n"+topology("[host]", "[{universalValue: h1}]", "podCounts: [2], universalPodCount: 2"), 1),
			status:   true,
			want:     []string{`status.admission.podSetAssignments[0].topologyAssignment.slices[0]: Invalid value: set exactly one of podCounts or universalPodCount`},
		},
		"workload: topology podCounts not one per domain": {
			before:   []string{goodWorkload},
			manifest: goodWorkload + strings.Replace(reservedStatus, "      resourceUsage: {cpu: \"2\", memory: 1Gi}\n", "      resourceUsage: {cpu: \"2\", memory: 1Gi}\n"+topology("[host]", "[{universalValue: h1}]", "podCounts: [1, 1]"), 1),
			status:   true,
			want:     []string{`status.admission.podSetAssignments[0].topologyAssignment.slices[0].podCounts: Invalid value: must have domainCount entries`},
		},
		"workload: topology roots not one per domain": {
			before:   []string{goodWorkload},
			manifest: goodWorkload + strings.Replace(reservedStatus, "      resourceUsage: {cpu: \"2\", memory: 1Gi}\n", "      resourceUsage: {cpu: \"2\", memory: 1Gi}\n"+topology("[host]", "[{roots: [h1, h2]}]", "universalPodCount: 2"), 1),
			status:   true,
			want:     []string{`status.admission.podSetAssignments[0].topologyAssignment.slices[0].valuesPerLevel: Invalid value: roots, when set, must have domainCount entries`},
		},
		"workload: topology universalValue with a prefix": {
			before:   []string{goodWorkload},
			manifest: goodWorkload + strings.Replace(reservedStatus, "      resourceUsage: {cpu: \"2\", memory: 1Gi}\n", "      resourceUsage: {cpu: \"2\", memory: 1Gi}\n"+topology("[host]", "[{universalValue: h1, prefix: node-}]", "universalPodCount: 2"), 1),
			status:   true,
			want:     []string{`status.admission.podSetAssignments[0].topologyAssignment.slices[0].valuesPerLevel[0]: Invalid value: universalValue cannot be combined with prefix or suffix`},
		},
		"workload: topology level with roots and universalValue": {
			before:   []string{goodWorkload},
			manifest: goodWorkload + strings.Replace(reservedStatus, "      resourceUsage: {cpu: \"2\", memory: 1Gi}\n", "      resourceUsage: {cpu: \"2\", memory: 1Gi}\n"+topology("[host]", "[{universalValue: h1, roots: [h1]}]", "universalPodCount: 2"), 1),
			status:   true,
			want:     []string{`status.admission.podSetAssignments[0].topologyAssignment.slices[0].valuesPerLevel[0]: Invalid value: set exactly one of roots or universalValue`},
		},

		// MultiKueue.
		"multikueueconfig: no clusters": {
			manifest: "apiVersion: kueue.x-k8s.io/v1beta2\nkind: MultiKueueConfig\nmetadata: {name: mkconf}\nspec: {clusters: []}\n",
			want:     []string{`spec.clusters: Invalid value: 0: spec.clusters in body should have at least 1 items`},
		},
		"multikueueconfig: more than 20 clusters": {
			manifest: "apiVersion: kueue.x-k8s.io/v1beta2\nkind: MultiKueueConfig\nmetadata: {name: mkconf}\nspec:\n  clusters: [" + clusterNames(21) + "]\n",
			want:     []string{`spec.clusters: Too many: 21: must have at most 20 items`, rulesNotChecked},
		},
		"multikueueconfig: cluster listed twice": {
			manifest: "apiVersion: kueue.x-k8s.io/v1beta2\nkind: MultiKueueConfig\nmetadata: {name: mkconf}\nspec: {clusters: [worker-1, worker-2, worker-1]}\n",
			want: []string{
				`spec.clusters[2]: Duplicate value: "worker-1"`,
				`spec.clusters: Invalid value: each MultiKueueCluster may be listed only once; remove the duplicate`,
			},
		},
		"multikueuecluster: both kubeConfig and clusterProfileRef": {
			manifest: "apiVersion: kueue.x-k8s.io/v1beta2\nkind: MultiKueueCluster\nmetadata: {name: worker-1}\nspec:\n  clusterSource:\n    kubeConfig: {location: worker-1-kubeconfig}\n    clusterProfileRef: {name: worker-1}\n",
			want:     []string{`spec.clusterSource: Invalid value: set exactly one of kubeConfig or clusterProfileRef`},
		},
		"multikueuecluster: neither kubeConfig nor clusterProfileRef": {
			manifest: "apiVersion: kueue.x-k8s.io/v1beta2\nkind: MultiKueueCluster\nmetadata: {name: worker-1}\nspec: {clusterSource: {}}\n",
			want:     []string{`spec.clusterSource: Invalid value: set exactly one of kubeConfig or clusterProfileRef`},
		},
		"multikueuecluster: unknown locationType": {
			manifest: "apiVersion: kueue.x-k8s.io/v1beta2\nkind: MultiKueueCluster\nmetadata: {name: worker-1}\nspec:\n  clusterSource:\n    kubeConfig: {location: worker-1-kubeconfig, locationType: ConfigMap}\n",
			want:     []string{`spec.clusterSource.kubeConfig.locationType: Unsupported value: "ConfigMap": supported values: "Secret", "Path"`, rulesNotChecked},
		},

		// AdmissionCheck.
		"admissioncheck: controllerName changed": {
			before:   []string{"apiVersion: kueue.x-k8s.io/v1beta2\nkind: AdmissionCheck\nmetadata: {name: ac}\nspec: {controllerName: kueue.x-k8s.io/multikueue}\n"},
			manifest: "apiVersion: kueue.x-k8s.io/v1beta2\nkind: AdmissionCheck\nmetadata: {name: ac}\nspec: {controllerName: example.com/other}\n",
			want:     []string{`spec.controllerName: Invalid value: "example.com/other": is immutable; create a new AdmissionCheck for another controller`},
		},
	}

	names := make([]string, 0, len(cases))
	for name := range cases {
		names = append(names, name)
	}
	sort.Strings(names)
	for i, name := range names {
		tc := cases[name]
		t.Run(name, func(t *testing.T) {
			ns := fmt.Sprintf("rejection-%d", i)
			if err := k8sClient.Create(ctx(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
				t.Fatalf("create namespace %q: %v", ns, err)
			}
			existing := map[string]*unstructured.Unstructured{}
			for _, manifest := range tc.before {
				for _, obj := range decodeManifests(t, []byte(manifest)) {
					existing[obj.GetKind()+"/"+obj.GetName()] = createWithStatus(t, ns, obj)
				}
			}
			obj, err := send(t, ns, tc.manifest, tc.status, existing)
			if err == nil {
				t.Fatalf("%s %q was accepted, want it rejected with %q", obj.GetKind(), obj.GetName(), tc.want)
			}
			if !apierrors.IsInvalid(err) {
				t.Fatalf("got %v, want an Invalid error", err)
			}
			if diff := cmp.Diff(tc.want, causes(err)); diff != "" {
				t.Errorf("field errors (-want +got):\n%s\nfull error: %v", diff, err)
			}
		})
	}
}

// send creates the single object of manifest in ns, or replaces the object of the same kind and name
// in existing (through the status subresource when status is true), and returns the API server's answer.
func send(t *testing.T, ns, manifest string, status bool, existing map[string]*unstructured.Unstructured) (*unstructured.Unstructured, error) {
	t.Helper()
	objs := decodeManifests(t, []byte(manifest))
	if len(objs) != 1 {
		t.Fatalf("manifest holds %d objects, want 1", len(objs))
	}
	obj := objs[0]
	setNamespace(t, ns, obj)
	key := obj.GetKind() + "/" + obj.GetName()
	old, update := existing[key]
	var err error
	switch {
	case update && status:
		obj.SetResourceVersion(old.GetResourceVersion())
		err = k8sClient.Status().Update(ctx(t), obj, strict)
	case update:
		obj.SetResourceVersion(old.GetResourceVersion())
		err = k8sClient.Update(ctx(t), obj, strict)
	case status:
		t.Fatalf("%s: a status change needs the object to exist first", key)
	default:
		err = k8sClient.Create(ctx(t), obj, strict)
		if err == nil {
			deleteOnCleanup(t, obj)
		}
	}
	if err == nil {
		existing[key] = obj
	}
	return obj, err
}

// createWithStatus creates obj, then writes its status through the status subresource (the API server
// ignores status on create), and returns the stored object.
func createWithStatus(t *testing.T, ns string, obj *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	setNamespace(t, ns, obj)
	status, hasStatus := obj.Object["status"]
	if err := k8sClient.Create(ctx(t), obj, strict); err != nil {
		t.Fatalf("create %s %q: %v", obj.GetKind(), obj.GetName(), err)
	}
	deleteOnCleanup(t, obj)
	if hasStatus {
		obj.Object["status"] = status
		if err := k8sClient.Status().Update(ctx(t), obj, strict); err != nil {
			t.Fatalf("write status of %s %q: %v", obj.GetKind(), obj.GetName(), err)
		}
	}
	return obj
}

// setNamespace puts namespaced kinds in the case's namespace; cluster-scoped kinds stay unscoped.
func setNamespace(t *testing.T, ns string, obj *unstructured.Unstructured) {
	t.Helper()
	namespaced, err := k8sClient.IsObjectNamespaced(obj)
	if err != nil {
		t.Fatalf("scope of %s: %v", obj.GetKind(), err)
	}
	if namespaced {
		obj.SetNamespace(ns)
	}
}

// deleteOnCleanup removes cluster-scoped objects too, so cases can reuse names.
func deleteOnCleanup(t *testing.T, obj *unstructured.Unstructured) {
	t.Helper()
	key := client.ObjectKeyFromObject(obj)
	gvk := obj.GroupVersionKind()
	t.Cleanup(func() {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		u.SetNamespace(key.Namespace)
		u.SetName(key.Name)
		if err := k8sClient.Delete(context.Background(), u); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete %s %s: %v", gvk.Kind, key, err)
		}
	})
}

// topology is a topologyAssignment of one slice of one domain, indented for a podSetAssignment.
func topology(levels, valuesPerLevel, counts string) string {
	return fmt.Sprintf("      topologyAssignment:\n        levels: %s\n        slices:\n        - {domainCount: 1, valuesPerLevel: %s, %s}\n", levels, valuesPerLevel, counts)
}

func taints(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "  - {key: example.com/taint-%d, effect: NoSchedule}\n", i)
	}
	return b.String()
}

func podSets(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "  - name: ps-%d\n    template: {spec: {containers: [{name: c, image: busybox}]}}\n", i)
	}
	return b.String()
}

func clusterNames(n int) string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("worker-%d", i)
	}
	return strings.Join(names, ", ")
}
