#!/usr/bin/env python3
"""Runs cudyn-bench in N fresh processes and combines their paired ratios.

    scripts/bench_repeat.py BENCH --runs 3 --out DIR -- --case ipc/get-mem-handle
    scripts/bench_repeat.py --combine DIR                       (the table again, from DIR/run-K.json)
    scripts/bench_repeat.py --combine DIR --write docs/performance.md
    scripts/bench_repeat.py --combine DIR --check docs/performance.md

Within one process cudyn-bench times each case in rounds, one raw and one
cudyn sample back to back per round, and its ratio is the median of the
rounds' ratios (cudyn/raw of the same round); a case whose rounds are bimodal
on either side has no ratio. A nanosecond case still moves by a few percent
from one process to the next with the address layout the process gets (stack
and heap placement, code alignment), so the figure the docs quote combines
fresh processes:

- ratio: the median over the processes of each process's paired ratio, with
  the lowest and highest process (the spread over processes), and the lowest
  and highest single round of all processes;
- a case that was bimodal in any process has no ratio ("bimodal: no ratio"),
  only the range of each side's rounds over all processes;
- a case that did not run (skipped, failed) in every process has no ratio.

Each run's JSON is kept in --out as run-K.json; --combine reads them back.
--write fills the blocks of a Markdown file that sit between
`<!-- bench-table:begin PREFIX... -->` and `<!-- bench-table:end -->` with a
table of the cases whose names start with one of the PREFIXes (a block that
begins `runs=FOLDER PREFIX...` takes its runs from FOLDER, relative to the
Markdown file, instead of DIR); --check fails
(exit 1) where such a block is not what --write would put there. Exit status
otherwise: 0 when every run exited 0, else 1.
"""
import argparse
import glob
import json
import os
import re
import statistics
import subprocess
import sys

# The command a reader reruns a row with (a build configured with -Dbench=enabled).
RERUN = "scripts/bench_repeat.py build-bench/bench/cudyn-bench --runs 3 -- --case {name}"


