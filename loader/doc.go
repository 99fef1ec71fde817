// Package loader turns a checkpoint on disk into tensors, one at a time, and refuses anything
// malformed before a single tensor reaches the model.
//
// It owns the safetensors format (header rules, streaming reads, dtype conversion, writing),
// sharded checkpoints (model.safetensors.index.json), snapshot manifests (file sizes and SHA-256)
// and the Hugging Face Hub cache and download protocol. It knows nothing of graphs, models or
// configs beyond file names: callers ask for tensors by name and decide what they mean.
//
// Every rule broken by a file is reported as a *FormatError naming the file, the tensor (when
// there is one) and the rule; nothing panics on bad input and nothing is silently repaired.
package loader
