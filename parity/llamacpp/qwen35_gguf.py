#!/usr/bin/python3
"""Converts a Qwen3.5 safetensors checkpoint (Hub layout) into a float32 GGUF for llama.cpp.

    PYTHONPATH=<llama.cpp source>/gguf-py /usr/bin/python3 parity/llamacpp/qwen35_gguf.py CHECKPOINT OUT.gguf

Writes llama.cpp's `qwen35` architecture with llama.cpp's own gguf-py (GGUFWriter), making the
changes llama.cpp's converter (convert_hf_to_gguf.py: Qwen3NextModel, _LinearAttentionVReorderBase,
Qwen3_5TextModel) makes to the Hub's tensors, written here from reading it:

  - 1 added to every zero-centred RMSNorm weight (input/post-attention/final norms, q_norm, k_norm;
    not linear_attn.norm, which multiplies by plain w); llama.cpp's RMSNorm multiplies by w;
  - A_log stored as -exp(A_log) (ssm_a), dt_bias as ssm_dt.bias;
  - conv1d.weight [conv_dim, 1, K] squeezed to [conv_dim, K];
  - when value heads outnumber key heads, value heads reordered from grouped (the Hub's
    [k0: v0..v(r-1), k1: ...], read by repeat_interleave) to tiled ([v0 of k0, v0 of k1, ...], read by
    ggml's broadcast): the V rows of in_proj_qkv and conv1d, the rows of in_proj_z, in_proj_a,
    in_proj_b, the entries of A_log and dt_bias, the columns of out_proj;
  - no MTP block (nextn): text decoding only; vision tensors dropped.

plus a minimal tokenizer section (llama.cpp refuses a model without one): a gpt2-style byte-level
vocabulary of the model's size. Evaluation runs on token IDs, so its content does not matter.
Needs numpy, and torch only through parity/reference_qwen35.py's imports.
"""

import argparse
import json
import sys
from pathlib import Path

import numpy as np

import gguf

sys.dont_write_bytecode = True  # no __pycache__ beside the sibling scripts imported below
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from reference_qwen35 import Model  # noqa: E402  (numpy-only safetensors reading, prefix handling)


def tiled(x: np.ndarray, axis: int, nk: int, r: int, d: int) -> np.ndarray:
    """Reorders nk*r heads of d along axis from grouped (k major) to tiled (v-within-group major)."""
    x = np.moveaxis(x, axis, 0)
    rest = x.shape[1:]
    x = x.reshape(nk, r, d, *rest).transpose(1, 0, 2, *range(3, 3 + len(rest))).reshape(nk * r * d, *rest)
    return np.ascontiguousarray(np.moveaxis(x, 0, axis))


