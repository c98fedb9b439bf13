package sgemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// bf16TrainRoutes runs f on every route of the bf16 training GEMMs: the
// rounding route on each float32 kernel, the bf16 kernels' route on the
// portable kernel (forced: the native route's blocking and packing on any
// CPU), and on the assembly kernels where the CPU has AVX512_BF16.
func bf16TrainRoutes(t *testing.T, f func(t *testing.T)) {
	origAsm, origForce, origKern := bf16Asm, bf16Force, kern
	defer func() { bf16Asm, bf16Force, kern = origAsm, origForce, origKern }()
	for _, spec := range availableKernels() {
		bf16Asm, bf16Force, kern = false, false, spec
		t.Run("rounding/"+spec.name, f)
	}
	kern = origKern
	bf16Asm, bf16Force = false, true
	t.Run("kernels/portable", f)
	if bf16AsmAvailable() {
		bf16Asm, bf16Force = true, false
		t.Run("kernels/asm", f)
	}
}

// bf16Ref64 returns float64 references of C = alpha*op(A)*op(B) + beta*C0
// (C0 m x n with row stride ldc, not read when beta is 0): ref16 on the
// operands a bf16 GEMM multiplies (alpha*op(A) rounded to float32, then
// both to bfloat16), ref32 on the values as given, and the scale
// S = |beta c0| + sum over p of |alpha a_p b_p| of each element.
func bf16Ref64(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32,
	c0 []float32, ldc int) (ref16, ref32, scale []float64) {
	r := func(x float32) float64 { return float64(FromBF16(ToBF16(x))) }
	ref16, ref32, scale = make([]float64, m*n), make([]float64, m*n), make([]float64, m*n)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var s16, s32, sc float64
			if beta != 0 {
				bc := float64(beta) * float64(c0[i*ldc+j])
				s16, s32, sc = bc, bc, math.Abs(bc)
			}
			for p := 0; p < k; p++ {
				ai, bi := i*lda+p, p*ldb+j
				if transA {
					ai = p*lda + i
				}
				if transB {
					bi = j*ldb + p
				}
				av, bv := a[ai], b[bi]
				s16 += r(alpha*av) * r(bv)
				x := float64(alpha) * float64(av) * float64(bv)
				s32 += x
				sc += math.Abs(x)
			}
			ref16[i*n+j], ref32[i*n+j], scale[i*n+j] = s16, s32, sc
		}
	}
	return ref16, ref32, scale
}

// checkBF16 checks C against the references within bf16Bounds(k) and
// returns the largest |C - ref32| / S, which shows that the operands were
// rounded (a float32 GEMM's is about 2^-24 sqrt(k) / k).
func checkBF16(t *testing.T, what string, m, n, k int, c []float32, ldc int, ref16, ref32, scale []float64) float64 {
	t.Helper()
	b16, b32 := bf16Bounds(k)
	var worst32 float64
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			got, e := float64(c[i*ldc+j]), i*n+j
			if d := math.Abs(got - ref16[e]); !(d <= b16*scale[e]) {
				t.Fatalf("%s: C[%d,%d] = %v, exact on bf16 operands %v (|diff| %g > %g)", what, i, j, got, ref16[e], d, b16*scale[e])
			}
			d := math.Abs(got - ref32[e])
			if !(d <= b32*scale[e]) {
				t.Fatalf("%s: C[%d,%d] = %v, exact %v (|diff| %g > %g)", what, i, j, got, ref32[e], d, b32*scale[e])
			}
			if scale[e] > 0 {
				worst32 = max(worst32, d/scale[e])
			}
		}
	}
	return worst32
}

