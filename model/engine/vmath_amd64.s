// Vectorised GELU (tanh form) and exp for float32, AVX2 + FMA.
// exp(t) for t clamped to [-87, 87]: n = round(t log2 e), r = t - n ln2
// (Cody-Waite, two parts), e^r by its degree-7 Taylor polynomial, times 2^n
// built in the exponent bits. gelu(v) = v / (1 + exp(-2u)) with
// u = sqrt(2/pi) (v + 0.044715 v^3), which equals 0.5 v (1 + tanh(u)).

//go:build amd64 && !purego

#include "textflag.h"

DATA vconst<>+0(SB)/4, $0x3fcc422a
DATA vconst<>+4(SB)/4, $0x3fcc422a
DATA vconst<>+8(SB)/4, $0x3fcc422a
DATA vconst<>+12(SB)/4, $0x3fcc422a
DATA vconst<>+16(SB)/4, $0x3fcc422a
DATA vconst<>+20(SB)/4, $0x3fcc422a
DATA vconst<>+24(SB)/4, $0x3fcc422a
DATA vconst<>+28(SB)/4, $0x3fcc422a
DATA vconst<>+32(SB)/4, $0x3d922279
DATA vconst<>+36(SB)/4, $0x3d922279
DATA vconst<>+40(SB)/4, $0x3d922279
DATA vconst<>+44(SB)/4, $0x3d922279
DATA vconst<>+48(SB)/4, $0x3d922279
DATA vconst<>+52(SB)/4, $0x3d922279
DATA vconst<>+56(SB)/4, $0x3d922279
DATA vconst<>+60(SB)/4, $0x3d922279
DATA vconst<>+64(SB)/4, $0x80000000
DATA vconst<>+68(SB)/4, $0x80000000
DATA vconst<>+72(SB)/4, $0x80000000
DATA vconst<>+76(SB)/4, $0x80000000
DATA vconst<>+80(SB)/4, $0x80000000
DATA vconst<>+84(SB)/4, $0x80000000
DATA vconst<>+88(SB)/4, $0x80000000
DATA vconst<>+92(SB)/4, $0x80000000
DATA vconst<>+96(SB)/4, $0xc2ae0000
DATA vconst<>+100(SB)/4, $0xc2ae0000
DATA vconst<>+104(SB)/4, $0xc2ae0000
DATA vconst<>+108(SB)/4, $0xc2ae0000
DATA vconst<>+112(SB)/4, $0xc2ae0000
DATA vconst<>+116(SB)/4, $0xc2ae0000
DATA vconst<>+120(SB)/4, $0xc2ae0000
DATA vconst<>+124(SB)/4, $0xc2ae0000
DATA vconst<>+128(SB)/4, $0x42ae0000
DATA vconst<>+132(SB)/4, $0x42ae0000
DATA vconst<>+136(SB)/4, $0x42ae0000
DATA vconst<>+140(SB)/4, $0x42ae0000
DATA vconst<>+144(SB)/4, $0x42ae0000
DATA vconst<>+148(SB)/4, $0x42ae0000
DATA vconst<>+152(SB)/4, $0x42ae0000
DATA vconst<>+156(SB)/4, $0x42ae0000
DATA vconst<>+160(SB)/4, $0x3fb8aa3b
DATA vconst<>+164(SB)/4, $0x3fb8aa3b
DATA vconst<>+168(SB)/4, $0x3fb8aa3b
DATA vconst<>+172(SB)/4, $0x3fb8aa3b
DATA vconst<>+176(SB)/4, $0x3fb8aa3b
DATA vconst<>+180(SB)/4, $0x3fb8aa3b
DATA vconst<>+184(SB)/4, $0x3fb8aa3b
DATA vconst<>+188(SB)/4, $0x3fb8aa3b
DATA vconst<>+192(SB)/4, $0x3f318000
DATA vconst<>+196(SB)/4, $0x3f318000
DATA vconst<>+200(SB)/4, $0x3f318000
DATA vconst<>+204(SB)/4, $0x3f318000
DATA vconst<>+208(SB)/4, $0x3f318000
DATA vconst<>+212(SB)/4, $0x3f318000
DATA vconst<>+216(SB)/4, $0x3f318000
DATA vconst<>+220(SB)/4, $0x3f318000
DATA vconst<>+224(SB)/4, $0xb95e8083
DATA vconst<>+228(SB)/4, $0xb95e8083
DATA vconst<>+232(SB)/4, $0xb95e8083
DATA vconst<>+236(SB)/4, $0xb95e8083
DATA vconst<>+240(SB)/4, $0xb95e8083
DATA vconst<>+244(SB)/4, $0xb95e8083
DATA vconst<>+248(SB)/4, $0xb95e8083
DATA vconst<>+252(SB)/4, $0xb95e8083
DATA vconst<>+256(SB)/4, $0x39500d01
DATA vconst<>+260(SB)/4, $0x39500d01
DATA vconst<>+264(SB)/4, $0x39500d01
DATA vconst<>+268(SB)/4, $0x39500d01
DATA vconst<>+272(SB)/4, $0x39500d01
DATA vconst<>+276(SB)/4, $0x39500d01
DATA vconst<>+280(SB)/4, $0x39500d01
DATA vconst<>+284(SB)/4, $0x39500d01
DATA vconst<>+288(SB)/4, $0x3ab60b61
DATA vconst<>+292(SB)/4, $0x3ab60b61
DATA vconst<>+296(SB)/4, $0x3ab60b61
DATA vconst<>+300(SB)/4, $0x3ab60b61
DATA vconst<>+304(SB)/4, $0x3ab60b61
DATA vconst<>+308(SB)/4, $0x3ab60b61
DATA vconst<>+312(SB)/4, $0x3ab60b61
DATA vconst<>+316(SB)/4, $0x3ab60b61
DATA vconst<>+320(SB)/4, $0x3c088889
DATA vconst<>+324(SB)/4, $0x3c088889
DATA vconst<>+328(SB)/4, $0x3c088889
DATA vconst<>+332(SB)/4, $0x3c088889
DATA vconst<>+336(SB)/4, $0x3c088889
DATA vconst<>+340(SB)/4, $0x3c088889
DATA vconst<>+344(SB)/4, $0x3c088889
DATA vconst<>+348(SB)/4, $0x3c088889
DATA vconst<>+352(SB)/4, $0x3d2aaaab
DATA vconst<>+356(SB)/4, $0x3d2aaaab
DATA vconst<>+360(SB)/4, $0x3d2aaaab
DATA vconst<>+364(SB)/4, $0x3d2aaaab
DATA vconst<>+368(SB)/4, $0x3d2aaaab
DATA vconst<>+372(SB)/4, $0x3d2aaaab
DATA vconst<>+376(SB)/4, $0x3d2aaaab
DATA vconst<>+380(SB)/4, $0x3d2aaaab
DATA vconst<>+384(SB)/4, $0x3e2aaaab
DATA vconst<>+388(SB)/4, $0x3e2aaaab
DATA vconst<>+392(SB)/4, $0x3e2aaaab
DATA vconst<>+396(SB)/4, $0x3e2aaaab
DATA vconst<>+400(SB)/4, $0x3e2aaaab
DATA vconst<>+404(SB)/4, $0x3e2aaaab
DATA vconst<>+408(SB)/4, $0x3e2aaaab
DATA vconst<>+412(SB)/4, $0x3e2aaaab
DATA vconst<>+416(SB)/4, $0x3f000000
DATA vconst<>+420(SB)/4, $0x3f000000
DATA vconst<>+424(SB)/4, $0x3f000000
DATA vconst<>+428(SB)/4, $0x3f000000
DATA vconst<>+432(SB)/4, $0x3f000000
DATA vconst<>+436(SB)/4, $0x3f000000
DATA vconst<>+440(SB)/4, $0x3f000000
DATA vconst<>+444(SB)/4, $0x3f000000
DATA vconst<>+448(SB)/4, $0x3f800000
DATA vconst<>+452(SB)/4, $0x3f800000
DATA vconst<>+456(SB)/4, $0x3f800000
DATA vconst<>+460(SB)/4, $0x3f800000
DATA vconst<>+464(SB)/4, $0x3f800000
DATA vconst<>+468(SB)/4, $0x3f800000
DATA vconst<>+472(SB)/4, $0x3f800000
DATA vconst<>+476(SB)/4, $0x3f800000
DATA vconst<>+480(SB)/4, $0x3f800000
DATA vconst<>+484(SB)/4, $0x3f800000
DATA vconst<>+488(SB)/4, $0x3f800000
DATA vconst<>+492(SB)/4, $0x3f800000
DATA vconst<>+496(SB)/4, $0x3f800000
DATA vconst<>+500(SB)/4, $0x3f800000
DATA vconst<>+504(SB)/4, $0x3f800000
DATA vconst<>+508(SB)/4, $0x3f800000
GLOBL vconst<>(SB), RODATA|NOPTR, $512

