#!/usr/bin/env bash
# bench/depth.sh: decode at depth 4,096 against depth 0, the binary before the in-place KV cache
# against the one after, on both engines, alternated (before, after, before, after) in one
# sitting, with llama.cpp's peer at the same depths. Run it on a quiet machine:
#
#   BEFORE=/tmp/octlm-before AFTER=/tmp/octlm-after REPS=2 ./bench/depth.sh
#
# BEFORE and AFTER are `octlm` binaries (go build -o … ./cmd/octlm at each commit); MODEL is a
# random Qwen3-0.6B (made with `octlm synth --like qwen3-0.6b` if absent); LLAMACPP_BENCH is
# llama.cpp's llamacpp-bench peer script (skipped if unset); BACKENDS the engines (default
# "go onnx"); DTYPE the weights' dtype for both octlm and llama.cpp (default f32; bf16 on go
# only). Prints one line per run and a table of decode ms/token, the depth-4096 step over the
# depth-0 step, and peak RSS, with the load average at each run. The raw JSON lines go to $OUT
# (default /tmp/bench_depth.jsonl).
set -euo pipefail
BEFORE=${BEFORE:-/tmp/octlm-before}
AFTER=${AFTER:-/tmp/octlm-after}
MODEL=${MODEL:-/tmp/q06}
LLAMA=${LLAMACPP_BENCH:-}
REPS=${REPS:-2}
THREADS=${THREADS:-2}
OUT=${OUT:-/tmp/bench_depth.jsonl}
BACKENDS=${BACKENDS:-go onnx}
DTYPE=${DTYPE:-f32}
[ -f "$MODEL/model.safetensors" ] || "$AFTER" synth --like qwen3-0.6b --out "$MODEL"
: > "$OUT"

load() { cut -d' ' -f1 /proc/loadavg; }

octlm_run() { # label binary backend depth
	local label=$1 bin=$2 backend=$3 depth=$4 args
	if [ "$depth" = 0 ]; then
		args=(--prompt 128 --decode 32)
	else
		args=(--depth "$depth" --depth-fill zeros --prompt 32 --decode 16)
	fi
	local l
	l=$(load)
	"$bin" bench --model "$MODEL" --backend "$backend" --dtype "$DTYPE" --json "${args[@]}" 2>/dev/null |
		jq -c --arg lab "$label" --arg backend "$backend" --arg load "$l" \
			'{"label": $lab, backend: $backend, dtype: .dtype, depth: .depth, load: ($load|tonumber),
			  decode_ms: .decode_ms_per_token, decode_tps: .decode_tokens_per_second,
			  prefill_tps: .prefill_tokens_per_second, peak_rss_gib: (.peak_rss_bytes / 1073741824)}' | tee -a "$OUT"
}

llama_run() { # depth
	local depth=$1 args l
	if [ "$depth" = 0 ]; then
		args=(--prompt 128 --decode 32)
	else
		args=(--depth "$depth" --prompt 32 --decode 16)
	fi
	l=$(load)
	"$LLAMA" "${args[@]}" --dtype "$DTYPE" --threads "$THREADS" --reps 1 2>/dev/null | tail -1 |
		jq -c --arg load "$l" --argjson depth "$depth" \
			'{"label": "llama.cpp", backend: "llama.cpp", dtype: .dtype, depth: $depth, load: ($load|tonumber),
			  decode_ms: (1000 / .decode_tokens_per_second), decode_tps: .decode_tokens_per_second,
			  prefill_tps: .prefill_tokens_per_second, peak_rss_gib: null}' | tee -a "$OUT"
}

for rep in $(seq "$REPS"); do
	echo "# rep $rep" >&2
	for backend in $BACKENDS; do
		for depth in 0 4096; do
			octlm_run before "$BEFORE" "$backend" "$depth"
			octlm_run after "$AFTER" "$backend" "$depth"
		done
	done
	if [ -x "$LLAMA" ]; then
		for depth in 0 4096; do llama_run "$depth"; done
	fi
done

echo
echo "| binary | engine | depth | decode ms/token (runs) | step ÷ depth-0 step | peak RSS GiB | load |"
echo "| --- | --- | --- | --- | --- | --- | --- |"
jq -rs '
	group_by([.label, .backend]) | .[] |
	(map(select(.depth == 0) | .decode_ms) | min) as $base |
	group_by(.depth) | .[] |
	"| \(.[0].label) | \(.[0].backend) | \(.[0].depth) | \(map(.decode_ms * 10 | round / 10) | join(", ")) | \(if $base then ((map(.decode_ms) | min) / $base * 100 | round / 100) else "-" end)× | \(map(.peak_rss_gib // 0) | max * 100 | round / 100) | \(map(.load) | join(", ")) |"
' "$OUT"
