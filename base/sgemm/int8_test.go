package sgemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// i8Paths runs f on the portable kernels and, where the CPU has them, on
// the assembly ones.
func i8Paths(t *testing.T, f func(t *testing.T)) {
	orig := i8Asm
	defer func() { i8Asm = orig }()
	paths := []bool{false}
	if i8AsmAvailable() {
		paths = append(paths, true)
	}
	for _, asm := range paths {
		i8Asm = asm
		t.Run(fmt.Sprintf("asm=%v", asm), f)
	}
}

// i8Shape is an int8 GEMM: m x k times k x n, A's rows lda apart (lda < k:
// overlapping rows, a convolution's input read as its im2col matrix), row
// i's scale at aStride*i.
type i8Shape struct{ m, k, n, lda, aStride int }

var i8Shapes = []i8Shape{
	{1, 4, 32, 4, 1}, {12, 64, 32, 64, 1}, {13, 65, 33, 68, 1}, {25, 128, 64, 128, 0},
	{64, 896, 128, 256, 0}, // paper CNN conv2: k7 x 128 channels, stride 2
	{100, 64, 64, 128, 2},  // a strided 1x1 shortcut
	{7, 9, 17, 9, 2}, {4, 3, 16, 3, 1}, {29, 200, 48, 203, 3}, {3, 1, 5, 1, 1},
	{11, 40, 16, 40, 1}, {9, 12, 15, 4, 0}, {0, 4, 4, 4, 1}, {5, 8, 0, 8, 1},
}

// i8Inputs returns A (non-negative floats), its uint8 quantization with a
// scale per row (the row's largest value), B and the bias for s.
func i8Inputs(rng *rand.Rand, s i8Shape) (x []float32, a []uint8, sa []float32, b, bias []float32) {
	kq := (s.k + 3) / 4
	size := 0
	if s.m > 0 {
		size = (s.m-1)*s.lda + 4*kq
	}
	x = make([]float32, size)
	for i := range x {
		if rng.IntN(4) > 0 { // a quarter zeros, as after a ReLU
			x[i] = float32(rng.ExpFloat64())
		}
	}
	a = make([]uint8, size)
	sa = make([]float32, max(1, (s.m-1)*s.aStride+1))
	if s.aStride == 0 {
		scale, inv := U8Scale(maxF(x))
		QuantizeU8(a, x, inv)
		sa[0] = scale
	} else {
		for i := 0; i < s.m; i++ {
			row := x[i*s.lda : i*s.lda+s.k]
			scale, inv := U8Scale(maxF(row))
			QuantizeU8(a[i*s.lda:i*s.lda+s.k], row, inv)
			sa[i*s.aStride] = scale
		}
		// Overlapping rows: a later row's quantization rewrote an earlier
		// row's tail; x takes the values a stands for, row by row below.
	}
	return x, a, sa, randSlice(rng, s.k*s.n), randSlice(rng, s.n)
}

func maxF(x []float32) float32 {
	var m float32
	for _, v := range x {
		m = max(m, v)
	}
	return m
}

