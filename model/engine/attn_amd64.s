// Fused causal self-attention of one head for AVX-512: for each query, the
// scores against 64 keys (transposed, kt[d*64 + j]), masked to the keys the
// query may see, the softmax, and the weighted sum of the value rows.
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

// func attnAVX512(q *float32, ldq, nq, n0 int, kt *float32, hd int, v *float32, ldv, wide int, p, y *float32, ldy int)
//
// Query row i (q + i*ldq floats) sees keys 0..n0+i-1 (n0+nq-1 <= 64); its
// output (hd floats: 16, or 32 when wide) goes to y + i*ldy. p is 64
// floats of scratch (the row's weights).
TEXT ·attnAVX512(SB), NOSPLIT, $0-96
	MOVQ q+0(FP), SI
	MOVQ ldq+8(FP), R8
	SHLQ $2, R8
	MOVQ nq+16(FP), CX
	MOVQ n0+24(FP), DX
	MOVQ kt+32(FP), R9
	MOVQ hd+40(FP), R10
	SHLQ $8, R10 // bytes of kt
	MOVQ v+48(FP), R11
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

row:
	// Scores: Z0..Z3 = sum over d of q[d] * kt[d, 0:64].
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	MOVQ SI, AX
	MOVQ R9, R15
	LEAQ (R9)(R10*1), R14
score:
	VBROADCASTSS (AX), Z4
	VFMADD231PS (R15), Z4, Z0
	VFMADD231PS 64(R15), Z4, Z1
	VFMADD231PS 128(R15), Z4, Z2
	VFMADD231PS 192(R15), Z4, Z3
	ADDQ $4, AX
	ADDQ $256, R15
	CMPQ R15, R14
	JNE score

	// Mask the keys past n = n0 + i: add mask<>[64-n:128-n].
	LEAQ mask<>+256(SB), AX
	MOVQ DX, R15
	SHLQ $2, R15
	SUBQ R15, AX
	VADDPS (AX), Z0, Z0
	VADDPS 64(AX), Z1, Z1
	VADDPS 128(AX), Z2, Z2
	VADDPS 192(AX), Z3, Z3

	// Row maximum in every lane of Z8.
	VMAXPS Z1, Z0, Z8
	VMAXPS Z3, Z2, Z9
	VMAXPS Z9, Z8, Z8
	HREDUCE(VMAXPS, Z8, Z9)

	// e = exp(score - max) a block of 16 at a time, through p; their sum
	// in Z12.
	VMOVUPS Z0, (DI)
	VMOVUPS Z1, 64(DI)
	VMOVUPS Z2, 128(DI)
	VMOVUPS Z3, 192(DI)
	VPXORD Z12, Z12, Z12
	MOVQ DI, AX
	MOVQ $4, R13
expblock:
	VMOVUPS (AX), Z0
	VSUBPS Z8, Z0, Z0
	VMAXPS Z16, Z0, Z0
	VMULPS Z17, Z0, Z9
	VRNDSCALEPS $0, Z9, Z9
	VFNMADD231PS Z18, Z9, Z0
	VFNMADD231PS Z19, Z9, Z0
	VMOVAPS Z20, Z10
	VFMADD213PS Z21, Z0, Z10
	VFMADD213PS Z22, Z0, Z10
	VFMADD213PS Z23, Z0, Z10
	VFMADD213PS Z24, Z0, Z10
	VFMADD213PS Z25, Z0, Z10
	VFMADD213PS Z26, Z0, Z10
	VFMADD213PS Z26, Z0, Z10
	VCVTPS2DQ Z9, Z9
	VPSLLD $23, Z9, Z9
	VPADDD Z27, Z9, Z9
	VMULPS Z9, Z10, Z0
	VMOVUPS Z0, (AX)
	VADDPS Z0, Z12, Z12
	ADDQ $64, AX
	DECQ R13
	JNE expblock

	// The sum in every lane of Z12; p = e / sum.
	HREDUCE(VADDPS, Z12, Z9)
	VDIVPS Z12, Z26, Z8
	VMULPS (DI), Z8, Z0
	VMULPS 64(DI), Z8, Z1
	VMULPS 128(DI), Z8, Z2
	VMULPS 192(DI), Z8, Z3
	VMOVUPS Z0, (DI)
	VMOVUPS Z1, 64(DI)
	VMOVUPS Z2, 128(DI)
	VMOVUPS Z3, 192(DI)

	// y = sum over the n keys of p[j] * v[j]: four partial sums (j mod 4)
	// of 16 columns each (Z28..Z31), and of the next 16 when wide
	// (Z12..Z15).
	VPXORD Z28, Z28, Z28
	VPXORD Z29, Z29, Z29
	VPXORD Z30, Z30, Z30
	VPXORD Z31, Z31, Z31
	VPXORD Z12, Z12, Z12
	VPXORD Z13, Z13, Z13
	VPXORD Z14, Z14, Z14
	VPXORD Z15, Z15, Z15
	MOVQ DI, AX
	MOVQ R11, R15
	MOVQ DX, R13
	CMPQ wide+64(FP), $0
	JNE wide4
