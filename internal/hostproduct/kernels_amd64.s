//go:build goexperiment.simd

#include "textflag.h"
#include "pairs_amd64.h"

// The AVX-512 kernels that stream a weight's panels or a key block from memory, in assembly for
// two reasons. They prefetch (PREFETCHT0; Go has no prefetch of its own): the hardware's
// prefetchers alone left a Qwen3-0.6B decode step's products reading the panels below what a
// plain sum reads from the same memory, the more so the more arithmetic a byte takes (one row's
// bfloat16 panels at 23–27 GB/s against a sum's 31–38; eight rows' float32 at 18–20), and
// prefetching 4 KiB ahead (one row: 16–32 steps of k) made a decode step 1.04–1.06× (float32)
// and 1.20–1.23× (bfloat16) as fast on a 2-core Xeon (three rounds alternated against the
// archsimd kernels, docs/performance.md, "Prefetching the panels"; one float32 row reads 8 KiB
// ahead since a Xeon with AMX read faster so, "bfloat16 products on AMX's tiles"). And Go
// 1.27.4's register allocator, given the four-row kernels' sixteen accumulators in archsimd, kept
// five of them on the stack and moved the others between registers every step. A prefetch past
// the end of the memory read never faults. Each distance is the best of those measured there.

// ZERO_FOUR zeroes Z0–Z3 (the first row's accumulators).
#define ZERO_FOUR \
	VPXORD Z0, Z0, Z0; \
	VPXORD Z1, Z1, Z1; \
	VPXORD Z2, Z2, Z2; \
	VPXORD Z3, Z3, Z3

// SCORES_ARGS loads a key strip kernel's arguments: the block at AX, the query rows at BX and
// SI, hd (the rows to walk) in CX and the bytes between the block's rows in DX.
#define SCORES_ARGS \
	MOVQ kt+0(FP), AX; \
	MOVQ q0+8(FP), BX; \
	MOVQ q1+16(FP), SI; \
	MOVQ hd+24(FP), CX; \
	MOVQ stride+32(FP), DX

// CONTEXT_ARGS loads a context kernel's arguments: the value rows at AX, the two rows of
// probabilities at BX and SI, m (the rows to walk) in CX and the bytes between value rows in DX.
#define CONTEXT_ARGS \
	MOVQ vb+0(FP), AX; \
	MOVQ p0+8(FP), BX; \
	MOVQ p1+16(FP), SI; \
	MOVQ m+24(FP), CX; \
	MOVQ rowBytes+32(FP), DX

// ZERO_EIGHT zeroes Z0–Z7 (a key strip's two rows of four accumulators).
#define ZERO_EIGHT \
	ZERO_FOUR; \
	VPXORD Z4, Z4, Z4; \
	VPXORD Z5, Z5, Z5; \
	VPXORD Z6, Z6, Z6; \
	VPXORD Z7, Z7, Z7

// FMA_EIGHT_BY adds Z16–Z19 (64 values: a key row's slots, a panel's weights) times QA (one
// row's factor) to Z0–Z3, and times QB (the other row's) to Z4–Z7.
#define FMA_EIGHT_BY(QA, QB) \
	VFMADD231PS Z16, QA, Z0; \
	VFMADD231PS Z17, QA, Z1; \
	VFMADD231PS Z18, QA, Z2; \
	VFMADD231PS Z19, QA, Z3; \
	VFMADD231PS Z16, QB, Z4; \
	VFMADD231PS Z17, QB, Z5; \
	VFMADD231PS Z18, QB, Z6; \
	VFMADD231PS Z19, QB, Z7

// FMA_EIGHT is FMA_EIGHT_BY the factors in Z20 and Z21.
#define FMA_EIGHT FMA_EIGHT_BY(Z20, Z21)

// STORE_STRIPS stores a key strip's scores: Z0–Z3 at s0, Z4–Z7 at s1.
#define STORE_STRIPS \
	MOVQ s0+40(FP), R8; \
	MOVQ s1+48(FP), R10; \
	VMOVUPS Z0, (R8); \
	VMOVUPS Z1, 64(R8); \
	VMOVUPS Z2, 128(R8); \
	VMOVUPS Z3, 192(R8); \
	VMOVUPS Z4, (R10); \
	VMOVUPS Z5, 64(R10); \
	VMOVUPS Z6, 128(R10); \
	VMOVUPS Z7, 192(R10)

// FMA_SIXTEEN adds Z16–Z23 (128 columns of a row) times Z24 (one broadcast factor) to Z0–Z7, and
// times Z25 to Z8–Z15.
#define FMA_SIXTEEN \
	VFMADD231PS Z16, Z24, Z0; \
	VFMADD231PS Z17, Z24, Z1; \
	VFMADD231PS Z18, Z24, Z2; \
	VFMADD231PS Z19, Z24, Z3; \
	VFMADD231PS Z20, Z24, Z4; \
	VFMADD231PS Z21, Z24, Z5; \
	VFMADD231PS Z22, Z24, Z6; \
	VFMADD231PS Z23, Z24, Z7; \
	VFMADD231PS Z16, Z25, Z8; \
	VFMADD231PS Z17, Z25, Z9; \
	VFMADD231PS Z18, Z25, Z10; \
	VFMADD231PS Z19, Z25, Z11; \
	VFMADD231PS Z20, Z25, Z12; \
	VFMADD231PS Z21, Z25, Z13; \
	VFMADD231PS Z22, Z25, Z14; \
	VFMADD231PS Z23, Z25, Z15