// TestGemmPackedBiasI8 checks the int8 GEMM against float64 arithmetic on
// the quantized values (the only rounding: the int32 sum to float32, two
// products and the bias addition, within 2^-21 of the terms' magnitude),
// and against the float32 inputs within the quantization bound: for
// A's step sa and B's column step sw, |C - (A*B + bias)| <= sum over p of
// (x_p sw/2 + |b_p| sa/2 + sa sw/4), plus the rounding above.
func TestGemmPackedBiasI8(t *testing.T) {
	i8Paths(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(41, 42))
		tile := make([]float32, i8MR*i8NR)
		for _, s := range i8Shapes {
			for _, relu := range []bool{false, true} {
				x, a, sa, b, bias := i8Inputs(rng, s)
				pb := NewPackedI8(false, s.k, s.n, b, s.n)
				ldc := s.n + 3
				c := randSlice(rng, max(0, s.m*ldc))
				GemmPackedBiasI8(s.m, a, s.lda, sa, s.aStride, nil, 0, pb, bias, relu, c, ldc, tile)
				for i := 0; i < s.m; i++ {
					si := float64(sa[i*s.aStride])
					for j := 0; j < s.n; j++ {
						sw := float64(pb.scale[j])
						var acc int64
						var exact, bound float64
						for p := 0; p < s.k; p++ {
							q := pb.data[(j/i8NR)*pb.kq*i8NR*4+((p/4)*i8NR+j%i8NR)*4+p%4]
							av := a[i*s.lda+p]
							acc += int64(av) * int64(q)
							xv := float64(x[i*s.lda+p])
							if s.aStride != 0 && p >= s.lda && i+1 < s.m {
								xv = float64(av) * si // rewritten by the next row (see i8Inputs)
							}
							exact += xv * float64(b[p*s.n+j])
							bound += xv*sw/2 + math.Abs(float64(b[p*s.n+j]))*si/2 + si*sw/4
						}
						ref := float64(acc)*si*sw + float64(bias[j])
						round := (math.Abs(float64(acc)*si*sw) + math.Abs(float64(bias[j]))) * 0x1p-21
						exact += float64(bias[j])
						if relu {
							ref, exact = max(ref, 0), max(exact, 0)
						}
						got := float64(c[i*ldc+j])
						if d := math.Abs(got - ref); !(d <= round) {
							t.Fatalf("%+v relu=%v: C[%d,%d] = %v, exact on the quantized values %v (|diff| %g > %g)", s, relu, i, j, got, ref, d, round)
						}
						if d := math.Abs(got - exact); !(d <= bound*1.0001+round) {
							t.Fatalf("%+v relu=%v: C[%d,%d] = %v, exact %v (|diff| %g > quantization bound %g)", s, relu, i, j, got, exact, d, bound)
						}
					}
				}
			}
		}
	})
}

// TestI8AsmMatchesGo checks that the assembly kernels give the same bits as
// the portable definition (kernI8Go), through the whole GEMM and by direct
// calls for every tile shape.
func TestI8AsmMatchesGo(t *testing.T) {
	if !i8AsmAvailable() {
		t.Skip("no AVX512_VNNI kernels here (CPU or purego build)")
	}
	orig := i8Asm
	defer func() { i8Asm = orig }()
	rng := rand.New(rand.NewPCG(43, 44))
	tile := make([]float32, i8MR*i8NR)
	for _, s := range i8Shapes {
		for _, relu := range []bool{false, true} {
			_, a, sa, b, bias := i8Inputs(rng, s)
			pb := NewPackedI8(false, s.k, s.n, b, s.n)
			var out [2][]float32
			for i, asm := range []bool{false, true} {
				i8Asm = asm
				out[i] = make([]float32, s.m*s.n)
				GemmPackedBiasI8(s.m, a, s.lda, sa, s.aStride, nil, 0, pb, bias, relu, out[i], s.n, tile)
			}
			for e := range out[0] {
				if math.Float32bits(out[0][e]) != math.Float32bits(out[1][e]) {
					t.Fatalf("%+v relu=%v: element %d: Go %v, assembly %v", s, relu, e, out[0][e], out[1][e])
				}
			}
		}
	}
	for _, rows := range []int{1, 4, 8, 12} {
		for _, cols := range []int{16, 32} {
			for _, kq := range []int{1, 3, 4, 5, 224} {
				lda := 4*kq + 5
				a := make([]uint8, rows*lda)
				for i := range a {
					a[i] = uint8(rng.Uint32())
				}
				b := make([]int8, kq*i8NR*4)
				for i := range b {
					b[i] = int8(rng.IntN(255) - 127)
				}
				sa, sw, bias := randSlice(rng, 3*rows), randSlice(rng, cols), randSlice(rng, cols)
				za, cs := make([]int32, 2*rows), make([]int32, cols)
				for i := range za {
					za[i] = int32(rng.IntN(256))
				}
				for i := range cs {
					cs[i] = int32(rng.IntN(2*127*4*kq+1) - 127*4*kq)
				}
				for _, relu := range []bool{false, true} {
					var out [2][]float32
					for i, asm := range []bool{false, true} {
						i8Asm = asm
						out[i] = randSlice(rand.New(rand.NewPCG(1, 2)), rows*40)
						kernI8(rows, cols, kq, a, lda, b, out[i], 40, sa, 3, za, 2, sw, cs, bias, 0, relu)
					}
					for e := range out[0] {
						if math.Float32bits(out[0][e]) != math.Float32bits(out[1][e]) {
							t.Fatalf("kernel %dx%d kq=%d relu=%v: element %d: Go %v, assembly %v", rows, cols, kq, relu, e, out[0][e], out[1][e])
						}
					}
				}
			}
		}
	}
}

