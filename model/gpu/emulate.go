package gpu

import (
	"fmt"
	"math"
	"runtime"
	"sync"
)

// emulate runs op on the CPU over mem (one slice per arena), thread by
// thread as its kernel indexes (or as cuBLAS's GEMM reads and writes),
// each pointer argument cut to the region the op declares, so that an
// index outside it panics. It is the kernels' reference: the device check
// compares each op's output on the GPU with it.
func emulate(op *Op, mem [numArenas][]float32) {
	if op.Kernel == "gemm" {
		emulateGemm(op.Gemm, mem)
		return
	}
	sig, ok := kernelSigs[op.Kernel]
	if !ok {
		panic("gpu: no kernel " + op.Kernel)
	}
	if len(op.Args) != len(sig) {
		panic(fmt.Sprintf("gpu: %s: %d arguments, the kernel takes %d", op.Kernel, len(op.Args), len(sig)))
	}
	p := make([][]float32, len(op.Args))
	v := make([]int, len(op.Args))
	for i, a := range op.Args {
		switch {
		case sig[i] == argInt:
			if a.Ref != nil || a.Null {
				panic(fmt.Sprintf("gpu: %s argument %d: a pointer where the kernel takes an int", op.Kernel, i))
			}
			v[i] = a.Int
		case a.Null:
		case a.Ref != nil:
			r := *a.Ref
			p[i] = mem[r.Arena][r.Off : r.Off+r.Len : r.Off+r.Len]
		default:
			panic(fmt.Sprintf("gpu: %s argument %d: an int where the kernel takes a pointer", op.Kernel, i))
		}
	}
	g, b := op.Grid, op.Block
	if err := op.checkLaunch(); err != nil {
		panic(err)
	}
	shared := make([]float32, op.Shared/4)
	// each runs the kernel's body for every thread of every block; phases
	// split a body at its __syncthreads().
	each := func(body func(bx, by, tx int)) {
		for by := 0; by < g.Y; by++ {
			for bx := 0; bx < g.X; bx++ {
				for tx := 0; tx < b.X; tx++ {
					body(bx, by, tx)
				}
			}
		}
	}
	switch op.Kernel {
	case "im2col":
		in, col := p[0], p[1]
		lin, cin, winStride, posStride, chStride, lout, k, stride, pad := v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10]
		per := lout * k * cin
		each(func(bx, by, tx int) {
			idx := bx*b.X + tx
			if idx >= per {
				return
			}
			i, t, l := idx%cin, (idx/cin)%k, idx/(cin*k)
			j := l*stride - pad + t
			var x float32
			if j >= 0 && j < lin {
				x = in[by*winStride+j*posStride+i*chStride]
			}
			col[by*per+idx] = x
		})
	case "biasAct":
		y, bias, rows, cols, act := p[0], p[1], v[2], v[3], v[4]
		each(func(bx, by, tx int) {
			at := bx*b.X + tx
			if at >= rows*cols {
				return
			}
			x := y[at] + bias[at%cols]
			switch act {
			case actReLU:
				x = max(x, 0)
			case actGELU:
				u := 0.7978845608028654 * (float64(x) + gelucubic*float64(x)*float64(x)*float64(x))
				x = float32(0.5 * float64(x) * (1 + math.Tanh(u)))
			}
			y[at] = x
		})
	case "biasResidual":
		x, t, bias, rows, cols := p[0], p[1], p[2], v[3], v[4]
		each(func(bx, by, tx int) {
			at := bx*b.X + tx
			if at >= rows*cols {
				return
			}
			x[at] += t[at] + bias[at%cols]
		})
	case "sePool":
		h, pool, L, C := p[0], p[1], v[2], v[3]
		each(func(bx, by, tx int) {
			if tx >= C {
				return
			}
			var s float32
			for l := 0; l < L; l++ {
				s += h[bx*L*C+l*C+tx]
			}
			pool[bx*C+tx] = s / float32(L)
		})
	case "seGate":
		pool, w1, b1, w2, b2, gate, C, H := p[0], p[1], p[2], p[3], p[4], p[5], v[6], v[7]
		hid := shared[:H] // panics if the op declares too little shared memory
		for bx := 0; bx < g.X; bx++ {
			for tx := 0; tx < b.X; tx++ {
				if tx < H {
					s := b1[tx]
					for k := 0; k < C; k++ {
						s += pool[bx*C+k] * w1[k*H+tx]
					}
					hid[tx] = max(s, 0)
				}
			}
			for tx := 0; tx < b.X; tx++ { // after __syncthreads
				if tx >= C {
					continue
				}
				s := b2[tx]
				for k := 0; k < H; k++ {
					s += hid[k] * w2[k*C+tx]
				}
				gate[bx*C+tx] = float32(1 / (1 + math.Exp(-float64(s))))
			}
		}
	case "seApply":
		h, gt, sc, out, L, C := p[0], p[1], p[2], p[3], v[4], v[5]
		each(func(bx, by, tx int) {
			idx := bx*b.X + tx
			if idx >= L*C {
				return
			}
			at := by*L*C + idx
			out[at] = max(h[at]*gt[by*C+idx%C]+sc[at], 0)
		})
	case "embed":
		src, x, bias, pos, cell, rows, T, d := p[0], p[1], p[2], p[3], p[4], p[5], v[6], v[7]
		each(func(bx, by, tx int) {
			idx := bx*b.X + tx
			if idx >= T*d {
				return
			}
			f := idx % d
			at := by*T*d + idx
			r := int(int32(math.Float32bits(rows[by])))
			y := src[at] + pos[idx] + cell[r*d+f]
			if bias != nil {
				y += bias[f]
			}
			x[at] = y
		})
	case "layerNorm":
		x, y, w, bb, rows, d, xs, ys := p[0], p[1], p[2], p[3], v[4], v[5], v[6], v[7]
		if b.X%32 != 0 {
			panic("gpu: layerNorm's block is not a whole number of warps")
		}
		warps := b.X / 32
		for bx := 0; bx < g.X; bx++ {
			for wp := 0; wp < warps; wp++ {
				r := bx*warps + wp
				if r >= rows {
					continue
				}
				// The warp's lanes read features lane, lane+32, ...
				var s, q float64
				for f := 0; f < d; f++ {
					s += float64(x[r*xs+f])
				}
				mean := s / float64(d)
				for f := 0; f < d; f++ {
					e := float64(x[r*xs+f]) - mean
					q += e * e
				}
				inv := 1 / math.Sqrt(q/float64(d)+lnEps)
				for f := 0; f < d; f++ {
					y[r*ys+f] = float32((float64(x[r*xs+f])-mean)*inv)*w[f] + bb[f]
				}
			}
		}
	case "attention":
		// The head size is the kernel's compile-time RGC_HEAD_DIM: the
		// width over the grid's heads.
		qkv, y, T, d := p[0], p[1], v[2], v[3]
		if d%g.X != 0 {
			panic(fmt.Sprintf("gpu: attention of width %d on %d heads", d, g.X))
		}
		hd := d / g.X
		if len(shared) < 2*T*hd {
			panic(fmt.Sprintf("gpu: attention declares %d bytes of shared memory, needs %d", op.Shared, 8*T*hd))
		}
		if hd > maxHeadDim || b.X < T {
			panic(fmt.Sprintf("gpu: attention with head_dim %d (at most %d) on %d threads for %d tokens", hd, maxHeadDim, b.X, T))
		}
		ks, vs := shared[:T*hd], shared[T*hd:2*T*hd]
		for by := 0; by < g.Y; by++ {
			for h := 0; h < g.X; h++ {
				base := qkv[by*T*3*d:]
				for e := 0; e < T*hd; e++ {
					j, c := e/hd, e%hd
					ks[e] = base[j*3*d+d+h*hd+c]
					vs[e] = base[j*3*d+2*d+h*hd+c]
				}
				sc, acc := make([]float64, T), make([]float64, hd)
				for i := 0; i < T; i++ {
					q := base[i*3*d+h*hd : i*3*d+h*hd+hd]
					m := math.Inf(-1)
					for j := 0; j <= i; j++ {
						var s float64
						for c := 0; c < hd; c++ {
							s += float64(q[c]) * float64(ks[j*hd+c])
						}
						sc[j] = s
						m = math.Max(m, s)
					}
					var z float64
					clear(acc)
					for j := 0; j <= i; j++ {
						pj := math.Exp(sc[j] - m)
						z += pj
						for c := 0; c < hd; c++ {
							acc[c] += pj * float64(vs[j*hd+c])
						}
					}
					yr := y[(by*T+i)*d+h*hd : (by*T+i)*d+h*hd+hd]
					for c := range yr {
						yr[c] = float32(acc[c] / z)
					}
				}
			}
		}
	default:
		panic("gpu: no emulation of kernel " + op.Kernel)
	}
}

