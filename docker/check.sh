#!/usr/bin/env bash
# docker/check.sh builds the CPU image from docker/Dockerfile and smoke-tests it, also on a machine
# that cannot reach a container registry (CI runs it as a step of .ci/run):
#
#   1. engine   docker where a Docker daemon answers, else podman (podman, and runc where needed,
#               installed with apt-get when missing);
#   2. base     the registry's golang image when it is in the store or can be pulled; else a Debian 12
#               base made here: debootstrap --variant=minbase bookworm (cached as a tarball under
#               $OCTLM_CACHE, so a rerun never debootstraps again), plus the Go toolchain go.mod asks
#               for, from the host's go (GOTOOLCHAIN=auto fetches it through the module proxy),
#               imported as localhost/octlm-base:bookworm-goVERSION (reused by the next run);
#   3. build    $OCTLM_IMAGE from a copy of the checkout (tracked and untracked files, none that git
#               ignores), with the host's extra certificate authorities in docker/certs/;
#   4. server   starts the image with its default command on a free local port and checks that
#               Jupyter answers, /api/contents lists every notebooks/*.ipynb and /api/kernelspecs
#               names gonb as the default kernel;
#   5. inside   executes notebooks (nbcheck run: no cell error, the .expect file holds) and
#               `octlm parity` inside the running container.
#
# It removes what it starts (the container, the temporary build context, a half-made base) on
# success, failure and interrupt. Images stay, so the next build reuses their layers; remove them
# with `podman rmi localhost/octlm:check localhost/octlm-base:bookworm-go1.27.4` (or docker rmi).
#
# Usage: bash docker/check.sh [--help]
# Environment:
#   OCTLM_ENGINE          docker or podman (default: docker if its daemon answers, else podman)
#   OCTLM_BASE            auto (default), registry, debootstrap, or an image to build from
#   OCTLM_PJRT            the Dockerfile's PJRT argument (default none: ONNX Runtime, no GitHub)
#   OCTLM_NOTEBOOKS       notebooks executed inside (default "00-setup"; "all" for every one)
#   OCTLM_IMAGE           the image built (default localhost/octlm:check)
#   OCTLM_DEBIAN_MIRROR   debootstrap's mirror (default: the host's own Debian mirror, read from
#                         /etc/apt/sources.list and /etc/apt/sources.list.d/*.list / *.sources)
#   OCTLM_EXTRA_CA_CERTS  more CA certificate files (PEM) for the build, separated by spaces
#   OCTLM_CACHE           cache folder (default ${XDG_CACHE_HOME:-$HOME/.cache}/octlm/container)
# Exit status: 0 passed, 1 a check or step failed, 2 bad usage, 130 interrupted, 143 terminated.
set -euo pipefail

say() { printf 'check.sh [%s]: %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() {
	printf 'check.sh: FAILED: %s\n' "$*" >&2
	exit 1
}

case "${1:-}" in
-h | --help)
	awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
	exit 0
	;;
"") ;;
*)
	echo "check.sh: unknown argument $1 (configure it with OCTLM_* variables; see --help)" >&2
	exit 2
	;;
esac

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

engine="${OCTLM_ENGINE:-}"
base_mode="${OCTLM_BASE:-auto}"
pjrt="${OCTLM_PJRT:-none}"
image="${OCTLM_IMAGE:-localhost/octlm:check}"
mirror="${OCTLM_DEBIAN_MIRROR:-}"
security=""
cache="${OCTLM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/octlm/container}"

