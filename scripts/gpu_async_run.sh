# The issue-14 GPU run: build with benchmarks, the gpu suite, cudyn-info, the
# examples, and the asynchrony benchmarks in fresh processes (logs in $OUT).
set -o pipefail; export NCCL_NVLS_ENABLE=0; B=/tmp/cb
(nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv; meson setup $B -Dbench=enabled -Dtsan_test=disabled --buildtype=release >/dev/null && ninja -C $B >/dev/null && echo build ok) 2>&1 | tail -4 | tee $OUT/build.log
$B/tools/cudyn-info --json > $OUT/cudyn-info.json
meson test -C $B --suite gpu --num-processes 1 --print-errorlogs 2>&1 | tail -60 > $OUT/gpu-tests.log; python3 scripts/test_summary.py $B/meson-logs/testlog.json | tee -a $OUT/gpu-tests.log; cp $B/meson-logs/testlog.txt $OUT/gpu-testlog.txt
(for e in zero_copy managed_prefetch growable_buffer; do $B/examples/$e; echo "($e exit $?)"; done; for m in "" --fd; do sh examples/run_ipc_pair.sh $B/examples/ipc_producer $B/examples/ipc_consumer $m; echo "(ipc$m exit $?)"; done) > $OUT/examples.log 2>&1; tail -3 $OUT/examples.log
python3 scripts/bench_repeat.py $B/bench/cudyn-bench --runs 5 --out /tmp/bm -- --filter memory/s > $OUT/bench-memory.txt 2>&1; tail -12 $OUT/bench-memory.txt
(python3 scripts/bench_repeat.py $B/bench/cudyn-bench --runs 5 --out /tmp/bv -- --filter vmm/unmap; python3 scripts/bench_repeat.py $B/bench/cudyn-bench --runs 3 --out /tmp/bw -- --filter vmm/map-unmap; python3 -c "import json,glob;[print(f,[(c['name'],c.get('notes')) for c in json.load(open(f))['cases']]) for f in sorted(glob.glob('/tmp/bv/*.json'))]") > $OUT/bench-vmm.txt 2>&1; tail -12 $OUT/bench-vmm.txt
