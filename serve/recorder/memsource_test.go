package recorder

import (
	"context"
	"fmt"
)

// MemorySource returns a Source over msgs (tests, or a recording read
// into memory).
func MemorySource(msgs []Msg) Source {
	return func(ctx context.Context, fn func(Msg) error) error {
		for _, m := range msgs {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("recorder: %w", err)
			}
			if err := fn(m); err != nil {
				return err
			}
		}
		return nil
	}
}