// TestQuantizeU8: rounding half up, clamping to 0..255, NaN to 0, the
// assembly equal to the portable definition for every length, and every
// value of [0, top] within half a step of its quantized value.
func TestQuantizeU8(t *testing.T) {
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	cases := []struct {
		x, inv float32
		want   uint8
	}{
		{0, 1, 0}, {0.49, 1, 0}, {0.5, 1, 1}, {1.49, 1, 1}, {1.5, 1, 2}, {2.5, 1, 3},
		{254.5, 1, 255}, {255.4, 1, 255}, {1e30, 1, 255}, {inf, 1, 255},
		{-1, 1, 0}, {float32(math.Copysign(0, -1)), 1, 0}, {-inf, 1, 0}, {nan, 1, 0},
		{3, 0, 0}, {0.25, 2, 1}, {10, 25.5, 255},
	}
	i8Paths(t, func(t *testing.T) {
		for _, tc := range cases {
			// In a vector's worth of copies and alone (the Go tail).
			for _, n := range []int{1, 16, 17} {
				src := make([]float32, n)
				for i := range src {
					src[i] = tc.x
				}
				dst := make([]uint8, n)
				QuantizeU8(dst, src, tc.inv)
				for i, q := range dst {
					if q != tc.want {
						t.Fatalf("QuantizeU8(%v * %v) = %d at %d of %d, want %d", tc.x, tc.inv, q, i, n, tc.want)
					}
				}
			}
		}
		rng := rand.New(rand.NewPCG(45, 46))
		for range 50 {
			src := make([]float32, rng.IntN(100))
			for i := range src {
				src[i] = float32(rng.ExpFloat64())
			}
			top := maxF(src)
			scale, inv := U8Scale(top)
			dst := make([]uint8, len(src))
			QuantizeU8(dst, src, inv)
			for i, q := range dst {
				if d := math.Abs(float64(q)*float64(scale) - float64(src[i])); d > float64(scale)*0.5001 {
					t.Fatalf("x = %v (top %v): q = %d stands for %v, off by %g > half a step %g", src[i], top, q, float64(q)*float64(scale), d, scale/2)
				}
			}
		}
	})
	if i8AsmAvailable() {
		orig := i8Asm
		defer func() { i8Asm = orig }()
		rng := rand.New(rand.NewPCG(47, 48))
		for n := 0; n < 70; n++ {
			src := make([]float32, n)
			for i := range src {
				src[i] = float32(rng.NormFloat64() * 100)
			}
			var out [2][]uint8
			for i, asm := range []bool{false, true} {
				i8Asm = asm
				out[i] = make([]uint8, n)
				QuantizeU8(out[i], src, 1.7)
			}
			for i := range src {
				if out[0][i] != out[1][i] {
					t.Fatalf("n=%d: element %d (%v): Go %d, assembly %d", n, i, src[i], out[0][i], out[1][i])
				}
			}
		}
	}
}

func TestU8Scale(t *testing.T) {
	for _, tc := range []struct{ top, scale, inv float32 }{
		{255, 1, 1}, {0, 0, 0}, {-3, 0, 0}, {float32(math.NaN()), 0, 0}, {float32(math.Inf(1)), 0, 0}, {25.5, 0.1, 10},
	} {
		s, inv := U8Scale(tc.top)
		if s != tc.scale || inv != tc.inv {
			t.Errorf("U8Scale(%v) = %v, %v; want %v, %v", tc.top, s, inv, tc.scale, tc.inv)
		}
	}
}

