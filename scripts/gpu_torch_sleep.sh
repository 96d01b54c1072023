#!/usr/bin/env bash
# Run on a GPU machine with PyTorch: build libcudyn-torch, run the sleep/wake
# test with a model (tests/gpu/python/test_torch_sleep.py) and three fresh
# runs of bench/torch_sleep_bench.py; logs in ${OUT:-gpu-out}.
#   CUDYN_SLEEP_CYCLES=N   sleep/wake cycles of the test (default 100)
#   BENCH=0                no benchmark
#   BENCH_SLEEP_GIB=1,16   sizes of the sleep/wake benchmark, in GiB
set -uo pipefail
out="${OUT:-$PWD/gpu-out}"
mkdir -p "$out"
build=/tmp/cudyn-torch-build
{
    nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv
    python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
    # The Python package, assembled in $build/python with libcudyn-torch.so.
    meson setup "$build" -Dtests=disabled -Dtools=false -Dmpi=disabled -Dpython=enabled --buildtype=release >/dev/null &&
        ninja -C "$build" >/dev/null && echo "build ok"
} 2>&1 | tee "$out/torch-build.log"
export PYTHONPATH="$build/python${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONDONTWRITEBYTECODE=1
status=0
python3 tests/gpu/python/test_torch_sleep.py 2>&1 | tee "$out/torch-sleep-test.log"
test_status=${PIPESTATUS[0]}
echo "test exit $test_status" | tee -a "$out/torch-sleep-test.log"
[ "$test_status" = 0 ] || status=1
if [ "${BENCH:-1}" != 0 ]; then
    for run in 1 2 3; do
        BENCH_JSON="$out/torch-sleep-bench-$run.json" python3 bench/torch_sleep_bench.py 2>&1 |
            tee "$out/torch-sleep-bench-$run.log"
        [ "${PIPESTATUS[0]}" = 0 ] || status=1
    done
fi
exit $status
