/*
Copyright 2026 The fleetq Authors.

Licensed under the Apache License, Version 2.0.
*/

package crd_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	kueue "github.com/fleetq/fleetq/api/v1beta2"
	"github.com/fleetq/fleetq/config/crd"
)

// The tests of this package run against one real etcd and kube-apiserver (envtest) with the embedded
// CRDs installed, started once for the package.
var (
	restConfig *rest.Config
	k8sClient  client.Client
)

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(runWithAPIServer(m))
}

func runWithAPIServer(m *testing.M) int {
	binDir, err := controlPlaneBinDir()
	if err != nil {
		fmt.Fprintln(os.Stderr, "config/crd:", err)
		return 1
	}
	crds, err := crd.CustomResourceDefinitions()
	if err != nil {
		fmt.Fprintln(os.Stderr, "config/crd:", err)
		return 1
	}
	env := &envtest.Environment{
		CRDs:                  crds,
		BinaryAssetsDirectory: binDir,
		ErrorIfCRDPathMissing: true,
	}
	restConfig, err = env.Start()
	if err != nil {
		fmt.Fprintf(os.Stderr, "config/crd: start envtest with binaries from %s: %v\n", binDir, err)
		return 1
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "config/crd: stop envtest:", err)
		}
	}()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		fmt.Fprintln(os.Stderr, "config/crd: scheme:", err)
		return 1
	}
	if err := kueue.AddToScheme(s); err != nil {
		fmt.Fprintln(os.Stderr, "config/crd: scheme:", err)
		return 1
	}
	k8sClient, err = client.New(restConfig, client.Options{Scheme: s})
	if err != nil {
		fmt.Fprintln(os.Stderr, "config/crd: client:", err)
		return 1
	}
	return m.Run()
}

// controlPlaneBinDir finds etcd and kube-apiserver the way every fleetq test does: KUBEBUILDER_ASSETS
// or FLEETQ_BIN_DIR when set (make test sets both), else bin/ at the module root.
func controlPlaneBinDir() (string, error) {
	dir := os.Getenv("KUBEBUILDER_ASSETS")
	if dir == "" {
		dir = os.Getenv("FLEETQ_BIN_DIR")
	}
	if dir == "" {
		root, err := moduleRoot()
		if err != nil {
			return "", err
		}
		dir = filepath.Join(root, "bin")
	}
	for _, name := range []string{"etcd", "kube-apiserver"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			return "", fmt.Errorf("%s not found in %s: run `make tools` to build the pinned control-plane binaries", name, dir)
		}
	}
	return dir, nil
}

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory: cannot find bin/; set FLEETQ_BIN_DIR")
		}
		dir = parent
	}
}

// strict makes the API server reject unknown fields, as kubectl does by default (--validate=strict),
// instead of pruning them silently.
var strict = client.FieldValidation("Strict")

// decodeManifests splits a multi-document YAML manifest into objects, exactly as kubectl reads them.
func decodeManifests(t *testing.T, raw []byte) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return objs
			}
			t.Fatalf("decode manifest: %v", err)
		}
		if len(obj.Object) > 0 {
			objs = append(objs, obj)
		}
	}
}

// causes lists the field errors of an API rejection as "field: message", the way kubectl shows them.
func causes(err error) []string {
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil {
		return []string{"not a field error: " + fmt.Sprint(err)}
	}
	var out []string
	for _, c := range status.Status().Details.Causes {
		out = append(out, c.Field+": "+c.Message)
	}
	return out
}

func ctx(t *testing.T) context.Context {
	return t.Context()
}

func yamlToJSON(t *testing.T, raw []byte) []byte {
	t.Helper()
	j, err := yaml.YAMLToJSON(raw)
	if err != nil {
		t.Fatalf("convert YAML to JSON: %v", err)
	}
	return j
}
