#!/usr/bin/python3
"""Reference logits for Qwen3.5 (and Qwen3) checkpoints, without transformers.

An eager forward of Qwen3.5's text decoder written from transformers' modeling_qwen3_5.py
(which reuses modeling_qwen3_next.py), step by step, in float64 (default) or float32:

  - zero-centred RMSNorm `x * rsqrt(mean(x^2) + eps) * (1 + w)` (input, post-attention, final,
    q_norm, k_norm);
  - full attention: q_proj viewed [T, heads, 2*head_dim] and split per head into q and an output
    gate; q/k RMSNorm; partial rotate_half RoPE on the first partial_rotary_factor*head_dim dims
    (text-only: the three mrope rows hold the same position, so it is plain 1-D RoPE); grouped-query
    softmax attention scaled by 1/sqrt(head_dim); output * sigmoid(gate) before o_proj;
  - Gated DeltaNet: causal depthwise conv (kernel linear_conv_kernel_dim, zeros before the start)
    + SiLU over q|k|v; beta = sigmoid(b); g = -exp(A_log) * softplus(a + dt_bias); q and k
    L2-normalised `x * rsqrt(sum(x^2) + 1e-6)`, q scaled by 1/sqrt(head_k_dim); key heads
    repeat-interleaved up to the value heads; the gated delta rule, token by token (the recurrence)
    AND in transformers' chunked form (blocks of 64), the two compared on every layer;
    gated RMSNorm `x * rsqrt(mean(x^2) + eps) * w * silu(z)` with plain w; out_proj;
  - SwiGLU MLP; tied (embed_tokens) or untied (lm_head.weight) output head.

With `--arch qwen3` detection (model_type qwen3) it runs plain Qwen3 instead (RMSNorm with w,
q/k norms, full rotate_half RoPE, GQA, SwiGLU), for activation dumps.

Writes, for every case of a cases.json, `reference-logits-N.safetensors` (ids I64 [T], logits
F32 [T, vocab]) and, with --activations, `reference-activations-N.safetensors` (ids I64 [T],
hidden F32 [layers+1, T, hidden]: the embedding output, then the residual stream after each
decoder layer, before the final norm). With --greedy it writes greedy.json (24 greedy tokens per
prompt and the smallest top-2 logit gap). With --compare-float32 it also runs the whole forward
in float32 and reports its max |float32 - float64| logit gap (the reference's own rounding).

Needs only /usr/bin/python3 with Debian's python3-torch (1.13) and python3-numpy:

    /usr/bin/python3 parity/reference_qwen35.py --model testdata/tiny-qwen35 \\
        --cases testdata/tiny-qwen35/cases.json --out /tmp/ref --activations --greedy 1,2,3 --greedy 7
"""

import argparse
import json
import math
import os
import re
import struct
import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from reference_cases import read_cases  # parity/reference_cases.py, beside this script

REFERENCE_NAME = re.compile(r"^reference-(logits|activations)-(0|[1-9][0-9]*)\.safetensors$")
CHUNK = 64  # transformers' chunk_size for torch_chunk_gated_delta_rule

# ---------------------------------------------------------------------------------------------
# safetensors, read and written with numpy only


def read_safetensors_header(path: Path):
    with open(path, "rb") as f:
        raw = f.read(8)
        if len(raw) != 8:
            raise SystemExit(f"{path}: shorter than a safetensors header")
        (n,) = struct.unpack("<Q", raw)
        if n > 100 << 20:
            raise SystemExit(f"{path}: header of {n} bytes is implausible")
        header = json.loads(f.read(n))
    return header, 8 + n


def bf16_to_f32(raw: np.ndarray) -> np.ndarray:
    return (raw.astype(np.uint32) << 16).view(np.float32)


NP_DTYPES = {"F32": np.float32, "F16": np.float16, "F64": np.float64, "I64": np.int64}


