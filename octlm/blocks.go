package octlm

// The building blocks every architecture shares, written once: the RMSNorm family, the gated
// MLP and eager attention (transformers' eager_attention_forward with the cache write before
// it). Activations carry a batch axis: [B, S, …]. Statistics run in float32 whatever the
// activations' dtype (float64 stays float64, for the gradient tests).

import (
	"fmt"
	"math"
	"strings"

	"github.com/gomlx/compute/dtypes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // the graph DSL reads best unqualified
	"github.com/octlm/octlm/internal/hostproduct"
)

// wide converts x to float32 for statistics, unless it is already float64 (wideDType).
func wide(x *Node) *Node { return ConvertDType(x, wideDType(x.DType())) }

// wideDType is the dtype statistics of dtype run in: float64 stays, anything else is float32.
func wideDType(dtype dtypes.DType) dtypes.DType {
	if dtype == dtypes.Float64 {
		return dtype
	}
	return dtypes.Float32
}

// broadcastLast gives a weight [n] the rank of x [..., n].
func broadcastLast(weight, x *Node) *Node {
	for weight.Rank() < x.Rank() {
		weight = InsertAxes(weight, 0)
	}
	return weight
}

// rmsNormalized is the part every RMSNorm shares: x · rsqrt(mean(x²) + eps) over the last axis,
// computed in float32 whatever x's dtype (the weight, and how it is applied, differ by norm).
func rmsNormalized(o ops, x *Node, eps float64) *Node {
	x32 := wide(x)
	if !o.ownScalars {
		variance := ReduceAndKeep(Square(x32), ReduceMean, -1) // the form ONNX Runtime's optimizer fuses
		return o.rsqrtMul(x32, AddScalar(variance, eps))
	}
	width := x.Shape().Dimensions[x.Rank()-1]
	variance := Mul(ReduceAndKeep(Square(x32), ReduceSum, -1), o.scalar(x32, 1/float64(width))) // ReduceMean's
	return o.rsqrtMul(x32, Add(variance, o.scalar(x32, eps)))
}

// rmsNorm is Qwen3RMSNorm: statistics in float32, then weight * normalized (no 1+w).
func rmsNorm(o ops, x, weight *Node, eps float64) *Node {
	return Mul(broadcastLast(weight, x), ConvertDType(rmsNormalized(o, x, eps), x.DType()))
}

// zeroCenteredRMSNorm is Qwen3_5RMSNorm: x · rsqrt(mean(x²) + eps) · (1 + w), in float32, the
// stored weight zero-centred.
func zeroCenteredRMSNorm(o ops, x, weight *Node, eps float64) *Node {
	x32 := rmsNormalized(o, x, eps)
	w := OnePlus(ConvertDType(weight, x32.DType()))
	return ConvertDType(Mul(x32, broadcastLast(w, x32)), x.DType())
}

// rmsNormGated is Qwen3_5RMSNormGated: (x · rsqrt(mean(x²) + eps)) · w · silu(z), with the
// plain weight w; x and z [..., headDim].
func rmsNormGated(o ops, x, z, weight *Node, eps float64) *Node {
	x32 := rmsNormalized(o, x, eps)
	w := ConvertDType(weight, x32.DType())
	z32 := ConvertDType(z, x32.DType())
	return ConvertDType(Mul(Mul(broadcastLast(w, x32), x32), o.silu(z32)), x.DType())
}

// rmsNorm is the step's Qwen3RMSNorm (rmsNorm): one call of a graph function named for
// hostproduct.NormFunction where the layout has HostNorm (hostNorm), its body the definition.
func (s *step) rmsNorm(x, weight *Node, eps float64) *Node {
	if !s.hostNorm(x, weight) {
		return rmsNorm(s.ops, x, weight, eps)
	}
	fn := s.hostFn(hostproduct.NormName(eps), x.Shape().String(), x.Graph(), func(g *Graph) []*Node {
		return []*Node{rmsNorm(s.bodyOps(), Parameter(g, "x", x.Shape()), Parameter(g, "weight", weight.Shape()), eps)}
	})
	return fn.Call(x, weight)[0]
}