// ADD_STORE_EIGHT adds eight vectors to the 128 float32 at R and stores them there.
#define ADD_STORE_EIGHT(R, A, B, C, D, E, F, G, H) \
	VADDPS (R), A, A; \
	VMOVUPS A, (R); \
	VADDPS 64(R), B, B; \
	VMOVUPS B, 64(R); \
	VADDPS 128(R), C, C; \
	VMOVUPS C, 128(R); \
	VADDPS 192(R), D, D; \
	VMOVUPS D, 192(R); \
	VADDPS 256(R), E, E; \
	VMOVUPS E, 256(R); \
	VADDPS 320(R), F, F; \
	VMOVUPS F, 320(R); \
	VADDPS 384(R), G, G; \
	VMOVUPS G, 384(R); \
	VADDPS 448(R), H, H; \
	VMOVUPS H, 448(R)

// STORE_FOUR_AT_R10 stores Z0–Z3 at R10: 64 float32.
#define STORE_FOUR_AT_R10 \
	VMOVUPS Z0, (R10); \
	VMOVUPS Z1, 64(R10); \
	VMOVUPS Z2, 128(R10); \
	VMOVUPS Z3, 192(R10)

// WIDEN_BFLOAT16 widens a step of k's 64 bfloat16 weights, loaded as words in Z24 and Z25, to
// float32: Z16 and Z17 the even and odd columns of the first 32, Z18 and Z19 of the next (a
// word shifted left 16 is its even column's float32, the word masked by Z28, 0xffff0000 in every
// lane, its odd one's).
#define WIDEN_BFLOAT16 \
	VPSLLD $16, Z24, Z16; \
	VPANDD Z28, Z24, Z17; \
	VPSLLD $16, Z25, Z18; \
	VPANDD Z28, Z25, Z19

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
	FMA_EIGHT; \
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

// FOUR_ROWS_STEP_32(ptr) multiplies a step of k's 64 float32 weights at ptr by rows 0–3 into
// their accumulators and steps ptr and the rows on.
#define FOUR_ROWS_STEP_32(ptr) \
	VMOVUPS (ptr), Z16; \
	VMOVUPS 64(ptr), Z17; \
	VMOVUPS 128(ptr), Z18; \
	VMOVUPS 192(ptr), Z19; \
	BROADCAST_FOUR_ROWS; \
	MULTIPLY_ADD_FOUR_ROWS; \
	ADDQ $256, ptr; \
	NEXT_K_FOUR_ROWS

// FOUR_ROWS_STEP_16(ptr) is FOUR_ROWS_STEP_32 for 64 bfloat16 weights, widened (WIDEN_BFLOAT16).
#define FOUR_ROWS_STEP_16(ptr) \
	VMOVDQU32 (ptr), Z24; \
	VMOVDQU32 64(ptr), Z25; \
	WIDEN_BFLOAT16; \
	BROADCAST_FOUR_ROWS; \
	MULTIPLY_ADD_FOUR_ROWS; \
	ADDQ $128, ptr; \
	NEXT_K_FOUR_ROWS

// HALF_LOAD widens the 16 float16 values at addr to float32 in reg, exactly (VCVTPH2PS).
#define HALF_LOAD(addr, reg) VCVTPH2PS addr, reg

// BFLOAT16_LOAD widens the 16 bfloat16 values at addr to float32 in reg: each word zero-extended
// to a doubleword, then shifted into its high half.
#define BFLOAT16_LOAD(addr, reg) \
	VPMOVZXWD addr, reg; \
	VPSLLD $16, reg, reg

// FLOAT32_LOAD loads the 16 float32 values at addr into reg.
#define FLOAT32_LOAD(addr, reg) VMOVUPS addr, reg

// HALF_AT and BFLOAT16_AT are HALF_LOAD and BFLOAT16_LOAD at off(AX).
#define HALF_AT(off, reg) HALF_LOAD(off(AX), reg)
#define BFLOAT16_AT(off, reg) BFLOAT16_LOAD(off(AX), reg)

// SCORES_STRIP is scoresStrip32Asm for a key block of 2-byte values that WIDEN (HALF_AT or
// BFLOAT16_AT) makes float32 as they are loaded: each row's 64 slots (128 bytes), the next
// strip's prefetched.
#define SCORES_STRIP(WIDEN) \
	SCORES_ARGS; \
	ZERO_EIGHT; \
	TESTQ CX, CX; \
	JZ store; \
loop: \
	PREFETCHT0 128(AX); \
	PREFETCHT0 192(AX); \
	VBROADCASTSS (BX), Z20; \
	VBROADCASTSS (SI), Z21; \
	WIDEN(0, Z16); \
	WIDEN(32, Z17); \
	WIDEN(64, Z18); \
	WIDEN(96, Z19); \
	FMA_EIGHT; \
	ADDQ DX, AX; \
	ADDQ $4, BX; \
	ADDQ $4, SI; \
	DECQ CX; \
	JNZ loop; \
store: \
	STORE_STRIPS; \
	VZEROUPPER; \
	RET

