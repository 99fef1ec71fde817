#!/usr/bin/env bash
# bench/b1.sh: is B = 1 as fast after the batch axis as before it? Builds octlm at 4805c6f (the
# commit before the batch axis) and at HEAD, and runs `octlm bench` on a full-size synthetic
# Qwen3-0.6B alternated old, new, old, new on each backend, then prints prefill and decode
# tokens/s per run and the new/old ratio of the medians. Run it on a quiet machine; it prints the
# load average before and after.
#
#   ./bench/b1.sh                 # backends onnx and go, 2 rounds
#   BACKENDS=go ROUNDS=3 ./bench/b1.sh
set -euo pipefail
export GOTOOLCHAIN=auto GOEXPERIMENT=simd

OLD_COMMIT=${OLD_COMMIT:-4805c6f}
OLD_TREE=${OLD_TREE:-/tmp/old}
MODEL=${MODEL:-/tmp/q06}
BACKENDS=${BACKENDS:-onnx go}
ROUNDS=${ROUNDS:-2}
ARGS=(--json --prompt 128 --decode 32)
OUT=${OUT:-$(mktemp -d /tmp/bench_b1.XXXXXX)}
mkdir -p "$OUT"
repo=$(cd "$(dirname "$0")/.." && pwd)

if [ ! -d "$OLD_TREE" ]; then
	git -C "$repo" worktree add --detach "$OLD_TREE" "$OLD_COMMIT" >/dev/null
fi
echo "building old ($OLD_COMMIT) and new ($(git -C "$repo" rev-parse --short HEAD))" >&2
(cd "$OLD_TREE" && go build -o /tmp/octlm-old ./cmd/octlm)
(cd "$repo" && go build -o /tmp/octlm-new ./cmd/octlm)
if [ ! -f "$MODEL/config.json" ]; then
	/tmp/octlm-new synth --like qwen3-0.6b --out "$MODEL" >&2
fi

echo "start: $(uptime)"
for backend in $BACKENDS; do
	for round in $(seq "$ROUNDS"); do
		for which in old new; do
			f="$OUT/$backend-$which-$round.json"
			echo "$backend $which round $round" >&2
			"/tmp/octlm-$which" bench --model "$MODEL" --backend "$backend" "${ARGS[@]}" >"$f" 2>"$f.err" ||
				{ echo "failed: $backend $which $round (see $f.err)" >&2; rm -f "$f"; }
		done
	done
done
echo "end:   $(uptime)"

python3 - "$OUT" $BACKENDS <<'EOF'
import glob, json, os, statistics, sys
out, backends = sys.argv[1], sys.argv[2:]
print(f"{'backend':8} {'build':5} {'round':>5} {'load':>5} {'prefill tok/s':>14} {'decode tok/s':>13}")
for b in backends:
    med = {}
    for which in ("old", "new"):
        rows = []
        for f in sorted(glob.glob(os.path.join(out, f"{b}-{which}-*.json"))):
            r = json.load(open(f))
            rows.append(r)
            rnd = f.rsplit("-", 1)[1].split(".")[0]
            print(f"{b:8} {which:5} {rnd:>5} {r['load_average']:5.2f} {r['prefill_tokens_per_second']:14.1f} {r['decode_tokens_per_second']:13.2f}")
        if rows:
            med[which] = (statistics.median(r["prefill_tokens_per_second"] for r in rows),
                          statistics.median(r["decode_tokens_per_second"] for r in rows))
    if "old" in med and "new" in med:
        print(f"{b:8} new/old medians: prefill {med['new'][0]/med['old'][0]:.3f}, decode {med['new'][1]/med['old'][1]:.3f}")
EOF
echo "raw JSON in $OUT"
