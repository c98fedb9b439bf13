//go:build amd64 && !purego

#include "textflag.h"

// Rounding to bfloat16 (bf16_amd64.go) and packing of the A and B panels
// (pack_amd64.go) in AVX2. Each packing routine writes exactly what the Go
// packers (packAGo, packBGo) write for its part of a panel: alpha*value
// (only when flags bit 1 is set, so that alpha 1 copies bits unchanged),
// then, when flags bit 0 is set, rounded to bfloat16 as ToBF16 does, in
// the same pass.

// SPLAT defines sym, 32 read-only bytes: the 8 bytes v four times.
#define SPLAT(sym, v) \
	DATA sym+0(SB)/8, v; \
	DATA sym+8(SB)/8, v; \
	DATA sym+16(SB)/8, v; \
	DATA sym+24(SB)/8, v; \
	GLOBL sym(SB), RODATA|NOPTR, $32

// Constants of the bfloat16 rounding, eight lanes each.
SPLAT(bfOne<>, $0x0000000100000001)
SPLAT(bfBias<>, $0x00007fff00007fff)
SPLAT(bfHigh<>, $0xffff0000ffff0000)
SPLAT(bfExp<>, $0x7f8000007f800000)
SPLAT(bfSign<>, $0x8000000080000000)
SPLAT(bfAbs<>, $0x7fffffff7fffffff)
SPLAT(bfQuiet<>, $0x0040000000400000)
SPLAT(bfZero<>, $0)

// packMask holds eight all-ones lanes then eight zero lanes: the 8 lanes
// from byte (8-n)*4 are a load mask for the first n lanes (0 <= n <= 8).
DATA packMask<>+0(SB)/8, $-1
DATA packMask<>+8(SB)/8, $-1
DATA packMask<>+16(SB)/8, $-1
DATA packMask<>+24(SB)/8, $-1
GLOBL packMask<>(SB), RODATA|NOPTR, $64

// The constants ROUND uses most are held in Y12..Y15 by every routine
// (LOADC), the others read from memory.
#define C_HIGH Y12
#define C_EXP Y13
#define C_BIAS Y14
#define C_ONE Y15

#define LOADC \
	VMOVDQU bfHigh<>(SB), C_HIGH; \
	VMOVDQU bfExp<>(SB), C_EXP; \
	VMOVDQU bfBias<>(SB), C_BIAS; \
	VMOVDQU bfOne<>(SB), C_ONE

// ROUND rounds the 8 floats of x to bfloat16 in place, as ToBF16 does:
// finite values to nearest, ties to even (u + 0x7fff + lsb, low half
// cleared); zeros and subnormals to zero of their sign; NaNs to their high
// half with the quiet bit set. t1..t3 are temporaries.
#define ROUND(x, t1, t2, t3) \
	VPSRLD    $16, x, t1; \
	VPAND     C_ONE, t1, t1; \
	VPADDD    C_BIAS, x, t2; \
	VPADDD    t1, t2, t2; \
	VPAND     C_HIGH, t2, t2; \
	VPAND     C_EXP, x, t1; \
	VPCMPEQD  bfZero<>(SB), t1, t1; \
	VPAND     bfSign<>(SB), x, t3; \
	VPBLENDVB t1, t3, t2, t2; \
	VPAND     bfAbs<>(SB), x, t1; \
	VPCMPGTD  C_EXP, t1, t1; \
	VPAND     C_HIGH, x, t3; \
	VPOR      bfQuiet<>(SB), t3, t3; \
	VPBLENDVB t1, t3, t2, x

// LOAD6 loads 8 floats of rows 0..5 into Y0..Y5: row 0 at R11, row 3
// at R12, R8 bytes between rows.
#define LOAD6 \
	VMOVUPS (R11), Y0; \
	VMOVUPS (R11)(R8*1), Y1; \
	VMOVUPS (R11)(R8*2), Y2; \
	VMOVUPS (R12), Y3; \
	VMOVUPS (R11)(R8*4), Y4; \
	VMOVUPS (R12)(R8*2), Y5

