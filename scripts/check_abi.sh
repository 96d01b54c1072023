#!/usr/bin/env bash
# The ABI check: the built libcudyn against the committed baseline of its
# SONAME (tests/abi/<SONAME>.abi.xz: abidw's XML from Debian's
# abigail-tools, compressed; about 8 MB plain, mostly the standard library's
# types that public functions take).
#
#   scripts/check_abi.sh LIBRARY INCLUDE_DIR            compare
#   scripts/check_abi.sh LIBRARY INCLUDE_DIR --write    make or replace the baseline
#
# LIBRARY: a built or installed libcudyn.so.X.Y.Z with debug information (the
# default debugoptimized build); INCLUDE_DIR: the public headers (include/ of
# the source tree or of an install), so that only their types are described.
# A change that is compatible (an added function) passes and is listed; an
# incompatible one (a function gone, a changed layout or signature) fails,
# unless the SONAME changed with it: a new SONAME has no baseline yet, and the
# check fails until its baseline is committed (--write). Functions and
# variables in cudyn::detail are not held (tests/abi/suppressions.txt).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
[ "$#" -ge 2 ] || { sed -n '2,16p' "$0" >&2; exit 2; }
library="$1" include_dir="$2" mode="${3:-}"
command -v abidw >/dev/null 2>&1 || { echo "abi: abidw not found (apt-get install abigail-tools)" >&2; exit 2; }

soname="$(objdump -p "$library" | awk '$1 == "SONAME" { print $2 }')"
[ -n "$soname" ] || { echo "abi: $library has no SONAME" >&2; exit 1; }
baseline="$here/tests/abi/$soname.abi.xz"
work="$(mktemp -d "${TMPDIR:-/tmp}/cudyn-abi.XXXXXX")"
trap 'rm -rf "$work"' EXIT

abidw --headers-dir "$include_dir" --drop-private-types --no-show-locs --no-corpus-path \
    --out-file "$work/current.abi" "$library"
if [ "$mode" = --write ]; then
    xz -9 -T1 -c "$work/current.abi" >"$baseline"
    echo "abi: wrote $baseline"
    exit 0
fi
if [ ! -f "$baseline" ]; then
    others="$(cd "$here/tests/abi" && ls -- *.abi.xz 2>/dev/null | tr '\n' ' ')"
    echo "abi: no baseline for $soname (committed: ${others:-none}). A new SONAME may change the ABI;" \
         "commit its baseline: scripts/check_abi.sh $library $include_dir --write" >&2
    exit 1
fi
xz -d -c "$baseline" >"$work/baseline.abi"
status=0
abidiff --suppressions "$here/tests/abi/suppressions.txt" "$work/baseline.abi" "$work/current.abi" >"$work/diff.txt" ||
    status=$?
# abidiff's exit status is a bit set: 1 error, 2 usage, 4 a change, 8 an incompatible change.
if [ $((status & 11)) -ne 0 ]; then
    cat "$work/diff.txt"
    echo "abi: $soname is not compatible with its baseline (abidiff exit $status): keep the ABI, or change" \
         "the version's minor (the SONAME) with it and commit the new baseline" >&2
    exit 1
fi
if [ $((status & 4)) -ne 0 ]; then
    cat "$work/diff.txt"
    echo "abi: $soname: compatible additions (update the baseline when they are released: --write)"
else
    echo "abi: $soname matches its baseline"
fi
