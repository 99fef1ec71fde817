#!/usr/bin/env bash
# docker/install.sh installs what octlm's gonb notebooks need, on Debian 12 (or a Debian-based
# image) that already has Go 1.26 on PATH or at /usr/local/go:
#
#   - Jupyter's headless executor (Debian packages jupyter-nbconvert, jupyter-client), and with
#     --server also the classic notebook server (jupyter-notebook; Debian 12 has no JupyterLab);
#   - gonb v0.11.5, goimports, staticcheck and gopls v0.24.0, built from the pinned tools module in
#     docker/tools (go.mod + go.sum), into $(go env GOPATH)/bin (or $GOBIN);
#   - the gonb Jupyter kernel (`gonb --install`), with GOEXPERIMENT=simd and a PATH that finds
#     go and goimports written into the kernel's environment (kernel.json "env");
#   - with --browser, what checks exported notebooks in a real browser: Debian's chromium, Node.js
#     and npm (Debian's, unless node is already on PATH), and playwright-core pinned in
#     notebooks/browsercheck/package-lock.json (npm ci --ignore-scripts: no browser download);
#   - with --reference, what the reference scripts in parity/ need (Debian's python3-torch,
#     python3-numpy, libopenblas0-pthread, python3-yaml, python3-jinja2): the tests that run them
#     (fine-tuning, evaluation, Qwen3.5 references) skip, saying why, where they are missing;
#   - ONNX Runtime for octlm's "onnx" backend: npm's onnxruntime-node@1.30.0 in
#     ~/.cache/octlm/onnxruntime (its install script, which downloads more, skipped; npm from
#     Debian if missing), where octlm finds it.
#
# It is idempotent: run it again and it only does what is missing. It is used by .ci/run and by
# docker/Dockerfile*, so CI tests the same steps a user's image runs.
#
# Usage: bash docker/install.sh [--server] [--browser] [--reference] [--no-apt] [--no-onnx]
#   --server   also install the Jupyter notebook server (for `jupyter notebook`).
#   --browser  also install chromium, Node.js and playwright-core (notebooks/browsercheck).
#   --reference  also install the reference scripts' Python packages (Debian's PyTorch, NumPy,
#              OpenBLAS, PyYAML, Jinja2; about 1 GB).
#   --no-apt   skip apt-get: Jupyter (and npm) come from elsewhere (pip, conda, Homebrew); only
#              the Go tools, the kernel and ONNX Runtime (if npm is found) are installed.
#   --no-onnx  skip ONNX Runtime.
set -euo pipefail

server=0
browser=0
reference=0
apt=1
onnx=1
for arg in "$@"; do
	case "$arg" in
	--server) server=1 ;;
	--browser) browser=1 ;;
	--reference) reference=1 ;;
	--no-apt) apt=0 ;;
	--no-onnx) onnx=0 ;;
	-h | --help)
		awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
		exit 0
		;;
	*)
		echo "install.sh: unknown flag $arg (want --server, --browser, --reference, --no-apt, --no-onnx)" >&2
		exit 2
		;;
	esac
done

say() { echo "install.sh: $*" >&2; }
die() {
	echo "install.sh: FAILED: $*" >&2
	exit 1
}

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

# gonb and Jupyter place the kernel spec under $HOME.
if [ -z "${HOME:-}" ]; then
	HOME="$(getent passwd "$(id -u)" | cut -d: -f6)"
	export HOME
fi
[ -n "$HOME" ] || die "HOME is not set and has no passwd entry"

# Go: the project needs Go 1.27.4 with GOEXPERIMENT=simd; a Go 1.26 fetches that toolchain from the
# module proxy with GOTOOLCHAIN=auto (go.env on Debian-built machines may say GOTOOLCHAIN=local).
if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
	export PATH="/usr/local/go/bin:$PATH"
fi
command -v go >/dev/null 2>&1 || die "go not found on PATH nor at /usr/local/go/bin; install Go 1.26 or later first"
export GOEXPERIMENT=simd
export GOTOOLCHAIN=auto
say "using $(go version) at $(command -v go)"

# 1. Jupyter from Debian packages.
if [ "$apt" = 1 ]; then
	pkgs=(jupyter-nbconvert jupyter-client)
	if [ "$server" = 1 ]; then
		pkgs+=(jupyter-notebook)
	fi
	if [ "$browser" = 1 ]; then
		pkgs+=(chromium)
		# Node.js: Debian's (18 on Debian 12) unless a node is on PATH already.
		if ! command -v node >/dev/null 2>&1; then
			pkgs+=(nodejs npm)
		fi
	fi
	if [ "$reference" = 1 ]; then
		# OpenBLAS: Debian's torch falls back to the reference BLAS without it (about 50× slower).
		pkgs+=(python3-torch python3-numpy libopenblas0-pthread python3-yaml python3-jinja2)
	fi
	if [ "$onnx" = 1 ] && ! command -v npm >/dev/null 2>&1 && [[ " ${pkgs[*]} " != *" npm "* ]]; then
		pkgs+=(npm)
	fi
	missing=()
	for p in "${pkgs[@]}"; do
		if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
			missing+=("$p")
		fi
	done
	if [ "${#missing[@]}" -gt 0 ]; then
		command -v apt-get >/dev/null 2>&1 || die "apt-get not found; install Jupyter yourself and rerun with --no-apt"
		sudo=""
		if [ "$(id -u)" != 0 ]; then
			sudo="sudo"
		fi
		say "apt-get install ${missing[*]}"
		$sudo apt-get update -qq
		DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
	else
		say "Debian packages already installed: ${pkgs[*]}"
	fi
