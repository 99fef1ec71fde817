package octlm

// The engines' layouts, in one home: what each engine (GoMLX's pure-Go backend, ONNX Runtime,
// XLA) needs from the weights (load side) and from the graph (the operations an architecture
// calls instead of writing an engine's workaround itself). An architecture's graph code calls
// ops.linear, ops.embed, ops.head, ops.rsqrtMul and ops.dotLastAxes and never asks which engine
// runs; this file is the only one in the package that does, by the typed xla.Engine.

import (
	"cmp"
	"fmt"
	"math/bits"
	"path/filepath"
	"runtime"
	"slices"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/shapes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // the graph DSL reads best unqualified
	"github.com/gomlx/gomlx/core/tensors"

	"github.com/octlm/octlm/internal/hugepage"
	"github.com/octlm/octlm/xla"
)

// Layout is how weights and graphs are laid out for one engine's kernels. Every layout computes
// the same numbers; only speed and memory differ. Load uses LayoutFor(the backend's engine)
// unless LoadOptions.Layout says otherwise.
type Layout struct {
	// TableColumns stores the embedding table, and an untied output head, as columns [d, vocab]
	// instead of the checkpoint's rows [vocab, d]: the head is then a plain row × matrix
	// product, and the embedding lookup gathers columns.
	TableColumns bool
	// TableBlocks splits the table into this many blocks of ⌈vocab/TableBlocks⌉ tokens: with
	// TableColumns [TableBlocks, d, ⌈vocab/TableBlocks⌉] (the last block padded with zero
	// columns), as rows [TableBlocks, ⌈vocab/TableBlocks⌉, d] (padded with zero rows): the head
	// is then a batch of TableBlocks products, each with an output that stays in the cache.
	// 0 or 1 is one block, [d, vocab] or [vocab, d].
	TableBlocks int
	// EmbedSlices looks each token's embedding row up with a DynamicSlice of its own instead of
	// one Gather (rows only; see ops.embed).
	EmbedSlices bool
	// HostEmbed looks a step's token embeddings up on the host, in the resident table (a
	// buffer the backend shares with Go, read in place), and gives the step graph those rows
	// [B, S, d] instead of the token IDs: the graph has no lookup at all (see hostEmbeddings).
	// Load turns it off on a backend without shared buffers, where reading the table would copy
	// it to the host. The trace and the training forward still look up in the graph.
	HostEmbed bool
	// PadMACs pads the rows of a product with zeros until rows × in × out reaches it (at most
	// maxPadRows rows); 0 never pads. See ops.padRows.
	PadMACs int
	// PadRows pads the rows of a product that PadMACs pads, or need not pad, to at least this
	// many (at most maxPadRows): the pure-Go backend splits a product over the cores only in
	// whole micro-kernel row panels (goPadRows). 0 adds no rows beyond PadMACs'.
	PadRows int
	// UpcastHalfDot multiplies half-precision operands of ops.dotLastAxes in float32.
	UpcastHalfDot bool
	// SpreadTables repeats RoPE's cos and sin tables over the heads once a step (ops.spread),
	// so that each layer multiplies the queries and keys by tables of their own shape: the
	// pure-Go backend's binary operations (compute v0.1.14) take their vector path only for
	// operands of one shape or a broadcast over leading or trailing axes, and a table
	// broadcast over the heads, a middle axis, was multiplied index by index: 0.60–0.66 against
	// 0.07–0.09 ms a product on a 128-token prompt's queries (BenchmarkMiddleBroadcast).
	SpreadTables bool
	// SpreadHalfRows works around the pure-Go backend's large kernel (compute v0.1.14), which
	// returns wrong bfloat16 and float16 results in every row ≡ 3 (mod 4), float32 being right:
	// a half-precision product of up to maxSpreadRows rows (ops.linear, ops.head as columns)
	// leaves every fourth row to a zero row, a longer one (and ops.batchMatMul) is multiplied in
	// float32. See spreadRows.
	SpreadHalfRows bool
	// ColumnRows is how many table rows are decoded at a time while loading a table as columns
	// (the float32 scratch is ColumnRows × d); 0 means defaultColumnRows.
	ColumnRows int
	// FuseProjections keeps each group of Linear weights of one input that the architecture
	// marks (weightSpec.Fuse: q/k/v, gate/up) as one resident weight [in, Σ out], multiplied
	// once (ops.projections).
	FuseProjections bool
	// SigmoidByExp computes the logistic function as 1 / (1 + exp(−x)) instead of the engine's
	// Sigmoid (see ops.sigmoid).
	SigmoidByExp bool
	// LinearRows keeps Linear weights as nn.Linear stores them, [out, in] (a fused group
	// [Σ out, in]), instead of transposed: one row is multiplied as x·Wᵀ, several rows as
	// (W·xᵀ)ᵀ, so that the engine streams the weight and packs only the rows (see ops.linear).
	LinearRows bool
	// CacheLeft multiplies attention's cache blocks as the left-hand operand of their products,
	// as they lie, so that the engine packs only the small operand (the query rows, the
	// probabilities) and never copies a block: the scores against a key block [kvHeads, n, hd]
	// as (K·qᵀ)ᵀ, the context of a value block as (Vᵀ·pᵀ)ᵀ, with the values stored transposed,
	// [kvHeads, hd, n] (stateSpec.Values; the host writes each chunk's values as columns). See
	// ops.cacheScores and ops.cacheContext.
	CacheLeft bool
	// CacheLeftRows bounds CacheLeft to products of at most this many query rows per kv head
	// (decode steps); a prompt chunk's products take the blocks on the right, the values as
	// stored contracted on their last axis. 0: no bound.
	CacheLeftRows int
	// KeysTransposed stores attention's keys [kvHeads, hd, positions] (stateSpec.Keys; the
	// host writes each chunk's keys as columns), and the scores against a block are q·Kᵀ with the
	// block on the right as it lies: the pure-Go backend's small kernel multiplies that on its
	// 4 × 64 tiles at 33 GB/s, against 22 for K·qᵀ on 4 × 4 tiles (64 key blocks of [8, 512,
	// 128], a scratch benchmark, AMD Zen 5, 2 cores, 2026-12-05).
	KeysTransposed bool
	// CacheLeftPad pads the query rows of CacheLeft's products (K·qᵀ, Vᵀ·pᵀ) to a multiple of
	// it: the pure-Go backend's small kernel multiplies whole tiles of 4 rows, and ran a decode
	// step's two rows per kv head (Qwen3-0.6B: 16 heads over 8) on its slower remainder path:
	// 64 value blocks of [8, 128, 512] 12 GB/s for two rows, 35 padded to four (a scratch
	// benchmark, AMD Zen 5, 2 cores, 2026-12-05). 0 or 1: no padding.
	CacheLeftPad int
	// ContextByRows multiplies CacheLeft's value blocks by the probabilities as they lie,
	// [kvHeads, rows, n] contracted on their last axis, not by pᵀ: the pure-Go backend's small
	// kernel transposes a right-hand operand of fewer than 16 columns itself, so the graph's
	// own transpose of the probabilities, and its padding and slicing of them, were spent
	// twice (ops.cacheContext).
	ContextByRows bool
	// HalfCacheProducts multiplies a half-precision cache's blocks as they are stored (the
	// query rows and probabilities rounded to the cache's dtype, the products in float32;
	// ops.blockDot) where CacheLeft's products would widen every block to float32 on every step.
	HalfCacheProducts bool
	// CacheBlockMACs halves the KV cache's largest block (maxCacheBlock) until a decode step's
	// key product against a block, kvHeads × block × CacheLeftPad rows × headDim multiply-adds,
	// is below it: the pure-Go backend runs a product of 4 << 20 or more on its large kernel,
	// which packs the whole block on every call (Qwen3-0.6B: blocks of 1,024 positions are
	// exactly 4 << 20, so the go engine's are 512). 0: maxCacheBlock.
	CacheBlockMACs int
	// PieceMACs splits every Linear weight, and every table stored as rows (not TableColumns,
	// one block), into pieces of n of its output rows, each a resident tensor of its own with
	// PieceRows × n × in below PieceMACs (a Linear piece [in, n], or [n, in] with LinearRows; a
	// table's [n, d]), and multiplies a product of up to PieceRows rows piece by piece, its rows
	// padded to a multiple of pieceKernelRows (ops.linearPieces). It needs a backend with
	// shared buffers (Load turns it off elsewhere). 0: whole weights.
	PieceMACs int
	// PieceRows is the most rows a product by pieces is sized for (see PieceMACs).
	PieceRows int
	// HalfLinearRows keeps Linear weights as stored ([out, in], LinearRows) in a half-precision
	// model: the pure-Go backend's small kernel reads bfloat16 pieces of rows faster than pieces
	// of columns, float32 ones about as fast, and its large kernel packs columns faster (a
	// prompt's products), so float32 keeps columns.
	HalfLinearRows bool
	// PiecePanels stores each piece of n output rows (PieceMACs: a Linear weight's, a table's) as
	// n/PiecePanels panels of PiecePanels columns, [n/PiecePanels, in, PiecePanels]: panel q is
	// the columns [in, PiecePanels] of the piece's rows q·PiecePanels…, so that the pure-Go backend's small
	// kernel, whose tiles are 64 columns wide, reads each panel from start to end instead of
	// striding down the rows of a piece of columns, as llama.cpp repacks its weights once at load.
	// A decode product multiplies the panels as a batch, the rows broadcast over them
	// (panelRows.product). A piece whose height is not a multiple of it keeps the layout's form.
	// 0: none.
	PiecePanels int
	// PieceWorkers is how many pieces the engine multiplies at once (its graph executors):
	// pieceHeight keeps them evenly busy. 0 or 1: one.
	PieceWorkers int
	// HostRows: a product of up to this many rows by pieces of panels (PiecePanels) is written
	// as one product a piece, the rows [rows, in] unpadded by the panels [n/w, in, w] with no
	// batch axis, which the pure-Go backend wrapped by internal/hostproduct runs in Go. Load sets
	// it from the backend (hostproduct.Backend's MaxRows; 0 on any other backend).
	HostRows int
	// HostAttention: a step's attention over a sequence's cache blocks (a decode step's or a
	// prompt chunk's: ops.hostAttention) is one call of a graph function named for
	// hostproduct.AttentionFunction, which the pure-Go backend wrapped by internal/hostproduct
	// runs in Go, reading only the slots attended (step.hostAttend). It needs the keys stored
	// transposed and the values as rows (KeysTransposed, not CacheLeft). Load sets it from the
	// backend (hostproduct.Backend's Options.Attention), and then takes CacheLeft off.
	HostAttention bool
	// HostGated: the gated MLP's SiLU(gate) · up, in float32 or bfloat16, is one call of a graph
	// function named for hostproduct.GatedFunction (step.mlp), which the pure-Go backend wrapped
	// by internal/hostproduct runs in Go between the gate and up projections' products and the
	// down projection's. Load sets it on that backend.
	HostGated bool
	// HostNorm: Qwen3's RMSNorms (the residual connection before one with it) and RoPE with split
	// pairing, in float32 or bfloat16, are calls of graph functions named for
	// hostproduct.NormFunction and hostproduct.RopeFunction (step.rmsNorm, step.addRMSNorm,
	// step.rope), which the pure-Go backend wrapped by internal/hostproduct runs in Go: compute's
	// pieces between the products spent 55–240 µs each on them on a 2-core Xeon guest. Load sets
	// it on that backend.
	HostNorm bool
	// HugePages asks the operating system for transparent huge pages under the resident weights
	// where the backend shares their memory with Go (internal/hugepage), before they are filled:
	// a decode step streams every weight, and with 4 KiB pages every 4 KiB of the stream costs a
	// TLB miss. The KV cache keeps small pages: its blocks are zeroed (written) as they are
	// allocated, in a tensor shared with the backend that octlm cannot advise first.
	HugePages bool
}