// func geluAVX2(x *float32, n int) applies GELU in place to x[0:n], n a multiple of 8.
TEXT ·geluAVX2(SB), NOSPLIT, $0-16
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	SHRQ $3, CX
	JZ gdone
gloop:
	VMOVUPS (SI), Y0
	VMULPS Y0, Y0, Y1
	VMOVUPS vconst<>+32(SB), Y2
	VFMADD213PS vconst<>+0(SB), Y1, Y2
	VMULPS Y0, Y2, Y2
	VXORPS vconst<>+64(SB), Y2, Y2
	VMAXPS vconst<>+96(SB), Y2, Y2
	VMINPS vconst<>+128(SB), Y2, Y2
	VMULPS vconst<>+160(SB), Y2, Y3
	VROUNDPS $0, Y3, Y3
	VMOVAPS Y2, Y4
	VFNMADD231PS vconst<>+192(SB), Y3, Y4
	VFNMADD231PS vconst<>+224(SB), Y3, Y4
	VMOVUPS vconst<>+256(SB), Y5
	VFMADD213PS vconst<>+288(SB), Y4, Y5
	VFMADD213PS vconst<>+320(SB), Y4, Y5
	VFMADD213PS vconst<>+352(SB), Y4, Y5
	VFMADD213PS vconst<>+384(SB), Y4, Y5
	VFMADD213PS vconst<>+416(SB), Y4, Y5
	VFMADD213PS vconst<>+448(SB), Y4, Y5
	VFMADD213PS vconst<>+448(SB), Y4, Y5
	VCVTPS2DQ Y3, Y6
	VPSLLD $23, Y6, Y6
	VPADDD vconst<>+480(SB), Y6, Y6
	VMULPS Y6, Y5, Y5
	VADDPS vconst<>+448(SB), Y5, Y5
	VDIVPS Y5, Y0, Y0
	VMOVUPS Y0, (SI)
	ADDQ $32, SI
	DECQ CX
	JNZ gloop
