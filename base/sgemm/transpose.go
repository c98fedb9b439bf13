package sgemm

// Transpose writes B = A^T, where A is m x n with row stride lda and B is
// n x m with row stride ldb: B[j*ldb+i] = A[i*lda+j]. Only those m*n
// elements of B are written (the rest of each row, past m, is left as it
// was), so that B may be a block of a larger matrix. Where the CPU has
// AVX2, whole 8 x 8 blocks are transposed in registers by the B packer's
// routine (pack_amd64.s); the rows and columns past the last whole block,
// and every block on other builds, by transposeGo. Both copy bits
// unchanged. A and B must not overlap.
func Transpose(m, n int, a []float32, lda int, b []float32, ldb int) {
	checkMat("A", false, m, n, a, lda)
	checkMat("B", false, n, m, b, ldb)
	if m == 0 || n == 0 {
		return
	}
	transpose(m, n, a, lda, b, ldb)
}

// transposeTile is the side of the square blocks transposeGo walks: a
// block's rows of A and of B (32 floats, two cache lines each) stay in L1
// while it is transposed.
const transposeTile = 32

// transposeGo is Transpose's portable body (no argument checks), blocked
// in transposeTile squares so that neither the reads nor the strided
// writes leave L1 within a block.
func transposeGo(m, n int, a []float32, lda int, b []float32, ldb int) {
	for i0 := 0; i0 < m; i0 += transposeTile {
		i1 := min(i0+transposeTile, m)
		for j0 := 0; j0 < n; j0 += transposeTile {
			j1 := min(j0+transposeTile, n)
			for i := i0; i < i1; i++ {
				row := a[i*lda+j0 : i*lda+j1]
				for j, v := range row {
					b[(j0+j)*ldb+i] = v
				}
			}
		}
	}
}
