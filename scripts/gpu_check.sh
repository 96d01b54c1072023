#!/usr/bin/env bash
# Run on a GPU machine: build with benchmarks, run the gpu suite, cudyn-info, the
# examples and cudyn-bench, and put the logs in ${OUT:-gpu-out}. Used for the figures in
# docs/measurements and the README.
#   BENCH=0             no benchmarks
#   BENCH_ARGS="..."    cudyn-bench's options (e.g. --filter vmm/)
#   BENCH_RUNS=N        N fresh cudyn-bench processes (scripts/bench_repeat.py: per case
#                       the median of the processes' paired ratios, no ratio where any
#                       process was bimodal; each run's JSON in $OUT/bench-runs) instead of one
#   BENCH_TIMEOUT=S     seconds per cudyn-bench process (default 300)
#   BENCH_ONLY=1        build, then only the benchmarks (no cudyn-info, gpu suite or examples)
set -uo pipefail
out="${OUT:-$PWD/gpu-out}"
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0
build=/tmp/cudyn-gpu-build
{
    nvidia-smi -L
    nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv
    if [ "${BENCH_ONLY:-0}" = 1 ]; then  # the library and cudyn-bench, no test suites
        meson setup "$build" -Dbench=enabled -Dtests=disabled --buildtype=release >/dev/null &&
            ninja -C "$build" bench/cudyn-bench >/dev/null && echo "build ok (bench only)"
    else
        meson setup "$build" -Dbench=enabled -Dtsan_test=disabled --buildtype=release >/dev/null &&
            ninja -C "$build" >/dev/null && echo "build ok"
    fi
} 2>&1 | tee "$out/build.log"
if [ "${BENCH_ONLY:-0}" != 1 ]; then
"$build/tools/cudyn-info" --json > "$out/cudyn-info.json"
"$build/tools/cudyn-info" | tee "$out/cudyn-info.txt"
meson test -C "$build" --suite gpu --print-errorlogs --num-processes 1 "$@" 2>&1 | tail -n 60 | tee "$out/gpu-tests.log"
cp "$build/meson-logs/testlog.txt" "$out/gpu-testlog.txt" 2>/dev/null
python3 scripts/test_summary.py "$build/meson-logs/testlog.json" | tee -a "$out/gpu-tests.log"
# Every example, on the real driver, as a reader would run it (output for the notes).
{
    for example in zero_copy managed_prefetch growable_buffer; do
        echo "\$ examples/$example"
        "$build/examples/$example"
        echo "(exit $?)"
    done
    for mode in "" --fd; do
        echo "\$ examples/run_ipc_pair.sh ipc_producer ipc_consumer $mode"
        sh examples/run_ipc_pair.sh "$build/examples/ipc_producer" "$build/examples/ipc_consumer" $mode
        echo "(exit $?)"
    done
    # The MPI example (built where MPI is installed): 2 and 4 ranks, all on device 0.
    if [ -x "$build/examples/mpi_ranks" ] && command -v mpirun >/dev/null 2>&1; then
        for ranks in 2 4; do
            echo "\$ examples/run_mpi_ranks.sh mpirun mpi_ranks $ranks"
            sh examples/run_mpi_ranks.sh mpirun "$build/examples/mpi_ranks" "$ranks"
            echo "(exit $?)"
        done
    fi
    # The Python package (built where pybind11 was found): the weight-sync example with torch.
    if [ -d "$build/python/cudyn" ]; then
        echo "\$ examples/python/weight_sync.py"
        PYTHONPATH="$build/python" python3 examples/python/weight_sync.py
        echo "(exit $?)"
    fi
} 2>&1 | tee "$out/examples.log"
fi
# What a Python call adds over the C++ call (docs/performance.md, Python calls).
if [ "${BENCH:-1}" = 1 ] && [ -d "$build/python/cudyn" ]; then
    PYTHONPATH="$build/python" timeout "${BENCH_TIMEOUT:-300}" python3 bench/python_overhead.py --rounds 5 2>&1 |
        tee "$out/python-overhead.txt"
fi
if [ "${BENCH:-1}" = 1 ] && [ "${BENCH_RUNS:-1}" -gt 1 ]; then
    timeout "$(( ${BENCH_TIMEOUT:-300} * BENCH_RUNS ))" python3 scripts/bench_repeat.py "$build/bench/cudyn-bench" \
        --runs "$BENCH_RUNS" --out "$out/bench-runs" -- ${BENCH_ARGS:-} 2>&1 | tee "$out/bench.txt"
elif [ "${BENCH:-1}" = 1 ]; then
    (cd "$out" && timeout "${BENCH_TIMEOUT:-300}" "$build/bench/cudyn-bench" ${BENCH_ARGS:-} --json "$out/bench.json") 2>&1 | tee "$out/bench.txt"
fi