// PAIR_16 is SCORES_STRIP for 16 slots (a strip's tail), or CONTEXT_128 for 16 columns (a head
// dimension that is not a multiple of 128): ARGS (SCORES_ARGS or CONTEXT_ARGS) loads the two
// rows' factors at BX and SI, the count of rows to walk CX bytes DX apart from AX; each row's
// 16 values, widened by WIDEN, times each factor go into Z0 and Z4, and FINISH stores them.
#define PAIR_16(ARGS, WIDEN, FINISH) \
	ARGS; \
	VPXORD Z0, Z0, Z0; \
	VPXORD Z4, Z4, Z4; \
	TESTQ CX, CX; \
	JZ store; \
loop: \
	VBROADCASTSS (BX), Z20; \
	VBROADCASTSS (SI), Z21; \
	WIDEN(0, Z16); \
	VFMADD231PS Z16, Z20, Z0; \
	VFMADD231PS Z16, Z21, Z4; \
	ADDQ DX, AX; \
	ADDQ $4, BX; \
	ADDQ $4, SI; \
	DECQ CX; \
	JNZ loop; \
store: \
	FINISH; \
	VZEROUPPER; \
	RET

// STORE_SCORES_16 stores PAIR_16's sums as the scores of 16 slots: Z0 at s0, Z4 at s1.
#define STORE_SCORES_16 \
	MOVQ s0+40(FP), R8; \
	MOVQ s1+48(FP), R10; \
	VMOVUPS Z0, (R8); \
	VMOVUPS Z4, (R10)

// ADD_CONTEXT_16 adds PAIR_16's sums to 16 columns of the context: Z0 to c0, Z4 to c1.
#define ADD_CONTEXT_16 \
	MOVQ c0+40(FP), R8; \
	MOVQ c1+48(FP), R10; \
	VADDPS (R8), Z0, Z0; \
	VMOVUPS Z0, (R8); \
	VADDPS (R10), Z4, Z4; \
	VMOVUPS Z4, (R10)

// CONTEXT_128 is contextPair32x128Asm for value rows of 2-byte values that WIDEN makes float32
// as they are loaded: each row's 256 bytes, four rows ahead prefetched.
#define CONTEXT_128(WIDEN) \
	CONTEXT_ARGS; \
	LEAQ (AX)(DX*4), R9; \
	ZERO_ACCUMULATORS; \
	TESTQ CX, CX; \
	JZ store; \
loop: \
	PREFETCHT0 (R9); \
	PREFETCHT0 64(R9); \
	PREFETCHT0 128(R9); \
	PREFETCHT0 192(R9); \
	VBROADCASTSS (BX), Z24; \
	VBROADCASTSS (SI), Z25; \
	WIDEN(0, Z16); \
	WIDEN(32, Z17); \
	WIDEN(64, Z18); \
	WIDEN(96, Z19); \
	WIDEN(128, Z20); \
	WIDEN(160, Z21); \
	WIDEN(192, Z22); \
	WIDEN(224, Z23); \
	FMA_SIXTEEN; \
	ADDQ DX, AX; \
	ADDQ DX, R9; \
	ADDQ $4, BX; \
	ADDQ $4, SI; \
	DECQ CX; \
	JNZ loop; \
store: \
	MOVQ c0+40(FP), R8; \
	MOVQ c1+48(FP), R10; \
	ADD_STORE_EIGHT(R8, Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7); \
	ADD_STORE_EIGHT(R10, Z8, Z9, Z10, Z11, Z12, Z13, Z14, Z15); \
	VZEROUPPER; \
	RET

// EIGHT_ROWS(count, steps, FIRST, SECOND) is the eight-row kernels' body: their arguments taken
// (the panel w in AX, the rows' pointers x in R12, acc in R10, k's steps, the argument named
// count, in CX), the accumulators zeroed at acc, then k in blocks of steps (8 KiB of the panel, held in the
// level-1 cache), each block multiplied by rows 0–3 (FIRST(R8): one step of k, prefetching the
// panel ahead) and then by rows 4–7 (SECOND(R8)), their accumulators kept at acc between blocks.
// A step of k reads 4 bytes of each row.
#define EIGHT_ROWS(count, steps, FIRST, SECOND) \
	MOVQ w+0(FP), AX; \
	MOVQ x+8(FP), R12; \
	MOVQ acc+16(FP), R10; \
	MOVQ count+24(FP), CX; \
	ZERO_ACCUMULATORS; \
	SIXTEEN_TO(0); \
	SIXTEEN_TO(1024); \
	XORQ R13, R13; \
	TESTQ CX, CX; \
	JZ done; \
block: \
	MOVQ $steps, DX; \
	CMPQ CX, DX; \
	CMOVQLT CX, DX; \
	SIXTEEN_FROM(0); \
	ROWS_AT(0); \
	MOVQ AX, R8; \
	MOVQ DX, R11; \
first: \
	FIRST(R8); \
	DECQ R11; \
	JNZ first; \
	SIXTEEN_TO(0); \
	SIXTEEN_FROM(1024); \
	ROWS_AT(32); \
	MOVQ AX, R8; \
	MOVQ DX, R11; \
second: \
	SECOND(R8); \
	DECQ R11; \
	JNZ second; \
	SIXTEEN_TO(1024); \
	MOVQ R8, AX; \
	LEAQ (R13)(DX*4), R13; \
	SUBQ DX, CX; \
	JNZ block; \
done: \
	VZEROUPPER; \
	RET