// ROUND6 rounds rows Y0..Y5 (LOAD6's) with temporaries t1..t3.
#define ROUND6(t1, t2, t3) \
	ROUND(Y0, t1, t2, t3); \
	ROUND(Y1, t1, t2, t3); \
	ROUND(Y2, t1, t2, t3); \
	ROUND(Y3, t1, t2, t3); \
	ROUND(Y4, t1, t2, t3); \
	ROUND(Y5, t1, t2, t3)

// PAIRS interleaves rows a and b (8 columns each) into lo (columns 0, 1 |
// 4, 5 as a, b pairs) and hi (columns 2, 3 | 6, 7): the first step of a
// transpose.
#define PAIRS(a, b, lo, hi) \
	VUNPCKLPS b, a, lo; \
	VUNPCKHPS b, a, hi

// QUADS takes PAIRS of rows 0, 1 (lo01, hi01) and 2, 3 (lo23, hi23) to
// rows 0..3 of each column: s0 holds columns 0 | 4, s1 1 | 5, s2 2 | 6,
// s3 3 | 7 (low | high lane).
#define QUADS(lo01, hi01, lo23, hi23, s0, s1, s2, s3) \
	VSHUFPS $0x44, lo23, lo01, s0; \
	VSHUFPS $0xEE, lo23, lo01, s1; \
	VSHUFPS $0x44, hi23, hi01, s2; \
	VSHUFPS $0xEE, hi23, hi01, s3

// func roundBF16AVX2(x *float32, n int)
//
// Rounds n floats (a multiple of 8) to bfloat16 in place, 8 at a time.
TEXT ·roundBF16AVX2(SB), NOSPLIT, $0-16
	MOVQ x+0(FP), DI
	MOVQ n+8(FP), CX
	LOADC

roundLoop:
	CMPQ    CX, $8
	JLT     roundDone
	VMOVDQU (DI), Y0
	ROUND(Y0, Y1, Y2, Y3)
	VMOVDQU Y0, (DI)
	ADDQ    $32, DI
	SUBQ    $8, CX
	JMP     roundLoop

roundDone:
	VZEROUPPER
	RET

// func packAN6(a *float32, lda, kb8, h int, d *float32, ds int, alpha float32, flags int)
//
// Packs h rows (1 <= h <= 6) of A, row i at a + i*lda, columns 0..kb8 (a
// multiple of 8, > 0), into d[p*ds + i] for i < 6 (rows past h zero): a
// 6 x 8 transpose per 8 columns.
TEXT ·packAN6(SB), NOSPLIT, $0-64
	MOVQ a+0(FP), R11
	MOVQ lda+8(FP), R8
	SHLQ $2, R8
	MOVQ kb8+16(FP), CX
	MOVQ h+24(FP), BX
	MOVQ d+32(FP), DI
	MOVQ ds+40(FP), R9
	SHLQ $2, R9
	MOVQ flags+56(FP), R10
	LEAQ (R11)(R8*2), R12
	ADDQ R8, R12                  // row 3
	LEAQ (R9)(R9*2), AX           // 3 output rows, bytes
	MOVQ R9, R13
	SHLQ $3, R13                  // 8 output rows, bytes
	LOADC

anLoop:
	CMPQ BX, $6
	JNE  anPartial
	LOAD6
	JMP  anLoaded

anPartial:
	VXORPS  Y1, Y1, Y1
	VXORPS  Y2, Y2, Y2
	VXORPS  Y3, Y3, Y3
	VXORPS  Y4, Y4, Y4
	VXORPS  Y5, Y5, Y5
	VMOVUPS (R11), Y0
	CMPQ    BX, $1
	JEQ     anLoaded
	VMOVUPS (R11)(R8*1), Y1
	CMPQ    BX, $2
	JEQ     anLoaded
	VMOVUPS (R11)(R8*2), Y2
	CMPQ    BX, $3
	JEQ     anLoaded
	VMOVUPS (R12), Y3
	CMPQ    BX, $4
	JEQ     anLoaded
	VMOVUPS (R11)(R8*4), Y4

