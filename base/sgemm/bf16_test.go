package sgemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// bf16Ref is the nearest bfloat16 to a non-NaN x (ties to even) found by
// comparing the two candidates in float64, with subnormals flushed to signed
// zero.
func bf16Ref(x float32) uint16 {
	u := math.Float32bits(x)
	if u&0x7f800000 == 0 {
		return uint16(u>>16) & 0x8000
	}
	if math.IsInf(float64(x), 0) {
		return uint16(u >> 16)
	}
	down := u &^ 0xffff
	up := down + 0x10000
	upv := float64(math.Float32frombits(up))
	if math.IsInf(upv, 0) { // the next binade's first value, 2^128
		upv = math.Copysign(0x1p128, upv)
	}
	dd := math.Abs(float64(x) - float64(math.Float32frombits(down)))
	du := math.Abs(upv - float64(x))
	if dd < du || dd == du && down>>16&1 == 0 {
		return uint16(down >> 16)
	}
	return uint16(up >> 16)
}

// bf16Cases are float32s that exercise the rounding: ties, carries into the
// exponent, overflow to infinity, subnormals, zeros, infinities.
func bf16Cases(rng *rand.Rand) []float32 {
	bits := []uint32{0, 0x80000000, 0x3f808000, 0x3f818000, 0x3f808001, 0x3f80ffff, 0x3fff8000,
		0x7f7f8000, 0x7f7f7fff, 0xff7fffff, 0x00000001, 0x807fffff, 0x00800000, 0x7f800000,
		0xff800000, 0x3f800000, 0xbf7fffff, 0x007fffff}
	var xs []float32
	for _, b := range bits {
		xs = append(xs, math.Float32frombits(b))
	}
	for range 2000 {
		xs = append(xs, math.Float32frombits(rng.Uint32()&^0x7f800000|uint32(1+rng.IntN(254))<<23))
		xs = append(xs, float32(rng.NormFloat64()))
	}
	return xs
}

func TestToBF16(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	xs := bf16Cases(rng)
	for _, x := range xs {
		if got, want := ToBF16(x), bf16Ref(x); got != want {
			t.Fatalf("ToBF16(%#08x) = %#04x, want %#04x", math.Float32bits(x), got, want)
		}
	}
	nan := math.Float32frombits(0x7fa00001) // signalling NaN
	if h := ToBF16(nan); FromBF16(h) == FromBF16(h) || h&0x40 == 0 {
		t.Errorf("ToBF16(sNaN) = %#04x, want a quiet NaN", h)
	}
	// The vector conversion (assembly where available) must agree, for
	// every length (the tail goes through Go).
	if !bf16AsmAvailable() {
		t.Log("no AVX512_BF16: portable conversion only")
	}
	for _, n := range []int{0, 1, 31, 32, 33, 64, 100, len(xs)} {
		dst := make([]uint16, n+1)
		dst[n] = 0xabcd
		toBF16(dst, xs[:n])
		for i, x := range xs[:n] {
			if dst[i] != ToBF16(x) {
				t.Fatalf("n=%d: toBF16[%d] of %#08x = %#04x, want %#04x", n, i, math.Float32bits(x), dst[i], ToBF16(x))
			}
		}
		if dst[n] != 0xabcd {
			t.Fatalf("n=%d: toBF16 wrote past the end", n)
		}
	}
}

// bf16Paths runs f with the assembly kernels and with the portable ones.
func bf16Paths(t *testing.T, f func(t *testing.T)) {
	orig := bf16Asm
	defer func() { bf16Asm = orig }()
	paths := []bool{false}
	if bf16AsmAvailable() {
		paths = append(paths, true)
	}
	for _, asm := range paths {
		bf16Asm = asm
		t.Run(fmt.Sprintf("asm=%v", asm), f)
	}
}

type bf16Case struct {
	m, n, k, lda int // lda < k: overlapping rows
}

var bf16Shapes = []bf16Case{
	{1, 1, 1, 1}, {3, 7, 2, 2}, {4, 16, 3, 3}, {5, 17, 5, 9}, {12, 32, 64, 64}, {13, 33, 65, 70},
	{11, 31, 31, 31}, {8, 64, 8, 8}, {25, 81, 100, 100}, {96, 64, 512, 512}, {97, 65, 513, 513},
	{200, 40, 30, 30}, {7, 100, 1100, 1100}, {4, 4, 0, 0},
	// Convolutions: A is the padded input read with overlapping rows.
	{40, 16, 105, 10}, {63, 48, 3 * 64, 64}, {50, 96, 3 * 256, 256}, {9, 32, 21, 7}, {130, 33, 600, 301},
	// Gaps between rows: converted as one span (even k, gap < k) or row by
	// row; NaN in the gaps must not leak in.
	{30, 40, 64, 70}, {30, 40, 63, 70}, {20, 24, 40, 100}, {97, 50, 512, 600},
}