// EIGHT_ROWS' steps for the float32 panels (two lines of 128 bytes a step: rows 0–3 prefetch
// the first 16 KiB ahead, rows 4–7 the second), the bfloat16 panels (one line a step: rows 0–3
// the first of each pair of steps, rows 4–7 the second) and the bfloat16 pairs of k (four lines
// a step, two for each four rows).
#define FIRST_8X32(reg) PREFETCHT1 16384(reg); PREFETCHT1 16448(reg); FOUR_ROWS_STEP_32(reg)
#define SECOND_8X32(reg) PREFETCHT1 16512(reg); PREFETCHT1 16576(reg); FOUR_ROWS_STEP_32(reg)
#define FIRST_8X16(reg) PREFETCHT1 16384(reg); FOUR_ROWS_STEP_16(reg)
#define SECOND_8X16(reg) PREFETCHT1 16448(reg); FOUR_ROWS_STEP_16(reg)
#define FIRST_8DP(reg) PREFETCHT1 16384(reg); PREFETCHT1 16448(reg); FOUR_ROWS_DP(reg)
#define SECOND_8DP(reg) PREFETCHT1 16512(reg); PREFETCHT1 16576(reg); FOUR_ROWS_DP(reg)

// SCORES_ROWS is a key kernel that walks a block by its rows (scoresPairRows): two rows at a
// time, each along the slots, so that the block is read as two neighbouring streams. LOAD widens
// the 16 slots at an address to float32, O1–O3 are the offsets of a row's next three vectors and
// STEP64, STEP16 the bytes of 64 and 16 slots. PREFETCH, at each 64 slots, prefetches twice
// STEP64 bytes from R12 on, which starts four rows past the pair and moves on in a line: where the
// block's rows are all attended (its slots as many as m) that is the pair after next, in the
// order it is read. Prefetched so rather than as two rows, one core read the blocks at 11.1–11.2
// GB/s against 7.8–8.2, and into the L2 (PREFETCHT1) rather than the L1 at 18.3–18.7: the L1's
// few misses in flight no longer bound it (BenchmarkKeyWalks, a 2-core AMD EPYC, Zen 4; the strip
// kernels prefetched into the L2 ran 14.8–16.4 there, but no faster in a step at depths of 128 and
// 512, where their blocks are small). Registers: the block's pair of rows at AX, R9 walking
// them; the query rows at BX and SI (their two values broadcast to Z24, Z25 and Z26, Z27); hd
// counted down in CX; the bytes between rows in DX; the slots in R8, up to R10 = m − 64 by 64,
// then to m by 16; the scores at DI and R13 (Z0–Z3 and Z4–Z7 for 64 slots).
#define SCORES_ROWS(LOAD, O1, O2, O3, STEP64, STEP16, PREFETCH) \
	MOVQ kt+0(FP), AX; \
	MOVQ q0+8(FP), BX; \
	MOVQ q1+16(FP), SI; \
	MOVQ hd+24(FP), CX; \
	MOVQ stride+32(FP), DX; \
	MOVQ m+40(FP), R10; \
	MOVQ s0+48(FP), DI; \
	MOVQ s1+56(FP), R13; \
	TESTQ R10, R10; \
	JLE done; \
	SUBQ $64, R10; \
	CMPQ CX, $2; \
	JLT done; \
pair: \
	VBROADCASTSS (BX), Z24; \
	VBROADCASTSS 4(BX), Z25; \
	VBROADCASTSS (SI), Z26; \
	VBROADCASTSS 4(SI), Z27; \
	MOVQ AX, R9; \
	LEAQ (AX)(DX*4), R12; \
	XORQ R8, R8; \
	CMPQ R8, R10; \
	JGT tail; \
loop64: \
	VMOVUPS (DI)(R8*4), Z0; \
	VMOVUPS 64(DI)(R8*4), Z1; \
	VMOVUPS 128(DI)(R8*4), Z2; \
	VMOVUPS 192(DI)(R8*4), Z3; \
	VMOVUPS (R13)(R8*4), Z4; \
	VMOVUPS 64(R13)(R8*4), Z5; \
	VMOVUPS 128(R13)(R8*4), Z6; \
	VMOVUPS 192(R13)(R8*4), Z7; \
	PREFETCH; \
	KEY_ROW64(LOAD, O1, O2, O3, (R9), Z24, Z26); \
	KEY_ROW64(LOAD, O1, O2, O3, (R9)(DX*1), Z25, Z27); \
	VMOVUPS Z0, (DI)(R8*4); \
	VMOVUPS Z1, 64(DI)(R8*4); \
	VMOVUPS Z2, 128(DI)(R8*4); \
	VMOVUPS Z3, 192(DI)(R8*4); \
	VMOVUPS Z4, (R13)(R8*4); \
	VMOVUPS Z5, 64(R13)(R8*4); \
	VMOVUPS Z6, 128(R13)(R8*4); \
	VMOVUPS Z7, 192(R13)(R8*4); \
	ADDQ $STEP64, R9; \
	ADDQ $64, R8; \
	CMPQ R8, R10; \
	JLE loop64; \
tail: \
	CMPQ R8, m+40(FP); \
	JGE next; \
	VMOVUPS (DI)(R8*4), Z0; \
	VMOVUPS (R13)(R8*4), Z4; \
	LOAD((R9), Z16); \
	VFMADD231PS Z16, Z24, Z0; \
	VFMADD231PS Z16, Z26, Z4; \
	LOAD((R9)(DX*1), Z16); \
	VFMADD231PS Z16, Z25, Z0; \
	VFMADD231PS Z16, Z27, Z4; \
	VMOVUPS Z0, (DI)(R8*4); \
	VMOVUPS Z4, (R13)(R8*4); \
	ADDQ $STEP16, R9; \
	ADDQ $16, R8; \
	JMP tail; \