fi
command -v jupyter >/dev/null 2>&1 || die "jupyter not found on PATH after install"

# 2. gonb, goimports and gopls from the pinned tools module. `go install tool` rebuilds nothing
# when the build cache is warm. (A plain `go install github.com/janpfeifer/gonb@v0.11.5` can fail
# where the module proxy refuses gonb's version list; the tools module pins exact versions.)
gobin="$(go env GOBIN)"
if [ -z "$gobin" ]; then
	gobin="$(go env GOPATH)/bin"
fi
mkdir -p "$gobin"
say "go install tool (gonb, goimports, gopls from docker/tools/go.mod) into $gobin"
(cd "$here/tools" && GOBIN="$gobin" go install tool) || die "building the Go tools in docker/tools"
export PATH="$gobin:$PATH"
for t in gonb goimports gopls; do
	[ -x "$gobin/$t" ] || die "$gobin/$t missing after go install tool"
done

# 3. The kernel spec. gonb writes kernel.json under $JUPYTER_DATA_DIR (default
# ~/.local/share/jupyter) pointing at this gonb binary; it checks gopls and goimports.
say "gonb --install"
"$gobin/gonb" --install || die "gonb --install"
datadir="${JUPYTER_DATA_DIR:-$HOME/.local/share/jupyter}"
spec="$datadir/kernels/gonb/kernel.json"
[ -f "$spec" ] || die "gonb --install did not write $spec"

# jupyter_client 7 does not expand ${PATH} in kernel.json, so the kernel gets an explicit PATH:
# where go and goimports are, then the PATH of this install.
godir="$(dirname "$(command -v go)")"
kpath="$gobin:$godir:$PATH"
python3 - "$spec" "$kpath" <<'PY' || die "editing $spec"
import json, sys
path, kpath = sys.argv[1], sys.argv[2]
with open(path) as f:
    spec = json.load(f)
env = spec.get("env") or {}
env["GOEXPERIMENT"] = "simd"
# go.mod asks for Go 1.27.4: let an older go fetch that toolchain (go.env may say GOTOOLCHAIN=local).
env["GOTOOLCHAIN"] = "auto"
seen, dirs = set(), []
for d in kpath.split(":"):
    if d and d not in seen:
        seen.add(d)
        dirs.append(d)
env["PATH"] = ":".join(dirs)
spec["env"] = env
with open(path, "w") as f:
    json.dump(spec, f, indent=1)
    f.write("\n")
PY
say "kernel spec $spec:"
sed 's/^/  /' "$spec" >&2
specs="$(jupyter kernelspec list 2>/dev/null)" || die "jupyter kernelspec list failed"
grep -q '^ *gonb ' <<<"$specs" || die "jupyter does not list the gonb kernel:
$specs"
# 4. The browser check's driver: playwright-core at the version package-lock.json pins, without
# its install scripts (they would download a browser; the check uses Debian's chromium).
if [ "$browser" = 1 ]; then
	command -v chromium >/dev/null 2>&1 || die "chromium not found after install (apt-get install chromium)"
	command -v node >/dev/null 2>&1 || die "node not found after install (apt-get install nodejs npm)"
	command -v npm >/dev/null 2>&1 || die "npm not found (apt-get install npm)"
	bc="$here/../notebooks/browsercheck"
	say "npm ci --ignore-scripts in $bc (node $(node --version))"
	(cd "$bc" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error) || die "npm ci in $bc"
	[ -f "$bc/node_modules/playwright-core/package.json" ] || die "playwright-core missing in $bc/node_modules after npm ci"
fi
say "done: gonb kernel installed; GOEXPERIMENT=simd set in its environment"

# 5. ONNX Runtime from npm (octlm's "onnx" backend looks in this folder; see `octlm backends`).
if [ "$onnx" = 1 ]; then
	ortdir="$HOME/.cache/octlm/onnxruntime"
	ortlib="$ortdir/node_modules/onnxruntime-node/bin/napi-v6/linux/$(uname -m | sed 's/x86_64/x64/; s/aarch64/arm64/')/libonnxruntime.so.1"
	if [ -f "$ortlib" ] && grep -q '"version": "1.30.0"' "$ortdir/node_modules/onnxruntime-node/package.json" 2>/dev/null; then
		say "ONNX Runtime already installed: $ortlib"
	elif command -v npm >/dev/null 2>&1; then
		say "npm install onnxruntime-node@1.30.0 into $ortdir"
		mkdir -p "$ortdir"
		npm install --prefix "$ortdir" --ignore-scripts --no-audit --no-fund onnxruntime-node@1.30.0 >&2 || die "npm install onnxruntime-node"
		[ -f "$ortlib" ] || die "$ortlib missing after npm install"
	else
		say "npm not found: ONNX Runtime not installed (the onnx backend stays unavailable)"
	fi
fi
