#!/usr/bin/env bash
# Run on a GPU machine: build with benchmarks, run the gpu suite, cudyn-info and
# cudyn-bench, and put the logs in ${OUT:-gpu-out}. Used for the figures in the
# issue notes and the README.
set -uo pipefail
out="${OUT:-$PWD/gpu-out}"
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0
build=/tmp/cudyn-gpu-build
{
    nvidia-smi -L
    nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv
    meson setup "$build" -Dbench=enabled -Dtsan_test=disabled --buildtype=release >/dev/null &&
        ninja -C "$build" >/dev/null && echo "build ok"
} 2>&1 | tee "$out/build.log"
"$build/tools/cudyn-info" --json > "$out/cudyn-info.json"
"$build/tools/cudyn-info" | tee "$out/cudyn-info.txt"
meson test -C "$build" --suite gpu --print-errorlogs --num-processes 1 "$@" 2>&1 | tail -n 60 | tee "$out/gpu-tests.log"
cp "$build/meson-logs/testlog.txt" "$out/gpu-testlog.txt" 2>/dev/null
python3 scripts/test_summary.py "$build/meson-logs/testlog.json" | tee -a "$out/gpu-tests.log"
if [ "${BENCH:-1}" = 1 ]; then
    (cd "$out" && timeout "${BENCH_TIMEOUT:-300}" "$build/bench/cudyn-bench" ${BENCH_ARGS:-} --json "$out/bench.json") 2>&1 | tee "$out/bench.txt"
fi
