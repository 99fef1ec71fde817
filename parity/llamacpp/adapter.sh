#!/usr/bin/env bash
# adapter.sh: llama.cpp as an independent judge of a LoRA adapter on a Qwen3 or Qwen3.5 checkpoint.
#
#   parity/llamacpp/adapter.sh [--model DIR] [--adapter DIR]... [--scale S] [--threads N] [--out DIR]
#
# --model: a Qwen3 or Qwen3.5 checkpoint folder with cases.json (default testdata/tiny-qwen3);
# --adapter: a PEFT LoRA folder (adapter_config.json, adapter_model.safetensors), repeatable (default
# the reference-adapter and init-adapter of testdata/tiny-qwen3-finetune/lora). llama.cpp's own
# converters make float32 GGUFs of both (convert_hf_to_gguf.py, convert_lora_to_gguf.py, through
# adapter_gguf.py, which stands in for the Python packages they import that are not installed);
# lllogits loads the base with the adapter applied at --scale (default 1: llama.cpp multiplies by
# alpha / r itself) and computes every case's logits, whole case in one batch and token by token.
# Prints a markdown table (max |llama.cpp - reference| and top-token agreement per case, against a
# float64 PyTorch forward of W + scale·(alpha/r)·B·A) and one JSON line. --out DIR (one adapter)
# writes llama.cpp's batch logits as a parity reference folder, DIR/reference-logits-N.safetensors,
# for `octlm parity --model MODEL --adapter ADAPTER --reference DIR` (octlm vs llama.cpp).
# First run sets up ${OCTLM_PEER_CACHE:-~/.cache/octlm-peer} as run.sh does (npm, git, gcc);
# needs /usr/bin/python3 with Debian's python3-numpy and python3-torch. LLB_VERBOSE=1 shows the
# converters' and llama.cpp's logs.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
abs() { echo "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"; }
model="$repo/testdata/tiny-qwen3" threads=1 scale=1 out=() adapters=()
while [ $# -gt 0 ]; do
	case "$1" in
	--model | --adapter | --scale | --threads | --out)
		if [ $# -lt 2 ]; then echo "adapter.sh: $1 wants a value" >&2; exit 2; fi ;;&
	--model) model=$2; shift 2 ;;
	--adapter) adapters+=("$2"); shift 2 ;;
	--scale) scale=$2; shift 2 ;;
	--threads) threads=$2; shift 2 ;;
	--out) out=(--out "$(abs "$2")"); shift 2 ;;
	-h | --help) sed -n '2,19p' "$0"; exit 0 ;;
	*) echo "adapter.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
	esac
done
if [ ${#adapters[@]} -eq 0 ]; then
	adapters=("$repo/testdata/tiny-qwen3-finetune/lora/reference-adapter" "$repo/testdata/tiny-qwen3-finetune/lora/init-adapter")
fi
for d in "$model" "${adapters[@]}"; do
	if [ ! -d "$d" ]; then echo "adapter.sh: $d: no such folder" >&2; exit 2; fi
done
model="$(cd "$model" && pwd)"
for i in "${!adapters[@]}"; do
	adapters[$i]="$(cd "${adapters[$i]}" && pwd)"
done
. "$repo/parity/llamacpp/setup.sh"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# exit status: 0 done, 1 a converter or llama.cpp failed (its log's tail on stderr), 2 bad input
LLB_BINS="$bins" PYTHONPATH="$src/gguf-py" /usr/bin/python3 "$repo/parity/llamacpp/adapter_compare.py" \
	--lllogits "$cache/lllogits" --src "$src" --work "$work" --model "$model" --threads "$threads" --scale "$scale" \
	"${out[@]}" "${adapters[@]}"
