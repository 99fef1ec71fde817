#!/usr/bin/python3
"""llama.cpp with a PEFT LoRA adapter vs a float64 PyTorch reference of base + adapter (run through
adapter.sh).

    adapter_compare.py --lllogits BIN --src LLAMA_SRC --work DIR --model MODEL [--threads N]
                       [--scale S] [--out DIR] ADAPTER...

MODEL is a Qwen3 or Qwen3.5 checkpoint folder (config.json, safetensors, cases.json, reference/); each ADAPTER a
PEFT LoRA folder (adapter_config.json, adapter_model.safetensors). Converts MODEL to a float32 GGUF
with llama.cpp's convert_hf_to_gguf.py and every ADAPTER to a float32 GGUF adapter with its
convert_lora_to_gguf.py (both through adapter_gguf.py), has llama.cpp compute every case's logits
with the adapter applied at scale S (default 1: llama.cpp multiplies by alpha / r itself) twice
(the whole case in one batch; one token at a time, the last 64 after the rest in one batch for
cases over 256 tokens), and compares them with the float64 reference: parity/reference_qwen35.py's
eager Qwen3 / Qwen3.5 forward (the DeltaNet layers token by token) on weights merged as PEFT defines LoRA, W + S·(lora_alpha / r)·B·A, in float64
(the same function as PEFT's unmerged x·Wᵀ + S·(alpha/r)·(x·Aᵀ)·Bᵀ, up to float64 rounding).

Also reported, to read the numbers by: llama.cpp without the adapter against the float64 base
(the engine's own float32 floor on this model), the adapter's effect on the reference logits
(max |base+adapter - base|: how much a missing or mis-scaled adapter would show), the float64 base
against MODEL/reference/ (transformers in float32: the forward is the right one), and, for an
adapter folder next to a fine-tuning fixture's reference-losses.json whose step 1 started from it
(init-adapter), the float64 loss of the first batch against the recorded step-1 loss (the merge,
names and alpha / r are PEFT's).

With --out DIR (one ADAPTER only), llama.cpp's batch logits are written as a parity reference
folder, DIR/reference-logits-N.safetensors (ids I64 [T], logits F32 [T, vocab]), for
`octlm parity --model MODEL --adapter ADAPTER --reference DIR` (octlm vs llama.cpp directly).
Prints a markdown table and, last, one JSON line with every number.
"""

import argparse
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

here = Path(__file__).resolve().parent
sys.dont_write_bytecode = True  # no __pycache__ beside the sibling scripts imported below
sys.path.insert(0, str(here.parent))
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from reference_cases import read_cases  # noqa: E402
from reference_qwen35 import Model, forward, read_tensors, write_safetensors  # noqa: E402

# PEFT's names: base_model.model. + the checkpoint's name; the checkpoint's decoder prefix as
# reference_qwen35.Model strips it (Qwen3.5: model.language_model., Qwen3: model.).
PEFT_PREFIXES = ("base_model.model.model.language_model.", "base_model.model.model.")


