// Package loader turns a checkpoint on disk into tensors, one at a time, and refuses anything
// malformed before a single tensor reaches the model.
//
// It owns the safetensors format (header rules, streaming reads, dtype conversion, writing),
// sharded checkpoints (model.safetensors.index.json) and snapshot manifests (file sizes and
// SHA-256). Fetching a checkpoint from the Hugging Face Hub is the hub package's job. It knows
// nothing of graphs, models or configs beyond file names: callers ask for tensors by name and
// decide what they mean.
//
// Tensors are decoded in bounded chunks, in parallel for large tensors: on Linux straight from a
// read-only mapping of the file whose pages are released as soon as they are decoded, elsewhere
// through ReadAt into pooled 256 KiB buffers. Either way the only full-size memory is the
// caller's destination: streaming a 1.4 GiB BF16 checkpoint into float32 tensors peaks at about
// 1.00x the destination's size.
//
// Every rule broken by a file is reported as a *FormatError naming the file, the tensor (when
// there is one) and the rule; nothing panics on bad input and nothing is silently repaired.
package loader
