#!/usr/bin/env python3
"""Print 'N passed, N failed, N skipped' from one or more Meson testlog.json files.

Counts Meson's per-test results (each line of testlog.json is one test run):
OK and EXPECTEDFAIL pass; SKIP is skipped (exit 77); everything else
(FAIL, TIMEOUT, UNEXPECTEDPASS, ERROR) fails. With no test at all it says so
and exits 1, so a run that executed nothing is visible.
"""
import json
import sys


def main() -> int:
    passed = failed = skipped = 0
    for path in sys.argv[1:]:
        with open(path, encoding="utf-8") as log:
            for line in log:
                line = line.strip()
                if not line:
                    continue
                result = json.loads(line).get("result", "")
                if result in ("OK", "EXPECTEDFAIL"):
                    passed += 1
                elif result == "SKIP":
                    skipped += 1
                else:
                    failed += 1
    if passed + failed == 0:
        print("no test was executed", flush=True)
    # The summary is the last line, for CI to read.
    print(f"{passed} passed, {failed} failed, {skipped} skipped")
    if passed + failed == 0:
        return 1
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