anLoaded:
	TESTQ        $2, R10
	JZ           anScaled
	VBROADCASTSS alpha+48(FP), Y6
	VMULPS       Y6, Y0, Y0
	VMULPS       Y6, Y1, Y1
	VMULPS       Y6, Y2, Y2
	VMULPS       Y6, Y3, Y3
	VMULPS       Y6, Y4, Y4
	VMULPS       Y6, Y5, Y5
	CMPQ         BX, $6
	JEQ          anScaled

	// Rows past h are zero, whatever alpha times zero was.
	CMPQ BX, $1
	JEQ  anZero1
	CMPQ BX, $2
	JEQ  anZero2
	CMPQ BX, $3
	JEQ  anZero3
	CMPQ BX, $4
	JEQ  anZero4
	JMP  anZero5

anZero1:
	VXORPS Y1, Y1, Y1

anZero2:
	VXORPS Y2, Y2, Y2

anZero3:
	VXORPS Y3, Y3, Y3

anZero4:
	VXORPS Y4, Y4, Y4

anZero5:
	VXORPS Y5, Y5, Y5

anScaled:
	TESTQ $1, R10
	JZ    anRounded
	ROUND6(Y6, Y7, Y8)

anRounded:
	// Rows 0..3 of column p in s_p (Y0..Y3, p | p+4), rows 4, 5 as pairs
	// in Y10 (columns 0, 1 | 4, 5) and Y11 (2, 3 | 6, 7).
	PAIRS(Y0, Y1, Y6, Y7)
	PAIRS(Y2, Y3, Y8, Y9)
	PAIRS(Y4, Y5, Y10, Y11)
	QUADS(Y6, Y7, Y8, Y9, Y0, Y1, Y2, Y3)
	VEXTRACTF128 $1, Y10, X4
	VEXTRACTF128 $1, Y11, X5

	// Column p: 4 floats from s_p, then rows 4 and 5 (8 bytes).
	LEAQ         (DI)(AX*1), DX
	VMOVUPS      X0, (DI)
	VMOVQ        X10, 16(DI)
	VMOVUPS      X1, (DI)(R9*1)
	VMOVHPS      X10, 16(DI)(R9*1)
	VMOVUPS      X2, (DI)(R9*2)
	VMOVQ        X11, 16(DI)(R9*2)
	VMOVUPS      X3, (DX)
	VMOVHPS      X11, 16(DX)
	VEXTRACTF128 $1, Y0, (DI)(R9*4)
	VMOVQ        X4, 16(DI)(R9*4)
	VEXTRACTF128 $1, Y1, (DX)(R9*2)
	VMOVHPS      X4, 16(DX)(R9*2)
	VEXTRACTF128 $1, Y2, (DX)(AX*1)
	VMOVQ        X5, 16(DX)(AX*1)
	VEXTRACTF128 $1, Y3, (DX)(R9*4)
	VMOVHPS      X5, 16(DX)(R9*4)

	ADDQ $32, R11
	ADDQ $32, R12
	ADDQ R13, DI
	SUBQ $8, CX
	JNZ  anLoop
	VZEROUPPER
	RET

// func packAT6(a *float32, lda, kb, h int, d *float32, ds int, alpha float32, flags int)
//
// Packs the transposed A: for each p < kb (> 0), the h floats (1 <= h <=
// 6) at a + p*lda into d[p*ds + i] for i < 6 (past h zero), with masked
// loads that read nothing past the h floats.
TEXT ·packAT6(SB), NOSPLIT, $0-64
	MOVQ         a+0(FP), SI
	MOVQ         lda+8(FP), R8
	SHLQ         $2, R8
	MOVQ         kb+16(FP), CX
	MOVQ         h+24(FP), BX
	MOVQ         d+32(FP), DI
	MOVQ         ds+40(FP), R9
	SHLQ         $2, R9
	VBROADCASTSS alpha+48(FP), Y10
	MOVQ         flags+56(FP), R10
	LEAQ         packMask<>+32(SB), AX
	SHLQ         $2, BX
	SUBQ         BX, AX
	VMOVDQU      (AX), Y11                 // lanes < h
	LOADC

