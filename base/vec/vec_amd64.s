// Vector kernels for float32, AVX2 + FMA (geluAVX512: AVX-512F).
// exp(t) for t clamped to [-87, 87]: n = round(t log2 e), r = t - n ln2
// (Cody-Waite, two parts), e^r by its degree-7 Taylor polynomial, times 2^n
// built in the exponent bits. gelu(v) = v / (1 + exp(-2u)) with
// u = sqrt(2/pi) (v + 0.044715 v^3), which equals 0.5 v (1 + tanh(u)).
// Element-wise kernels round each operation as the portable Go code does
// (no fused multiply-adds); sums keep 8 lane sums, added pairwise at the end.
// vconst holds each constant in 8 lanes: +0 2 sqrt(2/pi), +32 that times
// 0.044715, +64 the sign bit, +96 -87, +128 87, +160 log2 e, +192 and +224
// ln 2 in two parts, +256 .. +416 1/7! .. 1/2!, +448 1, +480 127 << 23 (the
// exponent bias), +512 6 sqrt(2/pi) 0.044715.

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
DATA vconst<>+512(SB)/4, $0x3e5b33b6
DATA vconst<>+516(SB)/4, $0x3e5b33b6
DATA vconst<>+520(SB)/4, $0x3e5b33b6
DATA vconst<>+524(SB)/4, $0x3e5b33b6
DATA vconst<>+528(SB)/4, $0x3e5b33b6
DATA vconst<>+532(SB)/4, $0x3e5b33b6
DATA vconst<>+536(SB)/4, $0x3e5b33b6
DATA vconst<>+540(SB)/4, $0x3e5b33b6
GLOBL vconst<>(SB), RODATA|NOPTR, $544

// EXP_Y2_Y5 sets Y5 = exp(Y2) with Y2 clamped to [-87, 87] in place; it
// uses Y3, Y4 and Y6.
#define EXP_Y2_Y5 \
VMAXPS vconst<>+96(SB), Y2, Y2 \
VMINPS vconst<>+128(SB), Y2, Y2 \
VMULPS vconst<>+160(SB), Y2, Y3 \
VROUNDPS $0, Y3, Y3 \
VMOVAPS Y2, Y4 \
VFNMADD231PS vconst<>+192(SB), Y3, Y4 \
VFNMADD231PS vconst<>+224(SB), Y3, Y4 \
VMOVUPS vconst<>+256(SB), Y5 \
VFMADD213PS vconst<>+288(SB), Y4, Y5 \
VFMADD213PS vconst<>+320(SB), Y4, Y5 \
VFMADD213PS vconst<>+352(SB), Y4, Y5 \
VFMADD213PS vconst<>+384(SB), Y4, Y5 \
VFMADD213PS vconst<>+416(SB), Y4, Y5 \
VFMADD213PS vconst<>+448(SB), Y4, Y5 \
VFMADD213PS vconst<>+448(SB), Y4, Y5 \
VCVTPS2DQ Y3, Y6 \
VPSLLD $23, Y6, Y6 \
VPADDD vconst<>+480(SB), Y6, Y6 \
VMULPS Y6, Y5, Y5

// HSUM(y, x, t) adds the 8 lanes of y pairwise into the low lane of x (the
// same register as y); it uses t.
#define HSUM(y, x, t) \
VEXTRACTF128 $1, y, t \
VADDPS t, x, x \
VMOVHLPS x, t, t \
VADDPS t, x, x \
VPSHUFD $1, x, t \
VADDSS t, x, x

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
	EXP_Y2_Y5
	VADDPS vconst<>+448(SB), Y5, Y5
	VDIVPS Y5, Y0, Y0
	VMOVUPS Y0, (SI)
	ADDQ $32, SI
	DECQ CX
	JNZ gloop
gdone:
	VZEROUPPER
	RET