// addRMSNorm is a residual connection and the Qwen3RMSNorm after it: sum = residual + delta and
// rmsNorm(sum), as one call of a norm function (its form with a residual) where the layout has
// HostNorm.
func (s *step) addRMSNorm(residual, delta, weight *Node, eps float64) (sum, normed *Node) {
	if !s.hostNorm(residual, weight) || !delta.Shape().Equal(residual.Shape()) {
		sum = Add(residual, delta)
		return sum, rmsNorm(s.ops, sum, weight, eps)
	}
	fn := s.hostFn(hostproduct.NormName(eps), "residual "+residual.Shape().String(), residual.Graph(), func(g *Graph) []*Node {
		sum := Add(Parameter(g, "a", residual.Shape()), Parameter(g, "b", delta.Shape()))
		return []*Node{sum, rmsNorm(s.bodyOps(), sum, Parameter(g, "weight", weight.Shape()), eps)}
	})
	out := fn.Call(residual, delta, weight)
	return out[0], out[1]
}

// bodyOps is the step's ops for a host function's body: its scalars constants of their own
// (ops.scalar).
func (s *step) bodyOps() ops {
	o := s.ops
	o.ownScalars = true
	return o
}

// hostNorm says whether the step normalizes x by weight [d] in Go (Layout.HostNorm): float32 or
// bfloat16 activations and a weight of their dtype, outside the training forward.
func (s *step) hostNorm(x, weight *Node) bool {
	return s.ops.layout.HostNorm && !s.ops.asStored && hostDType(x.DType()) && weight.DType() == x.DType() &&
		weight.Rank() == 1 && weight.Shape().Dimensions[0] == x.Shape().Dimensions[x.Rank()-1]
}

// rope is RoPE by r's tables on x [..., S, heads, hd] (rotary.apply): with split pairing, where
// the layout has HostNorm, one call of a graph function named for hostproduct.RopeFunction on
// x and the tables in x's dtype [..., S, 1, hd], its body the definition (rotate).
func (s *step) rope(r *rotary, x *Node) *Node {
	if !r.split || !s.ops.layout.HostNorm || s.ops.asStored || !hostDType(x.DType()) {
		return r.apply(s.ops, x)
	}
	cos, sin := r.tables(s.ops, x.DType(), 1) // not spread: the call reads one row for every head
	fn := s.hostFn(hostproduct.RopeFunction, x.Shape().String(), x.Graph(), func(g *Graph) []*Node {
		return []*Node{rotate(Parameter(g, "x", x.Shape()), Parameter(g, "cos", cos.Shape()), Parameter(g, "sin", sin.Shape()), true)}
	})
	return fn.Call(x, cos, sin)[0]
}

// mlp is Qwen3MLP (and Qwen3_5MLP): down_proj(silu(gate_proj(x)) * up_proj(x)).
func mlp(o ops, w weightSet, x *Node) *Node {
	gateUp := o.projections(x, w, "gate_proj.weight", "up_proj.weight")
	gate, up := gateUp[0], gateUp[1]
	return o.project(Mul(o.silu(gate), up), w, "down_proj.weight")
}

// mlp is the step's gated MLP (mlp), its SiLU(gate) · up one call of a graph function named for
// hostproduct.GatedFunction where the layout has HostGated and the activations are float32 or
// bfloat16: the pure-Go backend runs it in Go, and the down projection's products follow the
// gate and up ones with no piece of compute's between them.
func (s *step) mlp(w weightSet, x *Node) *Node {
	if !s.ops.layout.HostGated || s.ops.asStored || !hostDType(x.DType()) {
		return mlp(s.ops, w, x)
	}
	gateUp := s.ops.projections(x, w, "gate_proj.weight", "up_proj.weight")
	return s.ops.project(s.gated(gateUp[0], gateUp[1]), w, "down_proj.weight")
}

// gated is SiLU(gate) · up as a call of the step's gated function for their shape, made at its
// first call (its body the definition).
func (s *step) gated(gate, up *Node) *Node {
	fn := s.hostFn(hostproduct.GatedFunction, gate.Shape().String(), gate.Graph(), func(g *Graph) []*Node {
		a := Parameter(g, "gate", gate.Shape())
		b := Parameter(g, "up", up.Shape())
		return []*Node{Mul(s.ops.silu(a), b)}
	})
	return fn.Call(gate, up)[0]
}

