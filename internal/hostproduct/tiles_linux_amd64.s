//go:build goexperiment.simd

#include "textflag.h"
#include "pairs_amd64.h"

// AMX's tile instructions, which Go's assembler does not know, as bytes (Intel SDM vol. 2,
// "LDTILECFG", "TILELOADD", "TDPBF16PS"): each a three-byte VEX prefix (C4), map 0F38.

// tilePairs' qword order: the two halves of each lane of VPUNPCKLWD's and VPUNPCKHWD's
// results put back in column order (columns 0–3, 4–7, 8–11, 12–15, then 16–31 the same way).
DATA tilePairs<>+0(SB)/8, $0
DATA tilePairs<>+8(SB)/8, $1
DATA tilePairs<>+16(SB)/8, $8
DATA tilePairs<>+24(SB)/8, $9
DATA tilePairs<>+32(SB)/8, $2
DATA tilePairs<>+40(SB)/8, $3
DATA tilePairs<>+48(SB)/8, $10
DATA tilePairs<>+56(SB)/8, $11
DATA tilePairs<>+64(SB)/8, $4
DATA tilePairs<>+72(SB)/8, $5
DATA tilePairs<>+80(SB)/8, $12
DATA tilePairs<>+88(SB)/8, $13
DATA tilePairs<>+96(SB)/8, $6
DATA tilePairs<>+104(SB)/8, $7
DATA tilePairs<>+112(SB)/8, $14
DATA tilePairs<>+120(SB)/8, $15
GLOBL tilePairs<>(SB), RODATA|NOPTR, $128

// PAIR_ROWS(src, dst) pairs one pair of a bfloat16 panel's rows (src, 256 bytes) into the four
// tiles of their block (dst, 1,024 bytes apart; the 16 column pairs of each tile's row), the
// panel read 16 KiB ahead into the L2, as the eight-row kernels read theirs (Z30 and Z31:
// tilePairs).
#define PAIR_ROWS(src, dst) \
	PREFETCHT1 16384(src); \
	PREFETCHT1 16448(src); \
	PREFETCHT1 16512(src); \
	PREFETCHT1 16576(src); \
	PAIR_PANEL_ROWS(src, Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7); \
	VMOVDQA64 Z4, Z8; \
	VPERMT2Q Z5, Z30, Z8; \
	VMOVDQA64 Z4, Z9; \
	VPERMT2Q Z5, Z31, Z9; \
	VMOVDQA64 Z6, Z10; \
	VPERMT2Q Z7, Z30, Z10; \
	VMOVDQA64 Z6, Z11; \
	VPERMT2Q Z7, Z31, Z11; \
	VMOVDQU64 Z8, (dst); \
	VMOVDQU64 Z9, 1024(dst); \
	VMOVDQU64 Z10, 2048(dst); \
	VMOVDQU64 Z11, 3072(dst)

// TILE_START configures the tiles (LDTILECFG from the arguments' cfg), zeroes the sums
// (TILEZERO tmm0 to tmm3) and takes the arguments TILE_BLOCK steps through: x (AX), xStride
// (BX), blocks (CX), and DI 64, the panel's tile rows apart.
#define TILE_START \
	MOVQ cfg+0(FP), AX; \
	BYTE $0xC4; BYTE $0xE2; BYTE $0x78; BYTE $0x49; BYTE $0x00; \
	BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x49; BYTE $0xC0; \
	BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x49; BYTE $0xC8; \
	BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x49; BYTE $0xD0; \
	BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x49; BYTE $0xD8; \
	MOVQ x+8(FP), AX; \
	MOVQ xStride+16(FP), BX; \
	MOVQ blocks+32(FP), CX; \
	MOVQ $64, DI

// TILE_BLOCK multiplies a block of 32 k: tmm4 ← x's (AX, rows BX apart), then each tile of 16
// columns of the paired panel (SI, rows 64 bytes apart: DI) into tmm5–tmm7, and TDPBF16PS adds
// their products to tmm0–tmm3 (TILELOADD tmm4, (AX)(BX*1); TILELOADD tmm5, (SI)(DI*1);
// TDPBF16PS tmm0, tmm4, tmm5; TILELOADD tmm6, 1024(SI)(DI*1); TDPBF16PS tmm1, tmm4, tmm6;
// TILELOADD tmm7, 2048(SI)(DI*1); TDPBF16PS tmm2, tmm4, tmm7; TILELOADD tmm5, 3072(SI)(DI*1);
// TDPBF16PS tmm3, tmm4, tmm5).
#define TILE_BLOCK \
	BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x4B; BYTE $0x24; BYTE $0x18; \
	BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x4B; BYTE $0x2C; BYTE $0x3E; \
	BYTE $0xC4; BYTE $0xE2; BYTE $0x52; BYTE $0x5C; BYTE $0xC4; \
	BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x4B; BYTE $0xB4; BYTE $0x3E; BYTE $0x00; BYTE $0x04; BYTE $0x00; BYTE $0x00; \
	BYTE $0xC4; BYTE $0xE2; BYTE $0x4A; BYTE $0x5C; BYTE $0xCC; \
	BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x4B; BYTE $0xBC; BYTE $0x3E; BYTE $0x00; BYTE $0x08; BYTE $0x00; BYTE $0x00; \
	BYTE $0xC4; BYTE $0xE2; BYTE $0x42; BYTE $0x5C; BYTE $0xD4; \
	BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x4B; BYTE $0xAC; BYTE $0x3E; BYTE $0x00; BYTE $0x0C; BYTE $0x00; BYTE $0x00; \
	BYTE $0xC4; BYTE $0xE2; BYTE $0x52; BYTE $0x5C; BYTE $0xDC

