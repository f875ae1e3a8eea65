/*
Copyright 2026 The fleetq Authors.

Licensed under the Apache License, Version 2.0.
*/

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestWalk(t *testing.T) {
	schema := map[string]any{"properties": map[string]any{
		"spec": map[string]any{"properties": map[string]any{
			"podSets": map[string]any{"items": map[string]any{"properties": map[string]any{
				"name": map[string]any{"type": "string"},
			}}},
		}},
	}}
	cases := map[string]struct {
		path    string
		want    map[string]any
		wantErr string
	}{
		"property of list items": {path: ".spec.podSets[].name", want: map[string]any{"type": "string"}},
		"missing property":       {path: ".spec.queueName", wantErr: `no property "queueName"`},
		"items of a non-list":    {path: ".spec[]", wantErr: `not a list at ".spec"`},
		"malformed path":         {path: "spec", wantErr: `cannot parse "spec"`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := walk(schema, tc.path)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("walk(%q) error = %v, want %q", tc.path, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("walk(%q) (-want +got):\n%s", tc.path, diff)
			}
		})
	}
}

// TestRunIsIdempotentOnTheCheckedInCRDs re-applies the limits to a copy of ../bases: the committed
// files already carry them, so nothing may change.
func TestRunIsIdempotentOnTheCheckedInCRDs(t *testing.T) {
	dir := t.TempDir()
	files, err := filepath.Glob("../bases/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs in ../bases: %v", err)
	}
	before := map[string][]byte{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		before[filepath.Base(f)] = raw
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := run(dir); err != nil {
		t.Fatal(err)
	}
	for name, raw := range before {
		after, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(raw, after) {
			t.Errorf("%s changed: the checked-in CRDs lack limits; run make generate", name)
		}
	}
	workloads := string(before["kueue.x-k8s.io_workloads.yaml"])
	if !strings.Contains(workloads, "maxProperties: 64") {
		t.Error("workloads CRD carries no maxProperties: 64 for container resources")
	}
}

func TestRunFailsWhenACRDIsMissing(t *testing.T) {
	err := run(t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "no generated CRD named clusterqueues.kueue.x-k8s.io") {
		t.Fatalf("run on an empty directory: got %v, want a missing-CRD error", err)
	}
}
