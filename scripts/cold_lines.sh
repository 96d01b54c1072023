#!/usr/bin/env bash
# The stream-ordered pool pair's cost in what a timing on a shared machine
# cannot show: instructions and first-level data-cache misses per pair, raw
# and cudyn, with the data caches emptied before the allocation and before
# the free (as a real driver's call leaves them). cachegrind counts them
# exactly; each side runs twice (PAIRS and 2 x PAIRS pairs) and the
# difference, divided by PAIRS, leaves out start-up and the cache sweeps.
#
#   scripts/cold_lines.sh [BUILD_DIR] [PAIRS]      (default: build, 200)
#
# BUILD_DIR: a build with -Dbench=enabled and the tests (the null driver
# answers over the emulated fake). Needs valgrind.
set -euo pipefail

build="${1:-build}" pairs="${2:-200}"
[ -d "$build" ] || { echo "cold_lines: no build directory $build" >&2; exit 2; }
build="$(cd "$build" && pwd)"  # the loader takes only an absolute driver path
program="$build/bench/cudyn-cold-lines"
null_driver="$build/bench/null-driver/libcuda.so.1"
fake="$build/tests/fakecuda/emulated/libcuda.so.1"
for needed in "$program" "$null_driver" "$fake"; do
    [ -e "$needed" ] || { echo "cold_lines: $needed missing (ninja -C $build)" >&2; exit 2; }
done
command -v valgrind >/dev/null || { echo "cold_lines: valgrind not found" >&2; exit 2; }

work="$(mktemp -d "${TMPDIR:-/tmp}/cudyn-cold-lines.XXXXXX")"
trap 'rm -rf "$work"' EXIT
export CUDYN_DRIVER_PATH="$null_driver" CUDYN_NULL_DRIVER_BACKING="$fake" FAKECUDA_DEVICES=1
for side in raw cudyn; do
    for n in "$pairs" "$((2 * pairs))"; do
        valgrind --tool=cachegrind --cache-sim=yes --cachegrind-out-file="$work/$side.$n" \
            "$program" "$n" "$side" >/dev/null 2>"$work/$side.$n.log" ||
            { cat "$work/$side.$n.log" >&2; exit 1; }
        cg_annotate --auto=no --threshold=0 "$work/$side.$n" >"$work/$side.$n.txt"
    done
done

python3 - "$work" "$pairs" <<'PY'
import re, sys
work, pairs = sys.argv[1], int(sys.argv[2])

# Per function: Ir I1mr ILmr Dr D1mr DLmr Dw D1mw DLmw. The cache sweep's own
# counts are left out.
def totals(path):
    sums = [0] * 9
    for line in open(path):
        line = re.sub(r'\(\s*[\d.]+%\)', '', line)
        fields = line.split()
        numbers = []
        while fields and re.fullmatch(r'[\d,]+', fields[0]):
            numbers.append(int(fields.pop(0).replace(',', '')))
        name = ' '.join(fields)
        if len(numbers) != 9 or 'PROGRAM TOTALS' in name or 'empty_data_caches' in name:
            continue
        sums = [a + b for a, b in zip(sums, numbers)]
    return sums

per_pair = {}
for side in ('raw', 'cudyn'):
    one, two = totals(f'{work}/{side}.{pairs}.txt'), totals(f'{work}/{side}.{2 * pairs}.txt')
    per_pair[side] = [(b - a) / pairs for a, b in zip(one, two)]
print(f'pool pair, 1 MiB, data caches emptied before each call ({pairs} and {2 * pairs} pairs a side)')
print(f'{"":<8}{"instructions":>14}{"D1 read misses":>16}{"D1 write misses":>17}')
for side in ('raw', 'cudyn'):
    p = per_pair[side]
    print(f'{side:<8}{p[0]:>14.0f}{p[4]:>16.1f}{p[7]:>17.1f}')
r, c = per_pair['raw'], per_pair['cudyn']
print(f'{"cudyn-raw":<8}{c[0] - r[0]:>14.0f}{c[4] - r[4]:>16.1f}{c[7] - r[7]:>17.1f}')
PY
