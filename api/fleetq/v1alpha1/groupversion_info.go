/*
Copyright 2026 The fleetq Authors.

Licensed under the Apache License, Version 2.0.
*/

// Package v1alpha1 holds fleetq's own API, group fleetq.dev: the CapacityReport a worker's agent
// publishes in its cluster, and the labels, annotations, names and reasons of the contract between
// the manager (dispatch) and the agent, so both sides import one definition of it.
//
// +kubebuilder:object:generate=true
// +groupName=fleetq.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is fleetq.dev/v1alpha1, the apiVersion of fleetq's own kinds.
	GroupVersion = schema.GroupVersion{Group: "fleetq.dev", Version: "v1alpha1"}

	// SchemeBuilder collects the kinds of this package so clients and managers can register them once.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme registers every kind of this package with a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
