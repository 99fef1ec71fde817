#!/usr/bin/python3
"""Float64 fine-tuning reference: the gradients, losses and final weights of a few training steps
of a Qwen3 or Qwen3.5 checkpoint, as PyTorch, PEFT and transformers' Trainer compute them.

The forward is reference_qwen35.py's eager decoder (imported, not copied), run in float64 and
differentiated by torch.autograd, one row at a time at its own length (a right-padded batch's real
positions never see the padding, so this is the batch's arithmetic). Around it:

  - LoRA as PEFT's LoraLayer computes it, W_eff = W + (alpha/r)·B·A (no dropout), whose gradient
    with respect to A and B is that of y = x·Wᵀ + (alpha/r)·(x·Aᵀ)·Bᵀ; or every weight trained
    (a tied embedding is one tensor used twice: its gradient sums both uses);
  - transformers' causal-LM loss: labels shifted left by one, -100 ignored, the sum over the
    batch's counted tokens divided by their number;
  - torch.optim.AdamW, torch.nn.utils.clip_grad_norm_ (the global norm is recorded before
    clipping; max_grad_norm 0 means no clipping), and transformers'
    get_{constant,linear,cosine}_schedule_with_warmup as a LambdaLR (so step k runs at the
    multiplier of k - 1).

Data rows are {"input_ids": [...], "labels": [...]} (labels optional); step k takes rows
(k-1)·B ... k·B-1 in file order, wrapping around. Settings come from a train.json (steps, batch,
lr, weight_decay, max_grad_norm, schedule, warmup, beta1, beta2, eps, full, lora_r, lora_alpha).

Writes into --out: reference-gradients.safetensors (the trainable tensors' gradients on the first
batch, before clipping; PEFT's names for LoRA, the checkpoint's for full), reference-losses.json
(per step: loss, grad_norm, lr, tokens), and reference-adapter/ (LoRA: adapter_config.json of the
initial adapter, adapter_model.safetensors) or reference-model.safetensors (full), all float32 of
the float64 values.

Needs only /usr/bin/python3 with Debian's python3-torch and python3-numpy:

    /usr/bin/python3 parity/reference_train.py --model testdata/tiny-qwen3 \\
        --data testdata/tiny-qwen3-finetune/train.jsonl \\
        --settings testdata/tiny-qwen3-finetune/lora/train.json \\
        --init-adapter testdata/tiny-qwen3-finetune/lora/init-adapter --out /tmp/ref-lora
"""

import argparse
import json
import math
import shutil
import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from reference_qwen35 import Model, forward, read_tensors, write_safetensors  # noqa: E402

PEFT_PREFIX = "base_model.model."


def schedule_lambda(kind: str, warmup: int, total: int):
    """transformers' lr_lambda of get_{constant,linear,cosine}_schedule_with_warmup."""

    def f(step: int) -> float:
        if step < warmup:
            return float(step) / float(max(1, warmup))
        if kind == "constant":
            return 1.0
        if kind == "linear":
            return max(0.0, float(total - step) / float(max(1, total - warmup)))
        if kind == "cosine":
            progress = float(step - warmup) / float(max(1, total - warmup))
            return max(0.0, 0.5 * (1.0 + math.cos(math.pi * 0.5 * 2.0 * progress)))
        raise SystemExit(f"unknown schedule {kind!r}")

    return f


def read_rows(path: Path):
    rows = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            row = json.loads(line)
            ids = row["input_ids"]
            labels = row.get("labels", ids)
            if len(labels) != len(ids):
                raise SystemExit(f"{path}:{n}: {len(labels)} labels for {len(ids)} input_ids")
            rows.append((ids, labels))
    return rows


