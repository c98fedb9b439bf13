//go:build amd64 && !purego

package sgemm

import "golang.org/x/sys/cpu"

// packAsm selects the AVX2 packing routines (tests switch it off to
// compare with packAGo and packBGo, which give the same bits).
var packAsm = cpu.X86.HasAVX2

// The routines below pack one group of a panel: 6 rows of an A panel or
// 16 (untransposed) or 8 (transposed) columns of a B panel, into dst with
// ds floats per k step, so that a kernel whose panel is a multiple of the
// group (AVX2's 6 x 16, AVX-512's 12 x 32) packs group by group. flags bit
// 0 rounds every value to bfloat16 (ToBF16); bit 1 multiplies A by alpha
// first.

// packAN6 packs h rows (1 <= h <= 6) of an untransposed A, row i at
// a + i*lda, columns 0..kb8 (a multiple of 8), into d[p*ds + i], i < 6.
//
//go:noescape
func packAN6(a *float32, lda, kb8, h int, d *float32, ds int, alpha float32, flags int)

// packAT6 packs h columns (1 <= h <= 6) of op(A) for a transposed A: for
// p < kb, the h floats at a + p*lda into d[p*ds + i], i < 6.
//
//go:noescape
func packAT6(a *float32, lda, kb, h int, d *float32, ds int, alpha float32, flags int)

// packBN16 packs w columns (1 <= w <= 16) of an untransposed B: for
// p < kb, the w floats at b + p*ldb into d[p*ds + j], j < 16.
//
//go:noescape
func packBN16(b *float32, ldb, kb, w int, d *float32, ds, flags int)

// packBT8 packs rows j < rows (1 <= rows <= 8) of a transposed B, row j
// at b + j*ldb, columns 0..kb8 (a multiple of 8), into d[p*ds + j], j < 8.
// With 8 rows and no flags it is an exact transpose of an 8 x kb8 block
// (transpose uses it so).
//
//go:noescape
func packBT8(b *float32, ldb, kb8, rows int, d *float32, ds, flags int)

// packFlags encodes the packing options of the routines above.
func packFlags(alpha float32, round bool) int {
	f := 0
	if round {
		f |= 1
	}
	if alpha != 1 {
		f |= 2
	}
	return f
}

// packA is packAGo, in AVX2 where the CPU has it and the kernel's mr is a
// multiple of 6.
func packA(transA bool, a []float32, lda, ic, mb, pc, kb int, alpha float32, dst []float32, round bool) {
	mr := kern.mr
	if !packAsm || mr%6 != 0 || kb == 0 {
		packAGo(transA, a, lda, ic, mb, pc, kb, alpha, dst, round)
		return
	}
	flags := packFlags(alpha, round)
	kb8 := kb &^ 7
	for ip := 0; ip*mr < mb; ip++ {
		d := dst[ip*kb*mr : (ip+1)*kb*mr]
		i0 := ic + ip*mr
		h := min(mr, ic+mb-i0)
		for g := 0; g < mr; g += 6 {
			hg := min(6, h-g)
			switch {
			case hg <= 0:
				for p := 0; p < kb; p++ {
					clear(d[p*mr+g : p*mr+g+6])
				}
			case transA:
				_ = a[(pc+kb-1)*lda+i0+g+hg-1]
				_ = d[(kb-1)*mr+g+5]
				packAT6(&a[pc*lda+i0+g], lda, kb, hg, &d[g], mr, alpha, flags)
			case kb8 > 0:
				_ = a[(i0+g+hg-1)*lda+pc+kb8-1]
				_ = d[(kb8-1)*mr+g+5]
				packAN6(&a[(i0+g)*lda+pc], lda, kb8, hg, &d[g], mr, alpha, flags)
			}
		}
		if !transA && kb8 < kb {
			packANTail(a, lda, i0, h, pc, kb8, kb, alpha, d, mr, round)
		}
	}
}

// packANTail packs columns kb8..kb of an untransposed A panel (h rows
// from row i0, mr floats per column) as packAGo does.
func packANTail(a []float32, lda, i0, h, pc, kb8, kb int, alpha float32, d []float32, mr int, round bool) {
	for p := kb8; p < kb; p++ {
		dp := d[p*mr : p*mr+mr]
		for i := 0; i < h; i++ {
			v := a[(i0+i)*lda+pc+p]
			if alpha != 1 {
				v = alpha * v
			}
			dp[i] = v
		}
		clear(dp[h:])
	}
	if round {
		roundBF16(d[kb8*mr : kb*mr])
	}
}

