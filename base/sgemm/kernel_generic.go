package sgemm

// Portable micro-kernel: a 4 x 4 tile held in 16 scalar accumulators, which
// the Go compiler keeps in registers.
const (
	genericMR = 4
	genericNR = 4
)

var genericKernel = kernelSpec{name: "generic", mr: genericMR, nr: genericNR, run: kernGeneric, runS: kernGenericStrided}

// kernGenericStrided computes C[0:4, 0:4] += A*B with A unpacked (row i at
// a[i*lda:]), or C = bias + A*B when bias is not nil; with relu the stored
// result is max(C, 0).
func kernGenericStrided(k int, a []float32, lda int, b []float32, c []float32, ldc int, bias []float32, relu bool) {
	var c00, c01, c02, c03 float32
	var c10, c11, c12, c13 float32
	var c20, c21, c22, c23 float32
	var c30, c31, c32, c33 float32
	a0s, a1s, a2s, a3s := a[:k], a[lda:lda+k], a[2*lda:2*lda+k], a[3*lda:3*lda+k]
	b = b[:k*4]
	for p := 0; p < k; p++ {
		bp := b[p*4 : p*4+4 : p*4+4]
		b0, b1, b2, b3 := bp[0], bp[1], bp[2], bp[3]
		a0 := a0s[p]
		c00 += a0 * b0
		c01 += a0 * b1
		c02 += a0 * b2
		c03 += a0 * b3
		a1 := a1s[p]
		c10 += a1 * b0
		c11 += a1 * b1
		c12 += a1 * b2
		c13 += a1 * b3
		a2 := a2s[p]
		c20 += a2 * b0
		c21 += a2 * b1
		c22 += a2 * b2
		c23 += a2 * b3
		a3 := a3s[p]
		c30 += a3 * b0
		c31 += a3 * b1
		c32 += a3 * b2
		c33 += a3 * b3
	}
	storeGeneric(&[4][4]float32{{c00, c01, c02, c03}, {c10, c11, c12, c13}, {c20, c21, c22, c23}, {c30, c31, c32, c33}},
		c, ldc, bias, relu)
}

// storeGeneric stores a 4 x 4 tile of sums: C = base + acc, base C itself
// or, when bias is not nil, the bias row (C is then not read); with relu
// the stored result is max(C, 0).
func storeGeneric(acc *[4][4]float32, c []float32, ldc int, bias []float32, relu bool) {
	for i := range acc {
		r := c[i*ldc : i*ldc+4 : i*ldc+4]
		base := r
		if bias != nil {
			base = bias[:4]
		}
		for j := range r {
			v := base[j] + acc[i][j]
			if relu && v < 0 {
				v = 0
			}
			r[j] = v
		}
	}
}

// kernGeneric computes C[0:4, 0:4] = base + A*B over k steps of packed
// panels, base C itself or, when bias is not nil, the bias row.
func kernGeneric(k int, a, b []float32, c []float32, ldc int, bias []float32) {
	var c00, c01, c02, c03 float32
	var c10, c11, c12, c13 float32
	var c20, c21, c22, c23 float32
	var c30, c31, c32, c33 float32
	a = a[:k*4]
	b = b[:k*4]
	for p := 0; p < k; p++ {
		ap := a[p*4 : p*4+4 : p*4+4]
		bp := b[p*4 : p*4+4 : p*4+4]
		b0, b1, b2, b3 := bp[0], bp[1], bp[2], bp[3]
		a0 := ap[0]
		c00 += a0 * b0
		c01 += a0 * b1
		c02 += a0 * b2
		c03 += a0 * b3
		a1 := ap[1]
		c10 += a1 * b0
		c11 += a1 * b1
		c12 += a1 * b2
		c13 += a1 * b3
		a2 := ap[2]
		c20 += a2 * b0
		c21 += a2 * b1
		c22 += a2 * b2
		c23 += a2 * b3
		a3 := ap[3]
		c30 += a3 * b0
		c31 += a3 * b1
		c32 += a3 * b2
		c33 += a3 * b3
	}
	storeGeneric(&[4][4]float32{{c00, c01, c02, c03}, {c10, c11, c12, c13}, {c20, c21, c22, c23}, {c30, c31, c32, c33}},
		c, ldc, bias, false)
}
