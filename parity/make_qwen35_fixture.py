#!/usr/bin/python3
"""Writes tiny random Qwen3.5 checkpoints in the Hub's multimodal layout, for octlm's tests.

    /usr/bin/python3 parity/make_qwen35_fixture.py NAME OUT_DIR

NAME is one of the presets below. OUT_DIR gets config.json (a Qwen3_5ForConditionalGeneration
config with text_config and a small vision_config, as the Hub ships them), the weights (BF16, with
linear_attn.norm.weight in F32; text weights under model.language_model.*, small dummy
model.visual.* and mtp.* tensors a text decoder must skip; one model.safetensors or the Hub's
sharded model-0000N-of-0000M.safetensors + model.safetensors.index.json) and cases.json. The
reference logits come from parity/reference_qwen35.py (see testdata/README.md for the command).

Only numpy is needed. Weights are deterministic for a preset (numpy's PCG64 seeded per preset).
"""

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.dont_write_bytecode = True  # no __pycache__ beside the sibling scripts imported below
sys.path.insert(0, str(Path(__file__).resolve().parent))
from reference_qwen35 import write_safetensors  # noqa: E402

PRESETS = {
    # Untied head (lm_head.weight), equal key and value heads, the Hub's 3+1 layer pattern twice,
    # sharded into three files.
    "tiny-qwen35-sharded": dict(
        seed=3501, vocab=384, hidden=48, layers=8, heads=4, kv_heads=1, head_dim=24, ff=80,
        k_heads=3, v_heads=3, k_dim=16, v_dim=16, conv=4, tie=False, shards=3,
        layer_types=None, interval=4, mrope=[1, 1, 1],
        cases=[1, 3, 33, 130], greedy=[[1, 2, 3], [100], [7, 7, 7, 7]],
    ),
    # Three value heads per key head (as no Hub model has, to pin the head mapping: value head h
    # reads key head h // 3), head dims 32, attention heads 64 wide with 16 rotary dims, and an
    # irregular layer pattern (full attention first, linear last) that full_attention_interval
    # cannot describe, so only layer_types gives it. A 1,300-token case (21 DeltaNet chunks of
    # 64) and cases at the chunk edges 64, 65 and 129.
    "tiny-qwen35-wide": dict(
        seed=3502, vocab=256, hidden=64, layers=5, heads=2, kv_heads=2, head_dim=64, ff=112,
        k_heads=2, v_heads=6, k_dim=32, v_dim=32, conv=4, tie=True, shards=1,
        layer_types=["full_attention", "linear_attention", "linear_attention", "full_attention", "linear_attention"],
        interval=4, mrope=[3, 3, 2],
        cases=[2, 64, 65, 129, 1300], greedy=[[5, 6], [250]],
    ),
    # The shape of a checkpoint on which ONNX Runtime once failed the 1e-3 gate (issue 30): 8
    # layers (L L L F) ×2, two value heads per key head (3 key / 6 value), untied head, three
    # shards, and a 500-token case (32 DeltaNet chunks of 16) where the float32 error peaked.
    "tiny-qwen35-grouped": dict(
        seed=3506, vocab=384, hidden=48, layers=8, heads=4, kv_heads=1, head_dim=24, ff=80,
        k_heads=3, v_heads=6, k_dim=16, v_dim=16, conv=4, tie=False, shards=3,
        layer_types=None, interval=4, mrope=[1, 1, 1],
        cases=[4, 100, 500], greedy=[[9, 8, 7], [42]],
    ),
    # Not a testdata fixture (1.5 GB): Qwen3.5-0.8B's exact text shape, for comparing octlm and
    # llama.cpp at the real head sizes (attention head_dim 256 with 64 rotary dims, DeltaNet heads
    # of 128, vocabulary 248,320), with the same scaled random values as the tiny fixtures.
    "qwen35-0.8b-shape": dict(
        seed=3508, vocab=248320, hidden=1024, layers=24, heads=8, kv_heads=2, head_dim=256, ff=3584,
        k_heads=16, v_heads=16, k_dim=128, v_dim=128, conv=4, tie=True, shards=1,
        layer_types=None, interval=4, mrope=[11, 11, 10],
        cases=[8, 70], greedy=[],
    ),
}


