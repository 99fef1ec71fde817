//go:build goexperiment.simd

#include "textflag.h"

// The four-row kernels are written in assembly: Go 1.27.4's register allocator, given their
// sixteen accumulators in archsimd, kept five of them on the stack and moved the others between
// registers every step, and eight rows ran no faster than eight calls of the one-row kernel.
// They prefetch the panel 2 KiB (float32) or 1 KiB (bfloat16) ahead, eight steps of k: with
// four rows of multiply-adds a weight, the hardware's prefetchers alone left eight rows reading
// the panels at 18–20 GB/s (float32) and 11–13 (bfloat16), prefetching at 22–24 and 15–16 (a
// 2-core Xeon, one run of each beside the other). A prefetch past the panel's end never faults.

// LOAD_PANEL_AND_ROWS loads the arguments both kernels begin with: the panel w in AX, rows x0–x3
// in BX, SI, DI, R9.
#define LOAD_PANEL_AND_ROWS \
	MOVQ w+0(FP), AX; \
	MOVQ x0+8(FP), BX; \
	MOVQ x1+16(FP), SI; \
	MOVQ x2+24(FP), DI; \
	MOVQ x3+32(FP), R9

// ZERO_ACCUMULATORS zeroes the accumulators Z0–Z15 (row r's in Z4r–Z4r+3).
#define ZERO_ACCUMULATORS \
	VPXORD Z0, Z0, Z0; \
	VPXORD Z1, Z1, Z1; \
	VPXORD Z2, Z2, Z2; \
	VPXORD Z3, Z3, Z3; \
	VPXORD Z4, Z4, Z4; \
	VPXORD Z5, Z5, Z5; \
	VPXORD Z6, Z6, Z6; \
	VPXORD Z7, Z7, Z7; \
	VPXORD Z8, Z8, Z8; \
	VPXORD Z9, Z9, Z9; \
	VPXORD Z10, Z10, Z10; \
	VPXORD Z11, Z11, Z11; \
	VPXORD Z12, Z12, Z12; \
	VPXORD Z13, Z13, Z13; \
	VPXORD Z14, Z14, Z14; \
	VPXORD Z15, Z15, Z15

// BROADCAST_FOUR_ROWS puts element k of rows 0–3 (at BX, SI, DI, R9) in every lane of Z20–Z23.
#define BROADCAST_FOUR_ROWS \
	VBROADCASTSS (BX), Z20; \
	VBROADCASTSS (SI), Z21; \
	VBROADCASTSS (DI), Z22; \
	VBROADCASTSS (R9), Z23

// MULTIPLY_ADD_FOUR_ROWS adds Z16–Z19 (a step of k's 64 weights) times each row's element to its
// accumulators.
#define MULTIPLY_ADD_FOUR_ROWS \
	VFMADD231PS Z16, Z20, Z0; \
	VFMADD231PS Z17, Z20, Z1; \
	VFMADD231PS Z18, Z20, Z2; \
	VFMADD231PS Z19, Z20, Z3; \
	VFMADD231PS Z16, Z21, Z4; \
	VFMADD231PS Z17, Z21, Z5; \
	VFMADD231PS Z18, Z21, Z6; \
	VFMADD231PS Z19, Z21, Z7; \
	VFMADD231PS Z16, Z22, Z8; \
	VFMADD231PS Z17, Z22, Z9; \
	VFMADD231PS Z18, Z22, Z10; \
	VFMADD231PS Z19, Z22, Z11; \
	VFMADD231PS Z16, Z23, Z12; \
	VFMADD231PS Z17, Z23, Z13; \
	VFMADD231PS Z18, Z23, Z14; \
	VFMADD231PS Z19, Z23, Z15

// NEXT_K_FOUR_ROWS steps the rows' pointers to element k+1.
#define NEXT_K_FOUR_ROWS \
	ADDQ $4, BX; \
	ADDQ $4, SI; \
	ADDQ $4, DI; \
	ADDQ $4, R9

// func panel4x32Asm(w, x0, x1, x2, x3, y0, y1, y2, y3 unsafe.Pointer, in int)
TEXT ·panel4x32Asm(SB), NOSPLIT, $0-80
	LOAD_PANEL_AND_ROWS
	MOVQ in+72(FP), CX
	ZERO_ACCUMULATORS
	TESTQ CX, CX
	JZ store32
loop32:
	PREFETCHT0 2048(AX)
	PREFETCHT0 2112(AX)
	PREFETCHT0 2176(AX)
	PREFETCHT0 2240(AX)
	VMOVUPS (AX), Z16
	VMOVUPS 64(AX), Z17
	VMOVUPS 128(AX), Z18
	VMOVUPS 192(AX), Z19
	BROADCAST_FOUR_ROWS
	MULTIPLY_ADD_FOUR_ROWS
	ADDQ $256, AX
	NEXT_K_FOUR_ROWS
	DECQ CX
	JNZ loop32