next: \
	LEAQ (AX)(DX*2), AX; \
	ADDQ $8, BX; \
	ADDQ $8, SI; \
	SUBQ $2, CX; \
	CMPQ CX, $2; \
	JGE pair; \
done: \
	VZEROUPPER; \
	RET

// KEY_ROW64 adds a key row's 64 slots at ADDR (LOAD widens them into Z16–Z19 from offsets 0,
// O1, O2 and O3) times QA to Z0–Z3 and times QB to Z4–Z7.
#define KEY_ROW64(LOAD, O1, O2, O3, ADDR, QA, QB) \
	LOAD(ADDR, Z16); \
	LOAD(O1 ADDR, Z17); \
	LOAD(O2 ADDR, Z18); \
	LOAD(O3 ADDR, Z19); \
	FMA_EIGHT_BY(QA, QB)

// PREFETCH_AHEAD_256 prefetches the 256 bytes at R12 into the L2 and moves R12 past them (a
// 2-byte block's 64 slots of two rows).
#define PREFETCH_AHEAD_256 \
	PREFETCHT1 (R12); \
	PREFETCHT1 64(R12); \
	PREFETCHT1 128(R12); \
	PREFETCHT1 192(R12); \
	ADDQ $256, R12

// PREFETCH_AHEAD_512 is PREFETCH_AHEAD_256 for a float32 block's 64 slots of two rows.
#define PREFETCH_AHEAD_512 \
	PREFETCH_AHEAD_256; \
	PREFETCH_AHEAD_256

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
	FOUR_ROWS_STEP_32(AX)
	DECQ CX
	JNZ loop32
store32:
	MOVQ y0+40(FP), R10
	STORE_FOUR_AT_R10
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
	PREFETCHT0 4096(AX)
	PREFETCHT0 4160(AX)
	FOUR_ROWS_STEP_16(AX)
	DECQ CX
	JNZ loop16
store16:
	MOVQ acc+48(FP), R10
	STORE_FOUR_AT_R10
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
	SCORES_ARGS
	ZERO_EIGHT
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
	FMA_EIGHT
	ADDQ DX, AX
	ADDQ $4, BX
	ADDQ $4, SI
	DECQ CX
	JNZ loopStrip
storeStrip:
	STORE_STRIPS
	VZEROUPPER
	RET

// func panels16Asm(w, x unsafe.Pointer, in, count int, acc unsafe.Pointer)
//
// One row x by count bfloat16 panels w [count, in, 64]: for each panel four accumulators, its
// even and odd columns of the first 32 and of the next, at acc (4 vectors a panel).
TEXT ·panels16Asm(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), AX
	MOVQ acc+32(FP), R10
	MOVQ count+24(FP), DX
	MOVL $0xffff0000, R11
	VPBROADCASTD R11, Z28
	TESTQ DX, DX
	JZ done1x16
panel1x16:
	MOVQ x+8(FP), BX
	MOVQ in+16(FP), CX
	ZERO_FOUR
	TESTQ CX, CX
	JZ store1x16
loop1x16:
	PREFETCHT0 4096(AX)
	PREFETCHT0 4160(AX)
	VMOVDQU32 (AX), Z24
	VMOVDQU32 64(AX), Z25
	VBROADCASTSS (BX), Z20
	WIDEN_BFLOAT16
	VFMADD231PS Z16, Z20, Z0
	VFMADD231PS Z17, Z20, Z1
	VFMADD231PS Z18, Z20, Z2
	VFMADD231PS Z19, Z20, Z3
	ADDQ $128, AX
	ADDQ $4, BX
	DECQ CX
	JNZ loop1x16
store1x16:
	STORE_FOUR_AT_R10
	ADDQ $256, R10
	DECQ DX
	JNZ panel1x16
done1x16:
	VZEROUPPER
	RET

// func panels32Asm(w, x, y unsafe.Pointer, in, count int)
//
// One row x by count float32 panels w [count, in, 64] into y [count·64], the panels prefetched
// 8 KiB ahead (on a Xeon with AMX 26–27.5 GB/s against 22–23 at 4 KiB; as fast as 4 KiB on
// Zen 4 and Emerald Rapids).
TEXT ·panels32Asm(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), AX
	MOVQ y+16(FP), R10
	MOVQ count+32(FP), DX
	TESTQ DX, DX
	JZ done1x32
panel1x32:
	MOVQ x+8(FP), BX
	MOVQ in+24(FP), CX
	ZERO_FOUR
	TESTQ CX, CX
	JZ store1x32
loop1x32:
	PREFETCHT0 8192(AX)
	PREFETCHT0 8256(AX)
	PREFETCHT0 8320(AX)
	PREFETCHT0 8384(AX)
	VBROADCASTSS (BX), Z20
	VFMADD231PS (AX), Z20, Z0
	VFMADD231PS 64(AX), Z20, Z1
	VFMADD231PS 128(AX), Z20, Z2
	VFMADD231PS 192(AX), Z20, Z3
	ADDQ $256, AX
	ADDQ $4, BX
	DECQ CX
	JNZ loop1x32
