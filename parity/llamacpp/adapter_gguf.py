#!/usr/bin/python3
"""Runs llama.cpp's own converters (convert_hf_to_gguf.py, convert_lora_to_gguf.py) where the Python
packages they import are missing, for adapter.sh.

    adapter_gguf.py --src LLAMA_SRC base MODEL_DIR OUT.gguf
    adapter_gguf.py --src LLAMA_SRC lora --base MODEL_DIR ADAPTER_DIR OUT.gguf

LLAMA_SRC is the llama.cpp source tree (node-llama-cpp's bundle, cloned by setup.sh): its gguf-py
and conversion/ package are imported from there, and the converter scripts run unmodified as
__main__ (runpy), float32 output (--outtype f32; for `base` also --no-mtp where the model class
has a multi-token-prediction block: text decoding only), written to OUT.gguf.tmp and renamed.
What this file adds, only where needed:

  - `transformers` (imported at the top of conversion/base.py and convert_lora_to_gguf.py) when it is
    not installed: a stand-in whose AutoConfig/AutoTokenizer.from_pretrained raise OSError.
    ModelBase.load_hparams then takes its own fallback, reading config.json as JSON; nothing else
    on these paths calls transformers (the adapter's hparams come from --base, no aLoRA invocation
    string to tokenize).
  - torch.float8_e4m3fn, float8_e5m2, float8_e8m0fnu (dict keys in conversion/base.py) when torch
    lacks them (Debian's 1.13): unique stand-in objects that no tensor's dtype equals.
  - `safetensors.torch.load_file` (convert_lora_to_gguf.py reads adapter_model.safetensors with it)
    when safetensors is not installed: the same tensors read with gguf-py's SafetensorsLocal, the
    reader llama.cpp's converter uses for base checkpoints.
  - `tqdm` (gguf-py's writer draws a progress bar) when not installed: a bar that draws nothing.
  - for `base`, when MODEL_DIR has no tokenizer.json (octlm's tiny fixtures have none) or
    transformers is the stand-in (the converter reads tokenizers through AutoTokenizer): the model
    class's set_vocab replaced by qwen35_gguf.add_minimal_vocab (a byte-level gpt2 vocabulary of
    the model's size). Evaluation runs on token IDs, so the vocabulary's content does not matter;
    hyperparameters, tensor names and values are the converter's.

For `lora`, one fix of llama.cpp's converter where it fails: Qwen3.5 adapters on linear_attn.out_proj
(lora_v_head_reorder below).

A LoRA GGUF holds `adapter.lora.alpha` = PEFT's lora_alpha and, per target, `NAME.lora_a` [r, in]
and `NAME.lora_b` [out, r] (row-major, as PEFT's A and B; ggml's ne lists them reversed); llama.cpp scales B·A by user_scale · alpha / r at run
time (llama-graph.cpp, build_lora_mm), so scale 1.0 reproduces PEFT's alpha / r.
"""

import argparse
import importlib.util
import runpy
import sys
import types
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ in the repository or the cache's source tree
here = Path(__file__).resolve().parent


def shim_transformers() -> None:
    if importlib.util.find_spec("transformers") is not None:
        return

    class Absent:
        @classmethod
        def from_pretrained(cls, *args, **kwargs):
            raise OSError(f"transformers is not installed (adapter_gguf.py's stand-in for {cls.__name__})")

    mod = types.ModuleType("transformers")
    mod.AutoConfig = type("AutoConfig", (Absent,), {})
    mod.AutoTokenizer = type("AutoTokenizer", (Absent,), {})
    mod.stand_in = True
    sys.modules["transformers"] = mod


def shim_tqdm() -> None:
    """gguf-py's writer draws a tqdm progress bar; without tqdm, a bar that draws nothing."""
    if importlib.util.find_spec("tqdm") is not None:
        return

    class Bar:
        def __init__(self, *args, **kwargs):
            pass

        def __getattr__(self, name):  # update, set_description, reset, close, ...
            return lambda *args, **kwargs: None

    mod = types.ModuleType("tqdm")
    mod.tqdm = Bar
    sys.modules["tqdm"] = mod


def shim_torch_float8() -> None:
    """Debian's torch 1.13 predates the float8 dtypes that conversion/base.py names in its dtype
    tables; unique stand-ins keep those tables importable (no tensor here is float8)."""
    import torch

    for name in ("float8_e4m3fn", "float8_e5m2", "float8_e8m0fnu"):
        if not hasattr(torch, name):
            setattr(torch, name, type(name, (), {"__repr__": lambda self, n=name: f"<absent torch.{n}>"})())


def shim_safetensors() -> None:
    if importlib.util.find_spec("safetensors") is not None:
        return
    import gguf
    import torch
    from conversion import LazyTorchTensor

    def load_file(filename, device="cpu"):
        if device != "cpu":
            raise ValueError(f"adapter_gguf.py's load_file reads to the CPU only, not {device!r}")
        with gguf.utility.SafetensorsLocal(Path(filename)) as tensors:
            out = {}
            for name, t in tensors.items():
                dtype = LazyTorchTensor._dtype_str_map.get(t.dtype)
                if dtype is None:
                    raise ValueError(f"{filename}: tensor {name}: dtype {t.dtype} is not supported")
                out[name] = torch.from_numpy(t.mmap_bytes().copy()).view(dtype).reshape(t.shape)
            return out

    pkg = types.ModuleType("safetensors")
    pkg.__path__ = []
    sub = types.ModuleType("safetensors.torch")
    sub.load_file = load_file
    pkg.torch = sub
    sys.modules["safetensors"] = pkg
    sys.modules["safetensors.torch"] = sub