// func geluDerivAVX2(y, d, x *float32, n int) sets y[i] = gelu(x[i]) and
// d[i] = gelu'(x[i]), n a multiple of 8: with e = exp(-2u) and s = 1/(1+e),
// y = v s and d = s + v (s s e) (2 sqrt(2/pi) (1 + 3 0.044715 v^2)).
TEXT ·geluDerivAVX2(SB), NOSPLIT, $0-32
	MOVQ y+0(FP), DI
	MOVQ d+8(FP), DX
	MOVQ x+16(FP), SI
	MOVQ n+24(FP), CX
	SHRQ $3, CX
	JZ gddone
gdloop:
	VMOVUPS (SI), Y0
	VMULPS Y0, Y0, Y1
	VMOVUPS vconst<>+32(SB), Y2
	VFMADD213PS vconst<>+0(SB), Y1, Y2
	VMULPS Y0, Y2, Y2
	VXORPS vconst<>+64(SB), Y2, Y2
	EXP_Y2_Y5
	VADDPS vconst<>+448(SB), Y5, Y7
	VMOVUPS vconst<>+448(SB), Y8
	VDIVPS Y7, Y8, Y8
	VMULPS Y8, Y0, Y9
	VMOVUPS Y9, (DI)
	VMULPS Y8, Y8, Y10
	VMULPS Y5, Y10, Y10
	VMULPS Y0, Y10, Y10
	VMOVUPS vconst<>+512(SB), Y11
	VFMADD213PS vconst<>+0(SB), Y1, Y11
	VMULPS Y11, Y10, Y10
	VADDPS Y8, Y10, Y10
	VMOVUPS Y10, (DX)
	ADDQ $32, DI
	ADDQ $32, DX
	ADDQ $32, SI
	DECQ CX
	JNZ gdloop
gddone:
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
	EXP_Y2_Y5
	VMOVUPS Y5, (SI)
	ADDQ $32, SI
	DECQ CX
	JNZ eloop
edone:
	VZEROUPPER
	RET

// func addAVX2(d, x, y *float32, n int) sets d[i] = x[i] + y[i], n a multiple of 8.
TEXT ·addAVX2(SB), NOSPLIT, $0-32
	MOVQ d+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ y+16(FP), DX
	MOVQ n+24(FP), CX
	SHRQ $3, CX
	JZ adone
aloop:
	VMOVUPS (SI), Y0
	VADDPS (DX), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, DI
	ADDQ $32, SI
	ADDQ $32, DX
	DECQ CX
	JNZ aloop
adone:
	VZEROUPPER
	RET

// func mulAVX2(d, x, y *float32, n int) sets d[i] = x[i] * y[i], n a multiple of 8.
TEXT ·mulAVX2(SB), NOSPLIT, $0-32
	MOVQ d+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ y+16(FP), DX
	MOVQ n+24(FP), CX
	SHRQ $3, CX
	JZ mudone
muloop:
	VMOVUPS (SI), Y0
	VMULPS (DX), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, DI
	ADDQ $32, SI
	ADDQ $32, DX
	DECQ CX
	JNZ muloop
mudone:
	VZEROUPPER
	RET

// func gateReLUAVX2(out, h, gate, sc *float32, n int) sets out[i] = max(h[i]*gate[i] + sc[i], 0)
// (multiply, then add: the rounding of the scalar code; VMAXPS with 0 first:
// NaN and -0 pass), n a multiple of 8.
TEXT ·gateReLUAVX2(SB), NOSPLIT, $0-40
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
	VMAXPS Y0, Y3, Y0
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
	HSUM(Y0, X0, X1)
	VZEROUPPER
	MOVSS X0, ret+16(FP)
	RET

// func affineAVX2(y, x *float32, n int, a, b float32) sets y[i] = x[i]*a + b
// (multiply, then add), n a multiple of 8.
TEXT ·affineAVX2(SB), NOSPLIT, $0-32
	MOVQ y+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ n+16(FP), CX
	VBROADCASTSS a+24(FP), Y1
	VBROADCASTSS b+28(FP), Y2
	SHRQ $3, CX
	JZ afdone
