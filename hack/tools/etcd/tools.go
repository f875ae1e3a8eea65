//go:build tools

// Package tools records the etcd command this module builds, so go.mod and go.sum pin it.
package tools

import _ "go.etcd.io/etcd/server/v3"