def run_once(bench, bench_args, json_path):
    completed = subprocess.run([bench, *bench_args, "--json", json_path], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    return completed.returncode, completed.stdout


def run_number(path):
    match = re.search(r"run-(\d+)\.json$", path)
    return int(match.group(1)) if match else 0


def load_runs(folder):
    """Every run-K.json of folder, in K order: [(K, report)]."""
    paths = sorted(glob.glob(os.path.join(folder, "run-*.json")), key=run_number)
    runs = []
    for path in paths:
        with open(path, encoding="utf-8") as report:
            runs.append((run_number(path), json.load(report)))
    return runs


def side_range(values):
    return (min(values), max(values)) if values else (float("nan"), float("nan"))


def combine(runs):
    """Case name -> what the processes say together (see the module's doc)."""
    names = []
    for _, report in runs:
        for case in report["cases"]:
            if case["name"] not in names:
                names.append(case["name"])
    combined = {}
    for name in names:
        per_run = []  # (K, case) where the case ran ok
        problems = []
        for number, report in runs:
            case = next((c for c in report["cases"] if c["name"] == name), None)
            if case is None:
                problems.append(f"run {number}: not run")
            elif case["status"] != "ok":
                problems.append(f"run {number}: {case['status']}")
            else:
                per_run.append((number, case))
        entry = {"name": name, "runs": len(runs), "ok_runs": len(per_run), "problems": problems}
        if per_run:
            first = per_run[0][1]
            entry["unit"] = first["unit"]
            entry["operation"] = first["operation"]
            entry["raw"] = statistics.median(c["raw"] for _, c in per_run)
            entry["cudyn"] = statistics.median(c["cudyn"] for _, c in per_run)
            entry["raw_range"] = side_range([s for _, c in per_run for s in c["raw_samples"]])
            entry["cudyn_range"] = side_range([s for _, c in per_run for s in c["cudyn_samples"]])
            entry["rounds"] = sum(len(c["raw_samples"]) for _, c in per_run)
            entry["bimodal_runs"] = [
                (number, " and ".join(side for side, flag in (("raw", c.get("raw_bimodal")),
                                                               ("cudyn", c.get("cudyn_bimodal"))) if flag))
                for number, c in per_run if c.get("bimodal")]
            entry["per_run"] = [(number, c.get("ratio")) for number, c in per_run]
        ratios = [c.get("ratio") for _, c in per_run]
        if problems or not per_run:
            entry["ratio"] = None
            entry["why_none"] = "not in every run: no ratio"
        elif entry["bimodal_runs"]:
            entry["ratio"] = None
            entry["why_none"] = "bimodal: no ratio"
        elif any(r is None for r in ratios):
            # Paired rounds missing in a process (its ratio_note says why).
            entry["ratio"] = None
            entry["why_none"] = next(c.get("ratio_note") or "no ratio" for _, c in per_run if c.get("ratio") is None)
        else:
            entry["ratio"] = statistics.median(ratios)
            entry["ratio_runs_range"] = (min(ratios), max(ratios))
            entry["ratio_rounds_range"] = (min(c["ratio_min"] for _, c in per_run),
                                           max(c["ratio_max"] for _, c in per_run))
        combined[name] = entry
    return combined


def number(value):
    """Four significant digits, no exponent for the sizes benchmarks see."""
    if value != value:  # NaN
        return "-"
    magnitude = abs(value)
    decimals = 0 if magnitude >= 1000 else 1 if magnitude >= 100 else 2 if magnitude >= 10 else 3
    return f"{value:.{decimals}f}"


def text_table(combined, header):
    lines = [header,
             f"{'case':<30} {'runs':>4}  {'ratio':>7} {'runs min-max':>13} {'rounds min-max':>15}  "
             f"{'raw (median)':>16} {'cudyn (median)':>16}  per run"]
    for name, e in combined.items():
        runs = f"{e['ok_runs']}/{e['runs']}"
        per_run = " ".join(f"{r:.3f}" if r is not None else "none" for _, r in e.get("per_run", []))
        sides = (f"{number(e['raw']):>9} {e['unit']:<6} {number(e['cudyn']):>9} {e['unit']:<6}"
                 if "raw" in e else "")
        if e["ratio"] is not None:
            lo, hi = e["ratio_runs_range"]
            rlo, rhi = e["ratio_rounds_range"]
            lines.append(f"{name:<30} {runs:>4}  {e['ratio']:>6.3f}x {lo:>6.3f}-{hi:.3f} {rlo:>7.3f}-{rhi:.3f}  "
                         f"{sides}  {per_run}")
        else:
            why = e["why_none"]
            if e.get("bimodal_runs"):
                why += " (" + ", ".join(f"run {n}: {sides_}" for n, sides_ in e["bimodal_runs"]) + ")"
            if e["problems"]:
                why += " (" + ", ".join(e["problems"]) + ")"
            ranges = ""
            if "raw_range" in e:
                ranges = (f"  raw rounds {number(e['raw_range'][0])}-{number(e['raw_range'][1])} {e['unit']}, "
                          f"cudyn rounds {number(e['cudyn_range'][0])}-{number(e['cudyn_range'][1])} {e['unit']}")
            lines.append(f"{name:<30} {runs:>4}  {why}{ranges}")
    return "\n".join(lines)


def markdown_rows(combined, prefixes):
    """The Markdown table of the cases whose names start with one of prefixes."""
    lines = ["| case | what is timed | raw, median of runs | cudyn, median of runs | cudyn/raw: median of the runs' "
             "paired ratios [lowest-highest run] | lowest-highest round | rerun |",
             "|---|---|---|---|---|---|---|"]
    for name, e in combined.items():
        if not any(name.startswith(prefix) for prefix in prefixes):
            continue
        unit = e.get("unit", "")
        operation = e.get("operation", "").replace("|", "\\|")
        rerun = "`" + RERUN.format(name=name) + "`"
        if e["ratio"] is not None:
            lo, hi = e["ratio_runs_range"]
            rlo, rhi = e["ratio_rounds_range"]
            lines.append(f"| `{name}` | {operation} | {number(e['raw'])} {unit} | {number(e['cudyn'])} {unit} | "
                         f"{e['ratio']:.3f}x [{lo:.3f}-{hi:.3f}] | {rlo:.3f}-{rhi:.3f} | {rerun} |")
        else:
            why = e["why_none"]
            if e.get("bimodal_runs"):
                why += " (" + "; ".join(f"run {n}: {sides_}" for n, sides_ in e["bimodal_runs"]) + ")"
            if e["problems"]:
                why += " (" + "; ".join(e["problems"]) + ")"
            if "raw_range" in e:
                raw = f"rounds {number(e['raw_range'][0])}-{number(e['raw_range'][1])} {unit}"
                cudyn = f"rounds {number(e['cudyn_range'][0])}-{number(e['cudyn_range'][1])} {unit}"
            else:
                raw = cudyn = "-"
            lines.append(f"| `{name}` | {operation} | {raw} | {cudyn} | {why} | - | {rerun} |")
    return lines


BLOCK = re.compile(r"(<!-- bench-table:begin ([^>]*?) -->\n)(.*?)(<!-- bench-table:end -->)", re.S)


def fill_blocks(text, combined, base="."):
    """Fills every block from `combined`, or, for a block whose first word is
    runs=FOLDER (relative to `base`, the Markdown file's folder), from that
    folder's runs: one page can then hold tables of more than one machine."""
    own = {}

    def replace(match):
        words = match.group(2).split()
        source = combined
        if words and words[0].startswith("runs="):
            folder = os.path.join(base, words[0][len("runs="):])
            if folder not in own:
                own[folder] = combine(load_runs(folder))
            source, words = own[folder], words[1:]
        return match.group(1) + "\n".join(markdown_rows(source, words)) + "\n" + match.group(4)
    return BLOCK.sub(replace, text), len(BLOCK.findall(text))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("bench", nargs="?", help="path of cudyn-bench (not with --combine)")
    parser.add_argument("--runs", type=int, default=3, help="fresh processes (default 3)")
    parser.add_argument("--out", default="bench-repeat", help="folder for run-K.json (default bench-repeat)")
    parser.add_argument("--combine", metavar="DIR", help="combine DIR/run-K.json of an earlier call; run nothing")
    parser.add_argument("--write", metavar="MARKDOWN", help="fill MARKDOWN's bench-table blocks")
    parser.add_argument("--check", metavar="MARKDOWN", help="fail where MARKDOWN's bench-table blocks differ")
    # Everything after "--" is cudyn-bench's (argparse would take its options for ours).
    argv = sys.argv[1:]
    split = argv.index("--") if "--" in argv else len(argv)
    options = parser.parse_args(argv[:split])
    bench_args = argv[split + 1:]

    failures = 0
    if options.combine:
        if options.bench:
            parser.error("--combine runs nothing: give no cudyn-bench")
        folder = options.combine
        runs = load_runs(folder)
        if not runs:
            parser.error(f"{folder} holds no run-K.json")
        header = f"{len(runs)} runs combined from {folder}"
    else:
        if options.bench is None:
            parser.error("give the path of cudyn-bench, or --combine DIR")
        if options.runs < 1:
            parser.error("--runs must be at least 1")
        if not os.access(options.bench, os.X_OK):
            parser.error(f"{options.bench} is not an executable cudyn-bench")
        os.makedirs(options.out, exist_ok=True)
        for old in glob.glob(os.path.join(options.out, "run-*.json")):
            os.remove(old)  # a run that fails must not leave an earlier call's file in its place
        for run in range(1, options.runs + 1):
            json_path = os.path.join(options.out, f"run-{run}.json")
            status, output = run_once(options.bench, bench_args, json_path)
            print(f"--- run {run}: {options.bench} {' '.join(bench_args)} (exit {status})")
            print(output, end="" if output.endswith("\n") else "\n")
            if status != 0:
                failures += 1
                print(f"run {run}: cudyn-bench exited {status}", file=sys.stderr)
        runs = load_runs(options.out)
        header = f"{options.runs} fresh processes of {options.bench} {' '.join(bench_args)}"

    combined = combine(runs)
    print("\n" + text_table(combined, header))
    print(f"{len(runs) - failures} runs read, {failures} failed")

    status = 0 if failures == 0 else 1
    for target, write in ((options.write, True), (options.check, False)):
        if not target:
            continue
        with open(target, encoding="utf-8") as markdown:
            text = markdown.read()
        filled, blocks = fill_blocks(text, combined, os.path.dirname(os.path.abspath(target)))
        if blocks == 0:
            print(f"{target}: no <!-- bench-table:begin PREFIX... --> block", file=sys.stderr)
            status = 1
        elif write:
            with open(target, "w", encoding="utf-8") as markdown:
                markdown.write(filled)
            print(f"{target}: {blocks} bench-table blocks written")
        elif filled != text:
            print(f"{target}: its bench-table blocks are not what the runs in {options.combine or options.out} "
                  f"give; regenerate with --write", file=sys.stderr)
            status = 1
        else:
            print(f"{target}: {blocks} bench-table blocks match the runs")
    return status


if __name__ == "__main__":
    sys.exit(main())
