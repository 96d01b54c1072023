#!/usr/bin/env python3
"""Checks what cudyn-info's human report tells a user whose driver is not
usable: for each state, what it means for a program (the error every cudyn
call returns) and what to do next, ending with a dry-run command on the fake
driver that must itself work.

    check_info_report.py CUDYN_INFO FAKE_DIR

FAKE_DIR holds <variant>/libcuda.so.1 (a build tree's tests/fakecuda, or an
installed <libdir>/cudyn/fake). Runs CUDYN_INFO with CUDYN_DRIVER_PATH at a
missing file, a relative path, the stub and the broken fakes, checks each
report's explanation, then runs the dry-run command the first report printed
and checks that it reports a loaded driver with nothing to explain.
Exit 0 when all hold; 1 with one line per problem otherwise.
"""
import os
import shlex
import subprocess
import sys


def report(cudyn_info, driver_path, extra_env=None):
    env = dict(os.environ, CUDYN_DRIVER_PATH=driver_path)
    env.update(extra_env or {})
    run = subprocess.run([cudyn_info], env=env, capture_output=True, text=True, timeout=60)
    return run.returncode, run.stdout + run.stderr


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    cudyn_info, fake_dir = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    problems = []
    # state: (driver path, what the explanation must name)
    cases = {
        "not_found": ("/nonexistent/cudyn-report/libcuda.so.1", ["DriverNotFound", "install the NVIDIA driver"]),
        "refused": ("relative/libcuda.so.1", ["DriverRefused", "absolute path"]),
        "stub": (os.path.join(fake_dir, "stub", "libcuda.so.1"), ["StubDriver", "stubs folder"]),
        "init_failed": (os.path.join(fake_dir, "broken", "libcuda.so.1"), ["DriverInitFailed", "no GPU is visible"]),
    }
    dry_run = None
    for state, (path, expected) in cases.items():
        code, text = report(cudyn_info, path)
        if code != 0:
            problems.append(f"{state}: cudyn-info exited {code}")
        if f"state           {state}" not in text:
            problems.append(f"{state}: the report does not say 'state {state}'")
        for needed in ["what it means", "nothing crashes", "what to do"] + expected:
            if needed not in text:
                problems.append(f"{state}: the report does not say '{needed}'")
        commands = [line.strip() for line in text.splitlines() if line.strip().startswith("CUDYN_DRIVER_PATH=")]
        if not commands:
            problems.append(f"{state}: no dry-run command")
        elif dry_run is None:
            dry_run = commands[0]
        if problems:
            print(text, file=sys.stderr)
    if dry_run is not None:
        words = shlex.split(dry_run)
        fake = words[0].split("=", 1)[1]
        if not os.path.samefile(fake, os.path.join(fake_dir, "emulated", "libcuda.so.1")):
            problems.append(f"the dry run names {fake}, not the emulated fake of {fake_dir}")
        env = dict(os.environ, CUDYN_DRIVER_PATH=fake)
        run = subprocess.run(words[1:], env=env, capture_output=True, text=True, timeout=60)
        if run.returncode != 0 or "state           loaded" not in run.stdout:
            problems.append(f"the dry run '{dry_run}' did not report a loaded driver:\n{run.stdout}{run.stderr}")
        elif "what it means" in run.stdout:
            problems.append("the dry run's report still explains a failure")
    for problem in problems:
        print(f"check_info_report: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
