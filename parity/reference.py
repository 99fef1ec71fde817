#!/usr/bin/env python3
"""Float32 reference logits for octlm's parity protocol, from Hugging Face transformers.

Runs every case of a cases.json (a JSON list of lists of token IDs) through the reference
implementation with everything that could make two correct implementations disagree removed:
float32 weights and activations, eager attention (softmax step by step, no fused kernel),
TF32 off, eval mode, no KV cache. Writes one file per case into the output folder:

    reference-logits-N.safetensors   ids: I64 [T]   logits: F32 [T, vocab]

with the versions and settings in the safetensors metadata. `octlm parity --reference DIR`
reads that folder.

Needs Python 3.9+, torch, transformers (4.57.6 was the post's reference) and safetensors:

    pip install torch transformers==4.57.6 safetensors
    python parity/reference.py --model Qwen/Qwen3-0.6B --revision COMMIT \\
        --cases cases.json --out qwen3-reference
    octlm parity --model Qwen/Qwen3-0.6B@COMMIT --reference qwen3-reference

--model takes a checkpoint folder or a Hub name; pin --revision to the commit octlm loads.
"""

import argparse
import os
import platform
import re
import sys
from pathlib import Path

import torch
import transformers
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM

from reference_cases import read_cases  # parity/reference_cases.py, beside this script

REFERENCE_NAME = re.compile(r"^reference-logits-(0|[1-9][0-9]*)\.safetensors$")


def exact_float32() -> None:
    """Turns off every reduced-precision float32 shortcut (TF32 on Ampere and later GPUs)."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")


def load_model(name: str, revision, device: str):
    """Loads the checkpoint in float32 with eager attention, in eval mode."""
    kwargs = {"revision": revision, "attn_implementation": "eager"}
    major, minor = (int(x) for x in transformers.__version__.split(".")[:2])
    # transformers 4.56 renamed torch_dtype to dtype.
    if (major, minor) >= (4, 56):
        kwargs["dtype"] = torch.float32
    else:
        kwargs["torch_dtype"] = torch.float32
    model = AutoModelForCausalLM.from_pretrained(name, **kwargs)
    model.to(device)
    model.eval()
    if model.training:
        raise SystemExit("model is not in eval mode")
    if model.config._attn_implementation != "eager":
        raise SystemExit(f"attention implementation is {model.config._attn_implementation!r}, want 'eager'")
    for pname, p in model.named_parameters():
        if p.dtype != torch.float32:
            raise SystemExit(f"parameter {pname} is {p.dtype}, want torch.float32")
    return model


def prepare_out(out: Path, overwrite: bool) -> None:
    """Creates the output folder; refuses to mix with an earlier reference unless overwrite."""
    out.mkdir(parents=True, exist_ok=True)
    stale = sorted(p for p in out.iterdir() if REFERENCE_NAME.match(p.name))
    if stale and not overwrite:
        raise SystemExit(f"{out} already holds {len(stale)} reference files; pass --overwrite to replace them")
    for p in stale:
        p.unlink()


def main() -> None:
    parser = argparse.ArgumentParser(description="Write float32 reference logits for octlm parity.")
    parser.add_argument("--model", required=True, help="checkpoint folder or Hugging Face name")
    parser.add_argument("--revision", default=None, help="Hub commit to pin (default: the model's main)")
    parser.add_argument("--cases", required=True, type=Path, help="cases.json: a JSON list of lists of token IDs")
    parser.add_argument("--out", required=True, type=Path, help="reference folder to write")
    parser.add_argument("--device", default="cpu", help="torch device: cpu (default) or cuda")
    parser.add_argument("--overwrite", action="store_true", help="replace reference files already in --out")
    args = parser.parse_args()

    exact_float32()
    cases = read_cases(args.cases)
    model = load_model(args.model, args.revision, args.device)
    vocab = model.config.vocab_size
    for n, ids in enumerate(cases):
        if max(ids) >= vocab:
            raise SystemExit(f"{args.cases}: case {n}: token {max(ids)} is outside the vocabulary [0, {vocab})")
    prepare_out(args.out, args.overwrite)

    metadata = {
        "format": "octlm parity reference",
        "model": args.model,
        "revision": str(getattr(model.config, "_commit_hash", None) or args.revision or ""),
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "device": args.device,
        "dtype": "float32",
        "attn_implementation": "eager",
        "tf32": "off",
        "cases": str(len(cases)),
    }
    with torch.inference_mode():
        for index, ids in enumerate(cases):
            tokens = torch.tensor([ids], dtype=torch.int64, device=args.device)
            logits = model(tokens, use_cache=False).logits[0].to(torch.float32).cpu().contiguous()
            if tuple(logits.shape) != (len(ids), vocab):
                raise SystemExit(f"case {index}: logits shape {tuple(logits.shape)}, want ({len(ids)}, {vocab})")
            if not torch.isfinite(logits).all():
                raise SystemExit(f"case {index}: the reference produced non-finite logits")
            path = args.out / f"reference-logits-{index}.safetensors"
            tmp = path.with_name(path.name + ".tmp")
            save_file(
                {"ids": torch.tensor(ids, dtype=torch.int64), "logits": logits},
                str(tmp),
                metadata=dict(metadata, case=str(index)),
            )
            os.replace(tmp, path)
            print(f"case {index}: {len(ids)} positions -> {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