// adviseHugePages marks a shared buffer's memory, not yet written, for huge pages where the
// layout asks for them.
func (l Layout) adviseHugePages(flat any) {
	if l.HugePages {
		hugepage.AdviseSlice(flat)
	}
}

// Defaults chosen by measurement (see docs/performance.md for the full tables).
const (
	// goPadMACs is the smallest product (rows × in × out multiply-adds) that GoMLX's pure-Go
	// backend (compute v0.1.14) sends to its packing "large" kernel, which splits one product
	// over the cores; below it a product runs on a "small" kernel that reads a single row's
	// weight at about 1 GB/s against the large kernel's 12 (BenchmarkMatVec, AMD Zen 5 with
	// AVX-512). The router's threshold is internal, so the layout pads up to it.
	goPadMACs = 4 << 20
	// goPadRows: the pure-Go backend's packing kernel splits one product over its workers by
	// column panels only when each worker's share of rows fills its micro-kernel (compute
	// v0.1.14's Choose2DSplit keeps a split only if rowChunk ≥ LHSL1KernelRows, 8 rows with
	// AVX-512, 4 with AVX2); a decode product of 1–4 rows ran on one core whatever the workers
	// free. Padded to 8 rows, one row times a [1024, 6144] weight (BenchmarkMatMulRows, AMD
	// Zen 5, 2 cores, num_executors=2): float32 16–17 → 21–31 GB/s on 1.0 → 1.3–1.9 cores,
	// bfloat16 11–12 → 20 GB/s; the micro-kernel computes 8 rows whatever the real count, so the
	// padding costs no arithmetic on AVX-512.
	goPadRows = 8
	// goCacheLeftRows: on the pure-Go backend the blocks on the left (CacheLeft) took the
	// values' products of a decode step from 135 to 42 ms (BenchmarkCacheProducts/go, 28 layers'
	// blocks of 5,120 slots; the keys' 67 against 71) and a decode step at depth 4,096 from
	// 300–313 to 230–246 ms, but a 32-token prompt there from 50–78 to 36–40 tokens/s: prompt
	// chunks (more query rows per kv head than this) take the blocks on the right.
	goCacheLeftRows = 16
	// defaultColumnRows: 4,096 rows are 16 MiB of float32 scratch at Qwen3-0.6B's width
	// instead of the whole table.
	defaultColumnRows = 4096
	// onnxTableBlocks: ONNX Runtime multiplies one row by Qwen3-0.6B's tied head (1024 →
	// 151,936, float32) at 10–12 GB/s as rows or one block of columns, and at 19–21 GB/s as 4
	// blocks of columns, a batched product whose every output block stays in the cache
	// (BenchmarkHeadMatVec, Intel Xeon, 2 threads, ONNX Runtime 1.30.0).
	onnxTableBlocks = 4
	// goSmallMACs is compute v0.1.14's SmallMatMulSizeThreshold: a product of batch × rows × in
	// × out below it runs on the pure-Go backend's "small" kernel, straight from the weight,
	// with no packing; at or above it on the packing "large" one, which packs the weight on
	// every call. The threshold is internal, so the go layout splits its Linear weights into
	// pieces under it (PieceMACs) for decode steps.
	goSmallMACs = 4 << 20
	// goPieceRows: the pieces are sized for products of up to 8 rows (batched decode). One row
	// times a weight of Qwen3-0.6B's head size (1024 → 151,936, read from memory) in pieces,
	// padded to 4 rows, ran at 41 (rows) and 37 (columns) GB/s in float32 and 29 and 18 in
	// bfloat16, against 26 and 17 for the whole weight's 8-row packed product; 8 rows at 29
	// and 20 in pieces of rows (BenchmarkMatMulPieces, AMD Zen 5, 2 cores, 2026-12-05). Pieces
	// sized for 4 rows (twice as high) decoded Qwen3-0.6B no faster.
	goPieceRows = 8
	// goPiecePanels: the small kernel's non-transposed tiles are 64 columns wide (4 × 64 in
	// float32 and bfloat16). One row times a weight of Qwen3-0.6B's head size in pieces
	// (BenchmarkMatMulPanels, AMD Zen 5, 2 cores, huge pages, 2026-12-05, two runs): float32
	// pieces of columns 37–47 GB/s, of rows 37–47, of 64-column panels 40–52; bfloat16 22, 28–29
	// and 32–37. Eight rows: float32 32–37, 31–36, 37–43; bfloat16 18, 22–23, 27–28. Qwen3-0.6B
	// (octlm bench, alternated twice): decode 13.5–13.6 → 15.2–15.5 tokens/s in float32 and
	// 18.1–18.5 → 21.0–21.9 in bfloat16; a 128-token prompt 312–320 → 284–303 tokens/s in
	// float32 (a prompt's products multiply the panels as a batch, the rows copied for each), and
	// 168–171 → 186–203 in bfloat16.
	goPiecePanels = 64
	// pieceKernelRows: the small kernel multiplies rows four at a time (its AVX-512 assembly
	// takes 4-row groups; the rows left over run on a slower Go loop, 3–10 GB/s), so products
	// by pieces are padded to a multiple of four rows.
	pieceKernelRows = 4
	// pieceChunks: a product of up to pieceChunks × PieceRows rows by pieces stays on the small
	// kernel, PieceRows rows at a time (ops.smallPieces); a longer one goes to the large kernel.
	pieceChunks = 2
	// maxPadRows bounds the padding: products that would need more rows are small enough (tiny
	// test models) to run as they are.
	maxPadRows = 16
)

// LayoutFor is the layout an engine runs fastest with.
//
// Pure Go (compute v0.1.14, AMD Zen 5 with AVX-512): every Linear weight and the table in
// pieces under the small kernel's threshold (PieceMACs, BenchmarkMatMulPieces), so that a decode
// product runs on the small kernel straight from the weights, the pieces spread over the cores
// by the graph's executors: Linear pieces as columns [in, n] in float32 (a prompt's products
// pack them with the large kernel's fast packer), as rows [n, in] in half precision
// (HalfLinearRows), the table's as rows, looked up on the host (HostEmbed). Qwen3-0.6B on 2 cores
// (docs/performance.md, 2026-12-05): decode 9.0–9.3 → 12.3–12.6 tokens/s in float32 and
// 10.9–11.0 → 16.1–16.2 in bfloat16; a 128-token prompt 308–316 → 269–281 tokens/s in float32
// (the pieces' products each pack and allocate for themselves). Every piece whose height is a
// multiple of 64 is held as panels of 64 columns (PiecePanels, BenchmarkMatMulPanels): decode
// 1.08–1.13× in float32 and 1.12–1.24× in bfloat16, 8 sequences 1.15–1.21×, a float32 prompt
// 0.86–0.94× (docs/performance.md, sittings K and L). Products that stay whole
// (rows past PieceRows go through rowProduct; small weights) pad their rows to 8 (PadRows,
// BenchmarkMatMulRows); the cache's blocks on the left for decode steps (CacheLeft up to
// CacheLeftRows, BenchmarkCacheProducts).
//
// ONNX Runtime: the table looked up by slices, measured on a full-size Qwen3-0.6B: decode 5.6 →
// 7.7 tokens/s and peak RSS 2.36 → 1.21× the weights against one gather per step. The table in
// 4 blocks (onnxTableBlocks): as columns, decode 7.05–7.14 → 7.27–7.32 tokens/s against one
// block of rows (Intel Xeon, 2 threads); now as rows in 4 blocks, as fast for one row
// (BenchmarkHeadMatVec) and streamed for several. Linear weights as stored (LinearRows): B = 1
// decode unchanged, prefill 1.49–1.52× → 1.75–1.77× llama.cpp's, 8 sequences decoded together
// 2.1× → 3.3–3.4× one (docs/performance.md, 2026-12-02).
//
// On ONNX Runtime the step graph takes the embeddings looked up on the host (HostEmbed): one
// DynamicSlice per token made a graph of B sequences of S tokens B·S lookups, and ONNX Runtime's
// session build grows faster than linearly with them: the tiny synth shape's loglikelihood
// benchmark compiled its 4 graphs of 4 × 64–192 tokens in 57 s at batch 4 (0.73 s with
// HostEmbed) and had not compiled batch 16's in 300 s (0.43 s), 2026-12-02.
//
// XLA (and any other engine): rows, one gather; XLA parallelises a product by itself.
//
// ONNX Runtime multiplies the KV cache's blocks on the left as they lie (CacheLeft, values stored
// transposed): a decode step at depth 4,096 took 0.83–0.97× the time (see ops.cacheScores).
//
// ONNX Runtime's logistic function is built from its Exp (SigmoidByExp): its own Sigmoid is
// off by up to 2e-3 relative below −6 (see ops.sigmoid).
//
// ONNX Runtime's products are not padded: MLAS runs a one-row product (every decode product)
// on its matrix-vector kernel straight from the weight, split over the threads, while a product
// of two rows or more packs the weight panel by panel on every call (weights are graph inputs,
// never prepacked), so padding made each decode step repack all 2.4 GB of Qwen3-0.6B's float32
// weights. Unpadded, decode went from 2.1–3.2 to 5.9–7.1 tokens/s (Intel Xeon, 2 cores,
// ONNX Runtime 1.30.0; docs/performance.md). q/k/v and gate/up
// are fused (FuseProjections, 196 → 140 products per token): decode 7.09–7.17 → 7.54–7.67
// tokens/s with the blocked table, alternated; the pure-Go backend's padded products were not
// measurably faster fused, so it keeps them apart.
//
// Other engines pad their products' rows as the pure-Go backend needs (PadMACs), unmeasured on
// XLA. Every engine upcasts half-precision q·kᵀ (see ops.dotLastAxes).
func LayoutFor(engine xla.Engine) Layout {
	l := Layout{PadMACs: goPadMACs, UpcastHalfDot: true, ColumnRows: defaultColumnRows}
	switch engine {
	case xla.EngineGo:
		l.HugePages = true
		l.HostEmbed = true
		l.SpreadHalfRows = true
		l.SpreadTables = true
		l.PadRows = goPadRows
		l.CacheLeft = true
		l.CacheLeftRows = goCacheLeftRows
		l.CacheLeftPad = pieceKernelRows
		l.ContextByRows = true
		l.HalfCacheProducts = true
		l.KeysTransposed = true
		l.CacheBlockMACs = goSmallMACs
		l.PieceMACs = goSmallMACs
		l.PieceRows = goPieceRows
		l.HalfLinearRows = true
		l.PiecePanels = goPiecePanels
		l.PieceWorkers = min(runtime.GOMAXPROCS(0), 8) // xla.Go's executors (xla/go_executors.go)
	case xla.EngineONNX:
		l.HugePages = true
		l.TableBlocks = onnxTableBlocks
		l.EmbedSlices = true
		l.HostEmbed = true
		l.FuseProjections = true
		l.PadMACs = 0
		l.SigmoidByExp = true
		l.LinearRows = true
		l.CacheLeft = true
	}
	return l
}

