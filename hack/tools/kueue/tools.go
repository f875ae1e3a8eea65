//go:build tools

// Package tools records the Kueue command this module builds, so go.mod and go.sum pin it; the
// benchmark runs it beside fleetq, and reads its CRDs and webhook manifests from the same module.
package tools

import _ "sigs.k8s.io/kueue/cmd/kueue"
