//go:build tools

// Package tools records the kwok command this module builds, so go.mod and go.sum pin it.
package tools

import _ "sigs.k8s.io/kwok/cmd/kwok"
