#!/usr/bin/python3
"""Where Qwen3.5's float32 logit error comes from: each stage of the forward alone in float32.

    /usr/bin/python3 parity/qwen35_float32_budget.py testdata/tiny-qwen35-grouped [MORE_DIRS...]

For every case of a checkpoint's cases.json, runs parity/reference_qwen35.py's forward in float64
with ONE stage in float32 (its inputs and weights rounded to float32, its arithmetic in float32,
its output widened back), and prints that stage's max and mean |logit - float64 logit|, then the
whole forward in float32 ("all"). Stages: the zero-centred RMSNorms (norm), full attention
(attn), the RoPE tables (rope), the DeltaNet's input projections (proj), causal conv + SiLU (conv),
the L2 norm of q and k (l2), beta and g (gates), the delta rule token by token (delta), the gated
RMSNorm (gnorm), out_proj (out), the MLP (mlp), the residual stream's rounding after each add
(resid), the final norm (final) and the head (head). A stage whose own error is near the whole
forward's is where float32 loses the digits; errors of similar size everywhere mean the
architecture amplifies any float32 rounding about equally (docs/qwen35-decoder.md).

Needs only /usr/bin/python3 with Debian's python3-torch and python3-numpy.
"""

import json
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.dont_write_bytecode = True  # no __pycache__ beside the sibling scripts imported below
sys.path.insert(0, str(Path(__file__).resolve().parent))
import reference_qwen35 as R  # noqa: E402

STAGES = ["norm", "attn", "rope", "proj", "conv", "l2", "gates", "delta", "gnorm", "out", "mlp", "resid", "final", "head"]
IN_F32 = set()


def P(x, stage):
    """x in the precision of stage: float32 when it is the stage under test, else float64."""
    return x.float() if stage in IN_F32 else x.double()


def gated_deltanet(x, w, p, cfg):
    T = x.shape[0]
    nk, nv = cfg["linear_num_key_heads"], cfg["linear_num_value_heads"]
    dk, dv = cfg["linear_key_head_dim"], cfg["linear_value_head_dim"]
    K, eps = cfg["linear_conv_kernel_dim"], cfg["rms_norm_eps"]
    key_dim, value_dim = nk * dk, nv * dv

    def W(name, stage):
        return P(w[p + name], stage)

    xx = P(x, "proj")
    mixed = xx @ W("in_proj_qkv.weight", "proj").T
    z = (xx @ W("in_proj_z.weight", "proj").T).view(T, nv, dv)
    b = xx @ W("in_proj_b.weight", "proj").T
    a = xx @ W("in_proj_a.weight", "proj").T
    cw = W("conv1d.weight", "conv").reshape(-1, K)
    padded = F.pad(P(mixed, "conv").T, (K - 1, 0))
    conv = P(F.silu(sum(padded[:, j:j + T] * cw[:, j:j + 1] for j in range(K)).T), "l2")
    q = conv[:, :key_dim].reshape(T, nk, dk)
    k = conv[:, key_dim:2 * key_dim].reshape(T, nk, dk)
    v = conv[:, 2 * key_dim:].reshape(T, nv, dv)
    beta = torch.sigmoid(P(b, "gates"))
    g = -W("A_log", "gates").exp() * F.softplus(P(a, "gates") + W("dt_bias", "gates"))
    q, k = R.l2norm(q) * (dk ** -0.5), R.l2norm(k)
    if nv != nk:
        q, k = q.repeat_interleave(nv // nk, dim=1), k.repeat_interleave(nv // nk, dim=1)
    q, k, v = (P(t.transpose(0, 1).contiguous(), "delta") for t in (q, k, v))
    o, _ = R.delta_recurrent(q, k, v, P(g.T.contiguous(), "delta"), P(beta.T.contiguous(), "delta"))
    o = R.rms_plain(P(o.transpose(0, 1), "gnorm"), W("norm.weight", "gnorm"), eps) * F.silu(P(z, "gnorm"))
    return (P(o, "out").reshape(T, value_dim) @ W("out_proj.weight", "out").T).double()


def forward(model, w, ids):
    cfg = model.cfg
    eps = cfg["rms_norm_eps"]
    T = len(ids)
    x = w["embed_tokens.weight"][torch.tensor(ids)]
    rp = cfg["rope_parameters"]
    rotary = int(cfg["head_dim"] * rp["partial_rotary_factor"])
    cos, sin = R.rope_tables(torch.arange(T), rotary, rp["rope_theta"], torch.float32 if "rope" in IN_F32 else torch.float64)
    for i in range(model.layers):
        p = f"layers.{i}."
        h = R.rms_zero_centred(P(x, "norm"), P(w[p + "input_layernorm.weight"], "norm"), eps)
        if model.layer_types[i] == "linear_attention":
            h = gated_deltanet(h, w, p + "linear_attn.", cfg)
        else:
            a = p + "self_attn."
            wa = {k: P(t, "attn") for k, t in w.items() if k.startswith(a)}
            h = R.attention(P(h, "attn"), wa, a, cfg, P(cos, "attn"), P(sin, "attn"), True, True).double()
        x = P(x + h.double(), "resid").double()
        h = P(R.rms_zero_centred(P(x, "norm"), P(w[p + "post_attention_layernorm.weight"], "norm"), eps), "mlp")
        m = p + "mlp."
        gate, up, down = (P(w[m + n], "mlp") for n in ("gate_proj.weight", "up_proj.weight", "down_proj.weight"))
        x = P(x + ((F.silu(h @ gate.T) * (h @ up.T)) @ down.T).double(), "resid").double()
    x = R.rms_zero_centred(P(x, "final"), P(w["norm.weight"], "final"), eps)
    return (P(x, "head") @ P(w["lm_head.weight"], "head").T).double()


def main() -> None:
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    with torch.no_grad():
        for arg in sys.argv[1:]:
            folder = Path(arg)
            model = R.Model(folder)
            if model.arch != "qwen3_5":
                raise SystemExit(f"{folder}/config.json: not a Qwen3.5 checkpoint")
            cases = json.loads((folder / "cases.json").read_text(encoding="utf-8"))
            w = model.tensors(torch.float64)
            IN_F32.clear()
            refs = [forward(model, w, ids) for ids in cases]
            for stage in STAGES + ["all"]:
                IN_F32.clear()
                IN_F32.update(STAGES if stage == "all" else [stage])
                errs = [(forward(model, w, ids) - ref).abs() for ids, ref in zip(cases, refs)]
                cells = " ".join(f"{len(c)}:{e.max().item():.1e}({e.mean().item():.1e})" for c, e in zip(cases, errs))
                print(f"{folder.name} {stage:<6} {cells}", flush=True)


if __name__ == "__main__":
    main()