// TILE_STORE stores tmm0–tmm3 into y's rows (the arguments' y and yStride; TILESTORED
// (DX)(BX*1) for each, 64 bytes on) and releases the tiles (TILERELEASE).
#define TILE_STORE \
	MOVQ y+40(FP), DX; \
	MOVQ yStride+48(FP), BX; \
	BYTE $0xC4; BYTE $0xE2; BYTE $0x7A; BYTE $0x4B; BYTE $0x04; BYTE $0x1A; \
	ADDQ $64, DX; \
	BYTE $0xC4; BYTE $0xE2; BYTE $0x7A; BYTE $0x4B; BYTE $0x0C; BYTE $0x1A; \
	ADDQ $64, DX; \
	BYTE $0xC4; BYTE $0xE2; BYTE $0x7A; BYTE $0x4B; BYTE $0x14; BYTE $0x1A; \
	ADDQ $64, DX; \
	BYTE $0xC4; BYTE $0xE2; BYTE $0x7A; BYTE $0x4B; BYTE $0x1C; BYTE $0x1A; \
	BYTE $0xC4; BYTE $0xE2; BYTE $0x78; BYTE $0x49; BYTE $0xC0

// func pairPanelAsm(w, dst unsafe.Pointer, blocks int)
//
// pairPanelPlain's layout from a bfloat16 panel w [32·blocks, 64]: each pair of panel rows
// interleaved word by word (VPUNPCKLWD, VPUNPCKHWD), put in column order (VPERMT2Q), and each
// 16 columns stored in their tile (PAIR_ROWS).
TEXT ·pairPanelAsm(SB), NOSPLIT, $0-24
	MOVQ w+0(FP), AX
	MOVQ dst+8(FP), DI
	MOVQ blocks+16(FP), CX
	VMOVDQU64 tilePairs<>+0(SB), Z30
	VMOVDQU64 tilePairs<>+64(SB), Z31
pairBlock:
	MOVQ $16, DX
pairRow:
	PAIR_ROWS(AX, DI)
	ADDQ $256, AX
	ADDQ $64, DI
	DECQ DX
	JNZ pairRow
	ADDQ $3072, DI
	DECQ CX
	JNZ pairBlock
	VZEROUPPER
	RET

// func tilesAsm(cfg *[64]byte, x unsafe.Pointer, xStride int, paired unsafe.Pointer, blocks int, y unsafe.Pointer, yStride int)
//
// The products of a tile of bfloat16 rows x (cfg's rows, xStride bytes apart, 64·blocks bytes
// each) by a panel paired by pairPanelAsm, into y's rows (yStride bytes apart, 64 float32 each):
// tmm0–tmm3 sum the four tiles of 16 columns, tmm4 holds a block of x, tmm5–tmm7 the panel's.
// The tiles are configured and released within this call, so no other goroutine's code ever
// runs on them: Go does not preempt assembly, and Linux keeps them across signals.
TEXT ·tilesAsm(SB), NOSPLIT, $0-56
	TILE_START
	MOVQ paired+24(FP), SI
tileBlock:
	TILE_BLOCK
	ADDQ $64, AX
	ADDQ $4096, SI
	DECQ CX
	JNZ tileBlock
	TILE_STORE
	RET

// func tilesPairingAsm(cfg *[64]byte, x unsafe.Pointer, xStride int, w unsafe.Pointer, blocks int, y unsafe.Pointer, yStride int, buf unsafe.Pointer)
//
// tilesAsm's products by a bfloat16 panel w [32·blocks, 64] as it is stored, each block of 32 k
// paired (PAIR_ROWS) into buf (4 KiB) just before its tiles are loaded from it, so that the
// pairs stay in the level-1 cache: for rows that fit one tile, where pairing the whole panel
// first would write it to the L2 and read it back once.
TEXT ·tilesPairingAsm(SB), NOSPLIT, $0-64
	TILE_START
	MOVQ w+24(FP), R8
	MOVQ buf+56(FP), SI
	VMOVDQU64 tilePairs<>+0(SB), Z30
	VMOVDQU64 tilePairs<>+64(SB), Z31
pairingBlock:
	MOVQ SI, R9
	MOVQ $16, DX
pairingRow:
	PAIR_ROWS(R8, R9)
	ADDQ $256, R8
	ADDQ $64, R9
	DECQ DX
	JNZ pairingRow
	TILE_BLOCK
	ADDQ $64, AX
	DECQ CX
	JNZ pairingBlock
	TILE_STORE
	VZEROUPPER
	RET
