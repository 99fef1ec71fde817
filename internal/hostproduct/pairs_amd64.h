// PAIR_PANEL_ROWS(src, A0, A1, B0, B1, LO0, HI0, LO1, HI1) loads two rows of a bfloat16 panel
// (src: row A's 64 values in A0 and A1, row B's in B0 and B1) and pairs them word by word within
// each 128-bit lane: LO0 and HI0 hold columns 0–31's pairs (VPUNPCKLWD and VPUNPCKHWD: columns
// 0–3, 8–11, 16–19, 24–27 and 4–7, 12–15, 20–23, 28–31), LO1 and HI1 columns 32–63's. Shared by
// the VDPBF16PS kernel (kernels_amd64.s) and the tiles' pairing (tiles_linux_amd64.s).
#define PAIR_PANEL_ROWS(src, A0, A1, B0, B1, LO0, HI0, LO1, HI1) \
	VMOVDQU32 (src), A0; \
	VMOVDQU32 64(src), A1; \
	VMOVDQU32 128(src), B0; \
	VMOVDQU32 192(src), B1; \
	VPUNPCKLWD B0, A0, LO0; \
	VPUNPCKHWD B0, A0, HI0; \
	VPUNPCKLWD B1, A1, LO1; \
	VPUNPCKHWD B1, A1, HI1
