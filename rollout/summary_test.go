package rollout

import (
	"math"
	"testing"
)

func TestIQM(t *testing.T) {
	for _, tc := range []struct {
		x    []float64
		want float64
	}{
		{[]float64{5}, 5},
		{[]float64{1, 3}, 2},
		{[]float64{1, 2, 100}, 103.0 / 3},         // n < 4: nothing dropped
		{[]float64{4, 1, 3, 2}, 2.5},              // drop 1 each end: mean(2,3)
		{[]float64{100, 1, 2, 3, -50}, 2},         // n=5: drop 1 each end
		{[]float64{8, 1, 2, 3, 4, 5, 6, 7}, 4.5},  // drop 2 each end: mean(3..6)
		{[]float64{9, 1, 2, 3, 4, 5, 6, 7, 8}, 5}, // n=9: drop 2 each end: mean(3..7)
	} {
		if got := IQM(tc.x); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("IQM(%v) = %v, want %v", tc.x, got, tc.want)
		}
	}
	if !math.IsNaN(IQM(nil)) {
		t.Error("IQM of nothing is not NaN")
	}
}

func TestBootstrap(t *testing.T) {
	x := make([]float64, 40)
	for i := range x {
		x[i] = float64(i%10) + 0.1*float64(i)
	}
	s, err := Bootstrap(x, DefaultResamples, 1)
	if err != nil {
		t.Fatal(err)
	}
	if s.N != 40 || s.IQM != IQM(x) {
		t.Errorf("summary %+v, want n 40 and IQM %v", s, IQM(x))
	}
	if !(s.Lo < s.IQM && s.IQM < s.Hi) {
		t.Errorf("interval [%v, %v] does not bracket the IQM %v", s.Lo, s.Hi, s.IQM)
	}
	// The interval's ends against the exact bootstrap distribution:
	// TestBootstrapExact.
	again, _ := Bootstrap(x, DefaultResamples, 1)
	other, _ := Bootstrap(x, DefaultResamples, 2)
	if again != s {
		t.Errorf("same seed gave %+v then %+v", s, again)
	}
	if other == s {
		t.Errorf("different seeds gave identical intervals %+v", s)
	}
	// Identical values: a zero-width interval.
	c, _ := Bootstrap([]float64{2, 2, 2, 2, 2}, DefaultResamples, 3)
	if c.IQM != 2 || c.Lo != 2 || c.Hi != 2 {
		t.Errorf("constant values: %+v", c)
	}
	for _, bad := range []struct {
		x []float64
		r int
	}{{nil, 2000}, {[]float64{1, math.NaN()}, 2000}, {[]float64{1}, 100}} {
		if _, err := Bootstrap(bad.x, bad.r, 1); err == nil {
			t.Errorf("Bootstrap(%v, %d): no error", bad.x, bad.r)
		}
	}
}