// bf16Inputs returns A (m x k, stride lda), B (k x n), a bias and the
// float64 references: exact on the bf16-rounded inputs (ref16) and on the
// inputs as given (ref32), with the sums of |a_p b_p| per element (scale).
func bf16Inputs(rng *rand.Rand, s bf16Case, relu bool) (a, b, bias []float32, ref16, ref32, scale []float64) {
	a = randSlice(rng, max(0, (s.m-1)*s.lda+s.k))
	for i := 0; i < s.m-1 && s.lda > s.k; i++ {
		for p := s.k; p < s.lda; p++ {
			a[i*s.lda+p] = float32(math.NaN()) // gaps between rows are not A
		}
	}
	b = randSlice(rng, s.k*s.n)
	bias = randSlice(rng, s.n)
	r := func(x float32) float64 { return float64(FromBF16(ToBF16(x))) }
	ref16, ref32, scale = make([]float64, s.m*s.n), make([]float64, s.m*s.n), make([]float64, s.m*s.n)
	for i := 0; i < s.m; i++ {
		for j := 0; j < s.n; j++ {
			s16, s32, sc := float64(bias[j]), float64(bias[j]), math.Abs(float64(bias[j]))
			for p := 0; p < s.k; p++ {
				av, bv := a[i*s.lda+p], b[p*s.n+j]
				s16 += r(av) * r(bv)
				s32 += float64(av) * float64(bv)
				sc += math.Abs(float64(av) * float64(bv))
			}
			if relu {
				s16, s32 = max(s16, 0), max(s32, 0)
			}
			ref16[i*s.n+j], ref32[i*s.n+j], scale[i*s.n+j] = s16, s32, sc
		}
	}
	return a, b, bias, ref16, ref32, scale
}

// Error bounds, elementwise, with S = |bias| + sum over p of |a_p b_p|:
//   - against the exact product of the bf16-rounded inputs: float32
//     accumulation of k+1 terms, |err| <= (k+2) 2^-24 S;
//   - against the exact product of the float32 inputs: each bf16 rounding
//     (8 significant bits) has relative error <= 2^-8, so a product's is
//     <= 2^-7 + 2^-16, and |err| <= (2^-7 + 2^-16 + (k+2) 2^-24) S.
//
// ReLU is 1-Lipschitz, so the bounds hold after it too.
func bf16Bounds(k int) (vs16, vs32 float64) {
	acc := float64(k+2) * 0x1p-24
	return acc, 0x1p-7 + 0x1p-16 + acc
}

func TestGemmPackedBiasBF16(t *testing.T) {
	bf16Paths(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(23, 24))
		work := make([]float32, WorkSizeBF16())
		for _, s := range bf16Shapes {
			for _, relu := range []bool{false, true} {
				a, b, bias, ref16, ref32, scale := bf16Inputs(rng, s, relu)
				ldc := s.n + 3
				c := randSlice(rng, s.m*ldc) // garbage that must not leak in
				GemmPackedBiasBF16(s.m, a, s.lda, NewPackedBF16(false, s.k, s.n, b, s.n), bias, relu, c, ldc, work)
				b16, b32 := bf16Bounds(s.k)
				var worst32 float64
				for i := 0; i < s.m; i++ {
					for j := 0; j < s.n; j++ {
						got, e := float64(c[i*ldc+j]), i*s.n+j
						if d := math.Abs(got - ref16[e]); !(d <= b16*scale[e]) {
							t.Fatalf("%+v relu=%v: C[%d,%d] = %v, exact on bf16 inputs %v (|diff| %g > %g)", s, relu, i, j, got, ref16[e], d, b16*scale[e])
						}
						d := math.Abs(got - ref32[e])
						if !(d <= b32*scale[e]) {
							t.Fatalf("%+v relu=%v: C[%d,%d] = %v, exact %v (|diff| %g > %g)", s, relu, i, j, got, ref32[e], d, b32*scale[e])
						}
						worst32 = max(worst32, d/scale[e])
					}
					for j := s.n; j < ldc && i < s.m-1; j++ {
						if got := c[i*ldc+j]; got != got {
							t.Fatalf("%+v: NaN written past column n", s)
						}
					}
				}
				if testing.Verbose() && !relu && s.k > 0 {
					t.Logf("%+v: max |C - exact| / S = %.2g (bound %.2g)", s, worst32, b32)
				}
			}
		}
	})
}

