//go:build amd64 && !purego

#include "textflag.h"

// func roundBF16AVX2(x *float32, n int)
//
// Rounds n floats (a multiple of 8) to bfloat16 in place, 8 at a time, as
// ToBF16 does: finite values to nearest, ties to even (u + 0x7fff + lsb,
// low half cleared); zeros and subnormals to zero of their sign; NaNs to
// their high half with the quiet bit set.
TEXT ·roundBF16AVX2(SB), NOSPLIT, $0-16
	MOVQ x+0(FP), DI
	MOVQ n+8(FP), CX
	MOVL $0x7fff, AX
	VMOVD AX, X1
	VPBROADCASTD X1, Y1
	MOVL $1, AX
	VMOVD AX, X2
	VPBROADCASTD X2, Y2
	MOVL $0xffff0000, AX
	VMOVD AX, X3
	VPBROADCASTD X3, Y3
	MOVL $0x7f800000, AX
	VMOVD AX, X4
	VPBROADCASTD X4, Y4
	MOVL $0x80000000, AX
	VMOVD AX, X5
	VPBROADCASTD X5, Y5
	MOVL $0x00400000, AX
	VMOVD AX, X6
	VPBROADCASTD X6, Y6
	VPXOR Y7, Y7, Y7

loop:
	CMPQ CX, $8
	JLT  done
	VMOVDQU (DI), Y0
	VPSRLD $16, Y0, Y8
	VPAND Y2, Y8, Y8           // lsb of the kept half
	VPADDD Y1, Y0, Y9
	VPADDD Y8, Y9, Y9
	VPAND Y3, Y9, Y9           // rounded to nearest, ties to even
	VPAND Y4, Y0, Y10
	VPCMPEQD Y7, Y10, Y10      // zero or subnormal
	VPAND Y5, Y0, Y11          // its sign
	VPBLENDVB Y10, Y11, Y9, Y9
	VPANDN Y0, Y5, Y12         // |u|
	VPCMPGTD Y4, Y12, Y13      // NaN: |u| > +Inf
	VPAND Y3, Y0, Y14
	VPOR Y6, Y14, Y14          // high half, quiet
	VPBLENDVB Y13, Y14, Y9, Y9
	VMOVDQU Y9, (DI)
	ADDQ $32, DI
	SUBQ $8, CX
	JMP  loop

done:
	VZEROUPPER
	RET