store32:
	MOVQ y0+40(FP), R10
	VMOVUPS Z0, (R10)
	VMOVUPS Z1, 64(R10)
	VMOVUPS Z2, 128(R10)
	VMOVUPS Z3, 192(R10)
	MOVQ y1+48(FP), R10
	VMOVUPS Z4, (R10)
	VMOVUPS Z5, 64(R10)
	VMOVUPS Z6, 128(R10)
	VMOVUPS Z7, 192(R10)
	MOVQ y2+56(FP), R10
	VMOVUPS Z8, (R10)
	VMOVUPS Z9, 64(R10)
	VMOVUPS Z10, 128(R10)
	VMOVUPS Z11, 192(R10)
	MOVQ y3+64(FP), R10
	VMOVUPS Z12, (R10)
	VMOVUPS Z13, 64(R10)
	VMOVUPS Z14, 128(R10)
	VMOVUPS Z15, 192(R10)
	VZEROUPPER
	RET

// func panel4x16Asm(w, x0, x1, x2, x3 unsafe.Pointer, in int, acc *[16]archsimd.Float32x16)
TEXT ·panel4x16Asm(SB), NOSPLIT, $0-56
	LOAD_PANEL_AND_ROWS
	MOVQ in+40(FP), CX
	MOVL $0xffff0000, R11
	VPBROADCASTD R11, Z28
	ZERO_ACCUMULATORS
	TESTQ CX, CX
	JZ store16
loop16:
	PREFETCHT0 1024(AX)
	PREFETCHT0 1088(AX)
	VMOVDQU32 (AX), Z24
	VMOVDQU32 64(AX), Z25
	VPSLLD $16, Z24, Z16
	VPANDD Z28, Z24, Z17
	VPSLLD $16, Z25, Z18
	VPANDD Z28, Z25, Z19
	BROADCAST_FOUR_ROWS
	MULTIPLY_ADD_FOUR_ROWS
	ADDQ $128, AX
	NEXT_K_FOUR_ROWS
	DECQ CX
	JNZ loop16
store16:
	MOVQ acc+48(FP), R10
	VMOVUPS Z0, (R10)
	VMOVUPS Z1, 64(R10)
	VMOVUPS Z2, 128(R10)
	VMOVUPS Z3, 192(R10)
	VMOVUPS Z4, 256(R10)
	VMOVUPS Z5, 320(R10)
	VMOVUPS Z6, 384(R10)
	VMOVUPS Z7, 448(R10)
	VMOVUPS Z8, 512(R10)
	VMOVUPS Z9, 576(R10)
	VMOVUPS Z10, 640(R10)
	VMOVUPS Z11, 704(R10)
	VMOVUPS Z12, 768(R10)
	VMOVUPS Z13, 832(R10)
	VMOVUPS Z14, 896(R10)
	VMOVUPS Z15, 960(R10)
	VZEROUPPER
	RET

// func scoresStrip32Asm(kt, q0, q1 unsafe.Pointer, hd, stride int, s0, s1 unsafe.Pointer)
//
// Slots [t, t+64) of two query rows' scores against a transposed float32 key block: kt is slot
// t of the block's first row, stride the bytes from one row (one of the head's dimensions) to
// the next. Each row's next 64 slots (the next strip) are prefetched as this one is read: the
// strips read 256 bytes of each of hd rows, more streams than the hardware's prefetchers follow.
// A Qwen3-0.6B step at depth 4,096 (float32 cache, 940 MB read) took 112–113 ms against 115–116
// with the same loop in archsimd and no prefetch (three rounds alternated, a 2-core Xeon).
TEXT ·scoresStrip32Asm(SB), NOSPLIT, $0-56
	MOVQ kt+0(FP), AX
	MOVQ q0+8(FP), BX
	MOVQ q1+16(FP), SI
	MOVQ hd+24(FP), CX
	MOVQ stride+32(FP), DX
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	TESTQ CX, CX
	JZ storeStrip
loopStrip:
	PREFETCHT0 256(AX)
	PREFETCHT0 320(AX)
	PREFETCHT0 384(AX)
	PREFETCHT0 448(AX)
	VBROADCASTSS (BX), Z20
	VBROADCASTSS (SI), Z21
	VMOVUPS (AX), Z16
	VMOVUPS 64(AX), Z17
	VMOVUPS 128(AX), Z18
	VMOVUPS 192(AX), Z19
	VFMADD231PS Z16, Z20, Z0
	VFMADD231PS Z17, Z20, Z1
	VFMADD231PS Z18, Z20, Z2
	VFMADD231PS Z19, Z20, Z3
	VFMADD231PS Z16, Z21, Z4
	VFMADD231PS Z17, Z21, Z5
	VFMADD231PS Z18, Z21, Z6
	VFMADD231PS Z19, Z21, Z7
	ADDQ DX, AX
	ADDQ $4, BX
	ADDQ $4, SI
	DECQ CX
	JNZ loopStrip
storeStrip:
	MOVQ s0+40(FP), R8
	MOVQ s1+48(FP), R10
	VMOVUPS Z0, (R8)
	VMOVUPS Z1, 64(R8)
	VMOVUPS Z2, 128(R8)
	VMOVUPS Z3, 192(R8)
	VMOVUPS Z4, (R10)
	VMOVUPS Z5, 64(R10)
	VMOVUPS Z6, 128(R10)
	VMOVUPS Z7, 192(R10)
	VZEROUPPER
	RET