// roundedEnough fails unless the worst relative error against the exact
// product of the unrounded inputs is that of bf16 operands: at least
// 2^-12 / sqrt(k) for a product of some size (random normal operands give
// about 2^-9 / sqrt(k) per element, a float32 GEMM about 2^-24 / sqrt(k)).
func roundedEnough(t *testing.T, what string, m, n, k int, worst32 float64) {
	t.Helper()
	if k >= 16 && m*n >= 16 && !(worst32 > 0x1p-12/math.Sqrt(float64(k))) {
		t.Fatalf("%s: max |C - exact| / S = %.3g: the operands were not rounded to bf16", what, worst32)
	}
}

// bf16AlphaBeta are the (alpha, beta) pairs the training graph uses (1, 0:
// a fresh product; 1, 1: accumulating a gradient; a scale: attention
// scores) and a general pair.
var bf16AlphaBeta = [][2]float32{{1, 0}, {1, 1}, {0.125, 0}, {0.37, 0.5}}

func TestGemmWorkBF16(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	work := make([]float32, GemmWorkSize())
	for _, s := range shapes {
		for _, tr := range [][2]bool{{false, false}, {false, true}, {true, false}, {true, true}} {
			for _, ab := range bf16AlphaBeta {
				transA, transB, alpha, beta := tr[0], tr[1], ab[0], ab[1]
				if s.m*s.n*s.k > 1<<22 && (transA || transB || alpha != 1) {
					continue // the largest shapes only untransposed, to keep the test short
				}
				lda, ldb, ldc := s.k+2, s.n+1, s.n+3
				if transA {
					lda = s.m + 2
				}
				if transB {
					ldb = s.k + 1
				}
				ra, rb := s.m, s.k
				if transA {
					ra = s.k
				}
				if transB {
					rb = s.n
				}
				a, b, c0 := randSlice(rng, ra*lda), randSlice(rng, rb*ldb), randSlice(rng, s.m*ldc)
				if beta == 0 {
					for i := range c0 {
						c0[i] = float32(math.NaN()) // C is not read
					}
				}
				ref16, ref32, scale := bf16Ref64(transA, transB, s.m, s.n, s.k, alpha, a, lda, b, ldb, beta, c0, ldc)
				name := fmt.Sprintf("%+v transA=%v transB=%v alpha=%v beta=%v", s, transA, transB, alpha, beta)
				bf16TrainRoutes(t, func(t *testing.T) {
					c := append([]float32(nil), c0...)
					GemmWorkBF16(work, transA, transB, s.m, s.n, s.k, alpha, a, lda, b, ldb, beta, c, ldc)
					worst := checkBF16(t, name, s.m, s.n, s.k, c, ldc, ref16, ref32, scale)
					roundedEnough(t, name, s.m, s.n, s.k, worst)
				})
			}
		}
	}
}

// TestGemmPackedBF16 checks B packed by PackBIntoBF16 and multiplied by
// GemmPacked, with A read as a convolution's input (overlapping rows,
// gaps between rows holding NaN that must not leak in), and by
// GemmPackedRoundedA on A rounded once (RoundBF16).
func TestGemmPackedBF16(t *testing.T) {
	rng := rand.New(rand.NewPCG(43, 44))
	work := make([]float32, WorkSize())
	for _, s := range bf16Shapes {
		for _, transB := range []bool{false, true} {
			for _, ab := range bf16AlphaBeta {
				alpha, beta := ab[0], ab[1]
				a := randSlice(rng, max(0, (s.m-1)*s.lda+s.k))
				for i := 0; i < s.m-1 && s.lda > s.k; i++ {
					for p := s.k; p < s.lda; p++ {
						a[i*s.lda+p] = float32(math.NaN())
					}
				}
				ldb := s.n
				if transB {
					ldb = s.k + 2
				}
				rows := s.k
				if transB {
					rows = s.n
				}
				b := randSlice(rng, rows*ldb)
				ldc := s.n + 1
				c0 := randSlice(rng, s.m*ldc)
				ref16, ref32, scale := bf16Ref64(false, transB, s.m, s.n, s.k, alpha, a, s.lda, b, ldb, beta, c0, ldc)
				name := fmt.Sprintf("%+v transB=%v alpha=%v beta=%v", s, transB, alpha, beta)
				ar := append([]float32(nil), a...)
				RoundBF16(ar)
				bf16TrainRoutes(t, func(t *testing.T) {
					p := PackBIntoBF16(nil, transB, s.k, s.n, b, ldb)
					c := append([]float32(nil), c0...)
					GemmPacked(false, s.m, alpha, a, s.lda, p, beta, c, ldc, work)
					worst := checkBF16(t, name, s.m, s.n, s.k, c, ldc, ref16, ref32, scale)
					roundedEnough(t, name, s.m, s.n, s.k, worst)
					if alpha == 1 { // A rounded once by the caller, read in place
						c := append([]float32(nil), c0...)
						GemmPackedRoundedA(s.m, ar, s.lda, p, beta, c, ldc, work)
						checkBF16(t, name+" (GemmPackedRoundedA)", s.m, s.n, s.k, c, ldc, ref16, ref32, scale)
					}
				})
			}
		}
	}
}

