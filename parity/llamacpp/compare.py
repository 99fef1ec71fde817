#!/usr/bin/python3
"""llama.cpp vs the float64 PyTorch reference on Qwen3.5 fixtures (run through run.sh).

    compare.py --lllogits BIN --work DIR [--threads N] [--out DIR] FIXTURE...

For each fixture folder (config.json, safetensors, cases.json, reference/): converts it to a
float32 GGUF with qwen35_gguf.py, has llama.cpp compute every case's logits twice (the whole case
in one batch, and one token at a time: every token for cases up to 256 tokens, the last 64 after
the rest in one batch for longer ones), and compares both with reference/reference-logits-N:
max |llama.cpp - reference| over all positions and vocabulary entries, and the share of positions
whose top token agrees. It also compares llama.cpp's batch logits with the same float64 reference
computed with ggml's L2-norm convention (x / max(||x||, eps) instead of x * rsqrt(sum x^2 + eps)),
to show how much of the gap that convention explains. With --out, llama.cpp's batch logits are also written as a reference
folder per fixture (OUT/FIXTURE/reference-logits-N.safetensors, the parity format), so that
`octlm parity --model FIXTURE --reference OUT/FIXTURE` reports octlm vs llama.cpp directly.
Prints a markdown table and, last, one JSON line with every number.
"""

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

here = Path(__file__).resolve().parent
sys.dont_write_bytecode = True  # no __pycache__ beside the sibling scripts imported below
sys.path.insert(0, str(here.parent))
sys.path.insert(0, str(here))
import torch  # noqa: E402
from reference_qwen35 import Model, forward, read_tensors, write_safetensors  # noqa: E402
from qwen35_gguf import convert  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lllogits", required=True, type=Path)
    ap.add_argument("--work", required=True, type=Path)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("fixtures", nargs="+", type=Path)
    a = ap.parse_args()
    a.work.mkdir(parents=True, exist_ok=True)
    rows = []
    for fx in a.fixtures:
        gguf_path = a.work / f"{fx.name}-f32.gguf"
        convert(fx, gguf_path)
        with open(fx / "cases.json", encoding="utf-8") as f:
            cases = json.load(f)
        model = Model(fx)
        w64 = model.tensors(torch.float64)
        for n, ids in enumerate(cases):
            ref = read_tensors(fx / "reference" / f"reference-logits-{n}.safetensors")
            want = ref["logits"].astype(np.float64)
            if list(ref["ids"]) != ids:
                raise SystemExit(f"{fx}: case {n}: reference ids differ from cases.json")
            tok = a.work / f"{fx.name}-{n}.i32"
            np.array(ids, dtype="<i4").tofile(tok)
            row = {"fixture": fx.name, "case": n, "positions": len(ids)}
            for mode in ("batch", "step"):
                out = a.work / f"{fx.name}-{n}-{mode}.f32"
                prefix = max(0, len(ids) - 64) if len(ids) > 256 else 0
                env = dict(os.environ, LLB_PREFIX=str(prefix if mode == "step" else 0))
                subprocess.run([str(a.lllogits), mode, str(gguf_path), str(a.threads), str(tok), str(out)],
                               check=True, env=env, stderr=subprocess.DEVNULL if not os.environ.get("LLB_VERBOSE") else None)
                got = np.fromfile(out, dtype="<f4").reshape(want.shape)
                if mode == "step":  # only the positions decoded one at a time
                    got, want_m = got[prefix:], want[prefix:]
                    row["step_positions"] = len(ids) - prefix
                else:
                    want_m = want
                row[f"{mode}_max_abs"] = float(np.abs(got - want_m).max())
                row[f"{mode}_top_agree"] = float((got.argmax(-1) == want_m.argmax(-1)).mean())
                if mode == "batch":
                    with torch.no_grad():
                        ggml_ref = forward(model, w64, ids, torch.float64, "recurrent", l2="ggml").numpy()
                    row["batch_vs_ggml_l2_reference"] = float(np.abs(got - ggml_ref).max())
                    row["l2_convention_effect"] = float(np.abs(ggml_ref - want).max())
                if mode == "batch" and a.out is not None:
                    d = a.out / fx.name
                    d.mkdir(parents=True, exist_ok=True)
                    write_safetensors(d / f"reference-logits-{n}.safetensors",
                                      {"ids": ("I64", np.array(ids, dtype="<i8")), "logits": ("F32", got.astype("<f4"))},
                                      {"format": "octlm parity reference", "reference": "llama.cpp (node-llama-cpp 3.22.1), float32 GGUF, batch",
                                       "case": n})
            rows.append(row)
            print(json.dumps(row), file=sys.stderr)
    print("| fixture | case | tokens | batch: max abs | batch: top-1 agree | token by token (positions): max abs | top-1 agree "
          "| batch vs reference with ggml's L2 norm | the L2 convention alone |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| `{r['fixture']}` | {r['case']} | {r['positions']} | {r['batch_max_abs']:.1e} | {r['batch_top_agree']:.1%} | "
              f"({r['step_positions']}) {r['step_max_abs']:.1e} | {r['step_top_agree']:.1%} | "
              f"{r['batch_vs_ggml_l2_reference']:.1e} | {r['l2_convention_effect']:.1e} |")
    print(json.dumps({"rows": rows}))


if __name__ == "__main__":
    main()