narrow4:
	CMPQ R13, $4
	JLT narrow1
	VBROADCASTSS (AX), Z4
	VBROADCASTSS 4(AX), Z5
	VBROADCASTSS 8(AX), Z6
	VBROADCASTSS 12(AX), Z7
	VFMADD231PS (R15), Z4, Z28
	ADDQ R12, R15
	VFMADD231PS (R15), Z5, Z29
	ADDQ R12, R15
	VFMADD231PS (R15), Z6, Z30
	ADDQ R12, R15
	VFMADD231PS (R15), Z7, Z31
	ADDQ R12, R15
	ADDQ $16, AX
	SUBQ $4, R13
	JMP narrow4
narrow1:
	TESTQ R13, R13
	JEQ sum
	VBROADCASTSS (AX), Z4
	VFMADD231PS (R15), Z4, Z28
	ADDQ R12, R15
	ADDQ $4, AX
	DECQ R13
	JMP narrow1
wide4:
	CMPQ R13, $4
	JLT wide1
	VBROADCASTSS (AX), Z4
	VBROADCASTSS 4(AX), Z5
	VBROADCASTSS 8(AX), Z6
	VBROADCASTSS 12(AX), Z7
	VFMADD231PS (R15), Z4, Z28
	VFMADD231PS 64(R15), Z4, Z12
	ADDQ R12, R15
	VFMADD231PS (R15), Z5, Z29
	VFMADD231PS 64(R15), Z5, Z13
	ADDQ R12, R15
	VFMADD231PS (R15), Z6, Z30
	VFMADD231PS 64(R15), Z6, Z14
	ADDQ R12, R15
	VFMADD231PS (R15), Z7, Z31
	VFMADD231PS 64(R15), Z7, Z15
	ADDQ R12, R15
	ADDQ $16, AX
	SUBQ $4, R13
	JMP wide4
wide1:
	TESTQ R13, R13
	JEQ sum
	VBROADCASTSS (AX), Z4
	VFMADD231PS (R15), Z4, Z28
	VFMADD231PS 64(R15), Z4, Z12
	ADDQ R12, R15
	ADDQ $4, AX
	DECQ R13
	JMP wide1
sum:
	VADDPS Z29, Z28, Z28
	VADDPS Z31, Z30, Z30
	VADDPS Z30, Z28, Z28
	VMOVUPS Z28, (BX)
	CMPQ wide+64(FP), $0
	JEQ next
	VADDPS Z13, Z12, Z12
	VADDPS Z15, Z14, Z14
	VADDPS Z14, Z12, Z12
	VMOVUPS Z12, 64(BX)
next:
	ADDQ R8, SI
	MOVQ ldy+88(FP), AX
	SHLQ $2, AX
	ADDQ AX, BX
	INCQ DX
	DECQ CX
	JNE row
done:
	VZEROUPPER
	RET