class Adapter:
    """A PEFT LoRA adapter: its config and, per adapted weight (Model.w's short name), A and B."""

    def __init__(self, folder: Path):
        cfg_path = folder / "adapter_config.json"
        try:
            with open(cfg_path, encoding="utf-8") as f:
                cfg = json.load(f)
        except (OSError, json.JSONDecodeError) as e:
            raise SystemExit(f"{cfg_path}: {e}")
        if cfg.get("peft_type") != "LORA":
            raise SystemExit(f"{cfg_path}: peft_type {cfg.get('peft_type')!r}, want 'LORA'")
        for field, ok in (("use_dora", False), ("use_rslora", False), ("fan_in_fan_out", False)):
            if cfg.get(field, False) != ok:
                # llama.cpp's converter and runtime implement plain LoRA with scale alpha / r only.
                raise SystemExit(f"{cfg_path}: {field} is {cfg[field]!r}; only plain LoRA is compared here")
        r, alpha = cfg.get("r"), cfg.get("lora_alpha")
        if isinstance(r, bool) or not isinstance(r, int) or r < 1:
            raise SystemExit(f"{cfg_path}: r {r!r}: want a positive integer")
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not math.isfinite(alpha):
            raise SystemExit(f"{cfg_path}: lora_alpha {alpha!r}: want a finite number")
        self.folder, self.r, self.alpha = folder, r, float(alpha)
        if cfg.get("rank_pattern") or cfg.get("alpha_pattern"):
            raise SystemExit(f"{cfg_path}: rank_pattern/alpha_pattern are not supported here")
        raw = read_tensors(folder / "adapter_model.safetensors")
        self.pairs = {}
        for name, arr in raw.items():
            prefix = next((p for p in PEFT_PREFIXES if name.startswith(p)), None)
            for part in ("lora_A", "lora_B"):
                suffix = f".{part}.weight"
                if prefix is not None and name.endswith(suffix):
                    key = name[len(prefix):-len(suffix)] + ".weight"
                    self.pairs.setdefault(key, {})[part] = arr
                    break
            else:
                raise SystemExit(f"{folder}/adapter_model.safetensors: tensor {name}: not a PEFT lora_A/lora_B weight")
        for key, p in self.pairs.items():
            if set(p) != {"lora_A", "lora_B"}:
                raise SystemExit(f"{folder}: {key} has {sorted(p)} only, want lora_A and lora_B")
            a, b = p["lora_A"], p["lora_B"]
            if a.ndim != 2 or b.ndim != 2 or a.shape[0] != self.r or b.shape[1] != self.r:
                raise SystemExit(f"{folder}: {key}: lora_A {list(a.shape)}, lora_B {list(b.shape)} are not [r, in], [out, r] with r {self.r}")

    def merged(self, model: Model, w: dict, scale: float) -> dict:
        """float64 weights of model with every adapted W replaced by W + scale·(alpha/r)·B·A."""
        out = dict(w)
        s = scale * self.alpha / self.r
        for key, p in self.pairs.items():
            if key not in w or key in ("embed_tokens.weight", "lm_head.weight"):
                raise SystemExit(f"{self.folder}: adapts {key}, which {model.cfg.get('model_type')} has no plain linear weight for")
            a = torch.from_numpy(np.asarray(p["lora_A"], dtype=np.float64))
            b = torch.from_numpy(np.asarray(p["lora_B"], dtype=np.float64))
            if (b.shape[0], a.shape[1]) != tuple(w[key].shape):
                raise SystemExit(f"{self.folder}: {key}: B·A is {[b.shape[0], a.shape[1]]}, the weight {list(w[key].shape)}")
            out[key] = w[key] + s * (b @ a)
        return out


def first_batch_loss(model: Model, w: dict, adapter: Adapter):
    """The float64 loss of the first training batch with the adapter, against the recorded step-1
    loss, where adapter sits in a fine-tuning fixture (train.json, reference-losses.json beside it,
    train.jsonl one folder up) as its starting point; None otherwise."""
    run = adapter.folder.parent
    losses_path, train_json, data = run / "reference-losses.json", run / "train.json", run.parent / "train.jsonl"
    if adapter.folder.name != "init-adapter" or not (losses_path.is_file() and train_json.is_file() and data.is_file()):
        return None
    with open(losses_path, encoding="utf-8") as f:
        want = json.load(f)[0]
    with open(train_json, encoding="utf-8") as f:
        batch = int(json.load(f)["batch"])
    with open(data, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()][:batch]
    total, counted = 0.0, 0
    with torch.no_grad():
        for row in rows:
            ids = row["input_ids"]
            labels = torch.tensor(row.get("labels", ids)[1:], dtype=torch.int64)
            logits = forward(model, w, ids, torch.float64)[:-1]
            keep = labels != -100
            total += F.cross_entropy(logits[keep], labels[keep], reduction="sum").item()
            counted += int(keep.sum())
    got = total / counted
    return {"loss": got, "want": want["loss"], "abs_diff": abs(got - want["loss"]), "tokens": counted, "want_tokens": want["tokens"]}


