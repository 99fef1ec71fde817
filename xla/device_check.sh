#!/usr/bin/env bash
# xla/device_check.sh: the one-call check of the XLA/PJRT CUDA path on a GPU machine that has
# JAX's CUDA PJRT plugin (jax-cuda13-pjrt: site-packages/jax_plugins/xla_cuda13/xla_cuda_plugin.so),
# torch and transformers installed, but no Go and no network.
#
# Prepare here (Go and the module cache are needed), then run on the device from the repo root:
#
#   GOEXPERIMENT=simd go build -o bin/octlm ./cmd/octlm      # cgo: dlopens the plugin
#   bash xla/device_check.sh [OUT_DIR]                          # on the device
#
# (bin/ is ignored by git: a remote runner must carry it along with the working tree.)
#
# In one run, with every step logged to OUT_DIR (default ./device-check):
#   1. octlm backends --backend xla:cuda: plugin found, PJRT API version, float32 matmuls exact (no TF32)
#   2. octlm parity --backend xla:cuda on both fixtures (float32): the gate must pass
#   3. parity/reference.py regenerates the fixtures' reference logits with the real transformers
#      (float32, eager, TF32 off), compared with the committed files (expect ~1e-5), and
#      octlm parity against the regenerated references
#   4. octlm synth a full-size random Qwen3-0.6B; octlm bench on xla:cuda, float32 and bfloat16,
#      prompts of 128 and 1024 tokens
#   5. the same model in transformers (bfloat16, eager and sdpa): prefill and decode tokens/s,
#      for the ratio
# It keeps going after a failed step and exits non-zero if any failed.
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
out="${1:-device-check}"
mkdir -p "$out"
octlm="${OCTLM:-bin/octlm}"
[ -x "$octlm" ] || { echo "device_check: $octlm not found: build it first (see the header)" >&2; exit 2; }
python="${PYTHON:-python3}"
export NVIDIA_TF32_OVERRIDE=0 PYTHONUNBUFFERED=1
failed=()

step() {
	local name="$1"
	shift
	echo "==> $name" | tee -a "$out/summary.txt"
	if "$@" >"$out/$name.log" 2>&1; then
		echo "    ok" | tee -a "$out/summary.txt"
	else
		echo "    FAILED (exit $?): see $out/$name.log" | tee -a "$out/summary.txt"
		failed+=("$name")
	fi
	tail -n 25 "$out/$name.log"
}

nvidia-smi >"$out/nvidia-smi.txt" 2>&1 || true
step backends "$octlm" backends --backend xla:cuda

for fx in tiny-qwen3 tiny-qwen3-mha; do
	step "parity-cuda-$fx" "$octlm" parity --backend xla:cuda --model "testdata/$fx" \
		--reference "testdata/$fx/reference" --out "$out/parity-cuda-$fx.jsonl" --dtypes bf16,f16
done

for fx in tiny-qwen3 tiny-qwen3-mha; do
	step "reference-$fx" "$python" parity/reference.py --model "testdata/$fx" --cases "testdata/$fx/cases.json" \
		--out "$out/reference-$fx" --device cuda --overwrite
	step "reference-compare-$fx" "$python" - "testdata/$fx/reference" "$out/reference-$fx" <<'EOF'
import sys, glob, os
from safetensors.torch import load_file
old, new = sys.argv[1], sys.argv[2]
worst = 0.0
for path in sorted(glob.glob(os.path.join(old, "reference-logits-*.safetensors"))):
    a, b = load_file(path), load_file(os.path.join(new, os.path.basename(path)))
    assert a["ids"].tolist() == b["ids"].tolist(), f"{path}: ids differ"
    d = (a["logits"] - b["logits"]).abs().max().item()
    worst = max(worst, d)
    print(f"{os.path.basename(path)}: max |committed - regenerated| = {d:.3g}")
print(f"worst {worst:.3g}")
sys.exit(0 if worst < 1e-3 else 1)
EOF
	step "parity-cuda-regenerated-$fx" "$octlm" parity --backend xla:cuda --model "testdata/$fx" --reference "$out/reference-$fx"
done

synth=/tmp/octlm-qwen3-0.6b-synth
step synth "$octlm" synth --like qwen3-0.6b --out "$synth" --seed 1
for dtype in f32 bf16; do
	for prompt in 128 1024; do
		step "bench-cuda-$dtype-$prompt" "$octlm" bench --backend xla:cuda --model "$synth" --dtype "$dtype" \
			--prompt "$prompt" --decode 64 --json
	done
done

step transformers-bench "$python" - "$synth" <<'EOF'
import sys, time, torch, transformers
from transformers import AutoModelForCausalLM
path = sys.argv[1]
torch.backends.cuda.matmul.allow_tf32 = False
for attn in ("eager", "sdpa"):
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.bfloat16, attn_implementation=attn).to("cuda").eval()
    for prompt in (128, 1024):
        ids = torch.randint(0, 151643, (1, prompt), device="cuda")
        with torch.inference_mode():
            model(ids)  # warm-up
            torch.cuda.synchronize(); t = time.perf_counter()
            out = model(ids, use_cache=True)
            torch.cuda.synchronize(); prefill = time.perf_counter() - t
            past, tok = out.past_key_values, out.logits[:, -1:].argmax(-1)
            torch.cuda.synchronize(); t = time.perf_counter()
            for _ in range(64):
                out = model(tok, past_key_values=past, use_cache=True)
                past, tok = out.past_key_values, out.logits[:, -1:].argmax(-1)
            torch.cuda.synchronize(); decode = time.perf_counter() - t
        print(f"transformers {transformers.__version__} torch {torch.__version__} bf16 {attn} prompt {prompt}: "
              f"prefill {prompt / prefill:.1f} tokens/s, decode {64 / decode:.1f} tokens/s ({1000 * decode / 64:.2f} ms/token)")
    del model
EOF

echo
cat "$out/summary.txt"
if [ "${#failed[@]}" -gt 0 ]; then
	echo "device_check: ${#failed[@]} step(s) failed: ${failed[*]}"
	exit 1
fi
echo "device_check: all steps passed"
