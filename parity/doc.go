// Package parity is octlm's proof that its decoder computes the same function as the reference
// implementation: the logit parity protocol. For every reference case it runs the full path (the
// whole prompt in one call) and the cached path (the first half, then the second half on top of
// the kept KV cache), compares every logit at every position with float32 reference logits, and
// gates on the maximum absolute error against Tolerance, a constant fixed before any result was
// seen. Half-precision runs (bfloat16, float16) are measured the same way and reported, never
// gated, together with how often their greedy tokens agree with the float32 model's.
//
// It owns the reference folder format (reference-logits-N.safetensors holding ids I64 [T] and
// logits F32 [T, vocab], written by reference.py beside this file), the comparison statistics,
// the JSONL rows and the readable table. It does not choose backends, resolve Hub names or load
// checkpoints: callers hand it a loaded *octlm.Model.
package parity