afloop:
	VMULPS (SI), Y1, Y0
	VADDPS Y2, Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, DI
	ADDQ $32, SI
	DECQ CX
	JNZ afloop
afdone:
	VZEROUPPER
	RET

// func affineReLUAVX2(y, x *float32, n int, a, b float32) sets
// y[i] = max(x[i]*a + b, 0) (VMAXPS with 0 first: 0 where negative, NaN and
// -0 pass), n a multiple of 8.
TEXT ·affineReLUAVX2(SB), NOSPLIT, $0-32
	MOVQ y+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ n+16(FP), CX
	VBROADCASTSS a+24(FP), Y1
	VBROADCASTSS b+28(FP), Y2
	VXORPS Y3, Y3, Y3
	SHRQ $3, CX
	JZ arldone
arlloop:
	VMULPS (SI), Y1, Y0
	VADDPS Y2, Y0, Y0
	VMAXPS Y0, Y3, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, DI
	ADDQ $32, SI
	DECQ CX
	JNZ arlloop
arldone:
	VZEROUPPER
	RET

// func maskPosAVX2(d, dy, o *float32, n int) sets d[i] = dy[i] where o[i] != 0
// (unordered: NaN passes), else +0, n a multiple of 8.
TEXT ·maskPosAVX2(SB), NOSPLIT, $0-32
	MOVQ d+0(FP), DI
	MOVQ dy+8(FP), SI
	MOVQ o+16(FP), DX
	MOVQ n+24(FP), CX
	VXORPS Y3, Y3, Y3
	SHRQ $3, CX
	JZ mpdone
mploop:
	VMOVUPS (DX), Y1
	VCMPPS $4, Y3, Y1, Y1
	VANDPS (SI), Y1, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, DI
	ADDQ $32, SI
	ADDQ $32, DX
	DECQ CX
	JNZ mploop
mpdone:
	VZEROUPPER
	RET

// func bnDxAVX2(d, dy, x *float32, n int, k, a, m, c float32) sets
// d[i] = k*((dy[i]-a) - (x[i]-m)*c), each operation rounded, n a multiple of 8.
TEXT ·bnDxAVX2(SB), NOSPLIT, $0-48
	MOVQ d+0(FP), DI
	MOVQ dy+8(FP), SI
	MOVQ x+16(FP), DX
	MOVQ n+24(FP), CX
	VBROADCASTSS k+32(FP), Y10
	VBROADCASTSS a+36(FP), Y11
	VBROADCASTSS m+40(FP), Y12
	VBROADCASTSS c+44(FP), Y13
	SHRQ $3, CX
	JZ bxdone
bxloop:
	VMOVUPS (DX), Y0
	VSUBPS Y12, Y0, Y0
	VMULPS Y13, Y0, Y0
	VMOVUPS (SI), Y1
	VSUBPS Y11, Y1, Y1
	VSUBPS Y0, Y1, Y1
	VMULPS Y10, Y1, Y1
	VMOVUPS Y1, (DI)
	ADDQ $32, DI
	ADDQ $32, SI
	ADDQ $32, DX
	DECQ CX
	JNZ bxloop
bxdone:
	VZEROUPPER
	RET

// func bnDxPosAVX2(d, dy, x, o *float32, n int, k, a, m, c float32) is
// bnDxAVX2 with dy[i] taken as +0 where o[i] == 0, n a multiple of 8.
TEXT ·bnDxPosAVX2(SB), NOSPLIT, $0-56
	MOVQ d+0(FP), DI
	MOVQ dy+8(FP), SI
	MOVQ x+16(FP), DX
	MOVQ o+24(FP), BX
	MOVQ n+32(FP), CX
	VBROADCASTSS k+40(FP), Y10
	VBROADCASTSS a+44(FP), Y11
	VBROADCASTSS m+48(FP), Y12
	VBROADCASTSS c+52(FP), Y13
	VXORPS Y3, Y3, Y3
	SHRQ $3, CX
	JZ bpdone