// attention is eager_attention_forward after the projections, on top of a cache: query
// [B, S, heads, hd], key and value [B, S, kvHeads, hd] (after any norm and RoPE). With a cache
// (s.cached) the query attends over the cache's blocks kCache/vCache (per sequence, each
// [kvHeads, n, hd], read as they are: no copy, no write; the slots at or past a sequence's start
// are masked; values [kvHeads, hd, n] where the layout has CacheLeft, keys so with
// KeysTransposed) and over the chunk's own keys and values, rounded to the cache's dtype as the
// cache will hold them; without one over the chunk alone. The scores against the blocks and
// against the chunk are concatenated (they are small: [kvHeads, group·S, T+S]), the mask
// s.causal added as a bias (0 or −inf) in float32, then softmax, then the context
// [B, S, heads·hd] (head h = kv·group + g) as the sum of the probabilities' parts times each
// block's values and the chunk's; with a cache, each sequence on its own. Returns the
// context and the chunk's new keys and values [B, kvHeads, S, hd] in the cache's dtype (values
// [B, kvHeads, hd, S] with CacheLeft), which the host writes into the cache (nil without a
// cache). The products against the blocks are the layout's (ops.cacheScores, ops.cacheContext);
// with Layout.HostAttention a decode step's attention over each sequence's cache is instead one
// call of a function that the wrapped pure-Go backend runs in Go (step.hostAttend).
func attention(s *step, query, key, value *Node, kCache, vCache kvBlocks) (ctx, newK, newV *Node) {
	o := s.ops
	batch, seqLen, heads, hd := query.Shape().Dimensions[0], query.Shape().Dimensions[1], query.Shape().Dimensions[2], query.Shape().Dimensions[3]
	kvHeads := key.Shape().Dimensions[2]
	group := heads / kvHeads
	attendLen := s.causal.Shape().Dimensions[2]
	slots := attendLen - seqLen // T: the cache's slots read
	dtype := query.DType()

	perHead := func(t *Node) *Node { return permuted(t, 0, 2, 1, 3) } // [B, kvHeads, S, hd]
	host := slots > 0 && o.hostAttention() && hostDType(dtype) && hostCacheDType(s.kvDType)
	var keys, values *Node
	if s.cached {
		// The cache holds the activations' dtype or a narrower one (a half-precision cache under
		// float32 activations: keys and values are rounded). Go's attention reads the chunk's
		// as the cache holds them; the graph's widens them back. The conversions come before
		// any permutation, where the pure-Go backend converts values between its pieces (in Go,
		// on vectors): after one, inside a piece, a prompt's conversions to and from float16
		// were compute's, a value at a time.
		stored, storedV := ConvertDType(key, s.kvDType), ConvertDType(value, s.kvDType)
		newK, newV = perHead(stored), perHead(storedV)
		keys, values = newK, newV
		if !host && s.kvDType != dtype {
			keys, values = perHead(ConvertDType(stored, dtype)), perHead(ConvertDType(storedV, dtype))
		}
	} else {
		keys, values = perHead(key), perHead(value)
	}

	// Grouped-query attention without copying K/V per query head: query head h uses kv head
	// h / group, so the query is laid out [B, kvHeads, group·S, hd], kv heads a batch axis.
	// With a cache to read, the layout may pad the groups with zero queries (ops.cacheGroups),
	// so that the rows of every product against the cache fill the engine's tiles from the
	// start: the scores, the softmax and the probabilities' slices per block keep the padded
	// rows, and only the context drops them.
	q := permuted(Reshape(query, batch, seqLen, kvHeads, group, hd), 0, 2, 3, 1, 4) // [B, kvHeads, group, S, hd]
	groups := group
	if slots > 0 && !host {
		groups = o.cacheGroups(group, seqLen)
		q = padTo(q, 2, groups)
	}
	q = Reshape(q, batch, kvHeads, groups*seqLen, hd)
	// The mask as a bias: 0 where attended, −inf elsewhere (x + 0 is x exactly), [B, S, T+S],
	// broadcast over heads.
	bias := s.maskBias(wideDType(dtype)) // in the scores' (wide) dtype
	// attend is the attention of n sequences (q, keys, values and bias with a leading axis of n)
	// over their chunks and, given one sequence's cache blocks, over that cache's slots first:
	// [n, kvHeads, groups·S, hd].
	attend := func(q, keys, values, bias *Node, kBlocks, vBlocks []*Node) *Node {
		n := q.Shape().Dimensions[0]
		scores := wide(o.dotLastAxes(q, keys, 2)) // [n, kvHeads, groups·S, S]
		if kBlocks != nil {
			past := o.cacheScores(Squeeze(q, 0), kBlocks)                 // [kvHeads, groups·S, T]
			scores = Concatenate([]*Node{InsertAxes(past, 0), scores}, 3) // [1, kvHeads, groups·S, T+S]
		}
		scores = MulScalar(scores, 1/math.Sqrt(float64(hd)))
		scores = Add(Reshape(scores, n, kvHeads, groups, seqLen, attendLen), Reshape(bias, n, 1, 1, seqLen, attendLen))
		probs := ConvertDType(Reshape(Softmax(scores, -1), n, kvHeads, groups*seqLen, attendLen), values.DType())
		if vBlocks == nil {
			return o.batchMatMul(probs, values, 2)
		}
		own := o.batchMatMul(SliceAxis(probs, 3, AxisRange(slots, attendLen)), values, 2)
		return Add(InsertAxes(o.cacheContext(Squeeze(probs, 0), vBlocks), 0), own)
	}
	if slots == 0 {
		ctx = attend(q, keys, values, bias, nil, nil)
	} else {
		// Each sequence on its own cache: its rows through the whole of attention apart, so
		// that no step slices a sequence's scores or probabilities out of the batch's, nor adds
		// the bias broadcast over heads and sequences at once (the pure-Go backend's general
		// broadcast walks every index).
		if host {
			ctx = s.hostAttend(attend, batch, q, keys, values, bias, kCache, vCache)
		} else {
			ctx = concatenate(eachSequence(attend, batch, q, keys, values, bias, kCache, vCache), 0) // [B, kvHeads, groups·S, hd]
		}
	}
	ctx = permuted(cutTo(Reshape(ctx, batch, kvHeads, groups, seqLen, hd), 2, group), 0, 3, 1, 2, 4)
	if newV != nil && o.layout.CacheLeft {
		newV = permuted(newV, 0, 1, 3, 2) // [B, kvHeads, hd, S], as the cache stores values
	}
	if newK != nil && o.layout.KeysTransposed {
		newK = permuted(newK, 0, 1, 3, 2) // [B, kvHeads, hd, S], as the cache stores keys
	}
	return Reshape(ConvertDType(ctx, dtype), batch, seqLen, heads*hd), newK, newV
}