# apt_sources prints "URI SUITE" for every binary package source the host's apt reads: one-line
# entries ("deb [options] URI SUITE COMPONENTS...") of sources.list and sources.list.d/*.list, and
# deb822 stanzas (Types: / URIs: / Suites:) of sources.list.d/*.sources, disabled ones skipped.
apt_sources() {
	local f
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[ -r "$f" ] || continue
		awk '$1 == "deb" { i = 2; if ($2 ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ } if (i + 1 <= NF) print $i, $(i + 1) }' "$f"
	done
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -r "$f" ] || continue
		awk '
			function flush(  u, s, nu, ns, a, b) {
				if (deb && enabled) { nu = split(uris, a, " "); ns = split(suites, b, " "); for (u = 1; u <= nu; u++) for (s = 1; s <= ns; s++) print a[u], b[s] }
				deb = 0; enabled = 1; uris = ""; suites = ""
			}
			BEGIN { enabled = 1 }
			/^[ \t]*#/ { next }
			/^[ \t]*$/ { flush(); next }
			tolower($1) == "types:" { for (i = 2; i <= NF; i++) if ($i == "deb") deb = 1 }
			tolower($1) == "uris:" { $1 = ""; uris = $0 }
			tolower($1) == "suites:" { $1 = ""; suites = $0 }
			tolower($1) == "enabled:" { enabled = (tolower($2) != "no") }
			END { flush() }' "$f"
	done
}

# host_mirrors sets mirror (unless OCTLM_DEBIAN_MIRROR did) and security from the host's apt
# sources: the Debian archive that serves bookworm (else any Debian archive, a URI ending in
# /debian), and its bookworm-security counterpart. No public mirror is named here: a host whose
# apt reads none must say which with OCTLM_DEBIAN_MIRROR.
host_mirrors() {
	local uri suite main="" any=""
	while read -r uri suite; do
		uri="${uri%/}"
		case "$suite" in
		bookworm-security | bookworm/updates) [ -n "$security" ] || security="$uri" ;;
		bookworm) [ -n "$main" ] || main="$uri" ;;
		*-security | */updates) ;;
		*) case "$uri" in */debian) [ -n "$any" ] || any="$uri" ;; esac ;;
		esac
	done < <(apt_sources)
	[ -n "$mirror" ] || mirror="${main:-$any}"
	[ -n "$mirror" ] || return 1
	[ -n "$security" ] || security="${mirror%/debian}/debian-security"
}
case "$engine" in
"" | docker | podman) ;;
*)
	echo "check.sh: OCTLM_ENGINE=$engine: want docker or podman" >&2
	exit 2
	;;
esac
case "$pjrt" in
none | cpu) ;;
*)
	echo "check.sh: OCTLM_PJRT=$pjrt: want none or cpu" >&2
	exit 2
	;;