// TestNewPackedI8: each column's scale is its largest magnitude over 127,
// each weight within half a step, transposed input the same packing, zero
// columns scale 0.
func TestNewPackedI8(t *testing.T) {
	rng := rand.New(rand.NewPCG(49, 50))
	const k, n = 37, 45
	b := randSlice(rng, k*n)
	for p := 0; p < k; p++ {
		b[p*n+7] = 0 // an all-zero column
	}
	bt := make([]float32, n*(k+2))
	for p := 0; p < k; p++ {
		for j := 0; j < n; j++ {
			bt[j*(k+2)+p] = b[p*n+j]
		}
	}
	pb, pt := NewPackedI8(false, k, n, b, n), NewPackedI8(true, k, n, bt, k+2)
	if fmt.Sprint(pb.data) != fmt.Sprint(pt.data) || fmt.Sprint(pb.scale) != fmt.Sprint(pt.scale) {
		t.Fatal("transposed B packs differently")
	}
	for j := 0; j < n; j++ {
		var m float64
		for p := 0; p < k; p++ {
			m = max(m, math.Abs(float64(b[p*n+j])))
		}
		if s := pb.scale[j]; s != float32(m/127) {
			t.Fatalf("column %d: scale %v, want %v", j, s, float32(m/127))
		}
		for p := 0; p < k; p++ {
			q := pb.data[(j/i8NR)*pb.kq*i8NR*4+((p/4)*i8NR+j%i8NR)*4+p%4]
			if d := math.Abs(float64(q)*float64(pb.scale[j]) - float64(b[p*n+j])); d > float64(pb.scale[j])*0.5001 {
				t.Fatalf("B[%d,%d] = %v quantized to %d x %v (off by %g)", p, j, b[p*n+j], q, pb.scale[j], d)
			}
		}
	}
	if from := NewPackedI8From(NewPackedB(false, k, n, b, n)); fmt.Sprint(from.data) != fmt.Sprint(pb.data) {
		t.Fatal("NewPackedI8From packs differently from NewPackedI8")
	}
}

func TestGemmPackedBiasI8Allocs(t *testing.T) {
	rng := rand.New(rand.NewPCG(51, 52))
	s := i8Shape{64, 896, 128, 256, 0}
	_, a, sa, b, bias := i8Inputs(rng, s)
	pb := NewPackedI8(false, s.k, s.n, b, s.n)
	c, tile := make([]float32, s.m*s.n), make([]float32, i8MR*i8NR)
	x := randSlice(rng, 1000)
	q := make([]uint8, len(x))
	if n := testing.AllocsPerRun(20, func() {
		QuantizeU8(q, x, 3)
		GemmPackedBiasI8(s.m, a, s.lda, sa, s.aStride, nil, 0, pb, bias, true, c, s.n, tile)
	}); n != 0 {
		t.Fatalf("%v allocations per call, want 0", n)
	}
}

func TestGemmPackedBiasI8Panics(t *testing.T) {
	pb := NewPackedI8(false, 8, 16, make([]float32, 8*16), 16)
	good := func() (a []uint8, sa, bias, c, tile []float32) {
		return make([]uint8, 3*8), make([]float32, 3), make([]float32, 16), make([]float32, 3*16), make([]float32, i8MR*i8NR)
	}
	for name, call := range map[string]func(){
		"short A": func() {
			a, sa, bias, c, tile := good()
			GemmPackedBiasI8(3, a[:20], 8, sa, 1, nil, 0, pb, bias, false, c, 16, tile)
		},
		"short scales": func() {
			a, sa, bias, c, tile := good()
			GemmPackedBiasI8(3, a, 8, sa[:2], 1, nil, 0, pb, bias, false, c, 16, tile)
		},
		"short bias": func() {
			a, sa, bias, c, tile := good()
			GemmPackedBiasI8(3, a, 8, sa, 1, nil, 0, pb, bias[:15], false, c, 16, tile)
		},
		"short C": func() {
			a, sa, bias, c, tile := good()
			GemmPackedBiasI8(3, a, 8, sa, 1, nil, 0, pb, bias, false, c[:40], 16, tile)
		},
		"short tile": func() {
			a, sa, bias, c, tile := good()
			GemmPackedBiasI8(3, a, 8, sa, 1, nil, 0, pb, bias, false, c, 16, tile[:10])
		},
		"negative m": func() {
			a, sa, bias, c, tile := good()
			GemmPackedBiasI8(-1, a, 8, sa, 1, nil, 0, pb, bias, false, c, 16, tile)
		},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			call()
		}()
	}
}

