package spin

import "time"

// Recv receives from c as <-c does, but polls c for up to budget first,
// yielding the core between polls (Yield): a value sent meanwhile is taken
// at once instead of after a wake-up, and the core does not idle (an idle
// virtual CPU halts, and its wake-up costs the host's scheduling). Past the
// budget it blocks. budget <= 0 blocks at once.
func Recv[T any](c <-chan T, budget time.Duration) (T, bool) {
	if budget > 0 {
		s := Spinner{Budget: budget}
		for s.More() {
			select {
			case v, ok := <-c:
				return v, ok
			default:
			}
			Yield()
		}
	}
	v, ok := <-c
	return v, ok
}
