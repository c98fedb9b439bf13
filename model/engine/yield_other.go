//go:build !linux

package engine

import "runtime"

// yieldThread lets other goroutines run on this thread's P (the operating
// system's scheduler preempts the polling thread for other threads).
func yieldThread() { runtime.Gosched() }