// TestGemmPackedBiasI8ZeroPoints: A of both signs, each row quantized with
// its own scale and zero point (QuantizeRowsU8), against float64
// arithmetic on the values the bytes stand for and against the float
// inputs within the quantization bound; the assembly gives the portable
// kernel's bits.
func TestGemmPackedBiasI8ZeroPoints(t *testing.T) {
	rng := rand.New(rand.NewPCG(55, 56))
	tile := make([]float32, i8MR*i8NR)
	for _, s := range []struct{ m, k, n int }{{1, 64, 192}, {64, 64, 64}, {13, 256, 64}, {7, 40, 33}, {30, 128, 512}} {
		kq := (s.k + 3) / 4
		lda := 4 * kq
		x := make([]float32, s.m*lda)
		for i := 0; i < s.m; i++ {
			for p := 0; p < s.k; p++ {
				x[i*lda+p] = float32(rng.NormFloat64()) + float32(i%3-1) // some rows mostly one sign
			}
		}
		b, bias := randSlice(rng, s.k*s.n), randSlice(rng, s.n)
		pb := NewPackedI8(false, s.k, s.n, b, s.n)
		var outs [][]float32
		i8Paths(t, func(t *testing.T) {
			a := make([]uint8, s.m*lda)
			sa, za := make([]float32, s.m), make([]int32, s.m)
			QuantizeRowsU8(a, lda, x, lda, s.m, s.k, sa, za)
			c := make([]float32, s.m*s.n)
			GemmPackedBiasI8(s.m, a, lda, sa, 1, za, 1, pb, bias, false, c, s.n, tile)
			outs = append(outs, c)
			for i := 0; i < s.m; i++ {
				si, zi := float64(sa[i]), int64(za[i])
				for j := 0; j < s.n; j++ {
					sw := float64(pb.scale[j])
					var acc int64
					var exact, bound float64
					for p := 0; p < s.k; p++ {
						q := int64(pb.data[(j/i8NR)*pb.kq*i8NR*4+((p/4)*i8NR+j%i8NR)*4+p%4])
						acc += (int64(a[i*lda+p]) - zi) * q
						xv := float64(x[i*lda+p])
						exact += xv * float64(b[p*s.n+j])
						bound += math.Abs(xv)*sw/2 + math.Abs(float64(b[p*s.n+j]))*si/2 + si*sw/4
					}
					ref := float64(acc)*si*sw + float64(bias[j])
					round := (math.Abs(float64(acc)*si*sw) + math.Abs(float64(bias[j]))) * 0x1p-21
					exact += float64(bias[j])
					got := float64(c[i*s.n+j])
					if d := math.Abs(got - ref); !(d <= round) {
						t.Fatalf("%+v: C[%d,%d] = %v, exact on the quantized values %v (|diff| %g)", s, i, j, got, ref, d)
					}
					if d := math.Abs(got - exact); !(d <= bound*1.0001+round) {
						t.Fatalf("%+v: C[%d,%d] = %v, exact %v (|diff| %g > quantization bound %g)", s, i, j, got, exact, d, bound)
					}
				}
			}
		})
		for i := 1; i < len(outs); i++ {
			for e := range outs[0] {
				if math.Float32bits(outs[i][e]) != math.Float32bits(outs[0][e]) {
					t.Fatalf("%+v: element %d: Go %v, assembly %v", s, e, outs[0][e], outs[i][e])
				}
			}
		}
	}
}