gdone:
	VZEROUPPER
	RET

// func expAVX2(x *float32, n int) replaces x[0:n] by exp(x) (arguments clamped to [-87, 87]), n a multiple of 8.
TEXT ·expAVX2(SB), NOSPLIT, $0-16
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	SHRQ $3, CX
	JZ edone
eloop:
	VMOVUPS (SI), Y2
	VMAXPS vconst<>+96(SB), Y2, Y2
	VMINPS vconst<>+128(SB), Y2, Y2
	VMULPS vconst<>+160(SB), Y2, Y3
	VROUNDPS $0, Y3, Y3
	VMOVAPS Y2, Y4
	VFNMADD231PS vconst<>+192(SB), Y3, Y4
	VFNMADD231PS vconst<>+224(SB), Y3, Y4
	VMOVUPS vconst<>+256(SB), Y5
	VFMADD213PS vconst<>+288(SB), Y4, Y5
	VFMADD213PS vconst<>+320(SB), Y4, Y5
	VFMADD213PS vconst<>+352(SB), Y4, Y5
	VFMADD213PS vconst<>+384(SB), Y4, Y5
	VFMADD213PS vconst<>+416(SB), Y4, Y5
	VFMADD213PS vconst<>+448(SB), Y4, Y5
	VFMADD213PS vconst<>+448(SB), Y4, Y5
	VCVTPS2DQ Y3, Y6
	VPSLLD $23, Y6, Y6
	VPADDD vconst<>+480(SB), Y6, Y6
	VMULPS Y6, Y5, Y5
	VMOVUPS Y5, (SI)
	ADDQ $32, SI
	DECQ CX
	JNZ eloop
edone:
	VZEROUPPER
	RET

// func addAVX2(dst, src *float32, n int) sets dst[i] += src[i], n a multiple of 8.
TEXT ·addAVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $3, CX
	JZ adone
aloop:
	VMOVUPS (DI), Y0
	VADDPS (SI), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, DI
	ADDQ $32, SI
	DECQ CX
	JNZ aloop
adone:
	VZEROUPPER
	RET

// func gateReluAVX2(out, h, gate, sc *float32, n int) sets out[i] = max(h[i]*gate[i] + sc[i], 0)
// (multiply, then add: the rounding of the scalar code), n a multiple of 8.
TEXT ·gateReluAVX2(SB), NOSPLIT, $0-40
	MOVQ out+0(FP), DI
	MOVQ h+8(FP), SI
	MOVQ gate+16(FP), DX
	MOVQ sc+24(FP), BX
	MOVQ n+32(FP), CX
	VXORPS Y3, Y3, Y3
	SHRQ $3, CX
	JZ gtdone