// packB is packBGo, in AVX2 where the CPU has it and the kernel's nr is a
// multiple of 16.
func packB(transB bool, b []float32, ldb, pc, kb, jc, nb int, dst []float32, round bool) {
	nr := kern.nr
	if !packAsm || nr%16 != 0 || kb == 0 {
		packBGo(transB, b, ldb, pc, kb, jc, nb, dst, round)
		return
	}
	flags := packFlags(1, round)
	kb8 := kb &^ 7
	for jp := 0; jp*nr < nb; jp++ {
		d := dst[jp*kb*nr : (jp+1)*kb*nr]
		j0 := jc + jp*nr
		w := min(nr, jc+nb-j0)
		if !transB {
			for g := 0; g < nr; g += 16 {
				wg := min(16, w-g)
				if wg <= 0 {
					clearColumns(d[:kb*nr], nr, g, 16)
					continue
				}
				_ = b[(pc+kb-1)*ldb+j0+g+wg-1]
				_ = d[(kb-1)*nr+g+15]
				packBN16(&b[pc*ldb+j0+g], ldb, kb, wg, &d[g], nr, flags)
			}
			continue
		}
		for g := 0; g < nr; g += 8 {
			rows := min(8, w-g)
			switch {
			case rows <= 0:
				clearColumns(d[:kb8*nr], nr, g, 8)
			case kb8 > 0:
				_ = b[(j0+g+rows-1)*ldb+pc+kb8-1]
				_ = d[(kb8-1)*nr+g+7]
				packBT8(&b[(j0+g)*ldb+pc], ldb, kb8, rows, &d[g], nr, flags)
			}
		}
		if kb8 < kb {
			packBTTail(b, ldb, j0, w, pc, kb8, kb, d, nr, round)
		}
	}
}

// packBTTail packs rows kb8..kb of a transposed B panel (w columns from
// column j0, nr floats per row) as packBGo does.
func packBTTail(b []float32, ldb, j0, w, pc, kb8, kb int, d []float32, nr int, round bool) {
	for p := kb8; p < kb; p++ {
		dp := d[p*nr : p*nr+nr]
		for j := 0; j < w; j++ {
			dp[j] = b[(j0+j)*ldb+pc+p]
		}
		clear(dp[w:])
	}
	if round {
		roundBF16(d[kb8*nr : kb*nr])
	}
}

// clearColumns zeroes columns g..g+width of every row of d (nr floats a
// row).
func clearColumns(d []float32, nr, g, width int) {
	for off := 0; off < len(d); off += nr {
		clear(d[off+g : off+g+width])
	}
}

// transposeCols is the number of columns of A each pass of transpose's
// 8-row strips covers: the 8-float pieces of that many rows of B stay in
// L1 until the next strip fills the rest of their cache lines.
const transposeCols = 128

// transpose is transposeGo with whole 8 x 8 blocks in AVX2 (packBT8 on 8
// rows, no rounding): strips of 8 rows of A, transposeCols columns at a
// time; the last m mod 8 rows and n mod 8 columns go through transposeGo.
func transpose(m, n int, a []float32, lda int, b []float32, ldb int) {
	m8, n8 := m&^7, n&^7
	if !packAsm || m8 == 0 || n8 == 0 {
		transposeGo(m, n, a, lda, b, ldb)
		return
	}
	_ = a[(m8-1)*lda+n8-1]
	_ = b[(n8-1)*ldb+m8-1]
	for j0 := 0; j0 < n8; j0 += transposeCols {
		nb := min(transposeCols, n8-j0)
		for i0 := 0; i0 < m8; i0 += 8 {
			packBT8(&a[i0*lda+j0], lda, nb, 8, &b[j0*ldb+i0], ldb, 0)
		}
	}
	if m8 < m {
		transposeGo(m-m8, n, a[m8*lda:], lda, b[m8:], ldb)
	}
	if n8 < n {
		transposeGo(m8, n-n8, a[n8:], lda, b[n8*ldb:], ldb)
	}
}
