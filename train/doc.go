// Package train owns fine-tuning: the training data formats the Hugging Face ecosystem writes
// (JSONL rows of token IDs, text, prompt/completion or chat messages), their batching, the loss,
// the optimizer, gradient clipping and learning-rate schedules exactly as PyTorch and
// transformers compute them, the training loop over a differentiable model, and checkpoints
// that a run resumes from.
//
// The arithmetic follows the reference line by line:
//
//   - the loss is transformers' causal-LM loss (ForCausalLMLoss): labels shifted left by one,
//     -100 ignored, the sum over the counted tokens divided by how many were counted over all
//     the micro-batches a step accumulates;
//   - the optimizer is torch.optim.AdamW's _single_tensor_adamw: decoupled decay first
//     (p ← p·(1 − lr·wd)), the moments, bias corrections, eps added after the square root;
//   - clipping is torch.nn.utils.clip_grad_norm_: the global L2 norm, every gradient multiplied
//     by min(1, max_norm/(norm + 1e-6));
//   - the schedules are transformers' get_{constant,linear,cosine}_schedule_with_warmup, the
//     multiplier of step k taken at k − 1 (so a warmup's first step runs at lr 0).
//
// The optimizer runs on the host in float32 storage with float64 intermediates, over the
// trainable tensors only: it is a few passes over memory next to a forward and backward pass,
// it needs no graph of its own per tensor shape, and its numbers are exactly the formulas
// above (GoMLX's optimizers differ: Adam's eps 1e-7, AdamW decaying every variable, no global
// norm clipping).
//
// The package knows nothing of the command line: flags, terminals and exit codes live in
// cmd/octlm.
package train
