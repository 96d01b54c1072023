#!/usr/bin/env python3
"""Every test case that is compiled is scheduled: some Meson test selects it.

A test binary (an executable built from tests/support/test_main.cpp, found in
the build folder's introspection files) holds Catch2 cases; Meson tests run it
with tag filters. A case whose tags no filter names compiles, and is never run
anywhere, without anything failing: this check fails instead.

Catch2 itself answers which cases a filter selects (`BINARY FILTER...
--list-test-names-only`), so the filter syntax ([a][b] both tags, `,` either,
`~` not, names and wildcards) is never reimplemented here. The filters of every
Meson test count, whichever suite and whether or not this machine can run it
(the gpu suite's tests are registered, and skipped at run time, on a machine
without a GPU): the question is whether a case is scheduled, not whether it ran.

    check_test_selection.py BUILD_DIR

Exit 0 when every case of every test binary is selected by a Meson test;
exit 1 listing, per binary, the cases nothing selects.
"""
import json
import os
import subprocess
import sys

TEST_MAIN = os.path.join("tests", "support", "test_main.cpp")


def load(build_dir, name):
    with open(os.path.join(build_dir, "meson-info", name), encoding="utf-8") as f:
        return json.load(f)


def test_binaries(build_dir):
    """The Catch2 test executables this build makes: path -> target name."""
    binaries = {}
    for target in load(build_dir, "intro-targets.json"):
        if target["type"] != "executable":
            continue
        sources = [s for group in target.get("target_sources", []) for s in group.get("sources", [])]
        if any(os.path.normpath(s).endswith(TEST_MAIN) for s in sources):
            for filename in target["filename"]:
                binaries[os.path.realpath(filename)] = target["name"]
    return binaries


def listed(binary, filters):
    """The case names `binary` runs for `filters` (none: every case not hidden)."""
    # Without the tests' environment: their CUDYN_TEST_REQUIRE_* skips stop a
    # binary before Catch2 starts, and a filter's selection does not depend on it.
    env = {k: v for k, v in os.environ.items() if not k.startswith("CUDYN_TEST_")}
    # Catch2 2.x lists names alone with --list-test-names-only; 3.x dropped that
    # option for --list-tests at quiet verbosity.
    for listing in (["--list-test-names-only"], ["--list-tests", "--verbosity", "quiet"]):
        done = subprocess.run([binary, *filters, *listing], env=env, capture_output=True, text=True, timeout=60)
        if "Unrecognised token" in done.stdout + done.stderr:
            continue
        # 2.x exits with the number of cases listed, 3.x with 0: only a signal fails.
        if done.returncode < 0:
            raise RuntimeError("%s %s died (signal %d): %s"
                               % (binary, " ".join(filters + listing), -done.returncode, done.stderr.strip()))
        return {line.strip() for line in done.stdout.splitlines() if line.strip()}
    raise RuntimeError("%s lists its cases with neither Catch2 2.x's nor 3.x's option" % binary)


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        print("usage: check_test_selection.py BUILD_DIR", file=sys.stderr)
        return 2
    build_dir = argv[1]
    binaries = test_binaries(build_dir)
    if not binaries:
        print("check_test_selection: no test binaries in %s (tests/support/test_main.cpp built into none)"
              % build_dir, file=sys.stderr)
        return 1

    runs = {path: [] for path in binaries}  # binary -> [(meson test, filters)]
    for test in load(build_dir, "intro-tests.json"):
        command = test["cmd"]
        path = os.path.realpath(command[0]) if command else ""
        if path in runs:
            runs[path].append((test["name"], command[1:]))

    unscheduled = {}
    cases_total = 0
    for path, name in sorted(binaries.items(), key=lambda item: item[1]):
        if not os.path.exists(path):
            print("check_test_selection: %s is not built (%s); build before checking" % (name, path),
                  file=sys.stderr)
            return 1
        # Every case: the default list (cases not hidden) and the hidden ones.
        cases = listed(path, []) | listed(path, ["[.]"])
        cases_total += len(cases)
        selected = set()
        for _, filters in runs[path]:
            selected |= listed(path, filters)
        missing = sorted(cases - selected)
        if missing:
            unscheduled[name] = (missing, [test for test, _ in runs[path]])

    if unscheduled:
        for name, (missing, tests) in sorted(unscheduled.items()):
            print("%s: %d case(s) no Meson test selects (the binary is run by %s):"
                  % (name, len(missing), "%d Meson tests" % len(tests) if tests else "no Meson test"))
            for case in missing:
                print("  " + case)
        print("Add the cases' topic tag to the Meson test list that should run them "
              "(tests/*/meson.build), or tag them with a topic that is scheduled.")
        return 1
    print("%d cases in %d test binaries, each selected by a Meson test" % (cases_total, len(binaries)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
