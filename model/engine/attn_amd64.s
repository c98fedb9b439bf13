// Fused causal self-attention of one head for AVX-512: for each query, the
// scores against 64 keys (transposed, kt[d*64 + j]), masked to the keys the
// query may see, the softmax, and the weighted sum of the value rows. Two
// query rows at a time, interleaved: a row's steps depend on each other
// (sums, horizontal reductions, the exp polynomial), and the two rows'
// independent chains fill each other's latencies and share the key and
// value loads. Each row gets the same operations in the same order as it
// would alone (a lone last row is paired with itself), so its output does
// not depend on the rows computed with it.
// exp(t) for t clamped to [-87, 0]: n = round(t log2 e), r = t - n ln2
// (Cody-Waite, two parts), e^r by its degree-7 Taylor polynomial, times 2^n
// built in the exponent bits (as vmath_amd64.s).

//go:build amd64 && !purego

#include "textflag.h"

// HREDUCE(op, z, t) leaves op over the 16 lanes of z in every lane of z
// (halves, quarters, pairs, neighbours); t is scratch.
#define HREDUCE(op, z, t) \
	VSHUFF64X2 $0x4e, z, z, t; \
	op t, z, z; \
	VSHUFF64X2 $0xb1, z, z, t; \
	op t, z, z; \
	VPERMILPS $0x4e, z, t; \
	op t, z, z; \
	VPERMILPS $0xb1, z, t; \
	op t, z, z

// mask<>: 64 zeros, then 64 -Inf; a query that sees n keys adds the 64
// floats from 64-n on to its scores.
DATA mask<>+256(SB)/4, $0xff800000
DATA mask<>+260(SB)/4, $0xff800000
DATA mask<>+264(SB)/4, $0xff800000
DATA mask<>+268(SB)/4, $0xff800000
DATA mask<>+272(SB)/4, $0xff800000
DATA mask<>+276(SB)/4, $0xff800000
DATA mask<>+280(SB)/4, $0xff800000
DATA mask<>+284(SB)/4, $0xff800000
DATA mask<>+288(SB)/4, $0xff800000
DATA mask<>+292(SB)/4, $0xff800000
DATA mask<>+296(SB)/4, $0xff800000
DATA mask<>+300(SB)/4, $0xff800000
DATA mask<>+304(SB)/4, $0xff800000
DATA mask<>+308(SB)/4, $0xff800000
DATA mask<>+312(SB)/4, $0xff800000
DATA mask<>+316(SB)/4, $0xff800000
DATA mask<>+320(SB)/4, $0xff800000
DATA mask<>+324(SB)/4, $0xff800000
DATA mask<>+328(SB)/4, $0xff800000
DATA mask<>+332(SB)/4, $0xff800000
DATA mask<>+336(SB)/4, $0xff800000
DATA mask<>+340(SB)/4, $0xff800000
DATA mask<>+344(SB)/4, $0xff800000
DATA mask<>+348(SB)/4, $0xff800000
DATA mask<>+352(SB)/4, $0xff800000
DATA mask<>+356(SB)/4, $0xff800000
DATA mask<>+360(SB)/4, $0xff800000
DATA mask<>+364(SB)/4, $0xff800000
DATA mask<>+368(SB)/4, $0xff800000
DATA mask<>+372(SB)/4, $0xff800000
DATA mask<>+376(SB)/4, $0xff800000
DATA mask<>+380(SB)/4, $0xff800000
DATA mask<>+384(SB)/4, $0xff800000
DATA mask<>+388(SB)/4, $0xff800000
DATA mask<>+392(SB)/4, $0xff800000
DATA mask<>+396(SB)/4, $0xff800000
DATA mask<>+400(SB)/4, $0xff800000
DATA mask<>+404(SB)/4, $0xff800000
DATA mask<>+408(SB)/4, $0xff800000
DATA mask<>+412(SB)/4, $0xff800000
DATA mask<>+416(SB)/4, $0xff800000
DATA mask<>+420(SB)/4, $0xff800000
DATA mask<>+424(SB)/4, $0xff800000
DATA mask<>+428(SB)/4, $0xff800000
DATA mask<>+432(SB)/4, $0xff800000
DATA mask<>+436(SB)/4, $0xff800000
DATA mask<>+440(SB)/4, $0xff800000
DATA mask<>+444(SB)/4, $0xff800000
DATA mask<>+448(SB)/4, $0xff800000
DATA mask<>+452(SB)/4, $0xff800000
DATA mask<>+456(SB)/4, $0xff800000
DATA mask<>+460(SB)/4, $0xff800000
DATA mask<>+464(SB)/4, $0xff800000
DATA mask<>+468(SB)/4, $0xff800000
DATA mask<>+472(SB)/4, $0xff800000
DATA mask<>+476(SB)/4, $0xff800000
DATA mask<>+480(SB)/4, $0xff800000
DATA mask<>+484(SB)/4, $0xff800000
DATA mask<>+488(SB)/4, $0xff800000
DATA mask<>+492(SB)/4, $0xff800000
DATA mask<>+496(SB)/4, $0xff800000
DATA mask<>+500(SB)/4, $0xff800000
DATA mask<>+504(SB)/4, $0xff800000
DATA mask<>+508(SB)/4, $0xff800000
GLOBL mask<>(SB), RODATA|NOPTR, $512

