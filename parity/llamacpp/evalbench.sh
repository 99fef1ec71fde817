#!/usr/bin/env bash
# evalbench.sh: octlm eval's loglikelihood speed at batch 1, 4 and 16 beside llama.cpp scoring the
# same tokens, alternated in one sitting (octlm, llama.cpp, octlm, llama.cpp, ...).
#
#   parity/llamacpp/evalbench.sh [--shape qwen3-0.6b] [--rounds 2] [--threads N] [--batches 1,4,16] [--tol 1e-3]
#
# octlm: eval's BenchmarkLoglikelihoodBatch (32 documents of 40 to 160 random words, a one-word
# continuation, on a random checkpoint of the synth shape written once into the folder
# ${OCTLM_PEER_CACHE:-~/.cache/octlm-peer}/evalbench-SHAPE), -benchtime=1x: each batch size runs the
# task once, graph building included, the model loaded before. It also writes the requests'
# token IDs and its log-likelihoods (requests.jsonl). llama.cpp: llscore (parity/llamacpp/llscore.c,
# node-llama-cpp 3.22.1's prebuilt CPU libraries, set up as run.sh does) on a float32 GGUF of the
# same checkpoint made by llama.cpp's own convert_hf_to_gguf.py (through adapter_gguf.py), the
# same requests in the same order, NSEQ sequences per llama_decode, logits only on the
# continuation's rows. Every llama.cpp round's log-likelihoods are checked against octlm's: the
# round fails when one differs by more than --tol or a greedy flag differs. octlm's backend is
# $GOMLX_BACKEND's, else the pure-Go one (`go`: ONNX Runtime did not finish the small shape in 10
# minutes, docs/eval.md); llama.cpp runs on the CPU with --threads (default nproc; on a loaded
# machine its spinning thread pool stalls, try 1). Prints the load (uptime) around each round, a
# markdown table and the ratios.
# Needs go, npm, gcc, git and /usr/bin/python3 with Debian's python3-numpy and python3-torch.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
shape=qwen3-0.6b rounds=2 threads=$(nproc) batches=1,4,16 tol=1e-3
while [ $# -gt 0 ]; do
	case "$1" in
	--shape | --rounds | --threads | --batches | --tol)
		if [ $# -lt 2 ]; then echo "evalbench.sh: $1 wants a value" >&2; exit 2; fi ;;&
	--shape) shape=$2; shift 2 ;;
	--rounds) rounds=$2; shift 2 ;;
	--threads) threads=$2; shift 2 ;;
	--batches) batches=$2; shift 2 ;;
	--tol) tol=$2; shift 2 ;;
	-h | --help) sed -n '2,21p' "$0"; exit 0 ;;
	*) echo "evalbench.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
	esac
done
if [ "$batches" != 1,4,16 ]; then
	echo "evalbench.sh: octlm's benchmark runs batch 1, 4 and 16; --batches changes llama.cpp's only" >&2
