#!/usr/bin/env bash
# bench/sidebyside.sh: issue 34's table in one sitting. octlm bench and llama.cpp (through the
# llamacpp-bench peer script, not part of this repository: LLAMACPP_BENCH names it) on a random
# Qwen3-0.6B, 2 threads each, engines alternated run by run:
#
#   depth 0, prompt 128, decode 32:  llama.cpp f32, octlm onnx f32 (+ batch 1,8,16), octlm go f32
#                                    (+ batch 1,8,16), llama.cpp bf16, octlm go bf16 (+ batch
#                                    1,8,16) (ROUNDS rounds, default 2)
#   depth 4096, prompt 32, decode 16: llama.cpp f32, octlm onnx f32, octlm go f32 (+ batch 1,8),
#                                    octlm go f32 with a float32 cache, llama.cpp bf16, octlm go
#                                    bf16 (+ batch 1,8) (one round)
#
# KV caches: llama.cpp's float16 (its default), octlm's generation default (float16 under float32
# weights on go since 2026-12-07, float32 on onnx; the bf16 runs bfloat16), and the last depth run
# float32 (--kv-dtype f32), as every go run before that day.
#   bash bench/sidebyside.sh [OCTLM_BINARY] [MODEL_DIR]
#
# The checkpoint (octlm synth: bfloat16 weights) is widened to float32 at load for the f32 runs.
# With OLD_OCTLM=BINARY each round also runs that build's onnx f32, go f32 and go bf16 at depth 0,
# and the sitting that build's go f32 and go bf16 at depth 4096.
# Prints one JSON line per run (octlm's --json with the run's name and peak RSS; llama.cpp's line
# with its peak RSS from /usr/bin/time) to stdout and the load average before each run to
# stderr. A run that fails prints its name and error and the sitting goes on.
set -uo pipefail
octlm="${1:-octlm}"
model="${2:-/tmp/q06}"
rounds="${ROUNDS:-2}"
script=sidebyside.sh
# shellcheck source=bench/sitting.sh
. "$(dirname "$0")/sitting.sh"

octlm_run() { # name, then octlm bench flags
	local name=$1
	shift
	echo "$(date +%H:%M:%S) load $(cut -d' ' -f1 /proc/loadavg): $name" >&2
	local out
	if out="$("$octlm" bench --json "$@" 2>/dev/null)"; then
		printf '{"run":"%s",%s\n' "$name" "${out#\{}"
	else
		echo "{\"run\":\"$name\",\"error\":\"octlm bench failed\"}"
	fi
}
llama_run() { # name, then llamacpp-bench flags
	local name=$1
	shift
	echo "$(date +%H:%M:%S) load $(cut -d' ' -f1 /proc/loadavg): $name" >&2
	local out rss
	rss="$(mktemp)"
	if out="$(/usr/bin/time -f '%M' -o "$rss" "$llama" --threads 2 --reps 1 "$@" 2>/dev/null)"; then
		printf '{"run":"%s","peak_rss_bytes":%d,%s\n' "$name" "$(($(tail -1 "$rss") * 1024))" "${out#\{}"
	else
		echo "{\"run\":\"$name\",\"error\":\"llamacpp-bench failed\"}"
	fi
	rm -f "$rss"
}

for round in $(seq "$rounds"); do
	llama_run "llama.cpp f32 d0 r$round" --dtype f32 --prompt 128 --decode 32
	octlm_run "onnx f32 d0 r$round" --model "$model" --backend onnx --prompt 128 --decode 32 --batch 1,8,16
	octlm_run "go f32 d0 r$round" --model "$model" --backend go --prompt 128 --decode 32 --batch 1,8,16
	llama_run "llama.cpp bf16 d0 r$round" --dtype bf16 --prompt 128 --decode 32
	octlm_run "go bf16 d0 r$round" --model "$model" --backend go --dtype bf16 --prompt 128 --decode 32 --batch 1,8,16
	if [ -n "${OLD_OCTLM:-}" ]; then # an earlier build, for a before/after beside the same runs
		octlm="$OLD_OCTLM" octlm_run "old onnx f32 d0 r$round" --model "$model" --backend onnx --prompt 128 --decode 32
		octlm="$OLD_OCTLM" octlm_run "old go f32 d0 r$round" --model "$model" --backend go --prompt 128 --decode 32 --batch 1,8,16
		octlm="$OLD_OCTLM" octlm_run "old go bf16 d0 r$round" --model "$model" --backend go --dtype bf16 --prompt 128 --decode 32
	fi
done
llama_run "llama.cpp f32 d4096" --dtype f32 --depth 4096 --prompt 32 --decode 16
octlm_run "onnx f32 d4096" --model "$model" --backend onnx --depth 4096 --depth-fill zeros --prompt 32 --decode 16
octlm_run "go f32 d4096" --model "$model" --backend go --depth 4096 --depth-fill zeros --prompt 32 --decode 16 --batch 1,8
octlm_run "go f32 d4096 f32cache" --model "$model" --backend go --depth 4096 --depth-fill zeros --prompt 32 --decode 16 --kv-dtype f32
if [ -n "${OLD_OCTLM:-}" ]; then
	octlm="$OLD_OCTLM" octlm_run "old go f32 d4096" --model "$model" --backend go --depth 4096 --depth-fill zeros --prompt 32 --decode 16
fi
llama_run "llama.cpp bf16 d4096" --dtype bf16 --depth 4096 --prompt 32 --decode 16
octlm_run "go bf16 d4096" --model "$model" --backend go --dtype bf16 --depth 4096 --depth-fill zeros --prompt 32 --decode 16 --batch 1,8
if [ -n "${OLD_OCTLM:-}" ]; then
	octlm="$OLD_OCTLM" octlm_run "old go bf16 d4096" --model "$model" --backend go --dtype bf16 --depth 4096 --depth-fill zeros --prompt 32 --decode 16
fi
