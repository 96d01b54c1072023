#!/usr/bin/env python3
"""Self-test of scripts/bench_repeat.py's combining rules, then the check that
docs/performance.md's tables are what the committed runs give.

    test_bench_repeat.py SCRIPTS_DIR [RUNS_DIR PERFORMANCE_MD]...

A combiner that quoted a bimodal case, or a quotient of separate medians,
would put a figure in the docs that the runs do not support: the rules run
here on made-up runs whose right answer is known (no GPU, no cudyn-bench).
With each pair RUNS_DIR PERFORMANCE_MD it also runs `bench_repeat.py
--combine RUNS_DIR --check PERFORMANCE_MD`. Exit status 0 when every expectation holds.
"""
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ left in the source tree
failures = []


def expect(condition, message):
    if not condition:
        failures.append(message)
        print("FAILED:", message)


def case(name, raw, cudyn, ratio, bimodal=False, raw_bimodal=False, cudyn_bimodal=False):
    rounds = [c / r for r, c in zip(raw, cudyn)]
    return {"name": name, "status": "ok", "operation": "op", "unit": "ns/call",
            "raw": sorted(raw)[len(raw) // 2], "cudyn": sorted(cudyn)[len(cudyn) // 2],
            "ratio": None if bimodal else ratio, "ratio_note": "bimodal: no ratio" if bimodal else "",
            "ratio_min": min(rounds), "ratio_max": max(rounds), "bimodal": bimodal,
            "raw_bimodal": raw_bimodal, "cudyn_bimodal": cudyn_bimodal,
            "raw_samples": raw, "cudyn_samples": cudyn}


def main():
    scripts = Path(sys.argv[1]).resolve()
    sys.path.insert(0, str(scripts))
    import bench_repeat  # noqa: E402  (needs the path above)

    runs = [
        (1, {"cases": [case("a/steady", [10, 10, 10, 10], [11, 11, 11, 11], 1.10),
                       case("a/flip", [10, 10, 10, 10], [10, 10, 10, 10], 1.00),
                       case("a/skipped", [10, 10, 10, 10], [10, 10, 10, 10], 1.00)]}),
        (2, {"cases": [case("a/steady", [20, 20, 20, 20], [21, 21, 21, 21], 1.05),
                       case("a/flip", [10, 10, 40, 40], [10, 10, 10, 10], None, bimodal=True, raw_bimodal=True),
                       {"name": "a/skipped", "status": "skipped"}]}),
        (3, {"cases": [case("a/steady", [10, 10, 10, 10], [12, 12, 12, 12], 1.20),
                       case("a/flip", [10, 10, 10, 10], [10, 10, 10, 10], 1.00),
                       case("a/skipped", [10, 10, 10, 10], [10, 10, 10, 10], 1.00)]}),
    ]
    combined = bench_repeat.combine(runs)
    steady = combined["a/steady"]
    expect(abs(steady["ratio"] - 1.10) < 1e-9, f"the ratio is the median of the runs' paired ratios: {steady['ratio']}")
    expect(steady["ratio_runs_range"] == (1.05, 1.20), f"the spread over runs: {steady['ratio_runs_range']}")
    # Separate medians over runs (raw 10, cudyn 12) would give 1.2: not what is quoted.
    expect(abs(steady["ratio"] - steady["cudyn"] / steady["raw"]) > 0.05,
           "the made-up runs tell a paired ratio from a quotient of medians")
    flip = combined["a/flip"]
    expect(flip["ratio"] is None and flip["why_none"] == "bimodal: no ratio",
           "bimodal in one run of three: no ratio")
    expect(flip["bimodal_runs"] == [(2, "raw")], f"the bimodal run and side are named: {flip['bimodal_runs']}")
    expect(flip["raw_range"] == (10, 40), f"a bimodal case shows each side's range: {flip['raw_range']}")
    skipped = combined["a/skipped"]
    expect(skipped["ratio"] is None and "not in every run" in skipped["why_none"],
           "a case that did not run in every run gets no ratio")

    rows = "\n".join(bench_repeat.markdown_rows(combined, ["a/"]))
    expect("bimodal: no ratio (run 2: raw)" in rows, "the Markdown row of a bimodal case says so")
    expect("1.100x [1.050-1.200]" in rows, "the Markdown row carries the ratio and its spread over runs")
    expect(rows.count("--case a/") == 3, "every Markdown row says how to rerun it")
    text = ("x\n<!-- bench-table:begin a/st -->\nold\n<!-- bench-table:end -->\n"
            "<!-- bench-table:begin a/f -->\n<!-- bench-table:end -->\n")
    filled, blocks = bench_repeat.fill_blocks(text, combined)
    expect(blocks == 2 and "old" not in filled and "`a/steady`" in filled and "`a/flip`" in filled,
           "--write fills each block with the cases of its prefixes")
    expect(bench_repeat.fill_blocks(filled, combined)[0] == filled, "filling twice changes nothing")
    with tempfile.TemporaryDirectory() as base:
        other = Path(base) / "other-machine"
        other.mkdir()
        (other / "run-1.json").write_text(json.dumps({"cases": [case("b/own", [10, 10, 10, 10], [12, 12, 12, 12],
                                                                      1.20)]}))
        text = ("<!-- bench-table:begin a/st -->\n<!-- bench-table:end -->\n"
                "<!-- bench-table:begin runs=other-machine b/ -->\n<!-- bench-table:end -->\n")
        filled, blocks = bench_repeat.fill_blocks(text, combined, base)
        expect(blocks == 2 and "`a/steady`" in filled and "`b/own`" in filled and "1.200x" in filled,
               "a block naming runs=FOLDER is filled from that folder's runs, the others from the page's")

    pairs = sys.argv[2:]
    expect(len(pairs) % 2 == 0, "runs folders and Markdown files come in pairs")
    for runs, markdown in zip(pairs[0::2], pairs[1::2]):
        check = subprocess.run([sys.executable, str(scripts / "bench_repeat.py"), "--combine", runs,
                                "--check", markdown], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if check.returncode != 0:
            print(check.stdout)
        expect(check.returncode == 0, f"{markdown} matches the runs in {runs}")

    print(f"{'FAILED' if failures else 'ok'}: {len(failures)} expectation(s) failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
