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
#   SANITIZER=1         also the sanitizer stage: the gpu suite under compute-sanitizer
#                       (memcheck, leak check, API errors not reported), every test but the
#                       driver's checkpoint ones; its log in $OUT/sanitizer.log, the tests'
#                       output in $OUT/sanitizer-testlog.txt; fails on any error or leak
#   SANITIZER_ONLY=1    build the gpu suite, then only the sanitizer stage
#   SANITIZER_TIMEOUT_MULTIPLIER=N  the tests' Meson timeouts times N (default 10)
set -uo pipefail
out="${OUT:-$PWD/gpu-out}"
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0
build=/tmp/cudyn-gpu-build
{
    nvidia-smi -L
    nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv
    if [ "${SANITIZER_ONLY:-0}" = 1 ]; then  # the gpu suite's binary and what it needs
        meson setup "$build" -Dbench=enabled -Dtsan_test=disabled --buildtype=release >/dev/null &&
            ninja -C "$build" tests/gpu/gpu_tests tests/mpi/mpi_record_tests >/dev/null &&
            echo "build ok (gpu suite only)"
    elif [ "${BENCH_ONLY:-0}" = 1 ]; then  # the library and cudyn-bench, no test suites
        meson setup "$build" -Dbench=enabled -Dtests=disabled --buildtype=release >/dev/null &&
            ninja -C "$build" bench/cudyn-bench >/dev/null && echo "build ok (bench only)"
    else
        meson setup "$build" -Dbench=enabled -Dtsan_test=disabled --buildtype=release >/dev/null &&
            ninja -C "$build" >/dev/null && echo "build ok"
    fi
} 2>&1 | tee "$out/build.log"
# The sanitizer stage. compute-sanitizer follows the child processes the
# sharing tests start (their consumers), and reports each process's errors
# and leaks; --error-exitcode fails a test with any. Left out: the driver's
# checkpoint cases (tagged [driver-checkpoint]; the driver refuses checkpoint
# under the sanitizer), by CUDYN_TEST_LEAVE_OUT in every test and by leaving
# out gpu-checkpoint, which has no other case. CUDYN_TEST_SANITIZER=1 skips,
# with its reason, the one check that cannot hold under the sanitizer (the
# capability trials' free-memory comparison: the tool keeps device memory of
# its own for the kernels they load).
sanitizer_stage() {
    local tool
    tool="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
    if [ ! -x "$tool" ]; then
        echo "sanitizer stage: compute-sanitizer not found (PATH, /usr/local/cuda/bin)" | tee "$out/sanitizer.log"
        return 1
    fi
    local tests
    # Also left out: the tests whose GPU work is another library's (PyTorch's
    # and NCCL's kernels under memcheck take many times their limits, and
    # their findings would not be cudyn's): python-gpu-*, gpu-torch-sleep,
    # gpu-nccl.
    tests=$(meson test -C "$build" --list --suite gpu --no-rebuild 2>/dev/null | sed -e 's|^.* / ||' -e 's|^.*:||' |
        grep -vxE 'gpu-checkpoint|python-gpu-.*|gpu-torch-sleep|gpu-nccl')
    (
        "$tool" --version | tail -n 1
        echo "tests: ${tests//$'\n'/ }"
        # shellcheck disable=SC2086  # one argument per test name
        CUDYN_TEST_SANITIZER=1 CUDYN_TEST_LEAVE_OUT='[driver-checkpoint]' \
            meson test -C "$build" --no-rebuild --print-errorlogs --num-processes 1 \
            --timeout-multiplier "${SANITIZER_TIMEOUT_MULTIPLIER:-10}" \
            --wrapper "$tool --tool memcheck --leak-check full --report-api-errors no --error-exitcode 1" $tests \
            2>&1 | tail -n 60
        status=${PIPESTATUS[0]}
        # Meson names the log of a wrapped run after the wrapper.
        local log="$build/meson-logs/testlog-$(basename "$tool")"
        [ -f "$log.json" ] || log="$build/meson-logs/testlog"
        cp "$log.txt" "$out/sanitizer-testlog.txt"
        python3 scripts/test_summary.py "$log.json"
        echo "--- compute-sanitizer's summaries, counted over every process (consumers included):"
        grep -E 'ERROR SUMMARY|LEAK SUMMARY' "$out/sanitizer-testlog.txt" | sort | uniq -c
        if grep -E 'Leaked [0-9]+ bytes' "$out/sanitizer-testlog.txt"; then
            status=1
        fi
        if [ "$status" = 0 ]; then echo "sanitizer stage: clean"; else echo "sanitizer stage: FAILED"; fi
        exit "$status"
    ) 2>&1 | tee "$out/sanitizer.log"
    return "${PIPESTATUS[0]}"
}
if [ "${SANITIZER_ONLY:-0}" = 1 ]; then
    sanitizer_stage
    exit $?
fi
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
[ "${SANITIZER:-0}" = 1 ] && sanitizer_stage
fi
# What a Python call adds over the C++ call (docs/performance.md, Python calls).
if [ "${BENCH:-1}" = 1 ] && compgen -G "$build/python/cudyn/_cudyn*.so" >/dev/null; then  # the extension built
    PYTHONPATH="$build/python" timeout "${BENCH_TIMEOUT:-300}" python3 bench/python_overhead.py --rounds 5 2>&1 |
        tee "$out/python-overhead.txt"
fi
if [ "${BENCH:-1}" = 1 ] && [ "${BENCH_RUNS:-1}" -gt 1 ]; then
    timeout "$(( ${BENCH_TIMEOUT:-300} * BENCH_RUNS ))" python3 scripts/bench_repeat.py "$build/bench/cudyn-bench" \
        --runs "$BENCH_RUNS" --out "$out/bench-runs" -- ${BENCH_ARGS:-} 2>&1 | tee "$out/bench.txt"
elif [ "${BENCH:-1}" = 1 ]; then
    (cd "$out" && timeout "${BENCH_TIMEOUT:-300}" "$build/bench/cudyn-bench" ${BENCH_ARGS:-} --json "$out/bench.json") 2>&1 | tee "$out/bench.txt"
fi