bploop:
	VMOVUPS (DX), Y0
	VSUBPS Y12, Y0, Y0
	VMULPS Y13, Y0, Y0
	VMOVUPS (BX), Y2
	VCMPPS $4, Y3, Y2, Y2
	VANDPS (SI), Y2, Y1
	VSUBPS Y11, Y1, Y1
	VSUBPS Y0, Y1, Y1
	VMULPS Y10, Y1, Y1
	VMOVUPS Y1, (DI)
	ADDQ $32, DI
	ADDQ $32, SI
	ADDQ $32, DX
	ADDQ $32, BX
	DECQ CX
	JNZ bploop
bpdone:
	VZEROUPPER
	RET

// func dotAVX2(x, y *float32, n int) float32 returns the sum of x[i]*y[i]
// (fused multiply-adds into 8 lane sums, then pairwise), n a multiple of 8.
TEXT ·dotAVX2(SB), NOSPLIT, $0-28
	MOVQ x+0(FP), SI
	MOVQ y+8(FP), DX
	MOVQ n+16(FP), CX
	VXORPS Y0, Y0, Y0
	SHRQ $3, CX
	JZ dred
dloop:
	VMOVUPS (SI), Y1
	VFMADD231PS (DX), Y1, Y0
	ADDQ $32, SI
	ADDQ $32, DX
	DECQ CX
	JNZ dloop
dred:
	HSUM(Y0, X0, X1)
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

// func gradSumsAVX2(dy, x *float32, n int, m float32) (sg, sgx float32)
// returns the sums of dy[i] and of dy[i]*(x[i]-m) (8 lane sums each, the
// second by fused multiply-adds, then pairwise), n a multiple of 8.
TEXT ·gradSumsAVX2(SB), NOSPLIT, $0-40
	MOVQ dy+0(FP), SI
	MOVQ x+8(FP), DX
	MOVQ n+16(FP), CX
	VBROADCASTSS m+24(FP), Y2
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	SHRQ $3, CX
	JZ gsred
gsloop:
	VMOVUPS (SI), Y3
	VADDPS Y3, Y0, Y0
	VMOVUPS (DX), Y4
	VSUBPS Y2, Y4, Y4
	VFMADD231PS Y4, Y3, Y1
	ADDQ $32, SI
	ADDQ $32, DX
	DECQ CX
	JNZ gsloop
gsred:
	HSUM(Y0, X0, X5)
	HSUM(Y1, X1, X5)
	VZEROUPPER
	MOVSS X0, sg+32(FP)
	MOVSS X1, sgx+36(FP)
	RET

// func gradSumsPosAVX2(dy, x, o *float32, n int, m float32) (sg, sgx float32)
// is gradSumsAVX2 with dy[i] taken as +0 where o[i] == 0, n a multiple of 8.
TEXT ·gradSumsPosAVX2(SB), NOSPLIT, $0-48
	MOVQ dy+0(FP), SI
	MOVQ x+8(FP), DX
	MOVQ o+16(FP), BX
	MOVQ n+24(FP), CX
	VBROADCASTSS m+32(FP), Y2
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y6, Y6, Y6
	SHRQ $3, CX
	JZ gpred
gploop:
	VMOVUPS (BX), Y5
	VCMPPS $4, Y6, Y5, Y5
	VANDPS (SI), Y5, Y3
	VADDPS Y3, Y0, Y0
	VMOVUPS (DX), Y4
	VSUBPS Y2, Y4, Y4
	VFMADD231PS Y4, Y3, Y1
	ADDQ $32, SI
	ADDQ $32, DX
	ADDQ $32, BX
	DECQ CX
	JNZ gploop
gpred:
	HSUM(Y0, X0, X5)
	HSUM(Y1, X1, X5)
	VZEROUPPER
	MOVSS X0, sg+40(FP)
	MOVSS X1, sgx+44(FP)
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
	HSUM(Y0, X0, X1)
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