fi
export GOTOOLCHAIN=auto GOEXPERIMENT=simd GOMLX_BACKEND="${GOMLX_BACKEND:-go}"
. "$repo/parity/llamacpp/setup.sh"
dir="$cache/evalbench-$shape"
mkdir -p "$dir"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
(cd "$repo" && go test -c -o "$work/eval.test" ./eval)
log="$dir/sitting-$(date -u +%Y%m%dT%H%M%SZ).txt"
echo "sitting log: $log" >&2
{
	echo "commit $(git -C "$repo" rev-parse --short HEAD)$(git -C "$repo" diff --quiet || echo '+dirty'), shape $shape, octlm backend $GOMLX_BACKEND, llama.cpp threads $threads, $(nproc) CPUs"
	grep -m1 'model name' /proc/cpuinfo || true
} | tee "$log" >&2
rows="$work/rows.tsv"
: >"$rows"
octlm_round() {
	echo "octlm round $1: $(uptime)" | tee -a "$log" >&2
	(cd "$repo/eval" && OCTLM_EVAL_BENCH_SHAPE="$shape" OCTLM_EVAL_BENCH_DIR="$dir" "$work/eval.test" \
		-test.run '^$' -test.bench BenchmarkLoglikelihoodBatch -test.benchtime=1x -test.timeout 60m) | tee -a "$log" /dev/stderr |
		awk -v r="$1" '/^BenchmarkLoglikelihoodBatch\/batch=/ {
			split($1, a, "="); sub(/-[0-9]+$/, "", a[2])
			for (i = 1; i <= NF; i++) { if ($i == "requests/s") q = $(i-1); if ($i == "tokens/s") t = $(i-1) }
			printf "octlm\t%s\t%s\t%s\t%s\n", r, a[2], q, t }' >>"$rows"
}
llama_round() {
	echo "llama.cpp round $1: $(uptime)" | tee -a "$log" >&2
	LLB_BINS="$bins" "$cache/llscore" "$dir/model-f32.gguf" "$threads" "$dir/requests.jsonl" "$batches" "$work/ll.tsv" |
		tee -a "$log" /dev/stderr | awk -v r="$1" '/^RESULT/ {
			for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
			printf "llama.cpp\t%s\t%s\t%s\t%s\n", r, v["nseq"], v["requests_per_s"], v["tokens_per_s"] }' >>"$rows"
	/usr/bin/python3 - "$dir/requests.jsonl" "$work/ll.tsv" "$tol" <<-'EOF' | tee -a "$log" >&2
		import json, sys
		octlm = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
		llama = [line.split("\t") for line in open(sys.argv[2]).read().splitlines() if line]
		if len(octlm) != len(llama):
		    sys.exit(f"{len(octlm)} octlm requests, {len(llama)} llama.cpp results")
		diff = [abs(o["loglikelihood"] - float(l[1])) for o, l in zip(octlm, llama)]
		greedy = sum(o["is_greedy"] == (l[2] == "1") for o, l in zip(octlm, llama))
		worst = max(range(len(diff)), key=diff.__getitem__)
		print(f"log-likelihoods: max |octlm - llama.cpp| {diff[worst]:.3g} (request {worst}: octlm "
		      f"{octlm[worst]['loglikelihood']:.6f}), greedy flags equal {greedy}/{len(octlm)}")
		if diff[worst] > float(sys.argv[3]) or greedy != len(octlm):
		    sys.exit(f"llama.cpp and octlm disagree beyond {sys.argv[3]}")
	EOF
}
for r in $(seq 1 "$rounds"); do
	octlm_round "$r"
	if [ ! -s "$dir/model-f32.gguf" ]; then
		PYTHONPATH="$src/gguf-py" /usr/bin/python3 "$repo/parity/llamacpp/adapter_gguf.py" --src "$src" \
			base "$dir/model" "$dir/model-f32.gguf" 2>"$work/convert.log" || { tail -5 "$work/convert.log" >&2; exit 1; }
	fi
	llama_round "$r"
done
echo "after: $(uptime)" | tee -a "$log" >&2
/usr/bin/python3 - "$rows" <<-'EOF' | tee -a "$log"
	import collections, statistics, sys
	rows = [line.split("\t") for line in open(sys.argv[1]).read().splitlines()]
	print("| engine | round | batch | requests/s | tokens/s | x batch 1 |")
	print("| --- | --- | --- | --- | --- | --- |")
	base = {}
	mean = collections.defaultdict(list)
	for eng, rnd, b, q, t in rows:
	    q, t = float(q), float(t)
	    if b == "1":
	        base[eng, rnd] = q
	    mean[eng, b].append(q)
	    print(f"| {eng} | {rnd} | {b} | {q:.2f} | {t:.0f} | {q / base[eng, rnd]:.2f} |")
	print()
	print("| batch | octlm requests/s (mean) | llama.cpp requests/s (mean) | octlm / llama.cpp |")
	print("| --- | --- | --- | --- |")
	for b in sorted({b for _, b in mean}, key=int):
	    o, l = mean.get(("octlm", b)), mean.get(("llama.cpp", b))
	    if o and l:
	        print(f"| {b} | {statistics.mean(o):.2f} | {statistics.mean(l):.2f} | {statistics.mean(o) / statistics.mean(l):.2f} |")
EOF