// maskBias is the mask s.causal as a bias of dtype: 0 where attended, −inf elsewhere (x + 0 is x
// exactly), [B, S, T+S], made once a step for every layer (but with recompute, where a node
// made in one layer's checkpoint must not be read by the next).
func (s *step) maskBias(dtype dtypes.DType) *Node {
	if b, ok := s.biases[dtype]; ok {
		return b
	}
	g, dims := s.causal.Graph(), s.causal.Shape().Dimensions
	bias := Where(s.causal, BroadcastToDims(ScalarZero(g, dtype), dims...), BroadcastToDims(Infinity(g, dtype, -1), dims...))
	if !s.recompute {
		if s.biases == nil {
			s.biases = map[dtypes.DType]*Node{}
		}
		s.biases[dtype] = bias
	}
	return bias
}

// hostDType says whether Go's attention (hostproduct.AttentionFunction) takes operands of dtype.
func hostDType(dtype dtypes.DType) bool { return dtype == dtypes.Float32 || dtype == dtypes.BFloat16 }

// hostCacheDType says whether Go's attention reads cache blocks of dtype: its operands' dtypes,
// and float16 (widened exactly as read).
func hostCacheDType(dtype dtypes.DType) bool { return hostDType(dtype) || dtype == dtypes.Float16 }

// eachSequence is attend for each of batch sequences apart: sequence b's part of q, keys, values
// and bias (a leading axis of 1), its cache blocks kCache[b] and vCache[b].
func eachSequence(attend attendFunc, batch int, q, keys, values, bias *Node, kCache, vCache kvBlocks) []*Node {
	perSeq := func(t *Node, b int) *Node {
		if batch == 1 {
			return t
		}
		return SliceAxis(t, 0, AxisElem(b))
	}
	seqs := make([]*Node, batch)
	for b := range batch {
		seqs[b] = attend(perSeq(q, b), perSeq(keys, b), perSeq(values, b), perSeq(bias, b), kCache[b], vCache[b])
	}
	return seqs
}