// stateSpecs are an architecture's state specs as this layout stores them: with CacheLeft
// attention's values (stateSpec.Values, declared [kvHeads, positions, hd]) are stored
// [kvHeads, hd, positions], the position axis last, and with KeysTransposed its keys
// (stateSpec.Keys) likewise.
func (l Layout) stateSpecs(specs []stateSpec) []stateSpec {
	if !l.CacheLeft && !l.KeysTransposed {
		return specs
	}
	out := slices.Clone(specs)
	for i, s := range out {
		if !(s.Values && l.CacheLeft || s.Keys && l.KeysTransposed) || s.PosAxis != len(s.Dims)-2 {
			continue
		}
		dims := slices.Clone(s.Dims)
		dims[s.PosAxis], dims[s.PosAxis+1] = dims[s.PosAxis+1], dims[s.PosAxis]
		out[i].Dims, out[i].PosAxis = dims, s.PosAxis+1
	}
	return out
}

// pieceSpecs is specs, in a model of dtype, with every Linear weight, and every table stored
// as rows, split into pieces of rows (PieceMACs), all as high as pieceHeight says but the last.
// A weight that fits whole stays whole.
func (l Layout) pieceSpecs(specs []weightSpec, dtype DType) []weightSpec {
	var out []weightSpec
	for _, s := range specs {
		if s.Kind != linearWeight && (s.Kind != tableWeight || l.TableColumns || l.tableBlocks() > 1) {
			out = append(out, s)
			continue
		}
		rows, in := s.Shape[0], s.Shape[1]
		step := 16
		if l.PiecePanels > 0 {
			step = 16 * l.PiecePanels / gcd(16, l.PiecePanels) // whole panels
		}
		most := (l.PieceMACs - 1) / (max(l.PieceRows, 1) * in) / step * step
		if most < step || rows <= most {
			out = append(out, s)
			continue
		}
		height := pieceHeight(rows, most, step, in*s.residentDType(dtype).Size(), max(l.PieceWorkers, 1))
		for k, first := 0, 0; first < rows; k, first = k+1, first+height {
			piece := s
			piece.Name, piece.Of, piece.First = fmt.Sprintf("%s#%d", s.Name, k), s.Name, first
			piece.Shape = []int{min(height, rows-first), in}
			out = append(out, piece)
		}
	}
	return out
}

// pieceHeight is the height of the pieces of a weight of rows rows of rowBytes each: a multiple
// of step rows (16, the kernels' column width, or whole panels) up to most, chosen first to waste little of the buffers
// the pure-Go backend allocates (goBufferBytes: within 2% of the least waste), then to keep
// workers executors evenly busy (within 5% of the fewest rounds of workers pieces, counted in
// rows), then the fewest pieces. Qwen3-0.6B's q_proj in float32 is 8 pieces of 256 rows (1 MiB
// buffers, no waste) where 6 balanced ones of 352 rows would take 1.5 MiB buffers for 1.38 MiB:
// on a Qwen3.5-0.8B such balanced heights had the load peak at 1.19× the weights, against 1.04
// for whole weights.
func pieceHeight(rows, most, step, rowBytes, workers int) int {
	type choice struct {
		height, pieces, rounds int
		waste                  float64
	}
	var choices []choice
	for h := step; h <= most; h += step {
		full, last := rows/h, rows%h
		allocated, pieces := full*goBufferBytes(h*rowBytes), full
		if last > 0 {
			allocated += goBufferBytes(last * rowBytes)
			pieces++
		}
		choices = append(choices, choice{height: h, pieces: pieces, rounds: ceilDiv(pieces, workers) * h,
			waste: float64(allocated)/float64(rows*rowBytes) - 1})
	}
	least := slices.MinFunc(choices, func(a, b choice) int { return cmp.Compare(a.waste, b.waste) }).waste
	choices = slices.DeleteFunc(choices, func(c choice) bool { return c.waste > least+0.02 })
	fewest := slices.MinFunc(choices, func(a, b choice) int { return cmp.Compare(a.rounds, b.rounds) }).rounds
	choices = slices.DeleteFunc(choices, func(c choice) bool { return float64(c.rounds) > 1.05*float64(fewest) })
	return slices.MinFunc(choices, func(a, b choice) int {
		return cmp.Or(cmp.Compare(a.pieces, b.pieces), cmp.Compare(a.rounds, b.rounds))
	}).height
}

// gcd is the greatest common divisor of a and b (positive).
func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// goBufferBytes is the size of the buffer the pure-Go backend (compute v0.1.14) allocates for
// n bytes: it rounds every buffer up to a power of two or one and a half times one, and the Go
// runtime may clear (so make resident) the whole of a buffer it reuses memory for.
func goBufferBytes(n int) int {
	if n <= 2 {
		return n
	}
	p := 1 << (bits.Len(uint(n)) - 1)
	switch {
	case n == p:
		return n
	case n <= p+p/2:
		return p + p/2
	}
	return 2 * p
}

// cacheBlock is the largest block of a cache holding specs (as this layout stores them): see
// CacheBlockMACs.
func (l Layout) cacheBlock(specs []stateSpec) int {
	block := maxCacheBlock
	if l.CacheBlockMACs <= 0 {
		return block
	}
	for _, s := range specs {
		if s.PosAxis < 0 {
			continue
		}
		macs := max(l.CacheLeftPad, 1) // per position: the other dimensions times the query rows
		for i, d := range s.Dims {
			if i != s.PosAxis {
				macs *= d
			}
		}
		for block > minCacheCapacity && block*macs >= l.CacheBlockMACs {
			block /= 2
		}
	}
	return block
}

// tableShape is the resident shape of a [vocab, d] table.
func (l Layout) tableShape(vocab, d int) []int {
	switch {
	case !l.TableColumns && l.tableBlocks() > 1:
		return []int{l.tableBlocks(), ceilDiv(vocab, l.tableBlocks()), d}
	case !l.TableColumns:
		return []int{vocab, d}
	case l.tableBlocks() > 1:
		return []int{l.tableBlocks(), d, ceilDiv(vocab, l.tableBlocks())}
	}
	return []int{d, vocab}
}

// tableBlocks is TableBlocks, at least 1.
func (l Layout) tableBlocks() int { return max(l.TableBlocks, 1) }

// tableColumn is where token t's column lies in a table of vocab tokens stored as columns:
// its block and its column in that block (block 0, column t with one block).
func (l Layout) tableColumn(t, vocab int) (block, column int) {
	perBlock := ceilDiv(vocab, l.tableBlocks())
	return t / perBlock, t % perBlock
}

// columnRows is ColumnRows or its default.
func (l Layout) columnRows() int {
	if l.ColumnRows > 0 {
		return l.ColumnRows
	}
	return defaultColumnRows
}

// ops are the layout's operations inside one graph: what an architecture's graph code calls for
// the products, lookups and functions whose best form depends on the engine.
type ops struct {
	layout Layout
	vocab  int // the tables' real token count (a table in blocks is padded to a multiple of them)
	// asStored says the weights are nodes in the checkpoint's layout (Linear [out, in], tables
	// as rows, nothing fused) and the graph must be differentiable by graph.Gradient: the
	// training forward (no Rsqrt, whose VJP GoMLX lacks; rows gathered by one Gather).
	asStored bool
	// ownScalars says the graph code is a host function's body (step.hostFn): its scalars are
	// constants of their own (ops.scalar).
	ownScalars bool
}

// spread is t repeated n times along its axis of size 1 where the layout spreads broadcast
// tables (Layout.SpreadTables): a buffer of its own, read as it lies by the products with it;
// t itself elsewhere (the products broadcast it).
func (o ops) spread(t *Node, axis, n int) *Node {
	if !o.layout.SpreadTables || n == 1 {
		return t
	}
	copies := make([]*Node, n)
	for i := range copies {
		copies[i] = t
	}
	return Concatenate(copies, axis)
}