atLoop:
	VMASKMOVPS (SI), Y11, Y0
	TESTQ      $2, R10
	JZ         atScaled
	VMULPS     Y10, Y0, Y0
	VANDPS     Y11, Y0, Y0                 // lanes past h zero

atScaled:
	TESTQ $1, R10
	JZ    atRounded
	ROUND(Y0, Y6, Y7, Y8)

atRounded:
	VEXTRACTF128 $1, Y0, X1
	VMOVUPS      X0, (DI)
	VMOVQ        X1, 16(DI)
	ADDQ         R8, SI
	ADDQ         R9, DI
	DECQ         CX
	JNZ          atLoop
	VZEROUPPER
	RET

// func packBN16(b *float32, ldb, kb, w int, d *float32, ds, flags int)
//
// Packs kb rows (> 0) of w columns (1 <= w <= 16) of B, row p at b +
// p*ldb, into d[p*ds + j] for j < 16 (past w zero), with masked loads
// that read nothing past the w floats.
TEXT ·packBN16(SB), NOSPLIT, $0-56
	MOVQ b+0(FP), SI
	MOVQ ldb+8(FP), R8
	SHLQ $2, R8
	MOVQ kb+16(FP), CX
	MOVQ w+24(FP), BX
	MOVQ d+32(FP), DI
	MOVQ ds+40(FP), R9
	SHLQ $2, R9
	MOVQ flags+48(FP), R10
	LOADC
	CMPQ BX, $16
	JEQ  bnFull
	LEAQ packMask<>+32(SB), AX
	MOVQ BX, DX
	CMPQ DX, $8
	JLE  bnMask0
	MOVQ $8, DX

bnMask0:
	SHLQ    $2, DX
	SUBQ    DX, AX
	VMOVDQU (AX), Y10               // lanes < min(w, 8)
	LEAQ    packMask<>+32(SB), AX
	MOVQ    BX, DX
	SUBQ    $8, DX
	JGE     bnMask1
	MOVQ    $0, DX

bnMask1:
	SHLQ    $2, DX
	SUBQ    DX, AX
	VMOVDQU (AX), Y11               // lanes < max(w-8, 0)

bnPartLoop:
	VMASKMOVPS (SI), Y10, Y0
	VMASKMOVPS 32(SI), Y11, Y1
	TESTQ      $1, R10
	JZ         bnPartStore
	ROUND(Y0, Y6, Y7, Y8)
	ROUND(Y1, Y6, Y7, Y8)

bnPartStore:
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	ADDQ    R8, SI
	ADDQ    R9, DI
	DECQ    CX
	JNZ     bnPartLoop
	VZEROUPPER
	RET

bnFull:
	VMOVUPS (SI), Y0
	VMOVUPS 32(SI), Y1
	TESTQ   $1, R10
	JZ      bnFullStore
	ROUND(Y0, Y6, Y7, Y8)
	ROUND(Y1, Y6, Y7, Y8)

bnFullStore:
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	ADDQ    R8, SI
	ADDQ    R9, DI
	DECQ    CX
	JNZ     bnFull
	VZEROUPPER
	RET