DATA aconst<>+0(SB)/4, $0xc2ae0000 // m87
DATA aconst<>+4(SB)/4, $0x3fb8aa3b // log2e
DATA aconst<>+8(SB)/4, $0x3f318000 // ln2hi
DATA aconst<>+12(SB)/4, $0xb95e8083 // ln2lo
DATA aconst<>+16(SB)/4, $0x39500d01 // c7
DATA aconst<>+20(SB)/4, $0x3ab60b61 // c6
DATA aconst<>+24(SB)/4, $0x3c088889 // c5
DATA aconst<>+28(SB)/4, $0x3d2aaaab // c4
DATA aconst<>+32(SB)/4, $0x3e2aaaab // c3
DATA aconst<>+36(SB)/4, $0x3f000000 // c2
DATA aconst<>+40(SB)/4, $0x3f800000 // one
GLOBL aconst<>(SB), RODATA|NOPTR, $44

// SBLOCK(off, k, za, zb) adds the key block at off(R15) (into k) times
// Z8 (row A's query feature) to za and times Z9 (row B's) to zb.
#define SBLOCK(off, k, za, zb) \
	VMOVUPS off(R15), k; \
	VFMADD231PS k, Z8, za; \
	VFMADD231PS k, Z9, zb

// SCORE(label, blocks) is the score loop over the query features for the
// first key blocks (a macro SBLOCKS1..4), then on to masked.
#define SCORE(label, blocks) \
label: \
	VBROADCASTSS (AX), Z8; \
	VBROADCASTSS (AX)(R14*1), Z9; \
	blocks; \
	ADDQ $4, AX; \
	ADDQ $256, R15; \
	CMPQ R15, R10; \
	JNE label; \
	JMP masked

#define SBLOCKS1 SBLOCK(0, Z10, Z0, Z4)
#define SBLOCKS2 SBLOCKS1; SBLOCK(64, Z11, Z1, Z5)
#define SBLOCKS3 SBLOCKS2; SBLOCK(128, Z12, Z2, Z6)
#define SBLOCKS4 SBLOCKS3; SBLOCK(192, Z13, Z3, Z7)

// NKEY(off, za, zb) adds the weights at off(AX) (row A) and 256+off(AX)
// (row B) times the value row at R15 (16 columns) to za and zb, and moves
// R15 to the next value row.
#define NKEY(off, za, zb) \
	VMOVUPS (R15), Z8; \
	VBROADCASTSS off(AX), Z10; \
	VBROADCASTSS 256+off(AX), Z11; \
	VFMADD231PS Z8, Z10, za; \
	VFMADD231PS Z8, Z11, zb; \
	ADDQ R12, R15

// WKEY(off, za, zah, zb, zbh) is NKEY for 32 columns: the second 16 to
// zah and zbh.
#define WKEY(off, za, zah, zb, zbh) \
	VMOVUPS (R15), Z8; \
	VMOVUPS 64(R15), Z9; \
	VBROADCASTSS off(AX), Z10; \
	VBROADCASTSS 256+off(AX), Z11; \
	VFMADD231PS Z8, Z10, za; \
	VFMADD231PS Z9, Z10, zah; \
	VFMADD231PS Z8, Z11, zb; \
	VFMADD231PS Z9, Z11, zbh; \
	ADDQ R12, R15

// BKEY(off, zb) adds row B's weight at 256+off(AX) times the value row at
// R15 (16 columns) to zb and moves R15 on; BWKEY(off, zb, zbh) is BKEY for
// 32 columns, the second 16 to zbh.
#define BKEY(off, zb) \
	VBROADCASTSS 256+off(AX), Z11; \
	VFMADD231PS (R15), Z11, zb; \
	ADDQ R12, R15