// TestRoundBF16 checks RoundBF16 (in assembly where the CPU has AVX2, 8
// values at a time, the tail in Go) and the Go loop against ToBF16 on the
// rounding's hard cases (ties, carries, overflow, subnormals, infinities,
// NaNs), for lengths around the assembly's step.
func TestRoundBF16(t *testing.T) {
	xs := bf16Cases(rand.New(rand.NewPCG(53, 54)))
	xs = append(xs, float32(math.NaN()), math.Float32frombits(0x7fa00001), math.Float32frombits(0xffc00001))
	for name, round := range map[string]func([]float32){"RoundBF16": RoundBF16, "roundBF16Go": roundBF16Go} {
		for _, n := range []int{0, 1, 7, 8, 9, 16, 23, len(xs)} {
			got := append([]float32(nil), xs[:n]...)
			got = append(got, 1.00001) // past the end: untouched
			round(got[:n])
			for i, x := range xs[:n] {
				if want := ToBF16(x); math.Float32bits(got[i]) != uint32(want)<<16 {
					t.Fatalf("%s, n=%d: %#08x rounds to %#08x, want %#08x", name, n, math.Float32bits(x), math.Float32bits(got[i]), uint32(want)<<16)
				}
			}
			if got[n] != 1.00001 {
				t.Fatalf("%s, n=%d: wrote past the end", name, n)
			}
		}
	}
	// The same values at every offset of an 8-value group.
	for off := 0; off < 8; off++ {
		got := append(make([]float32, off), xs...)
		RoundBF16(got)
		for i, x := range xs {
			if want := ToBF16(x); math.Float32bits(got[off+i]) != uint32(want)<<16 {
				t.Fatalf("offset %d: %#08x rounds to %#08x, want %#08x", off, math.Float32bits(x), math.Float32bits(got[off+i]), uint32(want)<<16)
			}
		}
	}
}

// TestBF16TrainWorkspaces checks that the bf16 kernels' route fits the
// workspaces of the float32 entry points it replaces: GemmWork's holds
// the bf16 path's own workspace and a block of B in bf16 pairs, and
// GemmPacked's the bf16 path's.
func TestBF16TrainWorkspaces(t *testing.T) {
	if need := WorkSizeBF16() + bf16PanelWords(bf16KC, ncBlock); GemmWorkSize() < need {
		t.Errorf("GemmWorkSize %d < %d floats for the bf16 kernels' route", GemmWorkSize(), need)
	}
	if WorkSize() < WorkSizeBF16() {
		t.Errorf("WorkSize %d < WorkSizeBF16 %d", WorkSize(), WorkSizeBF16())
	}
}

