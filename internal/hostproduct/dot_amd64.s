//go:build goexperiment.simd

#include "textflag.h"

// Products of bfloat16 rows by bfloat16 panels with VDPBF16PS (AVX512_BF16): each 32-bit lane
// adds two products of bfloat16 pairs, exact in float32, so one instruction does what two
// float32 multiply-adds do on widened values. Go's assembler has no mnemonic for it, so each is
// written out as its EVEX bytes (62 P0 P1 P2 52 ModRM: EVEX.512.F3.0F38.W0, register operands
// only); the comment beside each names it in Go's operand order.

// func interleavePairsAsm(dst, src unsafe.Pointer, pairs int)
//
// Rows 2p and 2p+1 of a bfloat16 panel src [2·pairs, 64] as pairs dst [pairs, 64]: each 32-bit
// word a column's value in row 2p (low half) and in row 2p+1 (high half), the columns in
// VPUNPCKLWD's and VPUNPCKHWD's order (see dotColumn).
TEXT ·interleavePairsAsm(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ pairs+16(FP), CX
	TESTQ CX, CX
	JZ doneInterleave
loopInterleave:
	PREFETCHT0 4096(SI)
	PREFETCHT0 4160(SI)
	PREFETCHT0 4224(SI)
	PREFETCHT0 4288(SI)
	VMOVDQU32 (SI), Z0
	VMOVDQU32 64(SI), Z1
	VMOVDQU32 128(SI), Z2
	VMOVDQU32 192(SI), Z3
	VPUNPCKLWD Z2, Z0, Z4
	VPUNPCKHWD Z2, Z0, Z5
	VPUNPCKLWD Z3, Z1, Z6
	VPUNPCKHWD Z3, Z1, Z7
	VMOVDQU32 Z4, (DI)
	VMOVDQU32 Z5, 64(DI)
	VMOVDQU32 Z6, 128(DI)
	VMOVDQU32 Z7, 192(DI)
	ADDQ $256, SI
	ADDQ $256, DI
	DECQ CX
	JNZ loopInterleave
doneInterleave:
	VZEROUPPER
	RET

// func panel4dpAsm(w unsafe.Pointer, x *[4]unsafe.Pointer, acc unsafe.Pointer, pairs int)
//
// Four bfloat16 rows x (pairs 32-bit words each) by one interleaved panel w [pairs, 64] into acc
// [4][64] (each row's four vectors in the panel's column order): per pair of k, four loads of
// the panel, a broadcast of each row's pair and sixteen VDPBF16PS.
TEXT ·panel4dpAsm(SB), NOSPLIT, $0-32
	MOVQ w+0(FP), AX
	MOVQ x+8(FP), R12
	MOVQ acc+16(FP), R10
	MOVQ pairs+24(FP), CX
	MOVQ 0(R12), BX
	MOVQ 8(R12), SI
	MOVQ 16(R12), DI
	MOVQ 24(R12), R9
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
	VPXORD Z12, Z12, Z12
	VPXORD Z13, Z13, Z13
	VPXORD Z14, Z14, Z14
	VPXORD Z15, Z15, Z15
	TESTQ CX, CX
	JZ store4dp
loop4dp:
	VMOVDQU32 (AX), Z16
	VMOVDQU32 64(AX), Z17
	VMOVDQU32 128(AX), Z18
	VMOVDQU32 192(AX), Z19
	VPBROADCASTD (BX), Z20
	VPBROADCASTD (SI), Z21
	VPBROADCASTD (DI), Z22
	VPBROADCASTD (R9), Z23
	BYTE $0x62; BYTE $0xB2; BYTE $0x5E; BYTE $0x40; BYTE $0x52; BYTE $0xC0 // VDPBF16PS Z16, Z20, Z0
	BYTE $0x62; BYTE $0xB2; BYTE $0x5E; BYTE $0x40; BYTE $0x52; BYTE $0xC9 // VDPBF16PS Z17, Z20, Z1
	BYTE $0x62; BYTE $0xB2; BYTE $0x5E; BYTE $0x40; BYTE $0x52; BYTE $0xD2 // VDPBF16PS Z18, Z20, Z2
	BYTE $0x62; BYTE $0xB2; BYTE $0x5E; BYTE $0x40; BYTE $0x52; BYTE $0xDB // VDPBF16PS Z19, Z20, Z3
	BYTE $0x62; BYTE $0xB2; BYTE $0x56; BYTE $0x40; BYTE $0x52; BYTE $0xE0 // VDPBF16PS Z16, Z21, Z4
	BYTE $0x62; BYTE $0xB2; BYTE $0x56; BYTE $0x40; BYTE $0x52; BYTE $0xE9 // VDPBF16PS Z17, Z21, Z5
	BYTE $0x62; BYTE $0xB2; BYTE $0x56; BYTE $0x40; BYTE $0x52; BYTE $0xF2 // VDPBF16PS Z18, Z21, Z6
	BYTE $0x62; BYTE $0xB2; BYTE $0x56; BYTE $0x40; BYTE $0x52; BYTE $0xFB // VDPBF16PS Z19, Z21, Z7
	BYTE $0x62; BYTE $0x32; BYTE $0x4E; BYTE $0x40; BYTE $0x52; BYTE $0xC0 // VDPBF16PS Z16, Z22, Z8
	BYTE $0x62; BYTE $0x32; BYTE $0x4E; BYTE $0x40; BYTE $0x52; BYTE $0xC9 // VDPBF16PS Z17, Z22, Z9
	BYTE $0x62; BYTE $0x32; BYTE $0x4E; BYTE $0x40; BYTE $0x52; BYTE $0xD2 // VDPBF16PS Z18, Z22, Z10
	BYTE $0x62; BYTE $0x32; BYTE $0x4E; BYTE $0x40; BYTE $0x52; BYTE $0xDB // VDPBF16PS Z19, Z22, Z11
	BYTE $0x62; BYTE $0x32; BYTE $0x46; BYTE $0x40; BYTE $0x52; BYTE $0xE0 // VDPBF16PS Z16, Z23, Z12
	BYTE $0x62; BYTE $0x32; BYTE $0x46; BYTE $0x40; BYTE $0x52; BYTE $0xE9 // VDPBF16PS Z17, Z23, Z13
	BYTE $0x62; BYTE $0x32; BYTE $0x46; BYTE $0x40; BYTE $0x52; BYTE $0xF2 // VDPBF16PS Z18, Z23, Z14
	BYTE $0x62; BYTE $0x32; BYTE $0x46; BYTE $0x40; BYTE $0x52; BYTE $0xFB // VDPBF16PS Z19, Z23, Z15
	ADDQ $256, AX
	ADDQ $4, BX
	ADDQ $4, SI
	ADDQ $4, DI
	ADDQ $4, R9
	DECQ CX
	JNZ loop4dp
store4dp:
	VMOVDQU32 Z0, 0(R10)
	VMOVDQU32 Z1, 64(R10)
	VMOVDQU32 Z2, 128(R10)
	VMOVDQU32 Z3, 192(R10)
	VMOVDQU32 Z4, 256(R10)
	VMOVDQU32 Z5, 320(R10)
	VMOVDQU32 Z6, 384(R10)
	VMOVDQU32 Z7, 448(R10)
	VMOVDQU32 Z8, 512(R10)
	VMOVDQU32 Z9, 576(R10)
	VMOVDQU32 Z10, 640(R10)
	VMOVDQU32 Z11, 704(R10)
	VMOVDQU32 Z12, 768(R10)
	VMOVDQU32 Z13, 832(R10)
	VMOVDQU32 Z14, 896(R10)
	VMOVDQU32 Z15, 960(R10)
	VZEROUPPER
	RET
