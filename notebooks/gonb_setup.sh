#!/usr/bin/env bash
# gonb_setup.sh points gonb's scratch module at this checkout of octlm. Every notebook runs it in its
# first cell:
#
#   !*bash "$GONB_DIR/gonb_setup.sh"
#
# gonb compiles each cell as a program in a scratch module of its own (`!*` commands run there, and
# $GONB_DIR is the notebook's folder). For `import "github.com/octlm/octlm/loader"` to compile
# against the files beside the notebook (not a published version, which does not exist), the
# scratch module gets
#
#   require github.com/octlm/octlm v0.0.0-00010101000000-000000000000
#   replace github.com/octlm/octlm => <this checkout>
#
# The require matters: with a replace (or a go.work) alone, gonb's automatic `go get` asks the
# module proxy for @latest of every imported module the scratch module does not require itself.
# With the require, octlm's own go.mod pins every module the notebooks import (gomlx, gonb's
# gonbui, ...), so cells build with exactly the versions `go test ./...` uses. A module a notebook
# imports must therefore be in octlm's build list (add it with `go get mod@version` at the root).
set -euo pipefail

dir="${GONB_DIR:?gonb_setup.sh: GONB_DIR is not set: run it from a gonb cell as !*bash \"\$GONB_DIR/gonb_setup.sh\"}"
[ -f go.mod ] || {
	echo "gonb_setup.sh: no go.mod in $(pwd): run it with !* (in gonb's scratch module), not !" >&2
	exit 1
}
mod=github.com/octlm/octlm
root="$(cd "$dir" && go list -m -f '{{.Dir}}' "$mod")" || {
	echo "gonb_setup.sh: $dir is not inside a checkout of $mod" >&2
	exit 1
}
go mod edit -require="$mod@v0.0.0-00010101000000-000000000000" -replace="$mod=$root"
echo "cells compile against $mod at $root (GOEXPERIMENT=${GOEXPERIMENT:-unset})"
case ",${GOEXPERIMENT:-}," in
*,simd,*) ;;
*)
	echo "gonb_setup.sh: warning: GOEXPERIMENT=simd is not set in the kernel's environment; the pure-Go backend runs about 9x slower (rerun docker/install.sh)" >&2
	;;
esac