#define BWKEY(off, zb, zbh) \
	VBROADCASTSS 256+off(AX), Z11; \
	VFMADD231PS (R15), Z11, zb; \
	VFMADD231PS 64(R15), Z11, zbh; \
	ADDQ R12, R15

// func attnAVX512(q *float32, ldq, nq, n0 int, kt *float32, hd int, v *float32, ldv, wide int, p, y *float32, ldy int)
//
// Query row i (q + i*ldq floats) sees keys 0..n0+i-1 (n0+nq-1 <= 64); its
// output (hd floats: 16, or 32 when wide) goes to y + i*ldy. p is 128
// floats of scratch (two rows' weights).
//
// Registers through a pair: SI row A's query, BX its output, DX the keys
// it sees, CX the rows left, DI p, R12 ldv in bytes, R14 row B's query
// offset from row A's (0: row B is row A again), R13 the blocks of 16
// keys row B sees; Z16-Z27 the exp constants. The blocks past R13 are
// masked for both rows: their scores are left at 0 (then -Inf), and their
// exponentials (exp(-87) each, the polynomial's floor) are not added to
// the sum, which holds the maximum's exp(0) = 1 and so cannot change by
// them.
TEXT ·attnAVX512(SB), NOSPLIT, $0-96
	MOVQ q+0(FP), SI
	MOVQ nq+16(FP), CX
	MOVQ n0+24(FP), DX
	MOVQ ldv+56(FP), R12
	SHLQ $2, R12
	MOVQ p+72(FP), DI
	MOVQ y+80(FP), BX
	VBROADCASTSS aconst<>+0(SB), Z16
	VBROADCASTSS aconst<>+4(SB), Z17
	VBROADCASTSS aconst<>+8(SB), Z18
	VBROADCASTSS aconst<>+12(SB), Z19
	VBROADCASTSS aconst<>+16(SB), Z20
	VBROADCASTSS aconst<>+20(SB), Z21
	VBROADCASTSS aconst<>+24(SB), Z22
	VBROADCASTSS aconst<>+28(SB), Z23
	VBROADCASTSS aconst<>+32(SB), Z24
	VBROADCASTSS aconst<>+36(SB), Z25
	VBROADCASTSS aconst<>+40(SB), Z26
	MOVL $0x3f800000, AX
	VPBROADCASTD AX, Z27
	TESTQ CX, CX
	JEQ done

pair:
	// Row B is the next row, or row A again when it is the last.
	MOVQ ldq+8(FP), R14
	SHLQ $2, R14
	CMPQ CX, $1
	JNE scores
	XORQ R14, R14

scores:
	// Z0..Z3 (row A) and Z4..Z7 (row B) = sum over d of q[d] * kt[d, 0:64],
	// over the R13 blocks of keys row B sees (the others stay 0 and are
	// masked).
	MOVQ DX, R13
	TESTQ R14, R14
	JEQ blocks
	INCQ R13
blocks:
	ADDQ $15, R13
	SHRQ $4, R13
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	MOVQ SI, AX
	MOVQ kt+32(FP), R15
	MOVQ hd+40(FP), R10
	SHLQ $8, R10
	ADDQ R15, R10
	CMPQ R13, $2
	JLT score1
	JEQ score2
	CMPQ R13, $3
	JEQ score3
	SCORE(score4, SBLOCKS4)
	SCORE(score3, SBLOCKS3)
	SCORE(score2, SBLOCKS2)
	SCORE(score1, SBLOCKS1)

masked:
	// Mask the keys past n: add mask<>[64-n:128-n]; row B sees DX + 1
	// keys (DX again when it is row A).
	LEAQ mask<>+256(SB), AX
	MOVQ DX, R15
	SHLQ $2, R15
	SUBQ R15, AX
	VADDPS (AX), Z0, Z0
	VADDPS 64(AX), Z1, Z1
	VADDPS 128(AX), Z2, Z2
	VADDPS 192(AX), Z3, Z3
	TESTQ R14, R14
	JEQ maskb
	SUBQ $4, AX
