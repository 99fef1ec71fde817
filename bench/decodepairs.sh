#!/usr/bin/env bash
# bench/decodepairs.sh: issue 34's depth-0 decode goals as paired runs. On a guest whose memory
# reads swing between two speeds from minute to minute, two rounds of bench/sidebyside.sh say
# little about a ratio near 1.0: here each pair is one llama.cpp run (the llamacpp-bench peer
# script, LLAMACPP_BENCH) and one `octlm bench --backend go` run back to back, the same dtype,
# prompt 128 and decode 32, 2 threads each, which of the two goes first swapped from pair to pair,
# PAIRS pairs (default 12) for float32 weights and then as many for bfloat16, alternated pair by pair
# (DTYPES="bf16", or "f32", for one of them).
# With OLD_OCTLM=BINARY each pair also runs that build ("octlm-old"), between the two.
#
#   bash bench/decodepairs.sh [OCTLM_BINARY] [MODEL_DIR] > pairs.jsonl
#   python3 bench/decodepairs_summary.py pairs.jsonl
#
# Prints one JSON line per run ({"pair":N,"engine":"octlm"|"llama.cpp",...the run's own JSON}) to
# stdout and the load average before each run to stderr. A run that fails prints its error and
# the sitting goes on.
set -uo pipefail
octlm="${1:-octlm}"
model="${2:-/tmp/q06}"
pairs="${PAIRS:-12}"
dtypes="${DTYPES:-f32 bf16}"
script=decodepairs.sh
# shellcheck source=bench/sitting.sh
. "$(dirname "$0")/sitting.sh"

run() { # pair, dtype, engine
	local pair=$1 dtype=$2 engine=$3 out
	echo "$(date +%H:%M:%S) load $(cut -d' ' -f1 /proc/loadavg): pair $pair $dtype $engine" >&2
	local binary="$octlm"
	if [ "$engine" = octlm-old ]; then
		binary="$OLD_OCTLM"
	fi
	if [ "$engine" = llama.cpp ]; then
		out="$("$llama" --threads 2 --reps 1 --dtype "$dtype" --prompt 128 --decode 32 2>/dev/null)"
	else
		out="$("$binary" bench --json --model "$model" --backend go --dtype "$dtype" --prompt 128 --decode 32 2>/dev/null | tr -d '\n')"
	fi
	if [ -n "$out" ] && [ "${out:0:1}" = "{" ]; then
		printf '{"pair":%d,"engine":"%s",%s\n' "$pair" "$engine" "${out#\{}"
	else
		printf '{"pair":%d,"engine":"%s","dtype":"%s","error":"the run failed"}\n' "$pair" "$engine" "$dtype"
	fi
}

for pair in $(seq "$pairs"); do
	for dtype in $dtypes; do
		engines=(llama.cpp octlm)
		if [ $((pair % 2)) -eq 0 ]; then
			engines=(octlm llama.cpp)
		fi
		if [ -n "${OLD_OCTLM:-}" ]; then
			engines=("${engines[0]}" octlm-old "${engines[1]}")
		fi
		for engine in "${engines[@]}"; do
			run "$pair" "$dtype" "$engine"
		done
	done
done