store1x32:
	STORE_FOUR_AT_R10
	ADDQ $256, R10
	DECQ DX
	JNZ panel1x32
done1x32:
	VZEROUPPER
	RET

// SIXTEEN_TO(off) stores the accumulators Z0–Z15 at off(R10).
#define SIXTEEN_TO(off) \
	VMOVUPS Z0, (off+0)(R10); \
	VMOVUPS Z1, (off+64)(R10); \
	VMOVUPS Z2, (off+128)(R10); \
	VMOVUPS Z3, (off+192)(R10); \
	VMOVUPS Z4, (off+256)(R10); \
	VMOVUPS Z5, (off+320)(R10); \
	VMOVUPS Z6, (off+384)(R10); \
	VMOVUPS Z7, (off+448)(R10); \
	VMOVUPS Z8, (off+512)(R10); \
	VMOVUPS Z9, (off+576)(R10); \
	VMOVUPS Z10, (off+640)(R10); \
	VMOVUPS Z11, (off+704)(R10); \
	VMOVUPS Z12, (off+768)(R10); \
	VMOVUPS Z13, (off+832)(R10); \
	VMOVUPS Z14, (off+896)(R10); \
	VMOVUPS Z15, (off+960)(R10)

// SIXTEEN_FROM(off) loads the accumulators Z0–Z15 from off(R10).
#define SIXTEEN_FROM(off) \
	VMOVUPS (off+0)(R10), Z0; \
	VMOVUPS (off+64)(R10), Z1; \
	VMOVUPS (off+128)(R10), Z2; \
	VMOVUPS (off+192)(R10), Z3; \
	VMOVUPS (off+256)(R10), Z4; \
	VMOVUPS (off+320)(R10), Z5; \
	VMOVUPS (off+384)(R10), Z6; \
	VMOVUPS (off+448)(R10), Z7; \
	VMOVUPS (off+512)(R10), Z8; \
	VMOVUPS (off+576)(R10), Z9; \
	VMOVUPS (off+640)(R10), Z10; \
	VMOVUPS (off+704)(R10), Z11; \
	VMOVUPS (off+768)(R10), Z12; \
	VMOVUPS (off+832)(R10), Z13; \
	VMOVUPS (off+896)(R10), Z14; \
	VMOVUPS (off+960)(R10), Z15

// ROWS_AT(off) points BX, SI, DI, R9 at element k (byte R13) of the rows whose pointers lie at
// off(R12).
#define ROWS_AT(off) \
	MOVQ (off+0)(R12), BX; \
	ADDQ R13, BX; \
	MOVQ (off+8)(R12), SI; \
	ADDQ R13, SI; \
	MOVQ (off+16)(R12), DI; \
	ADDQ R13, DI; \
	MOVQ (off+24)(R12), R9; \
	ADDQ R13, R9

// func panel8x32Asm(w unsafe.Pointer, x *[8]unsafe.Pointer, acc unsafe.Pointer, in int)
//
// Eight rows by one float32 panel w [in, 64] into acc [8][64], the panel read from memory once:
// k in blocks of 32 steps, each block multiplied by rows 0–3 (prefetching the panel ahead) and
// then by rows 4–7 (EIGHT_ROWS).
TEXT ·panel8x32Asm(SB), NOSPLIT, $0-32
	EIGHT_ROWS(in, 32, FIRST_8X32, SECOND_8X32)

// func panel8x16Asm(w unsafe.Pointer, x *[8]unsafe.Pointer, acc unsafe.Pointer, in int)
//
// panel8x32Asm for a bfloat16 panel, widened in registers as panel4x16Asm widens it (and again
// for rows 4–7, from the level-1 cache): acc holds each row's four accumulators in
// panel4x16Asm's order, k in blocks of 64 steps (8 KiB of the panel).
TEXT ·panel8x16Asm(SB), NOSPLIT, $0-32
	MOVL $0xffff0000, R11
	VPBROADCASTD R11, Z28
	EIGHT_ROWS(in, 64, FIRST_8X16, SECOND_8X16)

