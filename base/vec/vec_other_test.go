//go:build !amd64 || purego

package vec

import "testing"

// checkGeluWide: no vector kernels on this build.
func checkGeluWide(*testing.T, []float32) {}