maskb:
	VADDPS (AX), Z4, Z4
	VADDPS 64(AX), Z5, Z5
	VADDPS 128(AX), Z6, Z6
	VADDPS 192(AX), Z7, Z7

	// Row maxima in every lane of Z8 (A) and Z10 (B).
	VMAXPS Z1, Z0, Z8
	VMAXPS Z3, Z2, Z9
	VMAXPS Z9, Z8, Z8
	VMAXPS Z5, Z4, Z10
	VMAXPS Z7, Z6, Z11
	VMAXPS Z11, Z10, Z10
	HREDUCE(VMAXPS, Z8, Z9)
	HREDUCE(VMAXPS, Z10, Z11)

	// e = exp(score - max) a block of 16 at a time, through p (row B at
	// p + 64 floats); the sums in Z12 (A) and Z13 (B).
	VMOVUPS Z0, (DI)
	VMOVUPS Z1, 64(DI)
	VMOVUPS Z2, 128(DI)
	VMOVUPS Z3, 192(DI)
	VMOVUPS Z4, 256(DI)
	VMOVUPS Z5, 320(DI)
	VMOVUPS Z6, 384(DI)
	VMOVUPS Z7, 448(DI)
	VPXORD Z12, Z12, Z12
	VPXORD Z13, Z13, Z13
	MOVQ DI, AX
	MOVQ R13, R15
expblock:
	VMOVUPS (AX), Z0
	VMOVUPS 256(AX), Z4
	VSUBPS Z8, Z0, Z0
	VSUBPS Z10, Z4, Z4
	VMAXPS Z16, Z0, Z0
	VMAXPS Z16, Z4, Z4
	VMULPS Z17, Z0, Z1
	VMULPS Z17, Z4, Z5
	VRNDSCALEPS $0, Z1, Z1
	VRNDSCALEPS $0, Z5, Z5
	VFNMADD231PS Z18, Z1, Z0
	VFNMADD231PS Z18, Z5, Z4
	VFNMADD231PS Z19, Z1, Z0
	VFNMADD231PS Z19, Z5, Z4
	VMOVAPS Z20, Z2
	VMOVAPS Z20, Z6
	VFMADD213PS Z21, Z0, Z2
	VFMADD213PS Z21, Z4, Z6
	VFMADD213PS Z22, Z0, Z2
	VFMADD213PS Z22, Z4, Z6
	VFMADD213PS Z23, Z0, Z2
	VFMADD213PS Z23, Z4, Z6
	VFMADD213PS Z24, Z0, Z2
	VFMADD213PS Z24, Z4, Z6
	VFMADD213PS Z25, Z0, Z2
	VFMADD213PS Z25, Z4, Z6
	VFMADD213PS Z26, Z0, Z2
	VFMADD213PS Z26, Z4, Z6
	VFMADD213PS Z26, Z0, Z2
	VFMADD213PS Z26, Z4, Z6
	VCVTPS2DQ Z1, Z1
	VCVTPS2DQ Z5, Z5
	VPSLLD $23, Z1, Z1
	VPSLLD $23, Z5, Z5
	VPADDD Z27, Z1, Z1
	VPADDD Z27, Z5, Z5
	VMULPS Z1, Z2, Z0
	VMULPS Z5, Z6, Z4
	VMOVUPS Z0, (AX)
	VMOVUPS Z4, 256(AX)
	VADDPS Z0, Z12, Z12
	VADDPS Z4, Z13, Z13
	ADDQ $64, AX
	DECQ R15
	JNE expblock

	// The sums in every lane; p = e / sum.
	HREDUCE(VADDPS, Z12, Z9)
	HREDUCE(VADDPS, Z13, Z11)
	VDIVPS Z12, Z26, Z8
	VDIVPS Z13, Z26, Z10
	MOVQ DI, AX
	MOVQ R13, R15
normalize:
	VMULPS (AX), Z8, Z0
	VMULPS 256(AX), Z10, Z4
	VMOVUPS Z0, (AX)
	VMOVUPS Z4, 256(AX)
	ADDQ $64, AX
	DECQ R15
	JNE normalize

	// y = sum over the row's keys of p[j] * v[j]: four partial sums per
	// row, key j in partial j mod 4 for each whole group of four keys and
	// in partial 0 past the last, of 16 columns each (row A Z28..Z31, row
	// B Z0..Z3), and of the next 16 when wide (A Z12..Z15, B Z4..Z7).
	// Both rows walk the groups of four row A has; row B then has one key
	// more (none when it is row A again).
	VPXORD Z28, Z28, Z28
	VPXORD Z29, Z29, Z29
	VPXORD Z30, Z30, Z30
	VPXORD Z31, Z31, Z31
	VPXORD Z12, Z12, Z12
	VPXORD Z13, Z13, Z13
	VPXORD Z14, Z14, Z14
	VPXORD Z15, Z15, Z15
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	MOVQ DI, AX
	MOVQ v+48(FP), R15
	MOVQ DX, R10
	CMPQ wide+64(FP), $0
	JNE wide4