gtloop:
	VMOVUPS (SI), Y0
	VMULPS (DX), Y0, Y0
	VADDPS (BX), Y0, Y0
	VMAXPS Y3, Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, DI
	ADDQ $32, SI
	ADDQ $32, DX
	ADDQ $32, BX
	DECQ CX
	JNZ gtloop
gtdone:
	VZEROUPPER
	RET

// func maxAVX2(x *float32, n int) float32 returns max(x[0:n]), n a positive multiple of 8.
TEXT ·maxAVX2(SB), NOSPLIT, $0-20
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	SHRQ $3, CX
	VMOVUPS (SI), Y0
	ADDQ $32, SI
	DECQ CX
	JZ mred
mloop:
	VMAXPS (SI), Y0, Y0
	ADDQ $32, SI
	DECQ CX
	JNZ mloop
mred:
	VEXTRACTF128 $1, Y0, X1
	VMAXPS X1, X0, X0
	VMOVHLPS X0, X1, X1
	VMAXPS X1, X0, X0
	VPSHUFD $1, X0, X1
	VMAXSS X1, X0, X0
	VZEROUPPER
	MOVSS X0, ret+16(FP)
	RET

// func sumAVX2(x *float32, n int) float32 returns the sum of x[0:n] (8 lane
// sums, then pairwise), n a multiple of 8.
TEXT ·sumAVX2(SB), NOSPLIT, $0-20
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	VXORPS Y0, Y0, Y0
	SHRQ $3, CX
	JZ sred
sloop:
	VADDPS (SI), Y0, Y0
	ADDQ $32, SI
	DECQ CX
	JNZ sloop
sred:
	VEXTRACTF128 $1, Y0, X1
	VADDPS X1, X0, X0
	VMOVHLPS X0, X1, X1
	VADDPS X1, X0, X0
	VPSHUFD $1, X0, X1
	VADDSS X1, X0, X0
	VZEROUPPER
	MOVSS X0, ret+16(FP)
	RET

// func scaleAddAVX2(x *float32, n int, a, b float32) sets x[i] = x[i]*a + b
// (multiply, then add), n a multiple of 8.
TEXT ·scaleAddAVX2(SB), NOSPLIT, $0-24
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	VBROADCASTSS a+16(FP), Y1
	VBROADCASTSS b+20(FP), Y2
	SHRQ $3, CX
	JZ sadone
saloop:
	VMULPS (SI), Y1, Y0
	VADDPS Y2, Y0, Y0
	VMOVUPS Y0, (SI)
	ADDQ $32, SI
	DECQ CX
	JNZ saloop
sadone:
	VZEROUPPER
	RET

// func sumSqDevAVX2(x *float32, n int, m float32) float32 returns the sum of
// (x[i]-m)^2 over x[0:n] (8 lane sums, then pairwise), n a multiple of 8.
TEXT ·sumSqDevAVX2(SB), NOSPLIT, $0-28
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	VBROADCASTSS m+16(FP), Y2
	VXORPS Y0, Y0, Y0
	SHRQ $3, CX
	JZ qred
qloop:
	VMOVUPS (SI), Y1
	VSUBPS Y2, Y1, Y1
	VMULPS Y1, Y1, Y1
	VADDPS Y1, Y0, Y0
	ADDQ $32, SI
	DECQ CX
	JNZ qloop
qred:
	VEXTRACTF128 $1, Y0, X1
	VADDPS X1, X0, X0
	VMOVHLPS X0, X1, X1
	VADDPS X1, X0, X0
	VPSHUFD $1, X0, X1
	VADDSS X1, X0, X0
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

// func normAVX2(y, x, w, b *float32, n int, m, inv float32) sets
// y[i] = ((x[i]-m)*inv)*w[i] + b[i] (each operation rounded, as the scalar
// code), n a multiple of 8.
TEXT ·normAVX2(SB), NOSPLIT, $0-48
	MOVQ y+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ w+16(FP), DX
	MOVQ b+24(FP), BX
	MOVQ n+32(FP), CX
	VBROADCASTSS m+40(FP), Y2
	VBROADCASTSS inv+44(FP), Y3
	SHRQ $3, CX
	JZ ndone
