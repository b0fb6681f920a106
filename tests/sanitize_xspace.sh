#!/usr/bin/env bash
# Opt-in sanitizer run of the C XSpace decoder (issue 14): builds parsers/_xspace.c with
# AddressSanitizer and UndefinedBehaviorSanitizer into a temporary copy of this checkout and
# runs the decoder tests there (the seeded mutation fuzz of both decoders, the hostile-caller
# and flooding tests, every stat type). Any sanitizer report aborts the run (exit != 0).
#
#   tests/sanitize_xspace.sh [extra pytest args]      # PYTHON=/path/to/python to choose one
#
# Needs gcc (or CC) with libasan/libubsan. The checkout and its own build are left untouched.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-python3}
CC=${CC:-gcc}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/repo"
(cd "$ROOT" && git ls-files -z --cached --others --exclude-standard \
    | xargs -0 cp --parents -t "$WORK/repo")
[ -d "$ROOT/../shared" ] && ln -s "$ROOT/../shared" "$WORK/shared"
INC=$("$PY" -c "import sysconfig; print(sysconfig.get_paths()['include'])")
EXT=$("$PY" -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))")
"$CC" -shared -fPIC -g -O1 -fno-omit-frame-pointer -pthread \
    -fsanitize=address,undefined -fno-sanitize-recover=undefined \
    -I"$INC" "$ROOT/parsers/_xspace.c" -o "$WORK/repo/_tracelens_xspace$EXT"
cd "$WORK/repo"
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export LD_PRELOAD="$("$CC" -print-file-name=libasan.so) $("$CC" -print-file-name=libubsan.so)"
export PYTHONPATH="$WORK/repo"
"$PY" -c "import _tracelens_xspace as c, sys; sys.exit(not c.__file__.startswith('$WORK'))" \
    || { echo "the sanitized build is not the one imported" >&2; exit 1; }
"$PY" -m pytest -q -p no:cacheprovider \
    tests/test_xspace_decode.py tests/test_xspace_hardening.py tests/test_xspace_stats.py \
    tests/test_xspace_metadata.py "$@"