// linear is nn.Linear without bias: x [..., in] · w, with w stored [in, out] (nn.Linear's
// weight transposed at load), or as the checkpoint stores it, [out, in] (asStored, or the
// layout's LinearRows). Returns [..., out] in x's dtype.
//
// With LinearRows a product of several rows is computed as W·xᵀ and transposed back: ONNX
// Runtime's MLAS packs the right-hand operand of every product with more than one row, on every
// call, and reads the left one as it lies, so with the weight on the left it packs only the
// rows. BenchmarkLinearRows is the measurement. A layout with pieces (PieceMACs) keeps the weight
// on the right, where SpreadHalfRows' care for the pure-Go engine's large kernel applies.
func (o ops) linear(x, w *Node) *Node {
	dims := x.Shape().Dimensions
	in, out := w.Shape().Dimensions[0], w.Shape().Dimensions[1]
	wIn := 0
	stored := o.asStored || o.layout.LinearRows
	if stored {
		in, out, wIn = out, in, 1 // as stored: [out, in]
	}
	rows := x.Shape().Size() / in
	y := o.rowProduct(Reshape(x, rows, in), in*out, func(x *Node, weight func(*Node) *Node) *Node {
		if o.layout.LinearRows && o.layout.PieceMACs == 0 && x.Shape().Dimensions[0] > 1 {
			return Transpose(DotGeneral(weight(w), []int{1}, nil, x, []int{1}, nil), 0, 1)
		}
		return DotGeneral(x, []int{1}, nil, weight(w), []int{wIn}, nil)
	})
	return Reshape(y, append(slices.Clone(dims[:len(dims)-1]), out)...)
}

// linearPieces is linear for a weight resident in pieces (Layout.PieceMACs): x [..., in] times
// each piece, the outputs side by side: [..., Σ n]. Pieces of rows [n, in] (a table; Linear
// weights with LinearRows) are multiplied as x·pieceᵀ, pieces of columns [in, n] (columns true)
// as x·piece.
//
// A product of up to pieceChunks × PieceRows rows is padded to a multiple of pieceKernelRows,
// so that every piece's product runs on the pure-Go backend's small kernel (smallPieces),
// straight from the weight, and the graph's executors multiply the pieces on all cores at once;
// the small kernel's half-precision products are right, so nothing is spread. A longer product
// (a prompt) goes through rowProduct: each piece packed by the large kernel, as a whole weight
// would be, which packs columns with its AVX-512 strip packer and rows with its generic one
// (hence columns for Linear weights: a 128-token prompt on Qwen3-0.6B took 1.27× as long with
// pieces of rows).
func (o ops) linearPieces(x *Node, pieces []*Node, columns bool) *Node {
	dims := x.Shape().Dimensions
	inAxis := pieceInAxis(columns)
	in, out := 0, 0
	for _, p := range pieces {
		pIn, pOut := pieceSize(p, inAxis)
		in, out = pIn, out+pOut
	}
	rows := x.Shape().Size() / in
	product := func(x *Node, weight func(*Node) *Node) *Node {
		panels := panelRows{x: x}
		ys := make([]*Node, len(pieces))
		for i, p := range pieces {
			ys[i] = panels.product(weight(p), inAxis)
		}
		return sideBySide(ys)
	}
	x = Reshape(x, rows, in)
	var y *Node
	if o.hostPath(rows, x.DType(), pieces) {
		axes := make([]int, len(pieces))
		for i := range axes {
			axes[i] = inAxis
		}
		y = concatenate(hostPieces(x, pieces, axes), 1)
	} else if rows <= pieceChunks*o.layout.PieceRows {
		y = cutTo(o.smallPieces(padToMultiple(x, 0, pieceKernelRows), pieces, inAxis), 0, rows)
	} else {
		y = o.rowProduct(x, in*out, product)
	}
	return Reshape(y, append(slices.Clone(dims[:len(dims)-1]), out)...)
}

// hostPieces is x [rows, in] times each piece, each output [rows, n]: a piece of panels
// [n/w, in, w] multiplied as it lies by the rows as they are (Layout.HostRows), [rows, n/w, w], a
// product the wrapped pure-Go backend runs in Go (internal/hostproduct); any other piece
// contracted on its axis inAxes[i]. The weight must be the piece itself, a parameter of the
// graph: a piece of another dtype than x, converted, and a piece not held as panels are
// multiplied by the backend's own kernels.
func hostPieces(x *Node, pieces []*Node, inAxes []int) []*Node {
	rows := x.Shape().Dimensions[0]
	ys := make([]*Node, len(pieces))
	for i, p := range pieces {
		axis := inAxes[i]
		if p.Rank() == 3 {
			axis = 1
		}
		ys[i] = DotGeneral(x, []int{1}, nil, ConvertDType(p, x.DType()), []int{axis}, nil)
	}
	// Only now the outputs' reshapes: an operation between two products would end the graph's
	// piece between them, and each product would run alone.
	for i, y := range ys {
		if d := y.Shape().Dimensions; len(d) == 3 {
			ys[i] = Reshape(y, rows, d[1]*d[2])
		}
	}
	return ys
}

// pieceInAxis is the input axis of a resident piece of columns [in, n] (0) or of rows [n, in] (1).
func pieceInAxis(columns bool) int {
	if columns {
		return 0
	}
	return 1
}

// pieceSize is a resident piece's input and output sizes: [n, in] or [in, n] (inAxis 0) as it
// lies, [n/w, in, w] as panels (Layout.PiecePanels).
func pieceSize(p *Node, inAxis int) (in, out int) {
	d := p.Shape().Dimensions
	if len(d) == 3 {
		return d[1], d[0] * d[2]
	}
	return d[inAxis], d[1-inAxis]
}

// panelRows is the rows x [rows, in] of a weight's product by its pieces, with their copies
// for each number of panels, made once for all the pieces of that many panels.
type panelRows struct {
	x      *Node
	copies map[int]*Node
}

// product is x times piece p contracted on its input axis: [rows, n], or for a piece of panels
// [n/w, in, w] a batch of products, one per panel, x copied for each: [n/w, rows, w]
// (sideBySide lays them out).
func (r *panelRows) product(p *Node, inAxis int) *Node {
	if p.Rank() != 3 {
		return DotGeneral(r.x, []int{1}, nil, p, []int{inAxis}, nil)
	}
	count := p.Shape().Dimensions[0]
	xs, ok := r.copies[count]
	if !ok {
		// Copies side by side: the pure-Go backend broadcasts a new leading axis element by
		// element, a concatenation with one copy a part.
		copies := make([]*Node, count)
		for i := range copies {
			copies[i] = r.x
		}
		rows, in := r.x.Shape().Dimensions[0], r.x.Shape().Dimensions[1]
		xs = Reshape(concatenate(copies, 0), count, rows, in)
		if r.copies == nil {
			r.copies = map[int]*Node{}
		}
		r.copies[count] = xs
	}
	return DotGeneral(xs, []int{2}, []int{0}, p, []int{1}, []int{0})
}

// sideBySide lays the products of one input by a weight's pieces side by side, [rows, Σ n]: each
// [rows, n] as it is, each run of panels' outputs [n/w, rows, w] (panelRows.product)
// concatenated and transposed once.
func sideBySide(ys []*Node) *Node {
	var parts, run []*Node
	flush := func() {
		if len(run) == 0 {
			return
		}
		y := concatenate(run, 0) // [Σ n/w, rows, w]
		d := y.Shape().Dimensions
		parts = append(parts, Reshape(TransposeAllAxes(y, 1, 0, 2), d[1], d[0]*d[2]))
		run = nil
	}
	for _, y := range ys {
		if y.Rank() != 3 {
			flush()
			parts = append(parts, y)
			continue
		}
		if len(run) > 0 && y.Shape().Dimensions[2] != run[0].Shape().Dimensions[2] {
			flush() // panels of another width
		}
		run = append(run, y)
	}
	flush()
	return concatenate(parts, 1)
}

// smallPieces is x [rows, in] (rows a multiple of pieceKernelRows) times each piece, contracted
// on the piece's axis inAxis, the outputs side by side, every product on the pure-Go backend's
// small kernel: up to PieceRows rows at a time (the pieces' sizing), each chunk of rows reading
// every piece again, a piece's chunks one after another so that the later ones find it in the
// cache. Sixteen sequences decoding at once on Qwen3-0.6B (float32, AMD Zen 5, 2 cores,
// 2026-12-05): 317–349 ms a step through the large kernel, which packed every piece on every
// call; 239–277 in two chunks of 8 rows, 241–246 with each piece's chunks together.
func (o ops) smallPieces(x *Node, pieces []*Node, inAxis int) *Node {
	rows := x.Shape().Dimensions[0]
	var chunks []panelRows // each chunk of rows, with its copies for the pieces of panels
	for first := 0; first < rows; first += o.layout.PieceRows {
		chunk, last := x, min(first+o.layout.PieceRows, rows)
		if first > 0 || last < rows {
			chunk = SliceAxis(x, 0, AxisRange(first, last))
		}
		chunks = append(chunks, panelRows{x: chunk})
	}
	ys := make([][]*Node, len(chunks))
	for _, p := range pieces {
		w := ConvertDType(p, x.DType())
		for c := range chunks {
			ys[c] = append(ys[c], chunks[c].product(w, inAxis))
		}
	}
	parts := make([]*Node, len(chunks))
	for c := range chunks {
		parts[c] = sideBySide(ys[c])
	}
	return concatenate(parts, 0)
}

// rowProduct is product(x, weight) for x [rows, in] and a product whose weight has weightSize
// elements, with x's rows padded (padRows), and spread (spreadRows) or widened to float32 where
// the layout needs it (SpreadHalfRows), the extra rows' results cut off: [rows, out] in x's
// dtype. product multiplies x by weight(its weight), the weight in the dtype of the x it is
// given.
func (o ops) rowProduct(x *Node, weightSize int, product func(x *Node, weight func(*Node) *Node) *Node) *Node {
	rows, dtype := x.Shape().Dimensions[0], x.DType()
	inDType := func(w *Node) *Node { return ConvertDType(w, dtype) }
	var y *Node
	switch {
	case !o.spreads(x, 0):
		y = product(o.padRows(x, weightSize), inDType) // [rows(+pad), out]
	case rows <= maxSpreadRows:
		y = gatherSpreadRows(product(o.padRows(spreadRows(x, 0), weightSize), inDType), 0, rows)
	default:
		x32 := ConvertDType(x, dtypes.Float32)
		y = ConvertDType(product(x32, func(w *Node) *Node { return ConvertDType(after(w, x), dtypes.Float32) }), dtype)
	}
	return cutTo(y, 0, rows)
}