def model_class(model_dir: Path):
    """The converter's model class for model_dir, and its hyperparameters, as its main() finds them."""
    import conversion

    hparams = conversion.ModelBase.load_hparams(model_dir, False)
    arch = conversion.get_model_architecture(hparams, conversion.ModelType.TEXT)
    return conversion.get_model_class(arch), hparams


def minimal_vocab_for(cls, hparams: dict) -> None:
    """Replaces set_vocab of the converter's model class cls by add_minimal_vocab."""
    from qwen35_gguf import add_minimal_vocab

    vocab = hparams.get("text_config", hparams)["vocab_size"]

    def set_vocab(self):
        add_minimal_vocab(self.gguf_writer, vocab)

    cls.set_vocab = set_vocab


def lora_v_head_reorder() -> None:
    """llama.cpp issue #21125: for Qwen3.5 with more value than key heads, the converter reorders
    out_proj's columns with _reorder_v_heads (reshape, permute, reshape), which a LoraTorchTensor
    (W = B·A) cannot do along A's row size: NotImplementedError. Where that happens, the permutation
    _reorder_v_heads itself computes (run on an index vector) is applied to A's columns, as the
    upstream fixes propose (pull requests #24627, #28324). Row reorders (dim 0) stay theirs."""
    try:
        from conversion import qwen
    except ImportError:
        return
    base = getattr(qwen, "_LinearAttentionVReorderBase", None)
    if base is None:
        return
    original = base._reorder_v_heads

    def reorder(tensor, dim, num_k_heads, num_v_per_k, head_dim):
        try:
            return original(tensor, dim, num_k_heads, num_v_per_k, head_dim)
        except NotImplementedError:
            if not hasattr(tensor, "get_lora_A_B") or len(tensor.shape) != 2 or dim not in (1, -1):
                raise
        import torch
        a, b = tensor.get_lora_A_B()
        index = torch.arange(a.shape[-1]).reshape(1, -1)
        perm = original(index, 1, num_k_heads, num_v_per_k, head_dim)[0]
        return type(tensor)(a.index_select(-1, perm), b)

    base._reorder_v_heads = staticmethod(reorder)


def run(script: Path, argv: list) -> None:
    saved = sys.argv
    sys.argv = [str(script)] + argv
    try:
        runpy.run_path(str(script), run_name="__main__")
    finally:
        sys.argv = saved


def main() -> None:
    ap = argparse.ArgumentParser(description="llama.cpp's converters, float32, with stand-ins for missing packages.")
    ap.add_argument("--src", required=True, type=Path, help="llama.cpp source tree")
    sub = ap.add_subparsers(dest="what", required=True)
    b = sub.add_parser("base", help="a Hugging Face checkpoint folder -> GGUF (convert_hf_to_gguf.py)")
    b.add_argument("model", type=Path)
    b.add_argument("out", type=Path)
    lo = sub.add_parser("lora", help="a PEFT LoRA adapter folder -> GGUF adapter (convert_lora_to_gguf.py)")
    lo.add_argument("--base", required=True, type=Path, help="the base model's folder (config.json)")
    lo.add_argument("adapter", type=Path)
    lo.add_argument("out", type=Path)
    a = ap.parse_args()
    src = a.src.resolve()
    for p in (src / "gguf-py", src, here):
        sys.path.insert(0, str(p))
    shim_transformers()
    shim_torch_float8()
    shim_safetensors()
    shim_tqdm()
    tmp = a.out.with_name(a.out.name + ".tmp")
    try:
        if a.what == "base":
            cls, hparams = model_class(a.model)
            if not (a.model / "tokenizer.json").is_file() or getattr(sys.modules.get("transformers"), "stand_in", False):
                minimal_vocab_for(cls, hparams)
            # text decoding only: no multi-token-prediction block (octlm's Qwen3.5 fixtures declare
            # mtp_num_hidden_layers but hold no mtp.* weights)
            flags = ["--no-mtp"] if getattr(cls, "supports_mtp_export", False) else []
            run(src / "convert_hf_to_gguf.py", ["--outtype", "f32", *flags, "--outfile", str(tmp), str(a.model)])
        else:
            if not (a.adapter / "adapter_config.json").is_file():
                raise SystemExit(f"{a.adapter}: no adapter_config.json (want a PEFT LoRA adapter folder)")
            lora_v_head_reorder()
            run(src / "convert_lora_to_gguf.py", ["--outtype", "f32", "--base", str(a.base), "--outfile", str(tmp), str(a.adapter)])
        if not tmp.is_file():
            raise SystemExit(f"{a.out}: the converter wrote nothing")
        tmp.replace(a.out)
    finally:
        tmp.unlink(missing_ok=True)


if __name__ == "__main__":
    main()
