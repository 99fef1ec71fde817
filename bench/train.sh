#!/bin/bash
# bench/train.sh: the LoRA fine-tuning side-by-side of docs/finetune.md ("Speed"), for a quiet
# machine. Each round runs PyTorch (the torch-lora-bench peer script, not part of this
# repository: TORCH_LORA_BENCH names it), then octlm's
# BenchmarkLoRATrainStep with float32 weights, --base-dtype bf16 and --gradient-checkpointing,
# one after the other (so PyTorch and octlm alternate); then the roofline
# (BenchmarkMatMulFLOPs, a 2048³ float32 product on the same pure-Go backend). It prints one
# markdown table: tokens/s, peak RSS, the ratios to PyTorch and to the roofline.
#
#   ./bench/train.sh                       # MODEL=/tmp/q06 ROUNDS=2 STEPS=3
#
# LoRA r 16 (alpha 32) on all seven projections of the Qwen3-0.6B shape, batch 1 × 256 tokens.
# PyTorch: best timed step of STEPS (its first step is a warm-up it does not time); octlm: the
# mean of STEPS steps after a compiled warm-up. Peak RSS is each process's VmHWM / ru_maxrss.
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=${MODEL:-/tmp/q06}
ROUNDS=${ROUNDS:-2}
STEPS=${STEPS:-3}
PEER=${TORCH_LORA_BENCH:-}
if [ ! -x "$PEER" ]; then
	echo "train.sh: set TORCH_LORA_BENCH to PyTorch's torch-lora-bench peer script" >&2
	exit 2
fi
export GOTOOLCHAIN=auto GOEXPERIMENT=simd
BIN=$(mktemp -d)/train.test
trap 'rm -rf "$(dirname "$BIN")"' EXIT

if [ ! -f "$MODEL/config.json" ]; then
	go run ./cmd/octlm synth --like qwen3-0.6b --out "$MODEL" >&2
fi
go test -c -o "$BIN" ./train

# The FLOPs of one trained token (see docs/finetune.md): LoRA 4·N + 3·A + 3·L, N the multiply-adds
# of the projections and the head, A the attention products' FLOPs (the full S × S, as both
# graphs compute it), L the adapters'.
flops=$(python3 - "$MODEL/config.json" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1]))
d, ff, L, V = c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"], c["vocab_size"]
H, KV = c["num_attention_heads"], c["num_key_value_heads"]
hd = c.get("head_dim") or d // H
S, r = 256, 16
shapes = [(d, H * hd), (d, KV * hd), (d, KV * hd), (H * hd, d), (d, ff), (d, ff), (ff, d)]
N = L * sum(i * o for i, o in shapes) + V * d
A = L * 2 * 2 * S * H * hd
LA = L * sum(2 * r * (i + o) for i, o in shapes)
print(4 * N + 3 * A + 3 * LA)
EOF
)

now() { date -u +%H:%M; }
load() { cut -d' ' -f1 /proc/loadavg; }
# torch_run: "tokens/s peak_bytes" from torch-lora-bench's JSON line.
torch_run() {
	env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$PEER" --model "$MODEL" --steps "$STEPS" 2>/dev/null |
		tail -1 | python3 -c 'import json,sys; j=json.loads(sys.stdin.read()); print(j["train_tokens_per_second"], j["peak_rss_bytes"])'
}
# octlm_run ENV...: "tokens/s peak_bytes cpu_s/step" from the benchmark's line.
octlm_run() {
	env "$@" OCTLM_TRAIN_BENCH_MODEL="$MODEL" "$BIN" -test.run XXX -test.bench LoRATrainStep -test.benchtime "${STEPS}x" |
		awk '/^BenchmarkLoRATrainStep/ { for (i = 3; i < NF; i++) m[$(i+1)] = $i
			printf "%s %.0f %s\n", m["train_tokens/s"], m["peak_RSS_MiB"] * 1048576, m["cpu_s/step"] }'
}
gb() { awk -v b="$1" 'BEGIN { printf "%.2f GB", b / 1e9 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f×", a / b }'; }

rows=()
for round in $(seq "$ROUNDS"); do
	t0=$(now) l0=$(load)
	read -r tt tm < <(torch_run)
	for variant in f32 bf16 checkpointing; do
		case $variant in
		f32) envs=(OCTLM_TRAIN_BENCH_BASE=f32) ;;
		bf16) envs=(OCTLM_TRAIN_BENCH_BASE=bf16) ;;
		checkpointing) envs=(OCTLM_TRAIN_BENCH_BASE=f32 OCTLM_TRAIN_BENCH_RECOMPUTE=1) ;;
		esac
		l1=$(load)
		read -r ot om oc < <(octlm_run "${envs[@]}")
		rows+=("| $round | $t0 | $l0 / $l1 | $variant | $(printf %.1f "$tt") | $ot | $(ratio "$ot" "$tt") | $(gb "$tm") | $(gb "$om") ($(ratio "$om" "$tm")) | $oc | @$ot |")
	done
done
gflops=$("$BIN" -test.run XXX -test.bench 'MatMulFLOPs/square2048' -test.benchtime 10x | awk '/GFLOP/ { for (i = 3; i < NF; i++) if ($(i+1) == "GFLOP/s") print $i }')

echo "LoRA r 16, all seven projections, $(basename "$MODEL") ($MODEL), batch 1 × 256, $(date -u +%F), commit $(git rev-parse --short HEAD), $(nproc) cores: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "roofline: $gflops GFLOP/s (BenchmarkMatMulFLOPs/square2048); $(awk -v f="$flops" 'BEGIN { printf "%.3f", f / 1e9 }') GFLOP per trained token"
echo
echo "| round | UTC | load (PyTorch / octlm) | octlm | PyTorch tokens/s | octlm tokens/s | ratio | PyTorch peak RSS | octlm peak RSS | octlm CPU s/step | octlm / roofline |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
for row in "${rows[@]}"; do
	tps=${row##*@}
	tps=${tps% |}
	echo "${row%@*}$(awk -v t="$tps" -v f="$flops" -v g="$gflops" 'BEGIN { printf "%.1f%%", 100 * t * f / (g * 1e9) }') |"
done