// after is w, computed only once x is: w − 0, with the 0 taken from x's first element, so that
// what is computed from w (a widened copy) waits for x.
//
// A graph executor runs every node whose inputs are ready, and a weight's ConvertDType needs
// nothing but the weight: the pure-Go backend's executors widened every bfloat16 weight of a
// prompt chunk's products (rowProduct's float32 path) to float32 at the start of the step, all
// at once. A 128-token prompt on a bfloat16 Qwen3-0.6B peaked at 3.16 GB for 1.19 GB of
// weights, against 1.30 GB for a 16-token one, whose products are not widened (octlm bench, AMD
// Zen 5, 2026-12-04). Subtracting a zero is exact for every value, −0 and NaN included; the
// zero is false converted, from x's first element compared with itself both ways.
func after(w, x *Node) *Node {
	first := Reshape(Slice(x, AxisRange(0, 1), AxisRange(0, 1)))
	never := LogicalAnd(Equal(first, first), NotEqual(first, first))
	return Sub(w, ConvertDType(never, w.DType()))
}

// batchMatMul is lhs [batch..., m, k] · rhs [batch..., k, n] with the first numBatch axes of both
// as batch axes (attention's probabilities · values): [batch..., m, n] in lhs's dtype, multiplied
// in float32 where the layout spreads half-precision rows (SpreadHalfRows; both operands are
// activations, so widening them costs a fraction of the product).
func (o ops) batchMatMul(lhs, rhs *Node, numBatch int) *Node {
	batch := make([]int, numBatch)
	for i := range batch {
		batch[i] = i
	}
	if !o.spreads(lhs, numBatch) {
		return DotGeneral(lhs, []int{numBatch + 1}, batch, rhs, []int{numBatch}, batch)
	}
	y := DotGeneral(ConvertDType(lhs, dtypes.Float32), []int{numBatch + 1}, batch, ConvertDType(rhs, dtypes.Float32), []int{numBatch}, batch)
	return ConvertDType(y, lhs.DType())
}

// spreads says whether x's rows (axis) need SpreadHalfRows' care before a product: half
// precision, the layout asks for it, and a row ≡ 3 (mod 4) exists.
func (o ops) spreads(x *Node, axis int) bool {
	return o.layout.SpreadHalfRows && x.DType() != dtypes.Float32 && x.DType() != dtypes.Float64 &&
		x.Shape().Dimensions[axis] > halfRowsGroup
}

// maxSpreadRows: a half-precision product of more rows than this (a prompt) is multiplied in
// float32 instead of spread. On a 4-layer, hidden-512 synth of Qwen3-0.6B's shape (bf16, vocab
// 151,936; 128-token prompt, 2 loaded cores, alternated runs): spreading every product made the
// prefill 179–319 tokens/s against 356–418 unworked-around, float32 373–406; one-row decode is
// unchanged (13–17 tokens/s, noise); 4 sequences decoded together, spread to 8 rows, took
// 6.2–7.3 s for 32 steps against 5.7–5.8, where widening would read every weight as float32 on
// every step.
const maxSpreadRows = 16

// halfRowsGroup is how many rows in each group of four the pure-Go backend's half-precision
// large kernel gets right (SpreadHalfRows).
const halfRowsGroup = 3

// spreadRows puts a zero row after every halfRowsGroup rows along x's axis: 4·⌈rows/3⌉ rows, real
// row r at 4·(r/3) + r%3, so that no real row lands on a row ≡ 3 (mod 4).
//
// GoMLX's pure-Go backend (github.com/gomlx/compute v0.1.14, AMD Zen 5 with AVX-512) returns
// wrong numbers for rows 3, 7, 11, … of a bfloat16 or float16 DotGeneral that its packing "large"
// kernel runs (batch × rows × in × out ≥ 4 << 20, which padRows aims at, batched products too);
// float32 is right, and so is the small kernel. It happens with both its assembly 8×32
// microkernel and its Go SIMD 4×32 one (GOMLX_GO_AVX512_ASM=false), so the fault lies in the
// half-precision large path both share (internal/gobackend/dot/matmul/avx512/gen_large_bf16.go
// and gen_large_f16.go, from large.go: avx512LargeMatrixSlice* and its LHS packing; the exact
// line is not located). TestHalfDotGeneral logs whether it is still there. Spreading costs
// nothing in a one-row decode step (its padding rows take the bad slots; it is not spread) and
// a few rows in batched decoding; prompts are multiplied in float32 instead (maxSpreadRows).
func spreadRows(x *Node, axis int) *Node {
	dims := x.Shape().Dimensions
	rows := dims[axis]
	groups := ceilDiv(rows, halfRowsGroup)
	with := func(at int, sizes ...int) []int {
		return slices.Concat(dims[:at], sizes, dims[at+1:])
	}
	if extra := groups*halfRowsGroup - rows; extra > 0 {
		x = Concatenate([]*Node{x, Zeros(x.Graph(), shapes.Make(x.DType(), with(axis, extra)...))}, axis)
	}
	x = Reshape(x, with(axis, groups, halfRowsGroup)...)
	x = Concatenate([]*Node{x, Zeros(x.Graph(), shapes.Make(x.DType(), with(axis, groups, 1)...))}, axis+1)
	return Reshape(x, with(axis, groups*(halfRowsGroup+1))...)
}

// gatherSpreadRows undoes spreadRows on a product's result y, whose axis holds
// 4·⌈rows/3⌉ rows (and perhaps padding after them): the rows real ones.
func gatherSpreadRows(y *Node, axis, rows int) *Node {
	groups := ceilDiv(rows, halfRowsGroup)
	y = SliceAxis(y, axis, AxisRange(0, groups*(halfRowsGroup+1)))
	dims := y.Shape().Dimensions
	y = Reshape(y, slices.Concat(dims[:axis], []int{groups, halfRowsGroup + 1}, dims[axis+1:])...)
	y = SliceAxis(y, axis+1, AxisRange(0, halfRowsGroup))
	y = Reshape(y, slices.Concat(dims[:axis], []int{groups * halfRowsGroup}, dims[axis+1:])...)
	return SliceAxis(y, axis, AxisRange(0, rows))
}

// projections is linear(x, w.get(name)) for each of names, weights of the same input: one
// product and a split where the layout fused them into one resident weight, else one product
// each. A LoRA adapter on any of them (w.adapter) is added per part, unmerged.
func (o ops) projections(x *Node, w weightSet, names ...string) []*Node {
	out := make([]*Node, len(names))
	fused, widths, ok := w.fused(names)
	if !ok && o.hostPathAll(x, w, names) {
		out = o.hostProjections(x, w, names)
	} else if !ok {
		for i, name := range names {
			if pieces, columns, ok := o.piecesOf(w, name); ok {
				out[i] = o.linearPieces(x, pieces, columns)
				continue
			}
			out[i] = o.linear(x, w.get(name))
		}
	} else {
		out = splitLast(o.linear(x, fused), widths)
	}
	for i, name := range names {
		out[i] = w.adapter.add(out[i], x, w.prefix+name)
	}
	return out
}

// hostAnyRows is the most half-precision rows multiplied by pieces through hostPieces whatever
// the pieces: beyond it only pieces held as panels of the rows' dtype are (hostPath), the
// products the wrapped backend runs in Go. The others take the paths made for compute's
// kernels, which multiply half-precision prompts in float32: its large kernel's half-precision
// products are wrong in rows ≡ 3 mod 4 (spreadRows). Float32 rows take hostPieces always.
const hostAnyRows = 2

// hostPath says whether rows of dtype by pieces go through hostPieces: at most Layout.HostRows
// rows, and half-precision ones beyond hostAnyRows only by pieces held as panels of dtype.
func (o ops) hostPath(rows int, dtype dtypes.DType, pieces []*Node) bool {
	if rows > o.layout.HostRows {
		return false
	}
	if rows <= hostAnyRows || dtype == dtypes.Float32 {
		return true
	}
	for _, p := range pieces {
		if p.Rank() != 3 || p.DType() != dtype {
			return false
		}
	}
	return true
}

// hostPathAll is hostPath for x's rows by the pieces of every weight named, false where the
// layout has no pieces.
func (o ops) hostPathAll(x *Node, w weightSet, names []string) bool {
	d := x.Shape().Dimensions
	rows := x.Shape().Size() / d[len(d)-1]
	for _, name := range names {
		pieces, _, ok := o.piecesOf(w, name)
		if !ok || !o.hostPath(rows, x.DType(), pieces) {
			return false
		}
	}
	return true
}

// hostProjections is projections' products by pieces for rows that run in Go (hostPathAll): the
// pieces of every weight named multiplied together (hostPieces), so that they run as one
// batch of products between two parts of the graph, each weight's outputs then put side by side.
func (o ops) hostProjections(x *Node, w weightSet, names []string) []*Node {
	dims := x.Shape().Dimensions
	in := dims[len(dims)-1]
	var pieces []*Node
	var axes, counts []int
	for _, name := range names {
		nodes, columns, _ := o.piecesOf(w, name) // hostPathAll: the layout has pieces
		axis := pieceInAxis(columns)
		for _, p := range nodes {
			pieces, axes = append(pieces, p), append(axes, axis)
		}
		counts = append(counts, len(nodes))
	}
	ys := hostPieces(Reshape(x, x.Shape().Size()/in, in), pieces, axes)
	out := make([]*Node, len(names))
	for i, n := range counts {
		y := concatenate(ys[:n], 1)
		ys = ys[n:]
		out[i] = Reshape(y, append(slices.Clone(dims[:len(dims)-1]), y.Shape().Dimensions[1])...)
	}
	return out
}

// piecesOf is the resident pieces of w's weight name and whether they are pieces of columns
// [in, n] (else rows [n, in], or panels either way): its pieces, or the whole weight as one piece
// where the layout has pieces (PieceMACs) and it fits; ok false where the layout has none.
func (o ops) piecesOf(w weightSet, name string) (pieces []*Node, columns, ok bool) {
	if p, ok := w.pieces[w.prefix+name]; ok {
		return p.nodes, p.axis == 1, true
	}
	if o.layout.PieceMACs > 0 { // a weight that fits whole is one piece
		return []*Node{w.get(name)}, !o.layout.LinearRows, true
	}
	return nil, false, false
}

