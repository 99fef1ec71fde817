#!/usr/bin/env bash
# run.sh: llama.cpp's logits on octlm's Qwen3.5 fixtures, against their float64 PyTorch reference.
#
#   parity/llamacpp/run.sh [--threads N] [--out DIR] [FIXTURE...]   (default: testdata/tiny-qwen35*)
#
# llama.cpp = the prebuilt CPU libraries of npm's node-llama-cpp 3.22.1 (its bundled llama.cpp
# source, llama/gitRelease.bundle, gives the headers and gguf-py). First run sets up a cache in
# ${OCTLM_PEER_CACHE:-~/.cache/octlm-peer} (npm install, git clone of the bundle, gcc), as
# the project's llama.cpp speed peer does; it needs npm, gcc, git and /usr/bin/python3 with Debian's
# python3-numpy and python3-torch. Prints a markdown table (max |llama.cpp - reference| and top-token
# agreement per case, whole case in one batch and token by token) and one JSON line. LLB_FA=1 or -1
# turns llama.cpp's flash attention on or to auto (its default; off here: see docs/qwen35.md).
# --out DIR also writes llama.cpp's batch logits as parity reference folders, DIR/FIXTURE/, for
# `octlm parity --model testdata/FIXTURE --reference DIR/FIXTURE` (octlm vs llama.cpp).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
threads=1 out=()
while [ $# -gt 0 ]; do
	case "$1" in
	--threads) threads=$2; shift 2 ;;
	--out) out=(--out "$(cd "$(dirname "$2")" && pwd)/$(basename "$2")"); shift 2 ;;
	-h | --help) sed -n '2,14p' "$0"; exit 0 ;;
	-*) echo "run.sh: unknown flag $1" >&2; exit 2 ;;
	*) break ;;
	esac
done
fixtures=("$@")
if [ ${#fixtures[@]} -eq 0 ]; then
	fixtures=("$repo"/testdata/tiny-qwen35*)
fi
for i in "${!fixtures[@]}"; do
	fixtures[$i]="$(cd "${fixtures[$i]}" && pwd)"
done
. "$repo/parity/llamacpp/setup.sh"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
LLB_BINS="$bins" PYTHONPATH="$cache/src/gguf-py" /usr/bin/python3 "$repo/parity/llamacpp/compare.py" \
	--lllogits "$cache/lllogits" --work "$work" --threads "$threads" "${out[@]}" "${fixtures[@]}"
