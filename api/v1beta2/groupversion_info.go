/*
Copyright 2026 The fleetq Authors.

Licensed under the Apache License, Version 2.0.
*/

// Package v1beta2 holds fleetq's copy of Kueue's kueue.x-k8s.io/v1beta2 API, so manifests written for
// Kueue apply unchanged to a fleetq manager cluster. Field names, JSON tags, enums and defaults follow
// Kueue's published v1beta2 reference; the types and comments are fleetq's own.
//
// Deliberate differences from Kueue are few and documented where they live: ClusterQueue accepts
// spec.cohort as an alias of spec.cohortName (so the GPU quota tutorial applies as written), the
// Topology kind and ProvisioningRequestConfig are not served, and some validation that Kueue does in
// webhooks is done here by CEL rules in the CRDs (see config/crd).
//
// +kubebuilder:object:generate=true
// +groupName=kueue.x-k8s.io
package v1beta2

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the API group and version every Kueue manifest names in its apiVersion.
	GroupVersion = schema.GroupVersion{Group: "kueue.x-k8s.io", Version: "v1beta2"}

	// SchemeBuilder collects the kinds of this package so clients and managers can register them once.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme registers every kind of this package with a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