// FOUR_ROWS_DP(reg) multiplies one pair of k of four bfloat16 rows (BX, SI, DI, R9: their pair
// broadcast) by the panel rows 2k and 2k+1 at reg (256 bytes), paired word by word in registers
// (VPUNPCKLWD, VPUNPCKHWD: Z24–Z27, each 32-bit word a column's two values), into Z0–Z15 (each
// row's four vectors, in pairedColumn's order), and steps the pointers on. VDPBF16PS
// (AVX512_BF16) adds the products of each lane's two bfloat16 pairs into its float32 sum; Go's
// assembler has no mnemonic for it, so each is written out as its EVEX bytes (62 P0 P1 P2 52
// ModRM: EVEX.512.F3.0F38.W0 52 /r, register operands only). The BYTE lines are, in order,
// VDPBF16PS Z(24+c), Z(20+r), Z(4r+c) (Go's operand order) for row r and vector c, 0–3 each.
#define FOUR_ROWS_DP(reg) \
	PAIR_PANEL_ROWS(reg, Z16, Z17, Z18, Z19, Z24, Z25, Z26, Z27); \
	VPBROADCASTD (BX), Z20; \
	VPBROADCASTD (SI), Z21; \
	VPBROADCASTD (DI), Z22; \
	VPBROADCASTD (R9), Z23; \
	BYTE $0x62; BYTE $0x92; BYTE $0x5E; BYTE $0x40; BYTE $0x52; BYTE $0xC0; \
	BYTE $0x62; BYTE $0x92; BYTE $0x5E; BYTE $0x40; BYTE $0x52; BYTE $0xC9; \
	BYTE $0x62; BYTE $0x92; BYTE $0x5E; BYTE $0x40; BYTE $0x52; BYTE $0xD2; \
	BYTE $0x62; BYTE $0x92; BYTE $0x5E; BYTE $0x40; BYTE $0x52; BYTE $0xDB; \
	BYTE $0x62; BYTE $0x92; BYTE $0x56; BYTE $0x40; BYTE $0x52; BYTE $0xE0; \
	BYTE $0x62; BYTE $0x92; BYTE $0x56; BYTE $0x40; BYTE $0x52; BYTE $0xE9; \
	BYTE $0x62; BYTE $0x92; BYTE $0x56; BYTE $0x40; BYTE $0x52; BYTE $0xF2; \
	BYTE $0x62; BYTE $0x92; BYTE $0x56; BYTE $0x40; BYTE $0x52; BYTE $0xFB; \
	BYTE $0x62; BYTE $0x12; BYTE $0x4E; BYTE $0x40; BYTE $0x52; BYTE $0xC0; \
	BYTE $0x62; BYTE $0x12; BYTE $0x4E; BYTE $0x40; BYTE $0x52; BYTE $0xC9; \
	BYTE $0x62; BYTE $0x12; BYTE $0x4E; BYTE $0x40; BYTE $0x52; BYTE $0xD2; \
	BYTE $0x62; BYTE $0x12; BYTE $0x4E; BYTE $0x40; BYTE $0x52; BYTE $0xDB; \
	BYTE $0x62; BYTE $0x12; BYTE $0x46; BYTE $0x40; BYTE $0x52; BYTE $0xE0; \
	BYTE $0x62; BYTE $0x12; BYTE $0x46; BYTE $0x40; BYTE $0x52; BYTE $0xE9; \
	BYTE $0x62; BYTE $0x12; BYTE $0x46; BYTE $0x40; BYTE $0x52; BYTE $0xF2; \
	BYTE $0x62; BYTE $0x12; BYTE $0x46; BYTE $0x40; BYTE $0x52; BYTE $0xFB; \
	ADDQ $256, reg; \
	ADDQ $4, BX; \
	ADDQ $4, SI; \
	ADDQ $4, DI; \
	ADDQ $4, R9

// func panel8dpAsm(w unsafe.Pointer, x *[8]unsafe.Pointer, acc unsafe.Pointer, pairs int)
//
// Eight bfloat16 rows x (pairs 32-bit words each) by one bfloat16 panel w [2·pairs, 64] as it is
// stored, into acc [8][64] (each row's four vectors in pairedColumn's order), the panel read
// from memory once: k in blocks of 32 pairs (EIGHT_ROWS), each pair of panel rows paired in
// registers (FOUR_ROWS_DP) for rows 0–3 and again, from the level-1 cache, for rows 4–7.
TEXT ·panel8dpAsm(SB), NOSPLIT, $0-32
	EIGHT_ROWS(pairs, 32, FIRST_8DP, SECOND_8DP)

// func contextPair32x128Asm(vb, p0, p1 unsafe.Pointer, m, rowBytes int, c0, c1 unsafe.Pointer)
//
// 128 columns of the context of two rows of probabilities: c0[j] += Σ_t p0[t]·vb[t][j] and the
// same for c1, j < 128, the m value rows rowBytes apart from vb. Each row's 512 bytes are read in
// one pass (sixteen accumulators), four rows ahead prefetched.
TEXT ·contextPair32x128Asm(SB), NOSPLIT, $0-56
	CONTEXT_ARGS
	LEAQ (AX)(DX*4), R9
	ZERO_ACCUMULATORS
	TESTQ CX, CX
	JZ storeContext
loopContext:
	PREFETCHT0 (R9)
	PREFETCHT0 64(R9)
	PREFETCHT0 128(R9)
	PREFETCHT0 192(R9)
	PREFETCHT0 256(R9)
	PREFETCHT0 320(R9)
	PREFETCHT0 384(R9)
	PREFETCHT0 448(R9)
	VBROADCASTSS (BX), Z24
	VBROADCASTSS (SI), Z25
	VMOVUPS (AX), Z16
	VMOVUPS 64(AX), Z17
	VMOVUPS 128(AX), Z18
	VMOVUPS 192(AX), Z19
	VMOVUPS 256(AX), Z20
	VMOVUPS 320(AX), Z21
	VMOVUPS 384(AX), Z22
	VMOVUPS 448(AX), Z23
	FMA_SIXTEEN
	ADDQ DX, AX
	ADDQ DX, R9
	ADDQ $4, BX
	ADDQ $4, SI
	DECQ CX
	JNZ loopContext
storeContext:
	MOVQ c0+40(FP), R8
	MOVQ c1+48(FP), R10
	ADD_STORE_EIGHT(R8, Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7)
	ADD_STORE_EIGHT(R10, Z8, Z9, Z10, Z11, Z12, Z13, Z14, Z15)
	VZEROUPPER
	RET

