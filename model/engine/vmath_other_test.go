//go:build !amd64 || purego

package engine

import "testing"

// checkGeluWide: no vector kernels on this build.
func checkGeluWide(t *testing.T, xs, g []float32) {}
