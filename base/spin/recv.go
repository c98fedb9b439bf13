package spin

import "time"

// Poll receives from c without blocking: it polls c for up to budget,
// yielding the core between polls (Yield), so that a value sent meanwhile
// is taken at once instead of after a wake-up, and the core does not idle
// (an idle virtual CPU halts, and its wake-up costs the host's
// scheduling). got is false when nothing came within the budget; otherwise
// v and ok are what <-c gave. budget <= 0 tries once.
func Poll[T any](c <-chan T, budget time.Duration) (v T, ok, got bool) {
	s := Spinner{Budget: budget}
	for {
		select {
		case v, ok = <-c:
			return v, ok, true
		default:
		}
		if budget <= 0 || !s.More() {
			return v, false, false
		}
		Yield()
	}
}

// Recv receives from c as <-c does, but polls c for up to budget first
// (Poll). Past the budget it blocks. budget <= 0 blocks at once.
func Recv[T any](c <-chan T, budget time.Duration) (T, bool) {
	if v, ok, got := Poll(c, budget); got {
		return v, ok
	}
	v, ok := <-c
	return v, ok
}
