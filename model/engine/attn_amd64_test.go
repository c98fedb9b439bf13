//go:build amd64 && !purego

package engine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// attnCase is random inputs of the fused attention kernel for one head of
// hd features over 64 tokens, laid out as the engine lays them out: q and
// v rows in a [64, 3*width] qkv matrix, the keys transposed [hd, 64].
type attnCase struct {
	hd, ld  int
	qkv, kt []float32
}

func newAttnCase(hd int, seed uint64) *attnCase {
	rng := rand.New(rand.NewPCG(seed, 3))
	c := &attnCase{hd: hd, ld: 3 * 4 * hd, kt: make([]float32, hd*64)}
	c.qkv = make([]float32, 64*c.ld)
	for i := range c.qkv {
		c.qkv[i] = float32(rng.NormFloat64())
	}
	for j := range 64 {
		for d := range hd {
			c.kt[d*64+j] = c.qkv[j*c.ld+c.ld/3+d]
		}
	}
	return c
}

// run runs the kernel for queries q0..q0+nq-1 and returns their outputs.
func (c *attnCase) run(q0, nq int) []float32 {
	y := make([]float32, nq*c.hd)
	p := make([]float32, 128)
	attnAVX512(&c.qkv[q0*c.ld], c.ld, nq, q0+1, &c.kt[0], c.hd, &c.qkv[2*c.ld/3], c.ld, c.hd/32, &p[0], &y[0], c.hd)
	return y
}

// want is query i's output in float64.
func (c *attnCase) want(i int) []float64 {
	s := make([]float64, i+1)
	top := math.Inf(-1)
	for j := range s {
		for d := range c.hd {
			s[j] += float64(c.qkv[i*c.ld+d]) * float64(c.qkv[j*c.ld+c.ld/3+d])
		}
		top = max(top, s[j])
	}
	var sum float64
	for j := range s {
		s[j] = math.Exp(s[j] - top)
		sum += s[j]
	}
	y := make([]float64, c.hd)
	for j := range s {
		for d := range c.hd {
			y[d] += s[j] / sum * float64(c.qkv[j*c.ld+2*c.ld/3+d])
		}
	}
	return y
}

// TestAttnKernel: the fused kernel's outputs are the float64 attention's
// within 1e-5 (relative to the output's size above 1), for heads of 16 and
// 32 features and every first query and count the engine's chunks use,
// and each row's output is bit for bit the same whatever rows it is
// computed with (the threads cut the queries at varying rows).
func TestAttnKernel(t *testing.T) {
	if !hasAVX512 {
		t.Skip("no AVX-512: the fused kernel does not run on this CPU")
	}
	for _, hd := range []int{16, 32} {
		c := newAttnCase(hd, uint64(hd))
		alone := make([][]float32, 64)
		for i := range 64 {
			alone[i] = c.run(i, 1)
			want := c.want(i)
			for d, w := range want {
				if diff := math.Abs(float64(alone[i][d]) - w); diff > 1e-5*max(1, math.Abs(w)) {
					t.Fatalf("hd %d, query %d, feature %d: %v, want %v", hd, i, d, alone[i][d], w)
				}
			}
		}
		for _, q0 := range []int{0, 1, 2, 3, 7, 15, 16, 31, 47, 60, 62, 63} {
			for nq := 1; q0+nq <= 64; nq += 1 + nq/3 {
				got := c.run(q0, nq)
				for i := range nq {
					for d := range hd {
						if g, a := got[i*hd+d], alone[q0+i][d]; math.Float32bits(g) != math.Float32bits(a) {
							t.Fatalf("hd %d, queries %d..%d: query %d feature %d is %v, alone %v", hd, q0, q0+nq-1, q0+i, d, g, a)
						}
					}
				}
			}
		}
	}
}

// BenchmarkAttnKernel is the fused attention of one head over 64 queries
// (the time per query row in ns/row).
func BenchmarkAttnKernel(b *testing.B) {
	if !hasAVX512 {
		b.Skip("no AVX-512")
	}
	for _, hd := range []int{16, 32} {
		c := newAttnCase(hd, 1)
		y := make([]float32, 64*hd)
		p := make([]float32, 128)
		b.Run(fmt.Sprintf("hd%d", hd), func(b *testing.B) {
			for b.Loop() {
				attnAVX512(&c.qkv[0], c.ld, 64, 1, &c.kt[0], c.hd, &c.qkv[2*c.ld/3], c.ld, c.hd/32, &p[0], &y[0], c.hd)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/64, "ns/row")
		})
	}
}
