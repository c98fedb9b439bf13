//go:build !amd64 || purego

package sgemm

// kern is the micro-kernel in use: portable Go on this platform.
var kern = genericKernel

// availableKernels lists every kernel this build can run (for tests).
func availableKernels() []kernelSpec { return []kernelSpec{genericKernel} }