// attendFunc is the attention of n sequences (q, keys, values and bias with a leading axis of
// n) over their chunks and, given one sequence's cache blocks, over that cache's slots first.
type attendFunc func(q, keys, values, bias *Node, kBlocks, vBlocks []*Node) *Node

// hostAttend is attend for batch sequences, each on its own cache blocks (kCache[b], vCache[b]),
// as one call of a graph function named for hostproduct.AttentionFunction in its form with a
// batch axis, which the wrapped pure-Go backend runs in Go (Layout.HostAttention): q [B,
// kvHeads, rows, hd], keys and values [B, kvHeads, S, hd] in the cache's dtype and bias [B, S, T+S] as they are, then
// every sequence's key blocks [kvHeads, hd, n], then every sequence's value blocks [kvHeads, n,
// hd]; the result [B, kvHeads, rows, hd]. The definition, the function's body, is eachSequence.
// One call for the batch, not one per sequence with each operand sliced for it and the results
// concatenated: those slices were 32 of compute's operations a layer for 8 sequences.
func (s *step) hostAttend(attend attendFunc, batch int, q, keys, values, bias *Node, kCache, vCache kvBlocks) *Node {
	args := []*Node{q, keys, values, bias}
	for b := range batch {
		args = append(args, kCache[b]...)
	}
	for b := range batch {
		args = append(args, vCache[b]...)
	}
	return s.hostFunction(attend, args, batch, len(kCache[0])).Call(args...)[0]
}

// hostFunction is the graph function hostAttend calls with args: q, keys, values and bias of
// batch sequences, then n key blocks of each sequence and n value blocks of each. It is made at
// its arguments' shapes' first call.
func (s *step) hostFunction(attend attendFunc, args []*Node, batch, n int) *Function {
	var key strings.Builder
	for _, a := range args {
		key.WriteString(a.Shape().String())
	}
	return s.hostFn(hostproduct.AttentionFunction, key.String(), args[0].Graph(), func(g *Graph) []*Node {
		ps := make([]*Node, len(args))
		for i, a := range args {
			ps[i] = Parameter(g, fmt.Sprintf("arg%d", i), a.Shape())
		}
		kCache, vCache := make(kvBlocks, batch), make(kvBlocks, batch)
		for b := range batch {
			kCache[b] = ps[4+b*n : 4+(b+1)*n]
			vCache[b] = ps[4+(batch+b)*n : 4+(batch+b+1)*n]
		}
		dtype := ps[0].DType() // the chunk's keys and values come as the cache holds them
		keys, values := ConvertDType(ps[1], dtype), ConvertDType(ps[2], dtype)
		return []*Node{concatenate(eachSequence(attend, batch, ps[0], keys, values, ps[3], kCache, vCache), 0)}
	})
}

// hostFn is the step's graph function named for prefix (a host function of hostproduct's) that
// key identifies, made with body at its first use.
func (s *step) hostFn(prefix, key string, g *Graph, body func(g *Graph) []*Node) *Function {
	key = prefix + " " + key
	if fn, ok := s.hostFns[key]; ok {
		return fn
	}
	if s.hostFns == nil {
		s.hostFns = map[string]*Function{}
	}
	fn := NewFunction(g, fmt.Sprintf("%s#%d", prefix, len(s.hostFns)), body)
	s.hostFns[key] = fn
	return fn
}

// permuted is TransposeAllAxes(x, perm...), or a Reshape where the permutation moves only axes
// of size 1, so that the values keep their order (a decode step's sequence axis): the pure-Go
// backend copies a transpose index by index, and a reshape of a value it owns not at all.
func permuted(x *Node, perm ...int) *Node {
	dims := x.Shape().Dimensions
	last := -1
	for _, axis := range perm {
		if dims[axis] == 1 {
			continue
		}
		if axis < last {
			return TransposeAllAxes(x, perm...)
		}
		last = axis
	}
	out := make([]int, len(perm))
	for i, axis := range perm {
		out[i] = dims[axis]
	}
	return Reshape(x, out...)
}

// concatenate is Concatenate, which a single part needs not.
func concatenate(parts []*Node, axis int) *Node {
	if len(parts) == 1 {
		return parts[0]
	}
	return Concatenate(parts, axis)
}
