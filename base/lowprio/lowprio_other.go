//go:build !linux

package lowprio

import "errors"

// lowerThread is unavailable here: only Linux sets priorities per thread.
func lowerThread() error { return errors.New("lowprio: per-thread priority needs Linux") }

// threadPolicy is unavailable here.
func threadPolicy() (int, error) { return 0, errors.New("lowprio: per-thread priority needs Linux") }

// threadNice is unavailable here.
func threadNice() (int, error) { return 0, errors.New("lowprio: per-thread priority needs Linux") }