def checkpoint_prefix(model: Model) -> str:
    """The prefix of the decoder's tensors in the checkpoint (reference_qwen35.Model strips it)."""
    return "model.language_model." if model.arch == "qwen3_5" else "model."


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", type=Path, required=True)
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--settings", type=Path, required=True)
    ap.add_argument("--init-adapter", type=Path, help="the starting adapter (LoRA runs)")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()

    with open(args.settings, encoding="utf-8") as f:
        s = json.load(f)
    torch.set_grad_enabled(True)
    dt = torch.float64
    model = Model(args.model)
    prefix = checkpoint_prefix(model)
    base = model.tensors(dt)
    tied = model.w["lm_head.weight"] is model.w["embed_tokens.weight"]
    rows = read_rows(args.data)

    names = {}  # trainable name -> tensor
    if s["full"]:
        for k, v in base.items():
            if k == "lm_head.weight" and tied:
                continue
            v.requires_grad_(True)
            names[k if k == "lm_head.weight" else prefix + k] = v
        if tied:
            base["lm_head.weight"] = base["embed_tokens.weight"]
        modules = []
    else:
        if args.init_adapter is None:
            raise SystemExit("a LoRA run needs --init-adapter")
        with open(args.init_adapter / "adapter_config.json", encoding="utf-8") as f:
            acfg = json.load(f)
        scale = acfg["lora_alpha"] / (math.sqrt(acfg["r"]) if acfg.get("use_rslora") else acfg["r"])
        init = read_tensors(args.init_adapter / "adapter_model.safetensors")
        modules = sorted({n[len(PEFT_PREFIX):].rsplit(".lora_", 1)[0] for n in init})
        for m in modules:
            for part in ("lora_A", "lora_B"):
                n = f"{PEFT_PREFIX}{m}.{part}.weight"
                names[n] = torch.from_numpy(np.asarray(init[n], dtype=np.float64)).requires_grad_(True)

    def weights():
        if s["full"]:
            return base
        w = dict(base)
        for m in modules:
            short = m[len(prefix):] + ".weight"
            a, b = names[f"{PEFT_PREFIX}{m}.lora_A.weight"], names[f"{PEFT_PREFIX}{m}.lora_B.weight"]
            w[short] = base[short] + scale * (b @ a)
        return w

    params = list(names.values())
    opt = torch.optim.AdamW(params, lr=s["lr"], betas=(s["beta1"], s["beta2"]), eps=s["eps"],
                            weight_decay=s["weight_decay"])
    sched = torch.optim.lr_scheduler.LambdaLR(opt, schedule_lambda(s["schedule"], s["warmup"], s["steps"]))
    B = s["batch"]
    losses, first_grads = [], None
    for step in range(1, s["steps"] + 1):
        batch = [rows[((step - 1) * B + j) % len(rows)] for j in range(B)]
        tokens = sum(sum(1 for l in labels[1:] if l != -100) for _, labels in batch)
        opt.zero_grad()
        w = weights()
        total = torch.zeros((), dtype=dt)
        for ids, labels in batch:
            logits = forward(model, w, ids, dt)
            target = torch.tensor(labels[1:], dtype=torch.int64)
            total = total + F.cross_entropy(logits[:-1], target, ignore_index=-100, reduction="sum")
        loss = total / tokens
        loss.backward()
        if step == 1:
            first_grads = {n: p.grad.detach().clone() for n, p in names.items()}
        max_norm = s["max_grad_norm"] if s["max_grad_norm"] > 0 else math.inf
        grad_norm = torch.nn.utils.clip_grad_norm_(params, max_norm).item()
        lr = opt.param_groups[0]["lr"]
        opt.step()
        sched.step()
        losses.append({"step": step, "loss": loss.item(), "grad_norm": grad_norm, "lr": lr, "tokens": tokens})
        print(f"step {step}: loss {loss.item():.6f} grad_norm {grad_norm:.6f} lr {lr:g} tokens {tokens}", file=sys.stderr)

    out = args.out
    out.mkdir(parents=True, exist_ok=True)

    def f32(t):
        return ("F32", t.detach().numpy().astype(np.float32))

    write_safetensors(out / "reference-gradients.safetensors", {n: f32(g) for n, g in first_grads.items()}, {"format": "pt"})
    with open(out / "reference-losses.json", "w", encoding="utf-8") as f:
        json.dump(losses, f, indent=1)
        f.write("\n")
    final = {n: f32(p) for n, p in names.items()}
    if s["full"]:
        write_safetensors(out / "reference-model.safetensors", final, {"format": "pt"})
    else:
        (out / "reference-adapter").mkdir(exist_ok=True)
        shutil.copyfile(args.init_adapter / "adapter_config.json", out / "reference-adapter" / "adapter_config.json")
        write_safetensors(out / "reference-adapter" / "adapter_model.safetensors", final, {"format": "pt"})


if __name__ == "__main__":
    main()
