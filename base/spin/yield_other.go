//go:build !linux

package spin

import "runtime"

// Yield lets other goroutines run on this thread's P (the operating
// system's scheduler preempts the polling thread for other threads).
func Yield() { runtime.Gosched() }
