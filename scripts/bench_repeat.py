#!/usr/bin/env python3
"""Runs cudyn-bench several times, each in a fresh process, and prints every
case's cudyn/raw ratio per run plus their median, minimum and maximum.

    scripts/bench_repeat.py BUILD/bench/cudyn-bench --runs 11 --out DIR -- --filter ipc/

Why: a nanosecond case (a ~35 ns cuIpcGetMemHandle) moves by a few percent
from one process to the next with the address layout the process happens to
get (stack and heap placement, code alignment), on the raw side as much as on
cudyn's; within one process the harness already alternates raw and cudyn. The
median over fresh processes is the figure the notes and README quote.

Each run's JSON is kept in --out as run-K.json. Exit status: 0 when every run
exited 0, else 1.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys


def run_once(bench, bench_args, json_path):
    completed = subprocess.run([bench, *bench_args, "--json", json_path], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    return completed.returncode, completed.stdout


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("bench", help="path of cudyn-bench")
    parser.add_argument("--runs", type=int, default=11, help="fresh processes (default 11)")
    parser.add_argument("--out", default="bench-repeat", help="folder for run-K.json (default bench-repeat)")
    # Everything after "--" is cudyn-bench's (argparse would take its options for ours).
    argv = sys.argv[1:]
    split = argv.index("--") if "--" in argv else len(argv)
    options = parser.parse_args(argv[:split])
    bench_args = argv[split + 1:]
    if options.runs < 1:
        parser.error("--runs must be at least 1")
    if not os.access(options.bench, os.X_OK):
        parser.error(f"{options.bench} is not an executable cudyn-bench")
    os.makedirs(options.out, exist_ok=True)

    ratios = {}  # case name -> [(ratio, raw, cudyn, unit)]
    failures = 0
    for run in range(1, options.runs + 1):
        json_path = os.path.join(options.out, f"run-{run}.json")
        status, output = run_once(options.bench, bench_args, json_path)
        if status != 0:
            failures += 1
            print(f"run {run}: cudyn-bench exited {status}", file=sys.stderr)
            if failures == 1:
                print(output, file=sys.stderr)
            continue
        with open(json_path, encoding="utf-8") as report:
            for case in json.load(report)["cases"]:
                if case["status"] == "ok":
                    ratios.setdefault(case["name"], []).append(
                        (case["ratio"], case["raw"], case["cudyn"], case["unit"]))

    print(f"{options.runs} fresh processes of {options.bench} {' '.join(bench_args)}")
    print(f"{'case':<24} {'runs':>4} {'median':>7} {'min':>7} {'max':>7}  {'raw (median)':>14} "
          f"{'cudyn (median)':>15}  per run")
    for name, results in ratios.items():
        values = [ratio for ratio, _, _, _ in results]
        unit = results[0][3]
        raw = statistics.median(raw for _, raw, _, _ in results)
        cudyn = statistics.median(cudyn for _, _, cudyn, _ in results)
        print(f"{name:<24} {len(values):>4} {statistics.median(values):>6.3f}x {min(values):>6.3f}x "
              f"{max(values):>6.3f}x  {raw:>7.2f} {unit:<6} {cudyn:>8.2f} {unit:<6}  "
              + " ".join(f"{value:.3f}" for value in values))
    print(f"{options.runs - failures} passed, {failures} failed")
    return 0 if failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