def bf16(x: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bits (uint16), round to nearest even."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype("<u2")


def weights(p: dict, rng) -> dict:
    """Text weights (HF names under model.language_model., float32) plus lm_head when untied."""
    H, V, I = p["hidden"], p["vocab"], p["ff"]
    nh, nkv, hd = p["heads"], p["kv_heads"], p["head_dim"]
    nk, nv, dk, dv, K = p["k_heads"], p["v_heads"], p["k_dim"], p["v_dim"], p["conv"]

    def lin(o, i, gain=1.0):
        return rng.standard_normal((o, i)).astype(np.float32) * np.float32(gain / np.sqrt(i))

    def zero_centred(n):  # Qwen3_5RMSNorm stores w with the norm scaling by (1 + w)
        return (0.3 * rng.standard_normal(n)).astype(np.float32)

    w = {"embed_tokens.weight": rng.standard_normal((V, H)).astype(np.float32)}
    for i, kind in enumerate(p["types"]):
        q = f"layers.{i}."
        w[q + "input_layernorm.weight"] = zero_centred(H)
        w[q + "post_attention_layernorm.weight"] = zero_centred(H)
        if kind == "full_attention":
            a = q + "self_attn."
            w[a + "q_proj.weight"] = lin(2 * nh * hd, H)
            w[a + "k_proj.weight"] = lin(nkv * hd, H)
            w[a + "v_proj.weight"] = lin(nkv * hd, H)
            w[a + "o_proj.weight"] = lin(H, nh * hd, 3.0)
            w[a + "q_norm.weight"] = zero_centred(hd)
            w[a + "k_norm.weight"] = zero_centred(hd)
        else:
            a = q + "linear_attn."
            conv_dim = 2 * nk * dk + nv * dv
            w[a + "in_proj_qkv.weight"] = lin(conv_dim, H)
            w[a + "in_proj_z.weight"] = lin(nv * dv, H)
            w[a + "in_proj_b.weight"] = lin(nv, H)
            w[a + "in_proj_a.weight"] = lin(nv, H)
            w[a + "conv1d.weight"] = (0.5 * rng.standard_normal((conv_dim, 1, K))).astype(np.float32)
            w[a + "A_log"] = np.log(rng.uniform(0.02, 0.3, nv)).astype(np.float32)
            w[a + "dt_bias"] = rng.uniform(0.5, 1.7, nv).astype(np.float32)
            w[a + "norm.weight"] = (1.0 + 0.25 * rng.standard_normal(dv)).astype(np.float32)
            w[a + "out_proj.weight"] = lin(H, nv * dv, 3.0)
        m = q + "mlp."
        w[m + "gate_proj.weight"] = lin(I, H)
        w[m + "up_proj.weight"] = lin(I, H)
        w[m + "down_proj.weight"] = lin(H, I, 3.0)
    w["norm.weight"] = zero_centred(H)
    out = {"model.language_model." + k: v for k, v in w.items()}
    if not p["tie"]:
        out["lm_head.weight"] = lin(V, H, 4.0)
    return out


def dummy_tensors(p: dict, rng) -> dict:
    """Small stand-ins for the vision tower and the multi-token-prediction head."""
    H, I = p["hidden"], p["ff"]

    def small(*shape):
        return (0.02 * rng.standard_normal(shape)).astype(np.float32)

    return {
        "model.visual.patch_embed.proj.weight": small(H, 3, 2, 16, 16),
        "model.visual.blocks.0.attn.qkv.weight": small(3 * H, H),
        "model.visual.merger.linear_fc2.weight": small(H, 4 * H),
        "mtp.fc.weight": small(H, 2 * H),
        "mtp.layers.0.mlp.gate_proj.weight": small(I, H),
        "mtp.norm.weight": small(H),
    }


def config(p: dict) -> dict:
    """A Qwen3_5ForConditionalGeneration config.json in the Hub's shape."""
    V = p["vocab"]
    text = {
        "model_type": "qwen3_5_text",
        "architectures": None,
        "attention_bias": False,
        "attention_dropout": 0.0,
        "attn_output_gate": True,
        "bos_token_id": None,
        "eos_token_id": 1,
        "dtype": "bfloat16",
        "full_attention_interval": p["interval"],
        "head_dim": p["head_dim"],
        "hidden_act": "silu",
        "hidden_size": p["hidden"],
        "initializer_range": 0.02,
        "intermediate_size": p["ff"],
        "layer_types": p["types"],
        "linear_conv_kernel_dim": p["conv"],
        "linear_key_head_dim": p["k_dim"],
        "linear_num_key_heads": p["k_heads"],
        "linear_num_value_heads": p["v_heads"],
        "linear_value_head_dim": p["v_dim"],
        "mamba_ssm_dtype": "float32",
        "max_position_embeddings": 8192,
        "mtp_num_hidden_layers": 1,
        "mtp_use_dedicated_embeddings": False,
        "num_attention_heads": p["heads"],
        "num_hidden_layers": p["layers"],
        "num_key_value_heads": p["kv_heads"],
        "pad_token_id": None,
        "rms_norm_eps": 1e-06,
        "rope_parameters": {
            "mrope_interleaved": True,
            "mrope_section": p["mrope"],
            "partial_rotary_factor": 0.25,
            "rope_theta": 10000000,
            "rope_type": "default",
        },
        "tie_word_embeddings": p["tie"],
        "use_cache": True,
        "vocab_size": V,
    }
    return {
        "architectures": ["Qwen3_5ForConditionalGeneration"],
        "model_type": "qwen3_5",
        "image_token_id": V - 3,
        "video_token_id": V - 2,
        "vision_start_token_id": V - 5,
        "vision_end_token_id": V - 4,
        "tie_word_embeddings": p["tie"],
        "transformers_version": "4.57.0.dev0",
        "text_config": text,
        "vision_config": {
            "model_type": "qwen3_5",
            "depth": 1,
            "hidden_size": p["hidden"],
            "num_heads": 2,
            "patch_size": 16,
            "temporal_patch_size": 2,
            "in_channels": 3,
            "out_hidden_size": p["hidden"],
            "spatial_merge_size": 2,
        },
    }


def encode(name: str, arr: np.ndarray):
    """Hub dtypes: BF16 everywhere except the DeltaNet gated norm weight (F32)."""
    if name.endswith("linear_attn.norm.weight"):
        return ("F32", arr.astype("<f4"))
    return ("BF16", bf16(arr))


def write_json(path: Path, obj) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=2)
        f.write("\n")
    tmp.replace(path)