def byte_vocab(V: int):
    """A gpt2-style byte-level vocabulary of exactly V tokens; the last one is the end-of-text token."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    b2u = dict(zip(bs, [chr(c) for c in cs]))
    tokens = [b2u[b] for b in range(min(256, V))]
    types = [gguf.TokenType.NORMAL] * len(tokens)
    while len(tokens) < V - 1:
        tokens.append(f"<tok{len(tokens)}>")
        types.append(gguf.TokenType.NORMAL)
    if len(tokens) < V:
        tokens.append("<|endoftext|>")
        types.append(gguf.TokenType.CONTROL)
    return tokens, types


def add_minimal_vocab(w, V: int) -> None:
    """Writes a tokenizer section llama.cpp accepts: byte_vocab(V), gpt2 model, qwen2 pre-tokenizer,
    one merge, the last token as end (and begin) of text, no BOS added."""
    tokens, types = byte_vocab(V)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(["Ġ t"])  # llama.cpp wants a merges list; one is enough for a loader
    w.add_eos_token_id(V - 1)
    w.add_bos_token_id(V - 1)
    w.add_add_bos_token(False)


def convert(folder: Path, out: Path, reorder: bool = True) -> dict:
    m = Model(folder)
    if m.arch != "qwen3_5":
        raise SystemExit(f"{folder}: not a Qwen3.5 checkpoint")
    c = m.cfg
    H, L = c["hidden_size"], c["num_hidden_layers"]
    nh, nkv, hd = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
    nk, nv = c["linear_num_key_heads"], c["linear_num_value_heads"]
    dk, dv, K = c["linear_key_head_dim"], c["linear_value_head_dim"], c["linear_conv_kernel_dim"]
    if dk != dv:
        raise SystemExit(f"{folder}: llama.cpp's qwen35 wants linear_key_head_dim == linear_value_head_dim ({dk} != {dv})")
    if nv % nk:
        raise SystemExit(f"{folder}: {nv} value heads are not a multiple of {nk} key heads")
    rp = c["rope_parameters"]
    r = nv // nk
    f32 = {k: np.asarray(v, dtype=np.float32) for k, v in m.w.items()}

    w = gguf.GGUFWriter(str(out), "qwen35")
    w.add_name(folder.name)
    w.add_block_count(L)
    w.add_context_length(c["max_position_embeddings"])
    w.add_embedding_length(H)
    w.add_feed_forward_length(c["intermediate_size"])
    w.add_head_count(nh)
    w.add_head_count_kv(nkv)
    w.add_key_length(hd)
    w.add_value_length(hd)
    w.add_rope_freq_base(float(rp["rope_theta"]))
    w.add_rope_dimension_count(int(hd * rp.get("partial_rotary_factor", 0.25)))
    w.add_rope_dimension_sections((list(rp.get("mrope_section", [11, 11, 10])) + [0, 0, 0, 0])[:4])
    w.add_layer_norm_rms_eps(float(c["rms_norm_eps"]))
    w.add_ssm_conv_kernel(K)
    w.add_ssm_state_size(dk)
    w.add_ssm_group_count(nk)
    w.add_ssm_time_step_rank(nv)
    w.add_ssm_inner_size(dv * nv)
    w.add_recurrent_layers([t == "linear_attention" for t in m.layer_types])
    w.add_full_attention_interval(c.get("full_attention_interval", 4))
    w.add_file_type(gguf.LlamaFileType.ALL_F32)

    add_minimal_vocab(w, m.vocab)

    def put(name, arr):
        w.add_tensor(name, np.ascontiguousarray(arr, dtype=np.float32))

    put("token_embd.weight", f32["embed_tokens.weight"])
    put("output_norm.weight", f32["norm.weight"] + 1)
    if not (c.get("tie_word_embeddings", m.top.get("tie_word_embeddings", False))):
        put("output.weight", f32["lm_head.weight"])
    for i, kind in enumerate(m.layer_types):
        p, b = f"layers.{i}.", f"blk.{i}."
        put(b + "attn_norm.weight", f32[p + "input_layernorm.weight"] + 1)
        put(b + "post_attention_norm.weight", f32[p + "post_attention_layernorm.weight"] + 1)
        put(b + "ffn_gate.weight", f32[p + "mlp.gate_proj.weight"])
        put(b + "ffn_up.weight", f32[p + "mlp.up_proj.weight"])
        put(b + "ffn_down.weight", f32[p + "mlp.down_proj.weight"])
        if kind == "full_attention":
            a = p + "self_attn."
            put(b + "attn_q.weight", f32[a + "q_proj.weight"])
            put(b + "attn_k.weight", f32[a + "k_proj.weight"])
            put(b + "attn_v.weight", f32[a + "v_proj.weight"])
            put(b + "attn_output.weight", f32[a + "o_proj.weight"])
            put(b + "attn_q_norm.weight", f32[a + "q_norm.weight"] + 1)
            put(b + "attn_k_norm.weight", f32[a + "k_norm.weight"] + 1)
            continue
        a = p + "linear_attn."
        qkv = f32[a + "in_proj_qkv.weight"]
        conv = f32[a + "conv1d.weight"].reshape(-1, K)
        z = f32[a + "in_proj_z.weight"]
        ba, aa = f32[a + "in_proj_b.weight"], f32[a + "in_proj_a.weight"]
        alog, dt = f32[a + "A_log"], f32[a + "dt_bias"]
        outp = f32[a + "out_proj.weight"]
        if r > 1 and reorder:
            qk = 2 * nk * dk
            qkv = np.concatenate([qkv[:qk], tiled(qkv[qk:], 0, nk, r, dv)])
            conv = np.concatenate([conv[:qk], tiled(conv[qk:], 0, nk, r, dv)])
            z = tiled(z, 0, nk, r, dv)
            ba, aa = tiled(ba, 0, nk, r, 1), tiled(aa, 0, nk, r, 1)
            alog, dt = tiled(alog, 0, nk, r, 1), tiled(dt, 0, nk, r, 1)
            outp = tiled(outp, 1, nk, r, dv)
        put(b + "attn_qkv.weight", qkv)
        put(b + "attn_gate.weight", z)
        put(b + "ssm_conv1d.weight", conv)
        put(b + "ssm_dt.bias", dt)
        put(b + "ssm_a", -np.exp(alog.astype(np.float64)).astype(np.float32))
        put(b + "ssm_beta.weight", ba)
        put(b + "ssm_alpha.weight", aa)
        put(b + "ssm_norm.weight", f32[a + "norm.weight"])
        put(b + "ssm_out.weight", outp)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return {"vocab": m.vocab, "layers": L, "layer_types": m.layer_types, "value_heads_per_key_head": r}


def main() -> None:
    ap = argparse.ArgumentParser(description="Qwen3.5 safetensors checkpoint -> float32 GGUF (llama.cpp qwen35).")
    ap.add_argument("checkpoint", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--no-reorder", action="store_true",
                    help="keep the Hub's grouped value-head order (wrong for llama.cpp: shows what the reordering is worth)")
    a = ap.parse_args()
    tmp = a.out.with_name(a.out.name + ".tmp")
    info = convert(a.checkpoint, tmp, reorder=not a.no_reorder)
    tmp.replace(a.out)
    print(json.dumps(dict(info, out=str(a.out))), file=sys.stderr)


if __name__ == "__main__":
    main()
