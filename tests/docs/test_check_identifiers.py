#!/usr/bin/env python3
"""check_identifiers.py can fail: on tests/docs/fixtures/identifiers it must
report exactly the three made-up names of docs/bad.md and its CMake block
that is no marked excerpt, and nothing of the
README's real ones (a member, a driver entry, an exception, the standard
library, a command line).

    test_check_identifiers.py
"""
import os
import subprocess
import sys

here = os.path.dirname(os.path.abspath(__file__))
fixture = os.path.join(here, "fixtures", "identifiers")
run = subprocess.run([sys.executable, os.path.join(here, "check_identifiers.py"), fixture,
                      os.path.join(fixture, "cuda")], capture_output=True, text=True)
expected = ["docs/bad.md:3: `GrowableBuffer::size()`: GrowableBuffer has no size",
            "docs/bad.md:3: `grow_everything(bytes)`: grow_everything is in no public header",
            "docs/bad.md:4: `ImaginaryType`: ImaginaryType is in no public header",
            "docs/bad.md:6: a cmake block without <!-- excerpt: PATH -->"]
lines = run.stdout.splitlines()
problems = [f"missing: {e}" for e in expected if not any(line.startswith(e) for line in lines)]
problems += [f"unexpected: {line}" for line in lines[:-1] if not any(line.startswith(e) for e in expected)]
if run.returncode != 1:
    problems.append(f"exit {run.returncode}, expected 1")
for p in problems:
    print(p)
print(f"{'ok' if not problems else 'FAILED'}: {len(expected)} planted problems, {len(problems)} problem(s)")
sys.exit(1 if problems else 0)
