//go:build !amd64 || purego

package engine

// hasAVX512 is false: attention runs on the GEMM path.
const hasAVX512 = false

func attnAVX512(q *float32, ldq, nq, n0 int, kt *float32, hd int, v *float32, ldv, wide int, p, y *float32, ldy int) {
	panic("engine: no fused attention kernel on this platform")
}
