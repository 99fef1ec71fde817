#!/usr/bin/env python3
"""bench/decodepairs_summary.py: the JSON lines bench/decodepairs.sh prints, summed up.

    python3 bench/decodepairs_summary.py pairs.jsonl

For each dtype: one row per pair (llama.cpp's and octlm's decode tokens/s, their ratio, and each
engine's decode roofline: weight bytes read per token × tokens/s ÷ the read bandwidth octlm bench
measured in that pair, so both are set against the same ceiling), then the ratios' median,
quartiles and range, and in how many pairs octlm decoded at least as fast; where the pairs also
ran an earlier build (OLD_OCTLM, "octlm-old"), its ratio beside. Then the same for the prompt's
prefill tokens/s (both engines run a 128-token prompt before they decode), counted against the
prefill goals (2.0 for float32, 1.0 for bfloat16).
"""
import json
import statistics
import sys


def quartiles(xs):
    """(lower quartile, median, upper quartile) of xs (at least one value)."""
    if len(xs) < 2:
        return xs[0], xs[0], xs[0]
    q = statistics.quantiles(xs, n=4, method="inclusive")
    return q[0], q[1], q[2]


def main(path):
    runs = [json.loads(line) for line in open(path, encoding="utf-8") if line.startswith("{")]
    for dtype in ("f32", "bf16"):
        pairs = {}
        for r in runs:
            if r.get("dtype") == dtype and "error" not in r:
                pairs.setdefault(r["pair"], {})[r["engine"]] = r
        done = [(n, p) for n, p in sorted(pairs.items()) if {"octlm", "llama.cpp"} <= p.keys()]
        if not done:
            continue
        print(f"\n{dtype}: {len(done)} pairs\n")
        old = any("octlm-old" in p for _, p in done)
        print("| pair | llama.cpp tokens/s | octlm tokens/s | octlm ÷ llama.cpp | roofline llama.cpp / octlm | read bandwidth |"
              + (" old build ÷ llama.cpp |" if old else ""))
        print("| --- | --- | --- | --- | --- | --- |" + (" --- |" if old else ""))
        ratios, old_ratios = [], []
        for n, p in done:
            mine, peer = p["octlm"], p["llama.cpp"]
            ratio = mine["decode_tokens_per_second"] / peer["decode_tokens_per_second"]
            ratios.append(ratio)
            ceiling, per_token = mine["read_bandwidth_bytes_per_second"], mine["weight_bytes_per_token"]
            roof = lambda tps: per_token * tps / ceiling
            cell = ""
            if "octlm-old" in p:
                old_ratios.append(p["octlm-old"]["decode_tokens_per_second"] / peer["decode_tokens_per_second"])
                cell = f" {old_ratios[-1]:.2f} |"
            elif old:
                cell = " |"
            print(f"| {n} | {peer['decode_tokens_per_second']:.2f} | {mine['decode_tokens_per_second']:.2f} | "
                  f"{ratio:.2f} | {roof(peer['decode_tokens_per_second']):.2f} / {roof(mine['decode_tokens_per_second']):.2f} | "
                  f"{ceiling / 1e9:.1f} GB/s |" + cell)
        prefill = [p["octlm"]["prefill_tokens_per_second"] / p["llama.cpp"]["prefill_tokens_per_second"] for _, p in done]
        old_prefill = [p["octlm-old"]["prefill_tokens_per_second"] / p["llama.cpp"]["prefill_tokens_per_second"]
                       for _, p in done if "octlm-old" in p]
        for name, rs in (("ratio", ratios), ("old build's ratio", old_ratios),
                         ("prefill ratio", prefill), ("old build's prefill ratio", old_prefill)):
            if rs:
                goal = 2.0 if dtype == "f32" and "prefill" in name else 1.0  # issue 34's goals
                lo, med, hi = quartiles(rs)
                met = sum(r >= goal for r in rs)
                print(f"\n{name}: median {med:.3f}, quartiles {lo:.3f}–{hi:.3f}, range {min(rs):.2f}–{max(rs):.2f}; "
                      f"≥ {goal:.1f} in {met} of {len(rs)} pairs")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
