# bench/sitting.sh: sourced by the side-by-side scripts (sidebyside.sh, decodepairs.sh) with
# octlm, model and the script's name set: checks that LLAMACPP_BENCH names the llamacpp-bench
# peer script (into llama), runs every engine on 2 threads, and makes the random Qwen3-0.6B where
# model holds none.
llama="${LLAMACPP_BENCH:-}"
if [ ! -x "$llama" ]; then
	echo "$script: set LLAMACPP_BENCH to llama.cpp's llamacpp-bench peer script" >&2
	exit 2
fi
export GOMAXPROCS=2
if [ ! -s "$model/model.safetensors" ]; then
	"$octlm" synth --like qwen3-0.6b --out "$model" >&2 || exit 1
fi