// emulateGemm computes C = A W as cuBLAS does, in float64 sums, reading A,
// W and writing C only inside their regions; rows are shared among
// GOMAXPROCS goroutines.
func emulateGemm(g *Gemm, mem [numArenas][]float32) {
	if g.Lda < g.K || g.Ldw < g.N || g.Ldc < g.N {
		panic(fmt.Sprintf("gpu: gemm %dx%dx%d with leading dimensions %d, %d, %d (cuBLAS needs lda >= k, ldw, ldc >= n)", g.M, g.N, g.K, g.Lda, g.Ldw, g.Ldc))
	}
	cut := func(r Ref) []float32 { return mem[r.Arena][r.Off : r.Off+r.Len : r.Off+r.Len] }
	a, w, c := cut(g.A), cut(g.W), cut(g.C)
	if g.M > 0 {
		_ = a[(g.M-1)*g.Lda+g.K-1] // the regions hold the last row: panic here, not in a goroutine
		_ = w[(g.K-1)*g.Ldw+g.N-1]
		_ = c[(g.M-1)*g.Ldc+g.N-1]
	}
	parallel(g.M, func(lo, hi int) {
		row := make([]float64, g.N)
		for i := lo; i < hi; i++ {
			clear(row)
			for k := 0; k < g.K; k++ {
				x := float64(a[i*g.Lda+k])
				wr := w[k*g.Ldw : k*g.Ldw+g.N]
				for j, v := range wr {
					row[j] += x * float64(v)
				}
			}
			cr := c[i*g.Ldc : i*g.Ldc+g.N]
			for j := range cr {
				cr[j] = float32(row[j])
			}
		}
	})
}

// parallel runs f on parts of 0..n on GOMAXPROCS goroutines.
func parallel(n int, f func(lo, hi int)) {
	t := min(runtime.GOMAXPROCS(0), max(1, n/64))
	var wg sync.WaitGroup
	for k := 0; k < t; k++ {
		lo, hi := n*k/t, n*(k+1)/t
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(lo, hi)
		}()
	}
	wg.Wait()
}