def main() -> None:
    ap = argparse.ArgumentParser(description="Write a tiny random Qwen3.5 checkpoint in the Hub's multimodal layout.")
    ap.add_argument("name", choices=sorted(PRESETS))
    ap.add_argument("out", type=Path)
    ap.add_argument("--seed", type=int, default=None, help="another seed than the preset's (weights and cases)")
    a = ap.parse_args()
    p = dict(PRESETS[a.name])
    if a.seed is not None:
        p["seed"] = a.seed
    p["types"] = p["layer_types"] or [
        "full_attention" if (i + 1) % p["interval"] == 0 else "linear_attention" for i in range(p["layers"])]
    if len(p["types"]) != p["layers"]:
        raise SystemExit(f"{a.name}: {len(p['types'])} layer types for {p['layers']} layers")
    if sum(p["mrope"]) * 2 != int(p["head_dim"] * 0.25):
        raise SystemExit(f"{a.name}: mrope sections {p['mrope']} do not cover {int(p['head_dim'] * 0.25)} rotary dims")
    rng = np.random.default_rng(p["seed"])
    tensors = {k: encode(k, v) for k, v in weights(p, rng).items()}
    tensors.update({k: encode(k, v) for k, v in dummy_tensors(p, rng).items()})
    a.out.mkdir(parents=True, exist_ok=True)
    write_json(a.out / "config.json", config(p))
    meta = {"format": "pt"}
    n = p["shards"]
    if n == 1:
        write_safetensors(a.out / "model.safetensors", tensors, meta)
    else:
        # The Hub's sharding: tensors in name order, cut into n runs of about equal bytes.
        names = sorted(tensors)
        sizes = [tensors[k][1].nbytes for k in names]
        total, bounds, acc = sum(sizes), [], 0
        for i, s in enumerate(sizes):
            acc += s
            if len(bounds) < n - 1 and acc >= total * (len(bounds) + 1) / n:
                bounds.append(i + 1)
        cuts = [0] + bounds + [len(names)]
        weight_map = {}
        for s in range(n):
            file = f"model-{s + 1:05d}-of-{n:05d}.safetensors"
            part = {k: tensors[k] for k in names[cuts[s]:cuts[s + 1]]}
            write_safetensors(a.out / file, part, meta)
            weight_map.update({k: file for k in part})
        write_json(a.out / "model.safetensors.index.json", {"metadata": {"total_size": total}, "weight_map": weight_map})
    crng = np.random.default_rng(p["seed"] + 1)
    cases = [[int(t) for t in crng.integers(0, p["vocab"], size=T)] for T in p["cases"]]
    with open(a.out / "cases.json.tmp", "w", encoding="utf-8") as f:
        json.dump(cases, f)
        f.write("\n")
    (a.out / "cases.json.tmp").replace(a.out / "cases.json")
    print(json.dumps({"fixture": a.name, "out": str(a.out), "layer_types": p["types"],
                      "greedy": [",".join(map(str, g)) for g in p["greedy"]]}))


if __name__ == "__main__":
    main()
