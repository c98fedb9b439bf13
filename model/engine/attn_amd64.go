//go:build amd64 && !purego

package engine

import "golang.org/x/sys/cpu"

// hasAVX512 selects the fused attention kernel (attn_amd64.s); tests
// switch it off to compare with the GEMM path.
var hasAVX512 = cpu.X86.HasAVX512F && cpu.X86.HasAVX512DQ

// attnAVX512 runs causal self-attention for nq queries of one head: query
// row i (at q + i*ldq floats) sees keys 0..n0+i-1 (n0+nq-1 <= 64) of kt
// (the head's keys transposed, kt[d*64 + j], hd rows), weighs the value
// rows (v + j*ldv floats; 16 columns, 32 when wide is 1) by the softmax of
// its scores and writes them to y + i*ldy; p is 128 floats of scratch.
//
//go:noescape
func attnAVX512(q *float32, ldq, nq, n0 int, kt *float32, hd int, v *float32, ldv, wide int, p, y *float32, ldy int)