// splitLast cuts y's last axis into consecutive parts of the given widths.
func splitLast(y *Node, widths []int) []*Node {
	out := make([]*Node, len(widths))
	offset := 0
	for i, width := range widths {
		out[i] = SliceAxis(y, -1, AxisRange(offset, offset+width))
		offset += width
	}
	return out
}

// project is one nn.Linear of w (with its adapter, if any): projections of one name.
func (o ops) project(x *Node, w weightSet, name string) *Node {
	return o.projections(x, w, name)[0]
}

// embed looks token IDs [B, S] up in an embedding table: [B, S, d].
func (o ops) embed(table, ids *Node) *Node {
	batch, seqLen := ids.Shape().Dimensions[0], ids.Shape().Dimensions[1]
	rows := o.embedRows(table, Reshape(ids, batch*seqLen))
	return Reshape(rows, batch, seqLen, rows.Shape().Dimensions[1])
}

// embedRows looks token IDs [S] up in an embedding table: [S, d].
//
// As columns [d, vocab] it gathers columns; in blocks [blocks, d, perBlock] (block, column)
// pairs. With EmbedSlices each token's row or column is a DynamicSlice of its own: GoMLX's ONNX
// Runtime backend turns a Gather into a Transpose of the whole table (even an identity one) and
// a GatherND, a 600 MB copy on every step. One node per token makes long chunks slow to compile
// (7.5 s for 1024 tokens against 0.5), once per length bucket and batch size, so the step graph
// on ONNX Runtime takes embeddings looked up on the host instead (HostEmbed); the trace and
// the training forward still look up here. Otherwise one Gather of rows.
func (o ops) embedRows(table, ids *Node) *Node {
	seqLen := ids.Shape().Dimensions[0]
	g := ids.Graph()
	zero := ScalarZero(g, ids.DType())
	if !o.layout.TableColumns && table.Rank() == 3 {
		// Rows in blocks [blocks, perBlock, d]: token t is row t % perBlock of block t / perBlock.
		d := table.Shape().Dimensions[2]
		block, row := tableBlock(ids, table.Shape().Dimensions[1])
		if !o.layout.EmbedSlices {
			at := Stack([]*Node{block, row}, -1)                             // [S, 2]
			rows := GatherSlices(table, []int{0, 1}, at, []int{1, 1}, false) // [S, 1, 1, d]
			return Reshape(rows, seqLen, d)
		}
		parts := make([]*Node, seqLen)
		for i := range parts {
			b, r := Reshape(SliceAxis(block, 0, AxisElem(i))), Reshape(SliceAxis(row, 0, AxisElem(i)))
			parts[i] = Reshape(DynamicSlice(table, []*Node{b, r, zero}, []int{1, 1, d}), 1, d)
		}
		return Concatenate(parts, 0) // [S, d]
	}
	if !o.layout.TableColumns {
		d := table.Shape().Dimensions[1]
		if !o.layout.EmbedSlices {
			return Gather(table, InsertAxes(ids, -1)) // [S, d]
		}
		parts := make([]*Node, seqLen)
		for i := range parts {
			id := Reshape(SliceAxis(ids, 0, AxisElem(i))) // scalar
			parts[i] = DynamicSlice(table, []*Node{id, zero}, []int{1, d})
		}
		return Concatenate(parts, 0) // [S, d]
	}
	if table.Rank() == 2 && !o.layout.EmbedSlices {
		// One block [d, vocab]: gather columns (a table in blocks would make the pure-Go
		// backend's gather copy the whole table on every step).
		d := table.Shape().Dimensions[0]
		columns := GatherSlices(table, []int{1}, InsertAxes(ids, -1), []int{1}, false) // [S, d, 1]
		return Reshape(columns, seqLen, d)
	}
	table = o.blockedTable(table) // [blocks, d, perBlock]
	d := table.Shape().Dimensions[1]
	if !o.layout.EmbedSlices {
		block, column := o.tableColumns(table, ids)
		at := Stack([]*Node{block, column}, -1)                             // [S, 2]
		columns := GatherSlices(table, []int{0, 2}, at, []int{1, 1}, false) // [S, 1, d, 1]
		return Reshape(columns, seqLen, d)
	}
	parts := make([]*Node, seqLen)
	for i := range parts {
		id := Reshape(SliceAxis(ids, 0, AxisElem(i))) // scalar
		block, column := o.tableColumns(table, id)
		parts[i] = Reshape(DynamicSlice(table, []*Node{block, zero, column}, []int{1, d, 1}), d, 1)
	}
	if len(parts) == 1 {
		return Reshape(parts[0], 1, d)
	}
	return Transpose(Concatenate(parts, 1), 0, 1) // [d, S] → [S, d]
}

// blockedTable views a table stored as columns as [blocks, d, perBlock] (one block: [1, d, vocab]);
// a table stored as rows is returned as it is.
func (o ops) blockedTable(table *Node) *Node {
	if !o.layout.TableColumns || table.Rank() == 3 {
		return table
	}
	return InsertAxes(table, 0)
}

// tableColumns is Layout.tableColumn in the graph: the block and the column of each token in
// ids (a scalar or [S]) within a blocked table [blocks, d, perBlock].
func (o ops) tableColumns(table, ids *Node) (block, column *Node) {
	return tableBlock(ids, table.Shape().Dimensions[2])
}

// tableBlock is the block of perBlock tokens each token of ids (a scalar or [S]) lies in, and
// its place in that block.
func tableBlock(ids *Node, perBlock int) (block, at *Node) {
	per := ConstAs(ids, perBlock)
	block = Div(ids, per)
	return block, Sub(ids, Mul(block, per))
}

// hostEmbeddings looks the token IDs of each row of ids up on the host in tables, the resident
// embedding as layout l stores it (rows or columns, in blocks or not, or its pieces of rows in
// order: PieceMACs; read in place), for HostEmbed: [len(ids), seqLen, d] in the table's dtype,
// each row's tokens followed by token 0's embedding up to seqLen (the step graph's padding ID).
// IDs must lie in [0, vocab).
func (l Layout) hostEmbeddings(tables []*tensors.Tensor, ids [][]int, seqLen, vocab int) (*tensors.Tensor, error) {
	if len(tables) > 1 {
		return pieceEmbeddings(tables, ids, seqLen)
	}
	table := tables[0]
	dims := table.Shape().Dimensions
	size := table.DType().Size()
	var d int
	var at func(t, k int) int // the element index of component k of token t's embedding
	switch {
	case !l.TableColumns:
		// Rows [vocab, d] or [blocks, perBlock, d], the padding rows after the last token:
		// token t is row t of the flat table either way.
		d = dims[len(dims)-1]
	case len(dims) == 2: // columns [d, vocab]
		d = dims[0]
		at = func(t, k int) int { return k*dims[1] + t }
	default: // columns in blocks [blocks, d, perBlock]
		d = dims[1]
		at = func(t, k int) int {
			block, column := l.tableColumn(t, vocab)
			return (block*d+k)*dims[2] + column
		}
	}
	out := tensors.FromShape(shapes.Make(table.DType(), len(ids), seqLen, d))
	var bad error
	err := table.ConstBytes(func(src []byte) {
		bad = out.MutableBytes(func(dst []byte) {
			for b, row := range ids {
				for j := range seqLen {
					t := 0
					if j < len(row) {
						t = row[j]
					}
					to := dst[((b*seqLen)+j)*d*size:][:d*size]
					if at == nil {
						copy(to, src[t*d*size:(t+1)*d*size])
						continue
					}
					for k := range d {
						copy(to[k*size:(k+1)*size], src[at(t, k)*size:][:size])
					}
				}
			}
		})
	})
	if err == nil {
		err = bad
	}
	if err != nil {
		_ = out.FinalizeAll()
		return nil, fmt.Errorf("octlm: looking up the embeddings of %d sequences in %s: %w", len(ids), table.Shape(), err)
	}
	return out, nil
}

// pieceEmbeddings is hostEmbeddings for a table in pieces of rows, every piece as high as the
// first but the last: token t is row t % height of piece t / height; in a piece of panels
// [n/w, in, w] (Layout.PiecePanels) that row is column r % w of panel r / w, read with a
// stride of w.
func pieceEmbeddings(pieces []*tensors.Tensor, ids [][]int, seqLen int) (*tensors.Tensor, error) {
	dims := pieces[0].Shape().Dimensions
	height, d := dims[0], dims[1]
	if len(dims) == 3 {
		height = dims[0] * dims[2]
	}
	elem := pieces[0].DType().Size()
	size := elem * d // bytes per row
	out := tensors.FromShape(shapes.Make(pieces[0].DType(), len(ids), seqLen, d))
	var bad error
	err := out.MutableBytes(func(dst []byte) {
		for b, row := range ids {
			for j := range seqLen {
				t := 0
				if j < len(row) {
					t = row[j]
				}
				to := dst[((b*seqLen)+j)*size:][:size]
				piece, r := pieces[t/height], t%height
				if bad = piece.ConstBytes(func(src []byte) { copyEmbedding(to, src, piece.Shape().Dimensions, r, elem) }); bad != nil {
					return
				}
			}
		}
	})
	if err == nil {
		err = bad
	}
	if err != nil {
		_ = out.FinalizeAll()
		return nil, fmt.Errorf("octlm: looking up the embeddings of %d sequences in %d pieces: %w", len(ids), len(pieces), err)
	}
	return out, nil
}

// copyEmbedding copies row r of a piece of a table (src, of dims: rows [n, d] or panels
// [n/w, d, w]) into to, elem bytes an element.
func copyEmbedding(to, src []byte, dims []int, r, elem int) {
	if len(dims) == 2 {
		copy(to, src[r*len(to):][:len(to)])
		return
	}
	d, w := dims[1], dims[2]
	for i := range d {
		copy(to[i*elem:(i+1)*elem], src[panelIndex(r, i, d, w)*elem:])
	}
}

