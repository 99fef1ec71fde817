# setup.sh: sourced by run.sh and adapter.sh (needs $repo). Sets up llama.cpp in the peer cache,
# ${OCTLM_PEER_CACHE:-~/.cache/octlm-peer}, the first time: npm's node-llama-cpp 3.22.1 (its prebuilt
# CPU libraries), a git clone of its bundled llama.cpp source (llama/gitRelease.bundle: headers,
# gguf-py, the converters) and lllogits and llscore built with gcc against them. Sets cache, bins (the folder
# of the prebuilt libraries) and src (the llama.cpp source tree).
cache="${OCTLM_PEER_CACHE:-$HOME/.cache/octlm-peer}"
mkdir -p "$cache"
if [ ! -d "$cache/node_modules/@node-llama-cpp/linux-x64" ]; then
	(cd "$cache" && npm install --silent --no-audit --no-fund --ignore-scripts node-llama-cpp@3.22.1 >&2)
fi
bins="$(cd "$cache/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64" && pwd)"
src="$cache/src"
if [ ! -d "$src/gguf-py" ]; then
	rm -rf "$src"
	git clone -q "$cache/node_modules/node-llama-cpp/llama/gitRelease.bundle" "$src" 2>/dev/null
fi
for tool in lllogits llscore; do
	if [ ! -x "$cache/$tool" ] || [ "$repo/parity/llamacpp/$tool.c" -nt "$cache/$tool" ] || [ "$repo/parity/llamacpp/llcommon.h" -nt "$cache/$tool" ]; then
		gcc -O2 -Wall -o "$cache/$tool.tmp" "$repo/parity/llamacpp/$tool.c" -I"$src/include" -I"$src/ggml/include" \
			"$bins/libllama.v0.5.0.so" "$bins/libggml.v0.5.0.so" "$bins/libggml-base.so" -lm -Wl,-rpath,"$bins"
		mv "$cache/$tool.tmp" "$cache/$tool"
	fi
done
