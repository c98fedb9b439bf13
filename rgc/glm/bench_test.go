package glm

import (
	"context"
	"testing"
)

// BenchmarkFit fits three synthetic cells (5 minutes, 210,000 training
// bins each) with the default options; the shipped recording's 60 cells of
// 563,000 training bins cost about 60 * 563 / (3 * 210) = 54 times as much.
func BenchmarkFit(b *testing.B) {
	sc, err := synthRec()
	if err != nil {
		b.Fatal(err)
	}
	opts := DefaultOptions()
	opts.Workers = 1
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, _, err := Fit(context.Background(), sc.rec, []int{0, 1, 2}, opts); err != nil {
			b.Fatal(err)
		}
	}
}
