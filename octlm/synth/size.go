package synth

// EstimatedBytes is about what WriteWith puts on disk for c: the tensors' bytes (BF16, the
// stored lm_head.weight copy included), their headers, the config files and the tokenizer. It
// is computed from the sizes alone, in float64 so that absurd sizes (a billion layers) give a
// huge number instead of overflowing or building the tensor list: check it against the free
// disk before writing.
func (c QwenLike) EstimatedBytes() float64 {
	H, I, D := float64(c.HiddenSize), float64(c.IntermediateSize), float64(c.HeadDim)
	q, kv := float64(c.NumHeads)*D, float64(c.NumKVHeads)*D
	layer := q*H + 2*kv*H + H*q + 2*D + 3*I*H + 2*H
	elements := 2*float64(c.VocabSize)*H + float64(c.NumLayers)*layer + H
	const headerPerTensor = 160 // name, dtype, shape and offsets in the JSON header
	tensors := 2 + 11*float64(c.NumLayers) + 1
	const otherFiles = 12 << 20 // config files and the tokenizer (11 MB for Qwen3's)
	return 2*elements + headerPerTensor*tensors + otherFiles
}