// func packBT8(b *float32, ldb, kb8, rows int, d *float32, ds, flags int)
//
// Packs the transposed B: rows j < rows (1 <= rows <= 8) of B at b +
// j*ldb, columns 0..kb8 (a multiple of 8, > 0), into d[p*ds + j] for
// j < 8 (past rows zero): an 8 x 8 transpose per 8 columns.
TEXT ·packBT8(SB), NOSPLIT, $0-56
	MOVQ b+0(FP), R11
	MOVQ ldb+8(FP), R8
	SHLQ $2, R8
	MOVQ kb8+16(FP), CX
	MOVQ rows+24(FP), BX
	MOVQ d+32(FP), DI
	MOVQ ds+40(FP), R9
	SHLQ $2, R9
	MOVQ flags+48(FP), R10
	LEAQ (R8)(R8*2), R14          // 3 rows of B, bytes
	LEAQ (R11)(R14*1), R12        // row 3
	LEAQ (R9)(R9*2), AX           // 3 output rows, bytes
	MOVQ R9, R13
	SHLQ $3, R13                  // 8 output rows, bytes
	LOADC

btLoop:
	CMPQ    BX, $8
	JNE     btPartial
	LOAD6
	VMOVUPS (R12)(R14*1), Y6
	VMOVUPS (R12)(R8*4), Y7
	JMP     btLoaded

btPartial:
	VXORPS  Y1, Y1, Y1
	VXORPS  Y2, Y2, Y2
	VXORPS  Y3, Y3, Y3
	VXORPS  Y4, Y4, Y4
	VXORPS  Y5, Y5, Y5
	VXORPS  Y6, Y6, Y6
	VXORPS  Y7, Y7, Y7
	VMOVUPS (R11), Y0
	CMPQ    BX, $1
	JEQ     btLoaded
	VMOVUPS (R11)(R8*1), Y1
	CMPQ    BX, $2
	JEQ     btLoaded
	VMOVUPS (R11)(R8*2), Y2
	CMPQ    BX, $3
	JEQ     btLoaded
	VMOVUPS (R12), Y3
	CMPQ    BX, $4
	JEQ     btLoaded
	VMOVUPS (R11)(R8*4), Y4
	CMPQ    BX, $5
	JEQ     btLoaded
	VMOVUPS (R12)(R8*2), Y5
	CMPQ    BX, $6
	JEQ     btLoaded
	VMOVUPS (R12)(R14*1), Y6

btLoaded:
	TESTQ $1, R10
	JZ    btRounded
	ROUND6(Y8, Y9, Y10)
	ROUND(Y6, Y8, Y9, Y10)
	ROUND(Y7, Y8, Y9, Y10)

btRounded:
	// Rows 0..3 of column p in Y4..Y7 (p | p+4), rows 4..7 in Y8..Y11.
	PAIRS(Y0, Y1, Y8, Y9)
	PAIRS(Y2, Y3, Y10, Y11)
	PAIRS(Y4, Y5, Y0, Y1)
	PAIRS(Y6, Y7, Y2, Y3)
	QUADS(Y8, Y9, Y10, Y11, Y4, Y5, Y6, Y7)
	QUADS(Y0, Y1, Y2, Y3, Y8, Y9, Y10, Y11)

	// Column p: rows 0..3 and 4..7 joined, 8 floats.
	LEAQ        (DI)(AX*1), DX
	VINSERTF128 $1, X8, Y4, Y0
	VPERM2F128  $0x31, Y8, Y4, Y1
	VINSERTF128 $1, X9, Y5, Y2
	VPERM2F128  $0x31, Y9, Y5, Y3
	VMOVUPS     Y0, (DI)
	VMOVUPS     Y1, (DI)(R9*4)
	VMOVUPS     Y2, (DI)(R9*1)
	VMOVUPS     Y3, (DX)(R9*2)
	VINSERTF128 $1, X10, Y6, Y0
	VPERM2F128  $0x31, Y10, Y6, Y1
	VINSERTF128 $1, X11, Y7, Y2
	VPERM2F128  $0x31, Y11, Y7, Y3
	VMOVUPS     Y0, (DI)(R9*2)
	VMOVUPS     Y1, (DX)(AX*1)
	VMOVUPS     Y2, (DX)
	VMOVUPS     Y3, (DX)(R9*4)

	ADDQ $32, R11
	ADDQ $32, R12
	ADDQ R13, DI
	SUBQ $8, CX
	JNZ  btLoop
	VZEROUPPER
	RET
