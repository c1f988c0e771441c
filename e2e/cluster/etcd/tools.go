//go:build tools

// Package tools pins the etcd server this module builds (see ../build.sh). It is
// a module of its own so that etcd's dependency versions never move the
// Kubernetes module's (../k8s).
package tools

import _ "go.etcd.io/etcd/server/v3"