// TestQuantizeRowsU8: every value within half a step of what its byte
// stands for, (q - z) * scale; rows of one sign, of zeros and with an
// infinity; a row of ReLU outputs quantized as QuantizeU8 does with
// U8Scale of its largest value and zero point 0; the assembly gives the
// portable definition's bytes, scales and zero points.
func TestQuantizeRowsU8(t *testing.T) {
	rng := rand.New(rand.NewPCG(57, 58))
	for _, cols := range []int{16, 64, 256, 17, 3} {
		const rows, lds, ldd = 7, 300, 310
		src := make([]float32, rows*lds)
		for i := range src {
			src[i] = float32(rng.NormFloat64() * 3)
		}
		for j := 0; j < cols; j++ {
			src[1*lds+j] = float32(math.Abs(float64(src[1*lds+j])))  // positive: z = 0
			src[2*lds+j] = -float32(math.Abs(float64(src[2*lds+j]))) // negative: z = 255
			src[3*lds+j] = 0
		}
		src[4*lds+cols/2] = float32(math.Inf(-1)) // scale 0
		var got [][]uint8
		var gotS [][]float32
		var gotZ [][]int32
		i8Paths(t, func(t *testing.T) {
			dst := make([]uint8, rows*ldd)
			scales, zeros := make([]float32, rows), make([]int32, rows)
			QuantizeRowsU8(dst, ldd, src, lds, rows, cols, scales, zeros)
			got, gotS, gotZ = append(got, dst), append(gotS, scales), append(gotZ, zeros)
			for i := 0; i < rows; i++ {
				if i == 4 {
					if scales[i] != 0 || zeros[i] != 0 {
						t.Fatalf("cols %d: row with an infinity: scale %v, zero point %d; want 0, 0", cols, scales[i], zeros[i])
					}
					continue
				}
				s, z := float64(scales[i]), float64(zeros[i])
				for j := 0; j < cols; j++ {
					x := float64(src[i*lds+j])
					if d := math.Abs((float64(dst[i*ldd+j])-z)*s - x); d > s*0.5001+1e-12 {
						t.Fatalf("cols %d row %d: x = %v stands as (%d - %v) * %v, off by %g", cols, i, x, dst[i*ldd+j], z, s, d)
					}
				}
			}
			if zeros[1] != 0 || zeros[2] != 255 || scales[3] != 0 {
				t.Fatalf("cols %d: zero points %d (positive row), %d (negative row), scale %v (zeros); want 0, 255, 0", cols, zeros[1], zeros[2], scales[3])
			}
			pos := src[1*lds : 1*lds+cols]
			scale, inv := U8Scale(maxF(pos))
			want := make([]uint8, cols)
			quantU8Go(want, pos, inv)
			if scales[1] != scale || string(dst[1*ldd:1*ldd+cols]) != string(want) {
				t.Fatalf("cols %d: non-negative row: scale %v, bytes %v; want QuantizeU8's %v, %v", cols, scales[1], dst[1*ldd:1*ldd+cols], scale, want)
			}
		})
		for k := 1; k < len(got); k++ {
			if string(got[k]) != string(got[0]) || fmt.Sprint(gotS[k]) != fmt.Sprint(gotS[0]) || fmt.Sprint(gotZ[k]) != fmt.Sprint(gotZ[0]) {
				t.Fatalf("cols %d: assembly and Go differ: scales %v / %v, zero points %v / %v", cols, gotS[0], gotS[k], gotZ[0], gotZ[k])
			}
		}
	}
}

// TestGemmPackedAccI8: products accumulated into C, the last with ReLU (a
// convolution's taps), against float64 arithmetic on the quantized values;
// the assembly gives the portable kernel's bits.
func TestGemmPackedAccI8(t *testing.T) {
	rng := rand.New(rand.NewPCG(59, 60))
	tile := make([]float32, i8MR*i8NR)
	for _, s := range []i8Shape{{38, 128, 128, 256, 2}, {9, 128, 48, 128, 1}, {13, 20, 17, 40, 2}} {
		var ins [3]struct {
			a  []uint8
			sa []float32
			b  *PackedI8
		}
		for k := range ins {
			_, a, sa, b, _ := i8Inputs(rng, s)
			ins[k].a, ins[k].sa, ins[k].b = a, sa, NewPackedI8(false, s.k, s.n, b, s.n)
		}
		c0 := randSlice(rng, s.m*s.n)
		var outs [][]float32
		i8Paths(t, func(t *testing.T) {
			c := append([]float32(nil), c0...)
			for k, in := range ins {
				GemmPackedAccI8(s.m, in.a, s.lda, in.sa, s.aStride, nil, 0, in.b, k == len(ins)-1, c, s.n, tile)
			}
			outs = append(outs, c)
			for i := 0; i < s.m; i++ {
				for j := 0; j < s.n; j++ {
					ref, mag := float64(c0[i*s.n+j]), math.Abs(float64(c0[i*s.n+j]))
					for _, in := range ins {
						var acc int64
						for p := 0; p < s.k; p++ {
							acc += int64(in.a[i*s.lda+p]) * int64(in.b.data[(j/i8NR)*in.b.kq*i8NR*4+((p/4)*i8NR+j%i8NR)*4+p%4])
						}
						v := float64(acc) * float64(in.sa[i*s.aStride]) * float64(in.b.scale[j])
						ref += v
						mag += math.Abs(v) + math.Abs(ref)
					}
					ref = max(ref, 0)
					if d := math.Abs(float64(c[i*s.n+j]) - ref); !(d <= mag*0x1p-21) {
						t.Fatalf("%+v: C[%d,%d] = %v, want %v (|diff| %g)", s, i, j, c[i*s.n+j], ref, d)
					}
				}
			}
		})
		for k := 1; k < len(outs); k++ {
			for e := range outs[0] {
				if math.Float32bits(outs[k][e]) != math.Float32bits(outs[0][e]) {
					t.Fatalf("%+v: element %d: Go %v, assembly %v", s, e, outs[0][e], outs[k][e])
				}
			}
		}
	}
}
