#!/usr/bin/env python3
"""bench/sidebyside_table.py: the JSON objects bench/sidebyside.sh prints, as a Markdown table.

    python3 bench/sidebyside_table.py sitting.jsonl

One row per run in order: prefill and decode tokens/s, each as a ratio to the llama.cpp run of
the same dtype, depth and round; decode's roofline ratio (weight bytes read per token × decode
tokens/s ÷ the read bandwidth octlm bench measured: for a llama.cpp run, with the weight bytes and
bandwidth of the octlm runs of its dtype, depth and round, so both engines are set against the same
ceiling); peak RSS; for octlm runs with --batch, B=8's aggregate decode tokens/s and its speed-up
over B=1. Then, for the runs that timed their steps (the pure-Go engine, decode_steps), where a
decode step went: its products (and the bytes of weights a second they read), attention, the
graph's other parts, the graph's run between them, and the rest outside the graph, at B=1 and at
B=8.
"""
import json
import re
import sys


def key(run):
    """(dtype, depth, round) of a run name such as 'onnx f32 d0 r1'."""
    parts = run.split()
    dtype = next((p for p in parts if p in ("f32", "bf16", "f16")), "")
    depth = next((p for p in parts if re.fullmatch(r"d\d+", p)), "")
    rnd = next((p for p in parts if re.fullmatch(r"r\d+", p)), "")
    return dtype, depth, rnd


def main(path):
    text, rows, at = open(path, encoding="utf-8").read(), [], 0
    decoder = json.JSONDecoder()
    while True:  # one object per run, octlm's spread over several lines
        at = text.find("{", at)
        if at < 0:
            break
        row, at = decoder.raw_decode(text, at)
        rows.append(row)
    peers = {key(r["run"]): r for r in rows if r["run"].startswith("llama.cpp") and "error" not in r}
    ceilings = {}  # (dtype, depth, round): [(weight bytes a token, read bandwidth)] of octlm's runs
    for r in rows:
        if "error" not in r and r.get("read_bandwidth_bytes_per_second"):
            ceilings.setdefault(key(r["run"]), []).append(
                (r["weight_bytes_per_token"], r["read_bandwidth_bytes_per_second"]))
    print("| run | prefill tokens/s | decode tokens/s | prefill ÷ llama.cpp | decode ÷ llama.cpp | decode roofline | peak RSS | B=8 tokens/s (× B=1) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        if "error" in r:
            print(f"| {r['run']} | {r['error']} | | | | | | |")
            continue
        peer = peers.get(key(r["run"]))
        pre, dec = r["prefill_tokens_per_second"], r["decode_tokens_per_second"]
        ratio = lambda mine, field: f"{mine / peer[field]:.2f}" if peer and peer is not r else ""
        batch = ""
        for b in r.get("batches") or []:
            if b["batch"] == 8:
                batch = f"{b['decode_tokens_per_second']:.2f} ({b['speed_up']:.2f}×)"
        roofline = ""
        if "roofline_ratio" in r:
            roofline = f"{r['roofline_ratio']:.2f}"
        elif ceilings.get(key(r["run"])):
            c = ceilings[key(r["run"])]
            weights = sum(w for w, _ in c) / len(c)
            bandwidth = sum(b for _, b in c) / len(c)
            roofline = f"{weights * dec / bandwidth:.2f}"
        rss = r.get("peak_rss_bytes", 0) / 2**30
        print(f"| {r['run']} | {pre:.1f} | {dec:.2f} | {ratio(pre, 'prefill_tokens_per_second')} | "
              f"{ratio(dec, 'decode_tokens_per_second')} | {roofline} | {rss:.2f} GiB | {batch} |")

    timed = [r for r in rows if "error" not in r and r.get("decode_steps")]
    if not timed:
        return
    print()
    print("| run | B | step ms | products ms | their weights GB/s | attention ms | other parts ms | between the parts ms | outside the graph ms |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in timed:
        steps = [(1, r["decode_ms_per_token"], r["decode_steps"])]
        steps += [(b["batch"], b["decode_ms_per_step"], b["steps"]) for b in r.get("batches") or []
                  if b["batch"] == 8 and b.get("steps")]
        for batch, ms, s in steps:
            parts = s["products_ms_per_token"] + s["attention_ms_per_token"] + s["other_parts_ms_per_token"]
            graph = s.get("graph_ms_per_token", parts)  # absent before the graph's whole run was timed
            between = f"{graph - parts:.1f}" if "graph_ms_per_token" in s else ""
            print(f"| {r['run']} | {batch} | {ms:.1f} | {s['products_ms_per_token']:.1f} | "
                  f"{s['product_read_bytes_per_second'] / 1e9:.1f} | {s['attention_ms_per_token']:.1f} | "
                  f"{s['other_parts_ms_per_token']:.1f} | {between} | {ms - graph:.1f} |")


if __name__ == "__main__":
    main(sys.argv[1])