narrow4:
	CMPQ R10, $4
	JLT narrowA
	NKEY(0, Z28, Z0)
	NKEY(4, Z29, Z1)
	NKEY(8, Z30, Z2)
	NKEY(12, Z31, Z3)
	ADDQ $16, AX
	SUBQ $4, R10
	JMP narrow4
narrowA:
	// Row A's last R10 keys into its partial 0.
	MOVQ AX, R8
	MOVQ R15, R9
	MOVQ R10, R11
narrowA1:
	TESTQ R11, R11
	JEQ narrowB
	VBROADCASTSS (R8), Z10
	VFMADD231PS (R9), Z10, Z28
	ADDQ R12, R9
	ADDQ $4, R8
	DECQ R11
	JMP narrowA1
narrowB:
	// Row B's: a group of four when they make one, else into partial 0.
	TESTQ R14, R14
	JEQ narrowB1
	INCQ R10
	CMPQ R10, $4
	JLT narrowB1
	BKEY(0, Z0)
	BKEY(4, Z1)
	BKEY(8, Z2)
	BKEY(12, Z3)
	JMP sum
narrowB1:
	TESTQ R10, R10
	JEQ sum
	BKEY(0, Z0)
	ADDQ $4, AX
	DECQ R10
	JMP narrowB1

wide4:
	CMPQ R10, $4
	JLT wideA
	WKEY(0, Z28, Z12, Z0, Z4)
	WKEY(4, Z29, Z13, Z1, Z5)
	WKEY(8, Z30, Z14, Z2, Z6)
	WKEY(12, Z31, Z15, Z3, Z7)
	ADDQ $16, AX
	SUBQ $4, R10
	JMP wide4
wideA:
	MOVQ AX, R8
	MOVQ R15, R9
	MOVQ R10, R11
wideA1:
	TESTQ R11, R11
	JEQ wideB
	VBROADCASTSS (R8), Z10
	VFMADD231PS (R9), Z10, Z28
	VFMADD231PS 64(R9), Z10, Z12
	ADDQ R12, R9
	ADDQ $4, R8
	DECQ R11
	JMP wideA1
wideB:
	TESTQ R14, R14
	JEQ wideB1
	INCQ R10
	CMPQ R10, $4
	JLT wideB1
	BWKEY(0, Z0, Z4)
	BWKEY(4, Z1, Z5)
	BWKEY(8, Z2, Z6)
	BWKEY(12, Z3, Z7)
	JMP sum
wideB1:
	TESTQ R10, R10
	JEQ sum
	BWKEY(0, Z0, Z4)
	ADDQ $4, AX
	DECQ R10
	JMP wideB1

sum:
	// Row B's output: the next row's, or row A's again.
	MOVQ BX, R8
	TESTQ R14, R14
	JEQ store
	MOVQ ldy+88(FP), R9
	SHLQ $2, R9
	ADDQ R9, R8
store:
	VADDPS Z29, Z28, Z28
	VADDPS Z31, Z30, Z30
	VADDPS Z30, Z28, Z28
	VMOVUPS Z28, (BX)
	VADDPS Z1, Z0, Z0
	VADDPS Z3, Z2, Z2
	VADDPS Z2, Z0, Z0
	VMOVUPS Z0, (R8)
	CMPQ wide+64(FP), $0
	JEQ next
	VADDPS Z13, Z12, Z12
	VADDPS Z15, Z14, Z14
	VADDPS Z14, Z12, Z12
	VMOVUPS Z12, 64(BX)
	VADDPS Z5, Z4, Z4
	VADDPS Z7, Z6, Z6
	VADDPS Z6, Z4, Z4
	VMOVUPS Z4, 64(R8)
next:
	CMPQ CX, $1
	JEQ done
	MOVQ ldq+8(FP), R8
	SHLQ $2, R8
	LEAQ (SI)(R8*2), SI
	MOVQ ldy+88(FP), R9
	SHLQ $2, R9
	LEAQ (BX)(R9*2), BX
	ADDQ $2, DX
	SUBQ $2, CX
	JNE pair
done:
	VZEROUPPER
	RET
