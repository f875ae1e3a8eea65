package copies

import (
	"maps"
	"testing"
)

func TestWorkerNamespaceFollowsPodSecurityLabels(t *testing.T) {
	mgmt := map[string]string{
		"pod-security.kubernetes.io/enforce":         "restricted",
		"pod-security.kubernetes.io/enforce-version": "latest",
		"team": "research",
	}
	want := podSecurityLabels(mgmt)
	if !maps.Equal(want, map[string]string{"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest"}) {
		t.Fatalf("podSecurityLabels = %v: only the Pod Security labels are copied", want)
	}

	worker := map[string]string{CreatedByLabel: "fleetq", "pod-security.kubernetes.io/enforce": "privileged", "pod-security.kubernetes.io/warn": "baseline"}
	got, changed := withPodSecurity(worker, want)
	if !changed {
		t.Fatal("a privileged worker namespace under a restricted management namespace must change")
	}
	if !maps.Equal(got, map[string]string{CreatedByLabel: "fleetq", "pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest"}) {
		t.Errorf("labels = %v: fleetq's own labels stay, Pod Security labels are the management namespace's, stale ones go", got)
	}
	if _, changed := withPodSecurity(got, want); changed {
		t.Error("labels already in line do not change")
	}
	if got, changed := withPodSecurity(map[string]string{CreatedByLabel: "fleetq", "pod-security.kubernetes.io/enforce": "baseline"}, map[string]string{}); !changed || len(podSecurityLabels(got)) != 0 {
		t.Errorf("a management namespace without Pod Security labels clears the worker's: %v %v", got, changed)
	}
}
