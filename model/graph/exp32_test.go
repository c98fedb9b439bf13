package graph

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestExp32 checks exp32 against float32(math.Exp) over the float32 range
// that matters: at most one ulp apart everywhere, equal in nearly all
// cases, and saturating to +Inf and 0 like float32.
func TestExp32(t *testing.T) {
	if b := math.Float64bits(6755399441055744.0); b != magicBits {
		t.Fatalf("magicBits %#x, want %#x", uint64(magicBits), b)
	}
	rng := rand.New(rand.NewPCG(3, 3))
	const n = 1_000_000
	diff := 0
	for i := 0; i < n; i++ {
		x := float32(-110 + 205*rng.Float64()) // [-110, 95]
		if i%2 == 0 {
			x = float32(8 * rng.NormFloat64()) // the usual range
		}
		got, want := exp32(x), float32(math.Exp(float64(x)))
		if got == want {
			continue
		}
		diff++
		if math.IsInf(float64(want), 0) || want == 0 || math.IsInf(float64(got), 0) || got == 0 {
			t.Fatalf("exp32(%g) = %g, want %g", x, got, want)
		}
		if u := math.Float32bits(got) - math.Float32bits(want); u != 1 && u != math.MaxUint32 {
			t.Fatalf("exp32(%g) = %g, want %g (more than one ulp)", x, got, want)
		}
	}
	if diff > n/1000 {
		t.Errorf("exp32 differs from float32(math.Exp) by one ulp in %d of %d cases, want <= 0.1%%", diff, n)
	}
	inf := float32(math.Inf(1))
	for _, tc := range []struct{ x, want float32 }{
		{0, 1}, {100, inf}, {1e30, inf}, {-200, 0}, {-1e30, 0}, {inf, inf}, {-inf, 0},
	} {
		if got := exp32(tc.x); got != tc.want {
			t.Errorf("exp32(%g) = %g, want %g", tc.x, got, tc.want)
		}
	}
}
