#!/usr/bin/env bash
# Run on a machine with two GPUs and NCCL (the system's, or the nvidia-nccl
# wheel of a Python installation): builds only what the NCCL module's GPU
# checks need, then runs the two-GPU test, the weight-broadcast example and
# three fresh runs of cudyn-nccl-bench, with the logs in ${OUT:-nccl-gpu-out}.
# Multicast (NVLS) stays off: NCCL_NVLS_ENABLE=0 is exported here.
#   BENCH_MAX_MIB=N   the largest all-reduce (default 1024)
set -uo pipefail
export NCCL_NVLS_ENABLE=0
out="${OUT:-$PWD/nccl-gpu-out}"
mkdir -p "$out"
build=/tmp/cudyn-nccl-gpu-build
# The nvidia-nccl wheel's library, as Python finds it.
wheel=$(python3 -c 'import nvidia.nccl as n, os; print(os.path.join(list(n.__path__)[0], "lib", "libnccl.so.2"))' 2>/dev/null)
[ -n "$wheel" ] && [ -f "$wheel" ] || wheel=$(timeout 60 find / -name libnccl.so.2 -not -path '/proc/*' 2>/dev/null | head -n 1)
{
    nvidia-smi -L
    nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv
    echo "wheel: ${wheel:-none}"
    meson setup "$build" -Dbench=enabled -Dtsan_test=disabled -Dtools=false --buildtype=release >/dev/null &&
        ninja -C "$build" tests/gpu/nccl_gpu_tests examples/nccl_weight_broadcast bench/cudyn-nccl-bench >/dev/null &&
        echo "build ok"
} 2>&1 | tee "$out/nccl-build.log"
[ -x "$build/bench/cudyn-nccl-bench" ] || exit 1
status=0
# First with cudyn's own search (no CUDYN_NCCL_PATH): the example says what it opened.
{
    echo "\$ nccl_weight_broadcast --steps 2   (cudyn's search: libnccl.so.2, then the wheel under Python prefixes)"
    env -u CUDYN_NCCL_PATH timeout 120 "$build/examples/nccl_weight_broadcast" --steps 2
    echo "(exit $?)"
} 2>&1 | tee "$out/nccl-example-search.log"
# Then the wheel's library named, so every run below uses the same NCCL.
[ -n "$wheel" ] && export CUDYN_NCCL_PATH="$wheel"
echo "\$ nccl_gpu_tests [gpu][nccl]   (CUDYN_NCCL_PATH=${CUDYN_NCCL_PATH:-})" | tee "$out/nccl-gpu-tests.log"
CUDYN_TEST_REQUIRE_DEVICES=2 timeout 240 "$build/tests/gpu/nccl_gpu_tests" '[gpu][nccl]' -s 2>&1 |
    tail -n 80 | tee -a "$out/nccl-gpu-tests.log"
[ "${PIPESTATUS[0]}" = 0 ] || status=1
{
    echo "\$ nccl_weight_broadcast --steps 6"
    timeout 120 "$build/examples/nccl_weight_broadcast" --steps 6
    echo "(exit $?)"
} 2>&1 | tee "$out/nccl-example.log"
grep -q "(exit 0)" "$out/nccl-example.log" || status=1
for run in 1 2 3; do
    echo "\$ cudyn-nccl-bench (run $run)"
    timeout 150 "$build/bench/cudyn-nccl-bench" --max-mib "${BENCH_MAX_MIB:-1024}" --json "$out/nccl-bench-run$run.json"
    echo "(exit $?)"
done 2>&1 | tee "$out/nccl-bench.txt"
echo "nccl_gpu_check: status $status" | tee -a "$out/nccl-gpu-tests.log"
exit $status
