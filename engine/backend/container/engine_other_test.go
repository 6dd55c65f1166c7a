//go:build !linux

package container_test

import "testing"

// runHelpers: the helper server and slow runtime are the Linux tests' (container_test.go).
func runHelpers() {}

// remoteEngine, off Linux, is the engine the container CLI finds by itself (Docker Desktop, a
// Podman machine, or what CONTAINER_HOST or DOCKER_HOST names): every engine is elsewhere.
func remoteEngine(*testing.T) string { return "" }

func stopEngine() {}