// TestPackBIntoAfterBF16 checks that PackBInto on storage that held a bf16
// packing gives the float32 product again, bit for bit.
func TestPackBIntoAfterBF16(t *testing.T) {
	bf16TrainRoutes(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(45, 46))
		const m, k, n = 30, 70, 40
		a, b := randSlice(rng, m*k), randSlice(rng, k*n)
		work := make([]float32, WorkSize())
		want := make([]float32, m*n)
		GemmPacked(false, m, 1, a, k, NewPackedB(false, k, n, b, n), 0, want, n, work)
		p := PackBIntoBF16(nil, false, k, n, b, n)
		got := make([]float32, m*n)
		GemmPacked(false, m, 1, a, k, PackBInto(p, false, k, n, b, n), 0, got, n, work)
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("element %d: %v after a bf16 packing, %v fresh", i, got[i], want[i])
			}
		}
	})
}

func TestBF16TrainAllocs(t *testing.T) {
	bf16TrainRoutes(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(47, 48))
		const m, k, n = 100, 300, 70
		a, b := randSlice(rng, m*k), randSlice(rng, k*n)
		c := make([]float32, m*m)
		work, pwork := make([]float32, GemmWorkSize()), make([]float32, WorkSize())
		p := PackBIntoBF16(nil, true, k, n, b, k)
		allocs := testing.AllocsPerRun(5, func() {
			GemmWorkBF16(work, false, false, m, n, k, 1, a, k, b, n, 0, c, n)
			GemmWorkBF16(work, true, true, m, m, m, 0.5, a, k, b, m, 1, c, m)
			p = PackBIntoBF16(p, true, k, n, b, k)
			GemmPacked(false, m, 1, a, k, p, 1, c, n, pwork)
		})
		if allocs != 0 {
			t.Errorf("%v allocations per round, want 0", allocs)
		}
	})
}

// TestBF16TrainAsmMatchesPortable checks that the bf16 kernels' route gives
// the same bits on the AVX512_BF16 assembly as on the portable kernel
// (which TestGemmWorkBF16 and TestGemmPackedBF16 check against float64 on
// every CPU).
func TestBF16TrainAsmMatchesPortable(t *testing.T) {
	if !bf16AsmAvailable() {
		t.Skip("this CPU (or a purego build) has no AVX512_BF16: the native route runs here on the portable kernel only " +
			"(TestGemmWorkBF16/kernels/portable, TestGemmPackedBF16/kernels/portable)")
	}
	origAsm, origForce := bf16Asm, bf16Force
	defer func() { bf16Asm, bf16Force = origAsm, origForce }()
	rng := rand.New(rand.NewPCG(49, 50))
	work := make([]float32, GemmWorkSize())
	for _, s := range shapes {
		for _, transB := range []bool{false, true} {
			for _, beta := range []float32{0, 1} {
				ldb := s.n
				if transB {
					ldb = s.k
				}
				a, b, c0 := randSlice(rng, s.m*s.k), randSlice(rng, max(s.k, s.n)*max(ldb, 1)), randSlice(rng, s.m*s.n)
				var out [2][2][]float32
				for i, asm := range []bool{false, true} {
					bf16Asm, bf16Force = asm, !asm
					out[i][0] = append([]float32(nil), c0...)
					GemmWorkBF16(work, false, transB, s.m, s.n, s.k, 1, a, s.k, b, ldb, beta, out[i][0], s.n)
					out[i][1] = append([]float32(nil), c0...)
					GemmPacked(false, s.m, 1, a, s.k, PackBIntoBF16(nil, transB, s.k, s.n, b, ldb), beta, out[i][1], s.n, work)
				}
				for r, route := range []string{"GemmWorkBF16", "GemmPacked"} {
					for e := range c0 {
						if math.Float32bits(out[0][r][e]) != math.Float32bits(out[1][r][e]) {
							t.Fatalf("%s %+v transB=%v beta=%v: element %d: portable %v, assembly %v", route, s, transB, beta, e,
								out[0][r][e], out[1][r][e])
						}
					}
				}
			}
		}
	}
}
