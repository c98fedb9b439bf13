//go:build !amd64 || purego

package sgemm

// i8Asm is false: this build has only the portable int8 kernels.
var i8Asm = false

// i8AsmAvailable reports whether assembly int8 kernels exist: not here.
func i8AsmAvailable() bool { return false }

// kernI8 is kernI8Go on this build.
func kernI8(rows, cols, kq int, a []uint8, lda int, b []int8, c []float32, ldc int, sa []float32, sas int, za []int32, zas int, sw []float32, cs []int32, bias []float32, bs int, relu bool) {
	kernI8Go(rows, cols, kq, a, lda, b, c, ldc, sa, sas, za, zas, sw, cs, bias, bs, relu)
}

// quantU8 is quantU8Go on this build.
func quantU8(dst []uint8, src []float32, inv float32) { quantU8Go(dst, src, inv) }

// quantRowsU8 is quantRowsU8Go on this build.
func quantRowsU8(dst []uint8, ldd int, src []float32, lds, rows, cols int, scales []float32, zeros []int32) {
	quantRowsU8Go(dst, ldd, src, lds, rows, cols, scales, zeros)
}
