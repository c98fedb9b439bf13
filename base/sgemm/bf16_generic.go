//go:build !amd64 || purego

package sgemm

// bf16Asm is false: this build has only the portable bf16 kernel.
var bf16Asm = false

// bf16AsmAvailable reports whether assembly bf16 kernels exist: not here.
func bf16AsmAvailable() bool { return false }

// kernBF16 is kernBF16Go on this build.
func kernBF16(rows, cols, kp int, a []uint16, lda int, b []uint32, c []float32, ldc int, bias []float32, relu bool) {
	kernBF16Go(rows, cols, kp, a, lda, b, c, ldc, bias, relu)
}

// roundBF16 is roundBF16Go on this build.
func roundBF16(x []float32) { roundBF16Go(x) }

// toBF16 is toBF16Go on this build.
func toBF16(dst []uint16, src []float32) { toBF16Go(dst, src) }