// func scoresStripHalfAsm(kt, q0, q1 unsafe.Pointer, hd, stride int, s0, s1 unsafe.Pointer)
TEXT ·scoresStripHalfAsm(SB), NOSPLIT, $0-56
	SCORES_STRIP(HALF_AT)

// func scoresVecHalfAsm(kt, q0, q1 unsafe.Pointer, hd, stride int, s0, s1 unsafe.Pointer)
TEXT ·scoresVecHalfAsm(SB), NOSPLIT, $0-56
	PAIR_16(SCORES_ARGS, HALF_AT, STORE_SCORES_16)

// func scoresRowsHalfAsm(kt, q0, q1 unsafe.Pointer, hd, stride, m int, s0, s1 unsafe.Pointer)
TEXT ·scoresRowsHalfAsm(SB), NOSPLIT, $0-64
	SCORES_ROWS(HALF_LOAD, 32, 64, 96, 128, 32, PREFETCH_AHEAD_256)

// func contextPairHalfx128Asm(vb, p0, p1 unsafe.Pointer, m, rowBytes int, c0, c1 unsafe.Pointer)
TEXT ·contextPairHalfx128Asm(SB), NOSPLIT, $0-56
	CONTEXT_128(HALF_AT)

// func contextPairHalfx16Asm(vb, p0, p1 unsafe.Pointer, m, rowBytes int, c0, c1 unsafe.Pointer)
TEXT ·contextPairHalfx16Asm(SB), NOSPLIT, $0-56
	PAIR_16(CONTEXT_ARGS, HALF_AT, ADD_CONTEXT_16)

// func scoresStrip16Asm(kt, q0, q1 unsafe.Pointer, hd, stride int, s0, s1 unsafe.Pointer)
TEXT ·scoresStrip16Asm(SB), NOSPLIT, $0-56
	SCORES_STRIP(BFLOAT16_AT)

// func scoresVec16Asm(kt, q0, q1 unsafe.Pointer, hd, stride int, s0, s1 unsafe.Pointer)
TEXT ·scoresVec16Asm(SB), NOSPLIT, $0-56
	PAIR_16(SCORES_ARGS, BFLOAT16_AT, STORE_SCORES_16)

// func scoresRows16Asm(kt, q0, q1 unsafe.Pointer, hd, stride, m int, s0, s1 unsafe.Pointer)
TEXT ·scoresRows16Asm(SB), NOSPLIT, $0-64
	SCORES_ROWS(BFLOAT16_LOAD, 32, 64, 96, 128, 32, PREFETCH_AHEAD_256)

// func contextPair16x128Asm(vb, p0, p1 unsafe.Pointer, m, rowBytes int, c0, c1 unsafe.Pointer)
TEXT ·contextPair16x128Asm(SB), NOSPLIT, $0-56
	CONTEXT_128(BFLOAT16_AT)

// func contextPair16x16Asm(vb, p0, p1 unsafe.Pointer, m, rowBytes int, c0, c1 unsafe.Pointer)
TEXT ·contextPair16x16Asm(SB), NOSPLIT, $0-56
	PAIR_16(CONTEXT_ARGS, BFLOAT16_AT, ADD_CONTEXT_16)

// func narrowHalfAsm(dst, src unsafe.Pointer, n int) (nan bool)
//
// n float32 values (a multiple of 16) rounded to float16 (VCVTPS2PH, to nearest, ties to even:
// float16.FromFloat32 but for NaNs' bits), reporting whether any was a NaN.
TEXT ·narrowHalfAsm(SB), NOSPLIT, $0-25
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	XORL AX, AX
	TESTQ CX, CX
	JZ doneNarrowHalf
loopNarrowHalf:
	VMOVUPS (SI), Z0
	VCMPPS $3, Z0, Z0, K1
	KORTESTW K1, K1
	JZ storeNarrowHalf
	MOVL $1, AX
storeNarrowHalf:
	VCVTPS2PH $0, Z0, (DI)
	ADDQ $64, SI
	ADDQ $32, DI
	SUBQ $16, CX
	JNZ loopNarrowHalf
doneNarrowHalf:
	MOVB AX, nan+24(FP)
	VZEROUPPER
	RET

// func widenHalfAsm(dst, src unsafe.Pointer, n int) (nan bool)
//
// n float16 values (a multiple of 16) widened to float32 (VCVTPH2PS: exact, but a signalling
// NaN comes out quiet), reporting whether any was a NaN.
TEXT ·widenHalfAsm(SB), NOSPLIT, $0-25
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	XORL AX, AX
	TESTQ CX, CX
	JZ doneWidenHalf
loopWidenHalf:
	VCVTPH2PS (SI), Z0
	VCMPPS $3, Z0, Z0, K1
	KORTESTW K1, K1
	JZ storeWidenHalf
	MOVL $1, AX
storeWidenHalf:
	VMOVUPS Z0, (DI)
	ADDQ $32, SI
	ADDQ $64, DI
	SUBQ $16, CX
	JNZ loopWidenHalf
doneWidenHalf:
	MOVB AX, nan+24(FP)
	VZEROUPPER
	RET

// func scoresRows32Asm(kt, q0, q1 unsafe.Pointer, hd, stride, m int, s0, s1 unsafe.Pointer)
TEXT ·scoresRows32Asm(SB), NOSPLIT, $0-64
	SCORES_ROWS(FLOAT32_LOAD, 64, 128, 192, 256, 64, PREFETCH_AHEAD_512)