// head is the output projection logits = hidden · tableᵀ for hidden [P, d], with the table (the
// tied embedding or an untied lm_head.weight) as the layout stores it, whole or in pieces of
// rows (PieceMACs, multiplied as a Linear weight in pieces is): [P, vocab].
//
// As columns [d, vocab] it is the plain product (padded like linear). As rows [vocab, d] it
// contracts the table's last axis, with a batch axis of one on both sides: the form the ONNX
// Runtime and XLA decode speeds were measured with. In blocks (TableBlocks), a batch of
// products over the blocks.
//
// The product runs in the table's dtype, with a float32 accumulator, so a decode step does not
// widen the table to a float32 copy (for Qwen3-8B in bfloat16 that copy would be 2.5 GB per
// step); as columns on the pure-Go engine a prompt's rows are widened or spread around its
// large kernel's half-precision bug (SpreadHalfRows).
func (o ops) head(hidden *Node, pieces []*Node) *Node {
	table := pieces[0]
	if o.layout.PieceMACs > 0 && !o.layout.TableColumns && o.layout.tableBlocks() == 1 && !o.asStored {
		return o.linearPieces(hidden, pieces, false) // rows in pieces [n, d] or panels (pieceSpecs), or whole
	}
	p := hidden.Shape().Dimensions[0]
	if o.layout.TableColumns && table.Rank() == 3 {
		// Blocks [blocks, d, perBlock]: one batched product, the blocks side by side, the
		// padding columns cut off.
		blocks, d, perBlock := table.Shape().Dimensions[0], table.Shape().Dimensions[1], table.Shape().Dimensions[2]
		padded := o.padRows(hidden, d*perBlock)
		rows := BroadcastToDims(InsertAxes(padded, 0), blocks, padded.Shape().Dimensions[0], d)
		logits := DotGeneral(rows, []int{2}, []int{0}, table, []int{1}, []int{0}) // [blocks, P(+pad), perBlock]
		logits = Reshape(TransposeAllAxes(SliceAxis(logits, 1, AxisRange(0, p)), 1, 0, 2), p, blocks*perBlock)
		return SliceAxis(logits, 1, AxisRange(0, o.vocab))
	}
	if o.layout.TableColumns {
		return o.rowProduct(hidden, table.Shape().Size(), func(x *Node, weight func(*Node) *Node) *Node {
			return DotGeneral(x, []int{1}, nil, weight(table), []int{0}, nil) // [P(+pad), vocab]
		})
	}
	if o.asStored {
		// The training forward: no batch axis, so that the table, a graph input that is not
		// the graph's to reuse, is not copied by the pure-Go backend's Reshape (622 MB per step
		// for Qwen3-0.6B's tied head); the same product.
		return DotGeneral(hidden, []int{1}, nil, table, []int{1}, nil)
	}
	if table.Rank() == 3 {
		// Rows in blocks [blocks, perBlock, d]: one batched product, each block's logits as
		// hidden · blockᵀ for one row, as (block · hiddenᵀ)ᵀ for several (the table on the left,
		// streamed, as ops.linear multiplies with LinearRows), the padding rows cut off.
		blocks, perBlock, d := table.Shape().Dimensions[0], table.Shape().Dimensions[1], table.Shape().Dimensions[2]
		rows := BroadcastToDims(InsertAxes(hidden, 0), blocks, p, d)
		var logits *Node
		if p == 1 {
			logits = DotGeneral(rows, []int{2}, []int{0}, table, []int{2}, []int{0}) // [blocks, 1, perBlock]
		} else {
			logits = TransposeAllAxes(DotGeneral(table, []int{2}, []int{0}, rows, []int{2}, []int{0}), 0, 2, 1) // [blocks, P, perBlock]
		}
		logits = Reshape(TransposeAllAxes(logits, 1, 0, 2), p, blocks*perBlock)
		return SliceAxis(logits, 1, AxisRange(0, o.vocab))
	}
	vocab, d := table.Shape().Dimensions[0], table.Shape().Dimensions[1]
	logits := DotGeneral(Reshape(hidden, 1, p, d), []int{2}, []int{0}, Reshape(table, 1, vocab, d), []int{2}, []int{0})
	return Reshape(logits, p, vocab)
}

// padRows appends zero rows to x [rows, in] so that rows × weightSize reaches PadMACs and rows
// reach PadRows, where that takes at most maxPadRows rows. The caller slices the padded rows'
// results off; the real rows' results do not depend on them.
func (o ops) padRows(x *Node, weightSize int) *Node {
	if o.layout.PadMACs <= 0 {
		return x
	}
	want := max(ceilDiv(o.layout.PadMACs, weightSize), o.layout.PadRows)
	if want > maxPadRows {
		return x
	}
	return padTo(x, 0, want)
}

// scalar is the scalar v in like's dtype: GoMLX's Scalar, one node per value for the graph,
// except in a host function's body (ownScalars), where it is a constant of its own (and
// rmsNormalized spells ReduceMean out). GoMLX
// v0.28.16's scalar cache (behind Scalar, AddScalar, MulScalar, ReduceMean) spans the graph's
// functions, so a body that made the same scalar as the main function, or as another body,
// would use a node of another function's scope and fail to build
// (TestGoMLXScalarCacheCrossesFunctions in internal/hostproduct is the reproduction); the main
// function keeps the shared node (a constant per use would add hundreds of nodes to ONNX
// Runtime's graph).
func (o ops) scalar(like *Node, v float64) *Node {
	if o.ownScalars {
		return Const(like.Graph(), shapes.CastAsDType(v, like.DType()))
	}
	return Scalar(like.Graph(), like.DType(), v)
}

// rsqrtMul is x / √v as torch.rsqrt computes it, x · rsqrt(v). Backends without Rsqrt (GoMLX's
// ONNX Runtime backend has none) divide by the square root instead, which differs only in the
// last bit. The training forward (Rsqrt has no VJP in GoMLX) multiplies by 1/√v, as ATen's CPU
// rsqrt computes it: the reciprocal is taken on the statistics [..., 1], and the backward
// multiplies where Div's VJP divided, squared and negated the whole activation.
func (o ops) rsqrtMul(x, v *Node) *Node {
	if o.asStored {
		return Mul(x, Reciprocal(Sqrt(v)))
	}
	if x.Graph().Backend().Capabilities().Operations[compute.OpTypeRsqrt] {
		return Mul(x, Rsqrt(v))
	}
	return Div(x, Sqrt(v))
}

// sigmoid is the logistic function 1 / (1 + exp(−x)) in x's dtype, accurate to a few float32
// ulps relative to the result, as torch.sigmoid computes it.
//
// With SigmoidByExp it is built from Exp and a reciprocal: ONNX Runtime 1.30.0's Sigmoid (MLAS's
// logistic approximation) is within 2·2⁻²⁴ in absolute terms but not relative to small results:
// its worst relative error is 1.8e-7 on [−1, 0), 1.6e-6 on [−3, −1), 2.8e-5 on [−6, −3), 2e-3
// on [−10, −6) and 4.5 near −18, against ≤ 1.4e-7 everywhere for 1 / (1 + exp(−x)) on the same
// runtime (TestSigmoidAccuracy). The small results matter: SiLU's negative side feeds Qwen3.5's
// L2-normalised DeltaNet keys and queries (the norm keeps their relative error however short the
// vector), its β, and every gate. Written with Div(1, ·) instead of Reciprocal it gave the
// Sigmoid's numbers back inside the decoder's graph (tiny-qwen35, 1 token, onnx: 2.72e-5 max
// logit error against 2.73e-5 with Sigmoid and 1.53e-5 with Reciprocal), though not in the
// test's one-operation graph.
func (o ops) sigmoid(x *Node) *Node {
	if !o.layout.SigmoidByExp {
		return Sigmoid(x)
	}
	return Reciprocal(OnePlus(Exp(Neg(x))))
}

// silu is x · sigmoid(x) (SiLU, Swish).
func (o ops) silu(x *Node) *Node { return Mul(x, o.sigmoid(x)) }

// dotLastAxes contracts the last axis of lhs with the last axis of rhs, with the first
// numBatch axes of both as batch axes (q·kᵀ).
//
// GoMLX v0.28.2's pure-Go DotGeneral returned wrong numbers for bfloat16 and float16 operands
// in this layout (rhs contracted on its last axis) on an Intel AVX-512 machine, so with
// UpcastHalfDot half-precision operands are multiplied in float32 and rounded back, which is
// also what a GPU's float32 accumulator does. TestHalfDotLastAxes logs whether the backend's own
// product is right on the CPU it runs on (it is on AMD Zen 5 with compute v0.1.14); the upcast
// stays until it is shown right on Intel too.
func (o ops) dotLastAxes(lhs, rhs *Node, numBatch int) *Node {
	return o.dotAxes(lhs, rhs, numBatch, rhs.Rank()-1)
}

// dotAxes is dotLastAxes with rhs contracted on its axis rhsAxis (keys stored transposed:
// Layout.KeysTransposed).
func (o ops) dotAxes(lhs, rhs *Node, numBatch, rhsAxis int) *Node {
	batch := make([]int, numBatch)
	for i := range batch {
		batch[i] = i
	}
	dtype := lhs.DType()
	if dtype == dtypes.Float32 || !o.layout.UpcastHalfDot {
		return DotGeneral(lhs, []int{lhs.Rank() - 1}, batch, rhs, []int{rhsAxis}, batch)
	}
	out := DotGeneral(ConvertDType(lhs, dtypes.Float32), []int{lhs.Rank() - 1}, batch,
		ConvertDType(rhs, dtypes.Float32), []int{rhsAxis}, batch)
	return ConvertDType(out, dtype)
}

// hostAttention says whether attention over the cache runs in Go (Layout.HostAttention), for a
// decode step's rows and a prompt chunk's alike. Chunks on top of a cache went to the backend's
// tiled products until 2026-12-07 (Go's kernels take two rows at a time, reading the attended
// keys and values once a pair); measured there on Qwen3-0.6B at depth 4,096 (a 2-core Zen 4
// guest, alternated), a chunk in Go ran as fast on a float32 cache within the guest's swing
// (32 and 128 tokens: 34.9–42.9 against 35.3–45.9 tokens/s; 512: 39.7 against 41.4) and on
// bfloat16 (27.1–27.2 against 26.3–26.4), and faster on a float16 one, which compute multiplies
// in float16 (39.0–47.9 against 29.2–36.4; 512 tokens 39.6 against 26.5). A chunk's rows are
// bounded by attentionBudget, and so is a worker's scratch for a kv head's scores.
func (o ops) hostAttention() bool { return o.layout.HostAttention }

// cacheLeft says whether the cache's products for rows query rows per kv head take the blocks
// on the left (Layout.CacheLeft, up to CacheLeftRows rows when that is set).
func (o ops) cacheLeft(rows int) bool {
	return o.layout.CacheLeft && (o.layout.CacheLeftRows <= 0 || rows <= o.layout.CacheLeftRows)
}