def lllogits(a, mode: str, gguf_path: Path, tok: Path, out: Path, shape, lora: Path = None) -> np.ndarray:
    n = shape[0]
    prefix = max(0, n - 64) if n > 256 else 0
    env = dict(os.environ, LLB_PREFIX=str(prefix if mode == "step" else 0), LLB_LORA=str(lora or ""),
               LLB_LORA_SCALE=repr(a.scale))
    quiet_run([str(a.lllogits), mode, str(gguf_path), str(a.threads), str(tok), str(out)], env)
    return np.fromfile(out, dtype="<f4").reshape(shape).astype(np.float64), prefix


def convert(a, *args) -> None:
    quiet_run([sys.executable, str(here / "adapter_gguf.py"), "--src", str(a.src), *map(str, args)], os.environ)


class PeerFailed(Exception):
    """A converter or lllogits exited non-zero; the message ends with the tail of its log."""


def quiet_run(cmd: list, env) -> None:
    """Runs cmd, its log kept (shown live with LLB_VERBOSE=1); on failure raises PeerFailed with the
    log's last lines, control characters removed (file names and model text reach the terminal)."""
    if os.environ.get("LLB_VERBOSE"):
        rc, log = subprocess.run(cmd, env=env).returncode, ""
    else:
        done = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        rc, log = done.returncode, done.stderr.decode("utf-8", "replace")
    if rc != 0:
        tail = "\n".join(log.splitlines()[-15:])
        tail = "".join(c if c.isprintable() or c in "\n\t" else "?" for c in tail)
        raise PeerFailed(f"{Path(cmd[0]).name} {' '.join(cmd[1:3])} ... exited with status {rc}\n{tail}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lllogits", required=True, type=Path)
    ap.add_argument("--src", required=True, type=Path)
    ap.add_argument("--work", required=True, type=Path)
    ap.add_argument("--model", required=True, type=Path)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("adapters", nargs="+", type=Path)
    a = ap.parse_args()
    if a.out is not None and len(a.adapters) != 1:
        raise SystemExit("--out writes one reference folder: give exactly one adapter with it")
    if not math.isfinite(a.scale):
        raise SystemExit(f"--scale {a.scale}: want a finite number")
    a.work.mkdir(parents=True, exist_ok=True)
    model = Model(a.model)
    adapters = [Adapter(d) for d in a.adapters]  # refuse bad input before the slow part
    cases = read_cases(a.model / "cases.json")
    base_gguf = a.work / "base-f32.gguf"
    convert(a, "base", a.model, base_gguf)
    w64 = model.tensors(torch.float64)
    rows, base_rows, checks = [], [], []
    with torch.no_grad():
        base_ref = [forward(model, w64, ids, torch.float64).numpy() for ids in cases]
    for n, ids in enumerate(cases):
        tok = a.work / f"case-{n}.i32"
        np.array(ids, dtype="<i4").tofile(tok)
        got, _ = lllogits(a, "batch", base_gguf, tok, a.work / f"base-{n}.f32", base_ref[n].shape)
        r = {"case": n, "positions": len(ids), "llamacpp_max_abs": float(np.abs(got - base_ref[n]).max()),
             "llamacpp_top_agree": float((got.argmax(-1) == base_ref[n].argmax(-1)).mean())}
        ref_file = a.model / "reference" / f"reference-logits-{n}.safetensors"
        if ref_file.is_file():
            t = read_tensors(ref_file)
            if list(t["ids"]) != ids:
                raise SystemExit(f"{ref_file}: its ids differ from {a.model}/cases.json case {n}")
            r["float64_vs_checkpoint_reference"] = float(np.abs(base_ref[n] - t["logits"].astype(np.float64)).max())
        base_rows.append(r)
        print(json.dumps(dict(r, adapter=None)), file=sys.stderr)
    for ad in adapters:
        name = ad.folder.name
        lora_gguf = a.work / f"{name}-lora-f32.gguf"
        convert(a, "lora", "--base", a.model, ad.folder, lora_gguf)
        w = ad.merged(model, w64, a.scale)
        check = first_batch_loss(model, w, ad)
        if check is not None:
            checks.append(dict(check, adapter=str(ad.folder)))
        for n, ids in enumerate(cases):
            with torch.no_grad():
                want = forward(model, w, ids, torch.float64).numpy()
            tok = a.work / f"case-{n}.i32"
            top2 = np.sort(want, axis=-1)[:, -2:]
            row = {"adapter": str(ad.folder), "case": n, "positions": len(ids),
                   "adapter_effect": float(np.abs(want - base_ref[n]).max()),
                   "reference_min_top2_gap": float((top2[:, 1] - top2[:, 0]).min())}
            for mode in ("batch", "step"):
                got, prefix = lllogits(a, mode, base_gguf, tok, a.work / f"{name}-{n}-{mode}.f32", want.shape, lora_gguf)
                if mode == "step":
                    got, want_m = got[prefix:], want[prefix:]
                    row["step_positions"] = len(ids) - prefix
                else:
                    want_m = want
                    if a.out is not None:
                        a.out.mkdir(parents=True, exist_ok=True)
                        write_safetensors(a.out / f"reference-logits-{n}.safetensors",
                                          {"ids": ("I64", np.array(ids, dtype="<i8")), "logits": ("F32", got.astype("<f4"))},
                                          {"format": "octlm parity reference",
                                           "reference": "llama.cpp (node-llama-cpp 3.22.1), float32 GGUF + LoRA GGUF adapter, batch",
                                           "adapter": str(ad.folder), "adapter_scale": a.scale, "case": n})
                row[f"{mode}_max_abs"] = float(np.abs(got - want_m).max())
                row[f"{mode}_top_agree"] = float((got.argmax(-1) == want_m.argmax(-1)).mean())
            rows.append(row)
            print(json.dumps(row), file=sys.stderr)
    print(f"Base + adapter at scale {a.scale:g} (llama.cpp applies alpha / r itself), against the float64 reference "
          "W + scale·(alpha/r)·B·A:\n")
    print("| adapter | case | tokens | batch: max abs | batch: top-1 agree | token by token (positions): max abs | top-1 agree "
          "| adapter's effect on the reference | reference's smallest top-2 gap |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| `{Path(r['adapter']).name}` | {r['case']} | {r['positions']} | {r['batch_max_abs']:.1e} | {r['batch_top_agree']:.1%} | "
              f"({r['step_positions']}) {r['step_max_abs']:.1e} | {r['step_top_agree']:.1%} | "
              f"{r['adapter_effect']:.1e} | {r['reference_min_top2_gap']:.1e} |")
    print("\nWithout an adapter (llama.cpp batch vs the float64 base; the float64 base vs the checkpoint's reference/):\n")
    print("| case | tokens | llama.cpp: max abs | top-1 agree | float64 vs reference/ |")
    print("| --- | --- | --- | --- | --- |")
    for r in base_rows:
        ck = r.get("float64_vs_checkpoint_reference")
        print(f"| {r['case']} | {r['positions']} | {r['llamacpp_max_abs']:.1e} | {r['llamacpp_top_agree']:.1%} | "
              f"{'—' if ck is None else f'{ck:.1e}'} |")
    for c in checks:
        print(f"\nReference self-check: `{Path(c['adapter']).name}`, first training batch, float64 loss {c['loss']:.12f} vs the "
              f"fixture's step-1 loss {c['want']:.12f} (|diff| {c['abs_diff']:.1e}, {c['tokens']} tokens)")
    print(json.dumps({"model": str(a.model), "scale": a.scale, "rows": rows, "base": base_rows, "loss_checks": checks}))


if __name__ == "__main__":
    try:
        main()
    except PeerFailed as e:
        print(f"adapter_compare.py: {e}", file=sys.stderr)
        sys.exit(1)
    except SystemExit as e:
        if isinstance(e.code, str):  # bad input, refused with a message naming the file or field
            print(e.code, file=sys.stderr)
            sys.exit(2)
        raise