def read_tensors(path: Path, want=None) -> dict:
    """Reads tensors (all, or those for which want(name) is true) as float32/float64/int64 arrays."""
    header, start = read_safetensors_header(path)
    out = {}
    with open(path, "rb") as f:
        for name, info in header.items():
            if name == "__metadata__" or (want is not None and not want(name)):
                continue
            dtype, shape, (lo, hi) = info["dtype"], info["shape"], info["data_offsets"]
            f.seek(start + lo)
            buf = f.read(hi - lo)
            if dtype == "BF16":
                arr = bf16_to_f32(np.frombuffer(buf, dtype="<u2"))
            elif dtype in NP_DTYPES:
                arr = np.frombuffer(buf, dtype=np.dtype(NP_DTYPES[dtype]).newbyteorder("<")).astype(NP_DTYPES[dtype])
            else:
                raise SystemExit(f"{path}: tensor {name}: dtype {dtype} is not supported")
            if arr.size != int(np.prod(shape, dtype=np.int64)):
                raise SystemExit(f"{path}: tensor {name}: {arr.size} values for shape {shape}")
            out[name] = arr.reshape(shape)
    return out


def write_safetensors(path: Path, tensors: dict, metadata: dict) -> None:
    """Writes tensors (name -> (dtype string, numpy array of the bytes' type)) atomically, header
    padded with spaces to a multiple of 8 bytes, tensors in name order."""
    header = {"__metadata__": {k: str(v) for k, v in metadata.items()}} if metadata else {}
    blobs, offset = [], 0
    for name in sorted(tensors):
        dtype, arr = tensors[name]
        data = np.ascontiguousarray(arr).tobytes()
        header[name] = {"dtype": dtype, "shape": list(arr.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)


# ---------------------------------------------------------------------------------------------
# checkpoint


class Model:
    """A checkpoint's text decoder: config fields and float64 (or float32) weights by short name."""

    def __init__(self, folder: Path):
        with open(folder / "config.json", encoding="utf-8") as f:
            top = json.load(f)
        self.top = top
        cfg = top.get("text_config", top)
        self.cfg = cfg
        self.arch = {"qwen3_5": "qwen3_5", "qwen3_5_text": "qwen3_5", "qwen3": "qwen3"}.get(cfg.get("model_type"))
        if self.arch is None:
            raise SystemExit(f"{folder}/config.json: model_type {cfg.get('model_type')!r} is neither qwen3_5(_text) nor qwen3")
        index = folder / "model.safetensors.index.json"
        if index.exists():
            with open(index, encoding="utf-8") as f:
                files = sorted(set(json.load(f)["weight_map"].values()))
        else:
            files = ["model.safetensors"]
        skip = ("model.visual.", "mtp.")
        raw = {}
        for name in files:
            raw.update(read_tensors(folder / name, want=lambda n: not n.startswith(skip)))
        if any(n.startswith("model.language_model.") for n in raw):
            prefix = "model.language_model."
        else:
            prefix = "model."
        self.w = {}
        for name, arr in raw.items():
            if name.startswith(prefix):
                self.w[name[len(prefix):]] = arr
            elif name == "lm_head.weight":
                self.w[name] = arr
            else:
                raise SystemExit(f"{folder}: unexpected tensor {name}")
        tie = cfg.get("tie_word_embeddings", top.get("tie_word_embeddings", False))
        if tie:
            self.w["lm_head.weight"] = self.w["embed_tokens.weight"]
        elif "lm_head.weight" not in self.w:
            raise SystemExit(f"{folder}: tie_word_embeddings is false but there is no lm_head.weight")
        self.layers = cfg["num_hidden_layers"]
        self.layer_types = cfg.get("layer_types") or ["full_attention"] * self.layers
        self.vocab = cfg["vocab_size"]
        self.hidden = cfg["hidden_size"]

    def tensors(self, dtype):
        return {k: torch.from_numpy(np.asarray(v, dtype=np.float64)).to(dtype) for k, v in self.w.items()}


# ---------------------------------------------------------------------------------------------
# the forward


def rms_zero_centred(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * (1.0 + w)


def rms_plain(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def rope_tables(positions, rotary_dim, theta, dtype):
    """cos, sin [T, rotary_dim] as transformers builds them (cat(freqs, freqs)), in dtype. In
    float32 the inverse frequencies and angles are float32 as in transformers; in float64, float64."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, rotary_dim, 2, dtype=dtype) / rotary_dim))
    freqs = positions.to(dtype)[:, None] * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def apply_partial_rope(x, cos, sin):
    """x [heads, T, head_dim]: rotate the first cos.shape[-1] dims, pass the rest through."""
    r = cos.shape[-1]
    xr, xp = x[..., :r], x[..., r:]
    return torch.cat((xr * cos + rotate_half(xr) * sin, xp), dim=-1)


def attention(x, w, p, cfg, cos, sin, gated, zero_centred):
    T = x.shape[0]
    nh, nkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = cfg.get("head_dim") or cfg["hidden_size"] // nh
    eps = cfg["rms_norm_eps"]
    norm = rms_zero_centred if zero_centred else rms_plain
    q = x @ w[p + "q_proj.weight"].T
    if gated:
        q = q.view(T, nh, 2 * hd)
        q, gate = q[..., :hd], q[..., hd:]
        gate = gate.reshape(T, nh * hd)
    else:
        q = q.view(T, nh, hd)
    k = (x @ w[p + "k_proj.weight"].T).view(T, nkv, hd)
    v = (x @ w[p + "v_proj.weight"].T).view(T, nkv, hd)
    q = norm(q, w[p + "q_norm.weight"], eps).transpose(0, 1)
    k = norm(k, w[p + "k_norm.weight"], eps).transpose(0, 1)
    v = v.transpose(0, 1)
    q, k = apply_partial_rope(q, cos, sin), apply_partial_rope(k, cos, sin)
    rep = nh // nkv
    k = k.repeat_interleave(rep, dim=0)
    v = v.repeat_interleave(rep, dim=0)
    scores = (q @ k.transpose(1, 2)) * (hd ** -0.5)
    mask = torch.ones(T, T, dtype=torch.bool).triu(1)
    scores = scores.masked_fill(mask, float("-inf"))
    out = torch.softmax(scores, dim=-1) @ v  # [nh, T, hd]
    out = out.transpose(0, 1).reshape(T, nh * hd)
    if gated:
        out = out * torch.sigmoid(gate)
    return out @ w[p + "o_proj.weight"].T


def l2norm(x, eps=1e-6):
    """transformers' (and FLA's) convention: x * rsqrt(sum(x^2) + eps)."""
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True) + eps)


def l2norm_ggml(x, eps=1e-6):
    """ggml's ggml_l2_norm convention (llama.cpp, eps = rms_norm_eps): x / max(||x||, eps). Only for
    measuring how much of a gap to llama.cpp the convention explains (--l2norm ggml)."""
    return x / torch.clamp(x.norm(dim=-1, keepdim=True), min=eps)


def delta_recurrent(q, k, v, g, beta):
    """The gated delta rule token by token. q, k [H, T, dk] (normalised, q scaled), v [H, T, dv],
    g, beta [H, T]. Returns o [H, T, dv] and the final state [H, dk, dv]."""
    H, T, dk = k.shape
    dv = v.shape[-1]
    S = torch.zeros(H, dk, dv, dtype=v.dtype)
    out = torch.zeros_like(v)
    for t in range(T):
        S = S * g[:, t].exp()[:, None, None]
        u = (S * k[:, t, :, None]).sum(1)  # S^T k   [H, dv]
        delta = (v[:, t] - u) * beta[:, t, None]
        S = S + k[:, t, :, None] * delta[:, None, :]
        out[:, t] = (S * q[:, t, :, None]).sum(1)
    return out, S


def delta_chunked(q, k, v, g, beta, chunk=CHUNK):
    """transformers' torch_chunk_gated_delta_rule rearrangement of the same recurrence: pad to a
    multiple of the chunk, solve the unit lower-triangular (UT) system per chunk, scan over chunks."""
    H, T, dk = k.shape
    dv = v.shape[-1]
    pad = (chunk - T % chunk) % chunk
    q, k, v = (F.pad(x, (0, 0, 0, pad)) for x in (q, k, v))
    g, beta = (F.pad(x, (0, pad)) for x in (g, beta))
    n = (T + pad) // chunk
    vb = (v * beta[..., None]).view(H, n, chunk, dv)
    kb = (k * beta[..., None]).view(H, n, chunk, dk)
    q, k = q.view(H, n, chunk, dk), k.view(H, n, chunk, dk)
    G = g.view(H, n, chunk).cumsum(-1)
    upper = torch.ones(chunk, chunk, dtype=torch.bool).triu(1)
    decay = (G[..., :, None] - G[..., None, :]).masked_fill(upper, float("-inf")).exp()
    system = (kb @ k.transpose(-1, -2)) * decay  # diagonal = beta_i (k_i.k_i); unitriangular ignores it
    intra = (q @ k.transpose(-1, -2)) * decay
    new_v = torch.linalg.solve_triangular(system, vb, upper=False, unitriangular=True)
    k_cum = torch.linalg.solve_triangular(system, kb * G.exp()[..., None], upper=False, unitriangular=True)
    qd = q * G.exp()[..., None]
    kd = k * (G[..., -1:] - G).exp()[..., None]
    chunk_decay = G[..., -1].exp()
    S = torch.zeros(H, dk, dv, dtype=v.dtype)
    out = torch.zeros(H, n, chunk, dv, dtype=v.dtype)
    for i in range(n):
        u = new_v[:, i] - k_cum[:, i] @ S
        out[:, i] = qd[:, i] @ S + intra[:, i] @ u
        S = S * chunk_decay[:, i, None, None] + kd[:, i].transpose(-1, -2) @ u
    return out.view(H, n * chunk, dv)[:, :T], S


class DeltaCheck:
    """Largest |recurrent - chunked| seen over the DeltaNet outputs and final states of a run."""

    def __init__(self):
        self.out = 0.0
        self.state = 0.0


def gated_deltanet(x, w, p, cfg, mode, check, l2="transformers"):
    T = x.shape[0]
    nk, nv = cfg["linear_num_key_heads"], cfg["linear_num_value_heads"]
    dk, dv = cfg["linear_key_head_dim"], cfg["linear_value_head_dim"]
    K = cfg["linear_conv_kernel_dim"]
    eps = cfg["rms_norm_eps"]
    key_dim, value_dim = nk * dk, nv * dv
    mixed = x @ w[p + "in_proj_qkv.weight"].T  # [T, conv_dim]
    z = (x @ w[p + "in_proj_z.weight"].T).view(T, nv, dv)
    b = x @ w[p + "in_proj_b.weight"].T  # [T, nv]
    a = x @ w[p + "in_proj_a.weight"].T
    # Causal depthwise convolution: out[t, c] = sum_j w[c, j] * in[t - (K-1) + j, c], zeros before 0.
    cw = w[p + "conv1d.weight"].reshape(-1, K)  # [conv_dim, K]
    padded = F.pad(mixed.T, (K - 1, 0))  # [conv_dim, T+K-1]
    conv = sum(padded[:, j:j + T] * cw[:, j:j + 1] for j in range(K)).T
    conv = F.silu(conv)
    q = conv[:, :key_dim].reshape(T, nk, dk)
    k = conv[:, key_dim:2 * key_dim].reshape(T, nk, dk)
    v = conv[:, 2 * key_dim:].reshape(T, nv, dv)
    beta = torch.sigmoid(b)
    g = -w[p + "A_log"].exp() * F.softplus(a + w[p + "dt_bias"])
    norm_l2 = l2norm_ggml if l2 == "ggml" else l2norm
    q = norm_l2(q) * (dk ** -0.5)
    k = norm_l2(k)
    if nv != nk:  # value head h reads key head h // (nv / nk)
        q = q.repeat_interleave(nv // nk, dim=1)
        k = k.repeat_interleave(nv // nk, dim=1)
    q, k, v = (t.transpose(0, 1).contiguous() for t in (q, k, v))
    g, beta = g.T.contiguous(), beta.T.contiguous()
    if mode in ("recurrent", "both"):
        o, S = delta_recurrent(q, k, v, g, beta)
    if mode in ("chunked", "both"):
        oc, Sc = delta_chunked(q, k, v, g, beta)
        if mode == "chunked":
            o, S = oc, Sc
        else:
            check.out = max(check.out, (o - oc).abs().max().item())
            check.state = max(check.state, (S - Sc).abs().max().item())
    o = o.transpose(0, 1)  # [T, nv, dv]
    o = rms_plain(o, w[p + "norm.weight"], eps) * F.silu(z)
    return o.reshape(T, value_dim) @ w[p + "out_proj.weight"].T


def forward(model: Model, w: dict, ids, dtype, mode="recurrent", check=None, hidden=None, l2="transformers"):
    """Logits [T, vocab] for one sequence; appends the residual stream to hidden if given."""
    cfg = model.cfg
    qwen35 = model.arch == "qwen3_5"
    eps = cfg["rms_norm_eps"]
    norm = rms_zero_centred if qwen35 else rms_plain
    ids_t = torch.tensor(ids, dtype=torch.int64)
    T = len(ids)
    x = w["embed_tokens.weight"][ids_t]
    if hidden is not None:
        hidden.append(x.clone())
    hd = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    if qwen35:
        rp = cfg.get("rope_parameters") or {}
        theta = rp.get("rope_theta", cfg.get("rope_theta"))
        rotary = int(hd * rp.get("partial_rotary_factor", cfg.get("partial_rotary_factor", 1.0)))
    else:
        theta, rotary = cfg["rope_theta"], hd
    cos, sin = rope_tables(torch.arange(T), rotary, theta, dtype)
    for i in range(model.layers):
        p = f"layers.{i}."
        h = norm(x, w[p + "input_layernorm.weight"], eps)
        kind = model.layer_types[i]
        if kind == "linear_attention":
            h = gated_deltanet(h, w, p + "linear_attn.", cfg, mode, check, l2)
        elif kind == "full_attention":
            h = attention(h, w, p + "self_attn.", cfg, cos, sin, gated=qwen35 and cfg.get("attn_output_gate", True),
                          zero_centred=qwen35)
        else:
            raise SystemExit(f"layer {i}: layer type {kind!r} is not supported")
        x = x + h
        h = norm(x, w[p + "post_attention_layernorm.weight"], eps)
        m = p + "mlp."
        h = (F.silu(h @ w[m + "gate_proj.weight"].T) * (h @ w[m + "up_proj.weight"].T)) @ w[m + "down_proj.weight"].T
        x = x + h
        if hidden is not None:
            hidden.append(x.clone())
    x = norm(x, w["norm.weight"], eps)
    return x @ w["lm_head.weight"].T


# ---------------------------------------------------------------------------------------------
# command line


def greedy(model, w, dtype, prompt, steps=24, mode="recurrent"):
    """Greedy continuation by full forwards (no cache): generated IDs and the smallest top-2 gap."""
    ids, gap = list(prompt), math.inf
    for _ in range(steps):
        last = forward(model, w, ids, dtype, mode)[-1]
        top = torch.topk(last, 2).values
        gap = min(gap, (top[0] - top[1]).item())
        ids.append(int(torch.argmax(last)))
    return ids[len(prompt):], gap


def main() -> None:
    ap = argparse.ArgumentParser(description="Qwen3.5 / Qwen3 reference logits (eager PyTorch, no transformers).")
    ap.add_argument("--model", required=True, type=Path, help="checkpoint folder (config.json + safetensors)")
    ap.add_argument("--cases", required=True, type=Path, help="cases.json: a JSON list of lists of token IDs")
    ap.add_argument("--out", required=True, type=Path, help="reference folder to write")
    ap.add_argument("--dtype", choices=["float64", "float32"], default="float64", help="compute precision (default float64; logits are stored float32)")
    ap.add_argument("--delta", choices=["both", "recurrent", "chunked"], default="both",
                    help="DeltaNet form for the logits: both (recurrent logits, chunked compared; default), recurrent, chunked")
    ap.add_argument("--activations", action="store_true", help="also write reference-activations-N.safetensors")
    ap.add_argument("--activations-only", action="store_true",
                    help="write only reference-activations-N.safetensors, leaving the logits files of --out as they are")
    ap.add_argument("--greedy", action="append", default=[], help="comma-separated prompt IDs for greedy.json (repeatable)")
    ap.add_argument("--compare-float32", action="store_true", help="also run in float32 and report the float32-vs-reference gap")
    ap.add_argument("--l2norm", choices=["transformers", "ggml"], default="transformers",
                    help="L2-norm epsilon convention for q and k (default transformers'; ggml's only to measure llama.cpp's gap)")
    ap.add_argument("--check", type=Path, default=None, help="an existing reference folder to compare the new logits with")
    ap.add_argument("--overwrite", action="store_true", help="replace reference files already in --out")
    a = ap.parse_args()
    if a.activations_only:
        a.activations = True

    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    dtype = torch.float64 if a.dtype == "float64" else torch.float32
    model = Model(a.model)
    cases = read_cases(a.cases)
    for n, ids in enumerate(cases):
        if max(ids) >= model.vocab:
            raise SystemExit(f"{a.cases}: case {n}: token {max(ids)} is outside the vocabulary [0, {model.vocab})")
    a.out.mkdir(parents=True, exist_ok=True)
    stale = sorted(p for p in a.out.iterdir() if REFERENCE_NAME.match(p.name)
                   and (not a.activations_only or "-activations-" in p.name))
    if stale and not a.overwrite:
        raise SystemExit(f"{a.out} already holds {len(stale)} reference files; pass --overwrite to replace them")
    for p in stale:
        p.unlink()
    w = model.tensors(dtype)
    w32 = model.tensors(torch.float32) if a.compare_float32 else None
    meta = {"format": "octlm parity reference", "reference": "parity/reference_qwen35.py", "arch": model.arch,
            "dtype": a.dtype, "delta_rule": a.delta, "l2norm": a.l2norm, "torch": torch.__version__, "cases": len(cases)}
    summary = {"cases": []}
    with torch.no_grad():
        for n, ids in enumerate(cases):
            check = DeltaCheck()
            hidden = [] if a.activations else None
            logits = forward(model, w, ids, dtype, a.delta, check, hidden, a.l2norm)
            if not torch.isfinite(logits).all():
                raise SystemExit(f"case {n}: non-finite logits")
            l32 = logits.to(torch.float32).numpy()
            if not a.activations_only:
                write_safetensors(a.out / f"reference-logits-{n}.safetensors",
                                  {"ids": ("I64", np.array(ids, dtype="<i8")), "logits": ("F32", l32.astype("<f4"))},
                                  dict(meta, case=n))
            if hidden is not None:
                hs = torch.stack(hidden).to(torch.float32).numpy().astype("<f4")
                write_safetensors(a.out / f"reference-activations-{n}.safetensors",
                                  {"ids": ("I64", np.array(ids, dtype="<i8")), "hidden": ("F32", hs)},
                                  dict(meta, case=n, format="octlm parity activations", layers=model.layers,
                                       hidden=model.hidden, layer_types=",".join(model.layer_types),
                                       content="hidden[0] embedding output; hidden[l+1] residual stream after layer l (before the final norm)"))
            row = {"case": n, "positions": len(ids)}
            if a.delta == "both" and model.arch == "qwen3_5":
                row["recurrent_vs_chunked_output"] = check.out
                row["recurrent_vs_chunked_state"] = check.state
            if w32 is not None:
                f32 = forward(model, w32, ids, torch.float32, "recurrent")
                row["float32_vs_reference"] = (f32.to(torch.float64) - logits.to(torch.float64)).abs().max().item()
                row["float32_top_token_agree"] = float((f32.argmax(-1) == logits.argmax(-1)).to(torch.float64).mean())
                if model.arch == "qwen3_5":
                    f32c = forward(model, w32, ids, torch.float32, "chunked")
                    row["float32_chunked_vs_reference"] = (f32c.to(torch.float64) - logits.to(torch.float64)).abs().max().item()
            if a.check is not None:
                old = read_tensors(a.check / f"reference-logits-{n}.safetensors")
                if list(old["ids"]) != list(ids):
                    raise SystemExit(f"{a.check}: case {n}: ids differ from {a.cases}")
                # stored float32 against stored float32: 0 when both references round the same values
                row["vs_check_max_abs"] = float(np.abs(old["logits"].astype(np.float64) - l32.astype(np.float64)).max())
                row["vs_check_top_token_agree"] = float((old["logits"].argmax(-1) == l32.argmax(-1)).mean())
            summary["cases"].append(row)
            print(json.dumps(row), file=sys.stderr)
        if a.greedy:
            out = []
            for spec in a.greedy:
                prompt = [int(t) for t in spec.split(",")]
                gen, gap = greedy(model, w, dtype, prompt, mode="recurrent")
                out.append({"prompt_ids": prompt, "generated_ids": gen, "min_top2_gap": gap})
            tmp = a.out / "greedy.json.tmp"
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump(out, f, indent=1)
                f.write("\n")
            os.replace(tmp, a.out / "greedy.json")
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