nloop:
	VMOVUPS (SI), Y0
	VSUBPS Y2, Y0, Y0
	VMULPS Y3, Y0, Y0
	VMULPS (DX), Y0, Y0
	VADDPS (BX), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, DI
	ADDQ $32, SI
	ADDQ $32, DX
	ADDQ $32, BX
	DECQ CX
	JNZ nloop
ndone:
	VZEROUPPER
	RET

// func geluAVX512(x *float32, n int) applies GELU in place to x[0:n], n a
// multiple of 16: geluAVX2's arithmetic, 16 lanes at a time.
TEXT ·geluAVX512(SB), NOSPLIT, $0-16
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	SHRQ $4, CX
	JZ g5done
	VBROADCASTSS vconst<>+0(SB), Z16
	VBROADCASTSS vconst<>+32(SB), Z17
	VBROADCASTSS vconst<>+64(SB), Z18
	VBROADCASTSS vconst<>+96(SB), Z19
	VBROADCASTSS vconst<>+128(SB), Z20
	VBROADCASTSS vconst<>+160(SB), Z21
	VBROADCASTSS vconst<>+192(SB), Z22
	VBROADCASTSS vconst<>+224(SB), Z23
	VBROADCASTSS vconst<>+256(SB), Z24
	VBROADCASTSS vconst<>+288(SB), Z25
	VBROADCASTSS vconst<>+320(SB), Z26
	VBROADCASTSS vconst<>+352(SB), Z27
	VBROADCASTSS vconst<>+384(SB), Z28
	VBROADCASTSS vconst<>+416(SB), Z29
	VBROADCASTSS vconst<>+448(SB), Z30
	VBROADCASTSS vconst<>+480(SB), Z31
g5loop:
	VMOVUPS (SI), Z0
	VMULPS Z0, Z0, Z1
	VMOVAPS Z17, Z2
	VFMADD213PS Z16, Z1, Z2
	VMULPS Z0, Z2, Z2
	VPXORD Z18, Z2, Z2
	VMAXPS Z19, Z2, Z2
	VMINPS Z20, Z2, Z2
	VMULPS Z21, Z2, Z3
	VRNDSCALEPS $0, Z3, Z3
	VMOVAPS Z2, Z4
	VFNMADD231PS Z22, Z3, Z4
	VFNMADD231PS Z23, Z3, Z4
	VMOVAPS Z24, Z5
	VFMADD213PS Z25, Z4, Z5
	VFMADD213PS Z26, Z4, Z5
	VFMADD213PS Z27, Z4, Z5
	VFMADD213PS Z28, Z4, Z5
	VFMADD213PS Z29, Z4, Z5
	VFMADD213PS Z30, Z4, Z5
	VFMADD213PS Z30, Z4, Z5
	VCVTPS2DQ Z3, Z6
	VPSLLD $23, Z6, Z6
	VPADDD Z31, Z6, Z6
	VMULPS Z6, Z5, Z5
	VADDPS Z30, Z5, Z5
	VDIVPS Z5, Z0, Z0
	VMOVUPS Z0, (SI)
	ADDQ $64, SI
	DECQ CX
	JNZ g5loop
g5done:
	VZEROUPPER
	RET

// func matvecAVX2(x *float32, in int, w *float32, out int, y *float32) adds
// x W to y: y[j] += sum over i of x[i]*w[i*out+j] (fused multiply-adds in
// order of i), out a multiple of 8.
TEXT ·matvecAVX2(SB), NOSPLIT, $0-40
	MOVQ x+0(FP), SI
	MOVQ in+8(FP), R8
	MOVQ w+16(FP), DX
	MOVQ out+24(FP), R9
	MOVQ y+32(FP), DI
	MOVQ R9, R10
	SHLQ $2, R10 // a row of w in bytes
	SHRQ $3, R9
	JZ mvdone
mvblock:
	VMOVUPS (DI), Y0
	MOVQ SI, AX
	MOVQ DX, BX
	MOVQ R8, CX
	TESTQ CX, CX
	JZ mvstore
mvrow:
	VBROADCASTSS (AX), Y1
	VFMADD231PS (BX), Y1, Y0
	ADDQ $4, AX
	ADDQ R10, BX
	DECQ CX
	JNZ mvrow
mvstore:
	VMOVUPS Y0, (DI)
	ADDQ $32, DI
	ADDQ $32, DX
	DECQ R9
	JNZ mvblock
mvdone:
	VZEROUPPER
	RET