// TestBF16AsmMatchesGo checks that the assembly kernels and conversion give
// the same bits as the portable definition (kernBF16Go), through the whole
// GEMM: every tile shape, edge tiles, both store modes.
func TestBF16AsmMatchesGo(t *testing.T) {
	if !bf16AsmAvailable() {
		t.Skip("no AVX512_BF16 kernels here (CPU or purego build)")
	}
	orig := bf16Asm
	defer func() { bf16Asm = orig }()
	rng := rand.New(rand.NewPCG(25, 26))
	work := make([]float32, WorkSizeBF16())
	for _, s := range bf16Shapes {
		for _, relu := range []bool{false, true} {
			a := randSlice(rng, max(0, (s.m-1)*s.lda+s.k))
			b := randSlice(rng, s.k*s.n)
			bias := randSlice(rng, s.n)
			pb := NewPackedBF16(false, s.k, s.n, b, s.n)
			var out [2][]float32
			for i, asm := range []bool{false, true} {
				bf16Asm = asm
				out[i] = make([]float32, s.m*s.n)
				GemmPackedBiasBF16(s.m, a, s.lda, pb, bias, relu, out[i], s.n, work)
			}
			for e := range out[0] {
				if math.Float32bits(out[0][e]) != math.Float32bits(out[1][e]) {
					t.Fatalf("%+v relu=%v: element %d: Go %v, assembly %v", s, relu, e, out[0][e], out[1][e])
				}
			}
		}
	}
	// Direct kernel calls with C + A*B (no bias) for every tile shape.
	for _, rows := range []int{4, 8, 12} {
		for _, cols := range []int{16, 32} {
			for _, kp := range []int{1, 3, 4, 9, 256} {
				lda := 2*kp + 3
				a := make([]uint16, rows*lda)
				toBF16(a, randSlice(rng, len(a)))
				b := make([]uint32, kp*bf16NR)
				for i := range b {
					b[i] = uint32(ToBF16(float32(rng.NormFloat64()))) | uint32(ToBF16(float32(rng.NormFloat64())))<<16
				}
				c0 := randSlice(rng, rows*40)
				var out [2][]float32
				for i, asm := range []bool{false, true} {
					bf16Asm = asm
					out[i] = append([]float32(nil), c0...)
					kernBF16(rows, cols, kp, a, lda, b, out[i], 40, nil, false)
				}
				for e := range c0 {
					if math.Float32bits(out[0][e]) != math.Float32bits(out[1][e]) {
						t.Fatalf("kernel %dx%d kp=%d: element %d: Go %v, assembly %v", rows, cols, kp, e, out[0][e], out[1][e])
					}
				}
			}
		}
	}
}

func TestPackedBF16Transposed(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 28))
	const k, n = 77, 45
	b := randSlice(rng, k*n)
	bt := make([]float32, n*(k+2))
	for p := 0; p < k; p++ {
		for j := 0; j < n; j++ {
			bt[j*(k+2)+p] = b[p*n+j]
		}
	}
	x, y := NewPackedBF16(false, k, n, b, n), NewPackedBF16(true, k, n, bt, k+2)
	if x.K() != k || x.N() != n || len(x.data) != len(y.data) {
		t.Fatalf("shapes: %dx%d, %d and %d words", x.K(), x.N(), len(x.data), len(y.data))
	}
	for i := range x.data {
		if x.data[i] != y.data[i] {
			t.Fatalf("word %d: %#x vs transposed %#x", i, x.data[i], y.data[i])
		}
	}
}

func TestGemmPackedBiasBF16Allocs(t *testing.T) {
	rng := rand.New(rand.NewPCG(29, 30))
	a := randSlice(rng, 100*300)
	pb := NewPackedBF16(false, 300, 70, randSlice(rng, 300*70), 70)
	bias := randSlice(rng, 70)
	c := make([]float32, 100*70)
	work := make([]float32, WorkSizeBF16())
	allocs := testing.AllocsPerRun(10, func() {
		GemmPackedBiasBF16(100, a, 300, pb, bias, true, c, 70, work)
		GemmPackedBiasBF16(90, a, 7, pb, bias, false, c, 70, work)
	})
	if allocs != 0 {
		t.Errorf("GemmPackedBiasBF16: %v allocations per call, want 0", allocs)
	}
}

func TestGemmPackedBiasBF16Panics(t *testing.T) {
	pb := NewPackedBF16(false, 4, 4, make([]float32, 16), 4)
	for name, f := range map[string]func(){
		"short work": func() {
			GemmPackedBiasBF16(4, make([]float32, 16), 4, pb, make([]float32, 4), false, make([]float32, 16), 4, make([]float32, 10))
		},
		"short bias": func() {
			GemmPackedBiasBF16(4, make([]float32, 16), 4, pb, make([]float32, 3), false, make([]float32, 16), 4, make([]float32, WorkSizeBF16()))
		},
		"short A": func() {
			GemmPackedBiasBF16(4, make([]float32, 15), 4, pb, make([]float32, 4), false, make([]float32, 16), 4, make([]float32, WorkSizeBF16()))
		},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}

func TestNewPackedBF16From(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	orig := kern
	defer func() { kern = orig }()
	for _, spec := range availableKernels() {
		kern = spec // the float32 packing depends on the kernel's nr
		for _, s := range []shape{{0, 45, 77}, {0, 1, 1}, {0, 100, 600}, {0, 32, 256}} {
			b := randSlice(rng, s.k*s.n)
			x, y := NewPackedBF16(false, s.k, s.n, b, s.n), NewPackedBF16From(NewPackedB(false, s.k, s.n, b, s.n))
			if y.K() != s.k || y.N() != s.n || len(x.data) != len(y.data) {
				t.Fatalf("k=%d n=%d: got %dx%d, %d words, want %d", s.k, s.n, y.K(), y.N(), len(y.data), len(x.data))
			}
			for i := range x.data {
				if x.data[i] != y.data[i] {
					t.Fatalf("%s k=%d n=%d: word %d: %#x from PackedB, want %#x", spec.name, s.k, s.n, i, y.data[i], x.data[i])
				}
			}
		}
	}
}