// cacheGroups is how many query groups per kv head attention multiplies against the cache, for
// group groups of seqLen rows each: group, or with CacheLeftPad the fewest more whose rows are a
// multiple of it while the products still take the blocks on the left (cacheLeft). The extra
// groups are zero queries, their results dropped; padded there, the scores, their softmax and
// the probabilities' slices per block need no padding, transposing or cutting of their own
// (a decode step on Qwen3-0.6B: 2 groups of 1 row, padded to 4).
func (o ops) cacheGroups(group, seqLen int) int {
	pad := o.layout.CacheLeftPad
	if pad <= 1 || !o.cacheLeft(group*seqLen) {
		return group
	}
	for g := group; g < group+pad && o.cacheLeft(g*seqLen); g++ {
		if g*seqLen%pad == 0 {
			return g
		}
	}
	return group
}

// cacheScores is the scores of query rows q [kvHeads, rows, hd] against a sequence's key blocks
// (each [kvHeads, n, hd], in the cache's dtype) side by side: [kvHeads, rows, T] in float32
// (wide), T the blocks' slots, q·Kᵀ per block.
//
// With CacheLeft each block is the left-hand operand, K·qᵀ [kvHeads, n, rows], and the
// transposed scores of all blocks are transposed back once: GoMLX's ONNX Runtime backend
// (compute-onnx v0.1.13) lowers q·Kᵀ, which contracts the block's last axis, to a Transpose of
// the block (a copy of every key block on every step) and a MatMul, whose right-hand operand
// MLAS packs again whenever the product has more than one row (grouped-query decoding has two
// per kv head); as the left operand the block is read once, as it lies, and only qᵀ is packed.
// BenchmarkCacheProducts and BenchmarkDecodeAtDepthLayouts are the measurement: at depth 4,096 on
// Qwen3-0.6B (AMD Zen 5, 2 threads, load 1.5–1.8) the products took 0.72–0.84× the time and the
// decode step 0.83–0.97× (docs/performance.md, 2026-12-02).
func (o ops) cacheScores(q *Node, blocks []*Node) *Node {
	dtype := q.DType()
	keyAxis := 2 // the blocks' hd axis: [kvHeads, n, hd], or [kvHeads, hd, n] (KeysTransposed)
	if o.layout.KeysTransposed {
		keyAxis = 1
	}
	rows := q.Shape().Dimensions[1]
	if !o.cacheLeft(rows) {
		parts := make([]*Node, len(blocks))
		for j, block := range blocks {
			parts[j] = wide(o.dotAxes(q, ConvertDType(block, dtype), 1, keyAxis)) // [kvHeads, rows, n]
		}
		return concatenate(parts, 2)
	}
	if dtype != dtypes.Float32 && o.layout.UpcastHalfDot {
		dtype = dtypes.Float32
	}
	q = padToMultiple(ConvertDType(q, dtype), 1, o.layout.CacheLeftPad)
	parts := make([]*Node, len(blocks))
	if o.layout.KeysTransposed {
		// q·Kᵀ with the block on the right as it lies: [kvHeads, rows(+pad), n].
		for j, block := range blocks {
			parts[j] = o.blockDot(q, 2, block, 1, false, dtype)
		}
		return wide(cutTo(concatenate(parts, 2), 1, rows))
	}
	for j, block := range blocks {
		parts[j] = o.blockDot(q, 2, block, 2, true, dtype) // K·qᵀ: [kvHeads, n, rows(+pad)]
	}
	return Transpose(wide(cutTo(concatenate(parts, 1), 2, rows)), 1, 2)
}

// blockDot is a cache block times x (query rows or probabilities; the kv heads a batch axis of
// both), contracted on x's axis xAxis and the block's axis blockAxis, the block on the left
// when blockLeft, in dtype: the block widened to it. With HalfCacheProducts a half-precision
// block is read as it is stored instead, x rounded to its dtype and the product accumulated and
// returned in float32 (as llama.cpp multiplies its float16 cache): the pure-Go backend's small
// kernel takes half-precision operands with a float32 output, and widening the block wrote a
// float32 copy of the whole cache on every step.
func (o ops) blockDot(x *Node, xAxis int, block *Node, blockAxis int, blockLeft bool, dtype dtypes.DType) *Node {
	half := o.layout.HalfCacheProducts && block.DType().IsHalfPrecision()
	if half {
		x = ConvertDType(x, block.DType())
	} else {
		block = ConvertDType(block, dtype)
	}
	lhs, lhsAxis, rhs, rhsAxis := x, xAxis, block, blockAxis
	if blockLeft {
		lhs, lhsAxis, rhs, rhsAxis = block, blockAxis, x, xAxis
	}
	dot := Dot(lhs, rhs)
	if half {
		dot = dot.WithOutputDType(dtypes.Float32)
	}
	return dot.General([]int{lhsAxis}, []int{0}, []int{rhsAxis}, []int{0})
}

// cacheContext is probs [kvHeads, rows, T(+more)] (the probabilities of a sequence's rows, the
// blocks' T slots first) times the sequence's value blocks as the layout stores them, summed:
// [kvHeads, rows, hd] in probs' dtype. As stored each block is [kvHeads, n, hd] and the product
// p·V; with CacheLeft [kvHeads, hd, n] and the product (Vᵀ·pᵀ)ᵀ, the block on the left, read as
// it lies, and only the probabilities packed (see cacheScores); with ContextByRows too, pᵀ is
// never formed: each block is contracted with its slots of p on their last axis.
func (o ops) cacheContext(probs *Node, blocks []*Node) *Node {
	dtype := probs.DType()
	var sum *Node
	add := func(part *Node) {
		if sum == nil {
			sum = part
		} else {
			sum = Add(sum, part)
		}
	}
	if !o.cacheLeft(probs.Shape().Dimensions[1]) {
		// The blocks on the right, p·V: the values as stored, [kvHeads, n, hd], or with
		// CacheLeft (a prompt chunk's many rows) [kvHeads, hd, n] contracted on their last axis.
		posAxis, product := 1, o.batchMatMul
		if o.layout.CacheLeft {
			posAxis, product = 2, o.dotLastAxes
		}
		offset := 0
		for _, block := range blocks {
			n := block.Shape().Dimensions[posAxis]
			add(product(SliceAxis(probs, 2, AxisRange(offset, offset+n)), ConvertDType(block, dtype), 1))
			offset += n
		}
		return sum
	}
	if o.layout.SpreadHalfRows && dtype != dtypes.Float32 && dtype != dtypes.Float64 {
		// The pure-Go backend's half-precision large kernel (see spreadRows): the hd rows of
		// each product, multiplied in float32 instead.
		dtype = dtypes.Float32
	}
	if o.layout.ContextByRows {
		// Vᵀ·pᵀ with p as it lies: each block's slots of the probabilities [kvHeads, rows, n],
		// contracted on their last axis.
		p := padToMultiple(ConvertDType(probs, dtype), 1, o.layout.CacheLeftPad)
		rows, offset := probs.Shape().Dimensions[1], 0
		for _, block := range blocks {
			n := block.Shape().Dimensions[2]
			add(o.blockDot(SliceAxis(p, 2, AxisRange(offset, offset+n)), 2, block, 2, true, dtype)) // [kvHeads, hd, rows(+pad)]
			offset += n
		}
		return ConvertDType(Transpose(cutTo(sum, 2, rows), 1, 2), probs.DType())
	}
	slots := 0
	for _, block := range blocks {
		slots += block.Shape().Dimensions[2]
	}
	pT := Transpose(ConvertDType(SliceAxis(probs, 2, AxisRange(0, slots)), dtype), 1, 2) // [kvHeads, T, rows]
	rows := pT.Shape().Dimensions[2]
	pT = padToMultiple(pT, 2, o.layout.CacheLeftPad)
	offset := 0
	for _, block := range blocks {
		n := block.Shape().Dimensions[2]
		part := pT
		if n != slots {
			part = SliceAxis(pT, 1, AxisRange(offset, offset+n))
		}
		add(o.blockDot(part, 1, block, 2, true, dtype)) // Vᵀ·pᵀ: [kvHeads, hd, rows]
		offset += n
	}
	return ConvertDType(Transpose(cutTo(sum, 2, rows), 1, 2), probs.DType())
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// padToMultiple appends zeros to x along axis until its size there is a multiple of m (m ≤ 1:
// x as it is). The products of the rows added are cut off again with cutTo.
func padToMultiple(x *Node, axis, m int) *Node {
	return padTo(x, axis, ceilDiv(x.Shape().Dimensions[axis], max(m, 1))*max(m, 1))
}

// padTo appends zeros to x along axis until its size there is n (x as it is when it has n or
// more).
func padTo(x *Node, axis, n int) *Node {
	have := x.Shape().Dimensions[axis]
	if have >= n {
		return x
	}
	dims := slices.Clone(x.Shape().Dimensions)
	dims[axis] = n - have
	return Concatenate([]*Node{x, Zeros(x.Graph(), shapes.Make(x.DType(), dims...))}, axis)
}

// cutTo is the first n entries of y along axis (y itself when it has n).
func cutTo(y *Node, axis, n int) *Node {
	if y.Shape().Dimensions[axis] == n {
		return y
	}
	return SliceAxis(y, axis, AxisRange(0, n))
}

// layoutOf is the layout of the engine behind backend.
func layoutOf(backend compute.Backend) Layout { return LayoutFor(xla.EngineOf(backend)) }

// MemoryNeededDir is MemoryNeeded for the checkpoint folder dir, whatever its architecture. The
// config's sizes are checked against the checkpoint's header (when dir holds one) before the
// weight table is built, as Load checks them.
func MemoryNeededDir(dir string, dtype DType, backend compute.Backend, positions int) (Memory, error) {
	return MemoryNeededOn(dir, dtype, xla.EngineOf(backend), positions)
}

// MemoryNeededOn is MemoryNeededDir for a kind of engine, before any backend of it is opened.
func MemoryNeededOn(dir string, dtype DType, engine xla.Engine, positions int) (Memory, error) {
	arch, err := readArchitecture(filepath.Join(dir, "config.json"))
	if err != nil {
		return Memory{}, err
	}
	if err := checkDirSizes(arch, dir); err != nil { // before the weight table is built
		return Memory{}, err
	}
	return memoryNeeded(arch, LayoutFor(engine), dtype, positions), nil
}