esac
notebooks=()
if [ "${OCTLM_NOTEBOOKS:-00-setup}" = all ]; then
	for nb in notebooks/*.ipynb; do
		notebooks+=("$nb")
	done
else
	for nb in ${OCTLM_NOTEBOOKS:-00-setup}; do
		[ -f "notebooks/$nb.ipynb" ] || {
			echo "check.sh: OCTLM_NOTEBOOKS: no notebooks/$nb.ipynb" >&2
			exit 2
		}
		notebooks+=("notebooks/$nb.ipynb")
	done
fi

sudo=""
if [ "$(id -u)" != 0 ]; then
	command -v sudo >/dev/null 2>&1 || die "not root and no sudo: apt-get, debootstrap and podman need root"
	sudo="sudo"
fi

# --- cleanup: whatever this run started goes, on any exit ---------------------------------------
child=""     # a long step running in the background (so a signal stops it and us at once)
container="" # the container started
context=""   # the temporary build context
scratch=""   # a half-made base (debootstrap's target, a partial tarball)
building=""  # set while a podman build runs: the storage containers that were there before it
eng=()       # the engine command, with the global flags this host needs

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	if [ -n "$child" ]; then
		kill -TERM "$child" 2>/dev/null || true
		wait "$child" 2>/dev/null || true
	fi
	if [ -n "$building" ]; then
		# A podman build stopped midway leaves its working containers (NAME-working-container) in
		# the store; those that were not there before it are this build's.
		"${eng[@]}" ps -a --external --format '{{.ID}} {{.Names}}' 2>/dev/null |
			while read -r id name; do
				[[ "$name" == *-working-container ]] || continue
				grep -qx "$id" <<<"$building" || "${eng[@]}" rm -f "$id" >/dev/null 2>&1 || true
			done
	fi
	if [ -n "$container" ]; then
		"${eng[@]}" rm -f "$container" >/dev/null 2>&1 || say "could not remove container $container"
	fi
	[ -z "$context" ] || rm -rf "$context"
	if [ -n "$scratch" ]; then
		# debootstrap mounts /proc and /sys (and may bind /dev) in its target while it runs: unmount
		# before removing, and never cross into another file system.
		awk -v d="$scratch/" 'index($2, d) == 1 { print $2 }' /proc/mounts | sort -r |
			while read -r m; do $sudo umount -l "$m" || true; done
		$sudo rm -rf --one-file-system "$scratch"
	fi
	if [ "$rc" != 0 ]; then
		say "exit status $rc"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# bg CMD...: runs CMD in the background and waits for it, so that INT/TERM reach the traps at once
# (bash runs a trap only after a foreground command ends) and cleanup stops CMD.
bg() {
	local rc=0
	"$@" &
	child=$!
	wait "$child" || rc=$?
	child=""
	return "$rc"
}

apt_install() {
	command -v apt-get >/dev/null 2>&1 || die "$* missing and no apt-get to install them with"
	say "apt-get install $*"
	bg $sudo apt-get -o DPkg::Lock::Timeout=600 update -qq || die "apt-get update"
	bg $sudo env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq "$@" >/dev/null ||
		die "apt-get install $*"
}

t0=$SECONDS
timings=()
lap() { # NAME: records the seconds since the last lap
	timings+=("$1 $((SECONDS - t0))s")
	t0=$SECONDS
}

# --- 1. engine ----------------------------------------------------------------------------------
missing=()
command -v python3 >/dev/null 2>&1 || missing+=(python3)
command -v git >/dev/null 2>&1 || missing+=(git)
if [ -z "$engine" ]; then
	if command -v docker >/dev/null 2>&1 && timeout 30 docker info >/dev/null 2>&1; then
		engine=docker
	else
		engine=podman
	fi
fi
if [ "$engine" = podman ] && ! command -v podman >/dev/null 2>&1; then
	missing+=(podman)
fi
[ "${#missing[@]}" = 0 ] || apt_install "${missing[@]}"

if [ "$engine" = docker ]; then
	# A Docker daemon has its own runtime and limits: nothing to adjust.
	eng=(docker)
	run_opts=()
else
	eng=($sudo podman)
	run_opts=()
	# crun, podman's usual runtime, refuses hosts that mount cgroup v1 and v2 side by side ("cgroups
	# in hybrid mode not supported"); runc runs there. Only then is runc used (installed if missing).
	runtime="$("${eng[@]}" info --format '{{.Host.OCIRuntime.Name}}' 2>/dev/null || true)"
	if [ "$runtime" = crun ] && [ "$(stat -fc %T /sys/fs/cgroup 2>/dev/null)" = tmpfs ] &&
		grep -q ' /sys/fs/cgroup/unified cgroup2 ' /proc/mounts; then
		command -v runc >/dev/null 2>&1 || apt_install runc
		say "cgroup v1 and v2 both mounted (hybrid), which crun refuses: podman --runtime runc"
		eng+=(--runtime runc)
	fi
	# Rootful podman gives every container RLIMIT_NOFILE and RLIMIT_NPROC of 1048576, which fails
	# ("setrlimit RLIMIT_NOFILE: Operation not permitted") where root may not raise its hard limits
	# (no CAP_SYS_RESOURCE, as in some sandboxed VMs). Only there, limits podman can grant are asked
	# for, for the build's steps and for the container: nofile at this run's hard limit, nproc at
	# most 32768 (podman 4.3 runs itself with RLIMIT_NPROC 32768, its builds' default).
	if ! $sudo bash -c 'ulimit -Hn 1048576' 2>/dev/null; then
		hard="$($sudo bash -c 'ulimit -Hn')"
		say "root cannot raise RLIMIT_NOFILE to podman's 1048576: --ulimit nofile=$hard:$hard"
		run_opts+=(--ulimit "nofile=$hard:$hard")
	fi
	if ! $sudo bash -c 'ulimit -Hu 1048576' 2>/dev/null; then
		hard="$($sudo bash -c 'ulimit -Hu')"
		[ "$hard" != unlimited ] && [ "$hard" -lt 32768 ] || hard=32768
		say "root cannot raise RLIMIT_NPROC to podman's 1048576: --ulimit nproc=$hard:$hard"
		run_opts+=(--ulimit "nproc=$hard:$hard")
	fi
fi
say "engine: $("${eng[@]}" --version)"

# --- 2. base ------------------------------------------------------------------------------------
export PATH="$PATH:/usr/local/go/bin"
export GOTOOLCHAIN=auto
go_version="$(awk '$1 == "go" { print $2; exit }' go.mod)"
[ -n "$go_version" ] || die "no go line in go.mod"
registry_base="docker.io/library/golang:${go_version}-bookworm"
local_base="localhost/octlm-base:bookworm-go${go_version}"

have_image() { "${eng[@]}" image inspect "$1" >/dev/null 2>&1; }

# make_base: the Debian 12 base with Go at /usr/local/go and GOPATH=/go, as in the golang image.
make_base() {
	local arch tarball goroot
	arch="$(dpkg --print-architecture 2>/dev/null || uname -m)"
	tarball="$cache/debian-bookworm-minbase-$arch.tar"
	mkdir -p "$cache"
	if [ -s "$tarball" ]; then
		say "Debian 12 root file system from the cache: $tarball"
	else
		host_mirrors || die "no Debian mirror in the host's apt sources (/etc/apt/sources.list, /etc/apt/sources.list.d): name one with OCTLM_DEBIAN_MIRROR"
		command -v debootstrap >/dev/null 2>&1 || apt_install debootstrap
		scratch="$(mktemp -d "$cache/rootfs.XXXXXX")"
		say "debootstrap --variant=minbase bookworm from $mirror (about a minute or two)"
		bg $sudo debootstrap --variant=minbase bookworm "$scratch/rootfs" "$mirror" >"$scratch/debootstrap.log" 2>&1 ||
			die "debootstrap failed; its log: $(tail -n 20 "$scratch/debootstrap.log")"
		# The official Debian image's package sources (with updates and security), and no
		# downloaded packages or indexes.
		$sudo rm -f "$scratch/rootfs/etc/apt/sources.list"
		$sudo tee "$scratch/rootfs/etc/apt/sources.list.d/debian.sources" >/dev/null <<-EOF
			Types: deb
			URIs: $mirror
			Suites: bookworm bookworm-updates
			Components: main
			Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

			Types: deb
			URIs: $security
			Suites: bookworm-security
			Components: main
			Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
		EOF
		$sudo find "$scratch/rootfs/var/cache/apt/archives" "$scratch/rootfs/var/lib/apt/lists" -type f -delete
		$sudo tar -C "$scratch/rootfs" --numeric-owner -cf "$scratch/rootfs.tar" . || die "packing the root file system"
		$sudo chown "$(id -u):$(id -g)" "$scratch/rootfs.tar"
		mv "$scratch/rootfs.tar" "$tarball"
		say "cached $tarball ($(du -h "$tarball" | cut -f1))"
		$sudo rm -rf --one-file-system "$scratch"
		scratch=""
	fi
	# Go: the toolchain go.mod asks for, as the host's go finds or fetches it (checked against the
	# checksum database by the go command).
	command -v go >/dev/null 2>&1 || die "go not found (needed for the Go layer of the base): install Go 1.21 or later"
	goroot="$(GOTOOLCHAIN="go$go_version" go env GOROOT)" || die "go env GOROOT for go$go_version"
	[ -x "$goroot/bin/go" ] || die "no go binary in $goroot"
	scratch="$(mktemp -d "$cache/base.XXXXXX")"
	cp "$tarball" "$scratch/base.tar"
	tar -C "$goroot" --owner=0 --group=0 --numeric-owner --transform 's,^\.,./usr/local/go,' \
		-rf "$scratch/base.tar" . || die "adding Go from $goroot to the base"
	say "importing $local_base (Debian 12 minbase + Go $go_version from $goroot)"
	bg "${eng[@]}" import \
		--change 'ENV PATH=/go/bin:/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
		--change 'ENV GOPATH=/go' \
		--change 'CMD ["bash"]' \
		"$scratch/base.tar" "$local_base" >/dev/null || die "$engine import $local_base"
	rm -rf "$scratch"
	scratch=""
}

case "$base_mode" in
auto)
	if have_image "$registry_base"; then
		base="$registry_base"
	elif have_image "$local_base"; then
		base="$local_base"
	elif say "trying to pull $registry_base" && bg timeout 300 "${eng[@]}" pull -q "$registry_base" >/dev/null 2>&1; then
		base="$registry_base"
	else
		say "$registry_base cannot be pulled: making the base here"
		make_base
		base="$local_base"
	fi
	;;
registry) base="$registry_base" ;;
debootstrap)
	have_image "$local_base" || make_base
	base="$local_base"
	;;
*) base="$base_mode" ;;
esac
say "base: $base"
lap base

# --- 3. build -----------------------------------------------------------------------------------
context="$(mktemp -d -t octlm-context-XXXXXX)"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	# Tracked and untracked files, not ignored ones; a deleted tracked file is skipped.
	git ls-files -z -co --exclude-standard | tar --null --ignore-failed-read -T - -cf - 2>/dev/null | tar -C "$context" -xf -
else
	tar --exclude=.git -cf - . | tar -C "$context" -xf -
fi
[ -f "$context/docker/Dockerfile" ] || die "the build context lacks docker/Dockerfile"

# Extra certificate authorities the host trusts (an HTTPS-intercepting proxy): without them HTTPS
# fails inside the build. Only PEM certificates are taken.
n=0
shopt -s nullglob globstar
for f in /usr/local/share/ca-certificates/**/*.crt /etc/pki/ca-trust/source/anchors/* ${OCTLM_EXTRA_CA_CERTS:-}; do
	[ -f "$f" ] || continue
	if grep -q -- '-----BEGIN CERTIFICATE-----' "$f" 2>/dev/null; then
		n=$((n + 1))
		cp "$f" "$context/docker/certs/host-$n.crt"
	fi
done
shopt -u nullglob globstar
[ "$n" = 0 ] || say "adding $n certificate authorities from the host to the build"

build=(build -f docker/Dockerfile -t "$image" --build-arg "BASE_IMAGE=$base" --build-arg "PJRT=$pjrt")
if [ "$engine" = podman ]; then
	build+=(--ignorefile "$context/docker/Dockerfile.dockerignore" "${run_opts[@]}")
fi
# Proxies: podman passes the host's to the build by itself, docker only when asked.
for v in http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY; do
	[ -z "${!v:-}" ] || build+=(--build-arg "$v")
done
old="$("${eng[@]}" image inspect -f '{{.Id}}' "$image" 2>/dev/null || true)"
say "$engine ${build[*]} (context: a copy of the checkout)"
if [ "$engine" = podman ]; then
	building="$("${eng[@]}" ps -a --external --format '{{.ID}}' 2>/dev/null || true)"
	building="${building:-none}"
fi
bg "${eng[@]}" "${build[@]}" "$context" || die "$engine build failed (output above)"
building=""
new="$("${eng[@]}" image inspect -f '{{.Id}}' "$image")"
if [ -n "$old" ] && [ "$old" != "$new" ]; then
	# The previous build of this tag, now untagged: removed unless something still uses it.
	"${eng[@]}" rmi "$old" >/dev/null 2>&1 || true
fi
size="$("${eng[@]}" image inspect -f '{{.Size}}' "$image")"
size_gb="$(awk -v s="$size" 'BEGIN { printf "%.2f GB", s / 1e9 }')"
say "built $image: $size_gb"
lap build

# --- 4. server ----------------------------------------------------------------------------------
container="octlm-check-$$"
"${eng[@]}" run -d --name "$container" "${run_opts[@]}" -p 127.0.0.1::8888 "$image" >/dev/null ||
	die "$engine run $image"
port="$("${eng[@]}" port "$container" 8888/tcp | head -n 1 | sed 's/.*://')"
[ -n "$port" ] || die "no host port for the container's 8888"
say "container $container started; Jupyter on 127.0.0.1:$port"

# The server prints its URL with a token once it listens; then its API must answer.
token=""
deadline=$((SECONDS + 120))
while :; do
	logs="$("${eng[@]}" logs "$container" 2>&1 || true)"
	token="$(grep -oE '[?&]token=[0-9a-f]+' <<<"$logs" | head -n 1 | cut -d= -f2 || true)"
	if [ -n "$token" ] && python3 -c '
import sys, urllib.request
urllib.request.urlopen(sys.argv[1], timeout=5).read()' "http://127.0.0.1:$port/api/status?token=$token" 2>/dev/null; then
		break
	fi
	running="$("${eng[@]}" inspect -f '{{.State.Running}}' "$container" 2>/dev/null || echo false)"
	[ "$running" = true ] || die "the container stopped; its output:
$logs"
	[ "$SECONDS" -lt "$deadline" ] || die "Jupyter did not answer within 120 s; its output:
$logs"
	sleep 0.5
done
lap server-start

expected=()
for nb in notebooks/*.ipynb; do
	expected+=("$(basename "$nb")")
done
python3 - "http://127.0.0.1:$port" "$token" "${expected[@]}" <<'PY' || die "the notebook server's answers (above)"
import json, sys, urllib.request

base, token, expected = sys.argv[1], sys.argv[2], sys.argv[3:]

def get(path):
    req = urllib.request.Request(base + path, headers={"Authorization": "token " + token})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.load(r)

ok = True
listed = sorted(c["name"] for c in get("/api/contents/")["content"] if c["type"] == "notebook")
missing = [n for n in expected if n not in listed]
print(f"check.sh: /api/contents lists {len(listed)} notebooks: {' '.join(listed)}", file=sys.stderr)
if missing:
    print(f"check.sh: missing from /api/contents: {' '.join(missing)}", file=sys.stderr)
    ok = False
specs = get("/api/kernelspecs")
names = sorted(specs.get("kernelspecs", {}))
print(f"check.sh: /api/kernelspecs: default {specs.get('default')!r}, kernels {' '.join(names)}", file=sys.stderr)
if specs.get("default") != "gonb" or "gonb" not in names:
    print("check.sh: gonb is not the default kernel", file=sys.stderr)
    ok = False
sys.exit(0 if ok else 1)
PY
lap server-api

# --- 5. inside ----------------------------------------------------------------------------------
say "nbcheck run ${notebooks[*]} (inside)"
bg "${eng[@]}" exec -w /octlm "$container" nbcheck run -out /tmp/nbcheck "${notebooks[@]}" ||
	die "a notebook failed inside the container (output above)"
lap notebooks

say "octlm backends; octlm parity (inside)"
bg "${eng[@]}" exec -w /octlm "$container" octlm backends --check=false || die "octlm backends inside the container"
bg "${eng[@]}" exec -w /octlm "$container" octlm parity || die "octlm parity failed inside the container"
lap parity

say "PASSED: $image ($size_gb) from $base, PJRT=$pjrt; seconds: ${timings[*]}"
