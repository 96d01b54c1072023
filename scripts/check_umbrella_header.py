#!/usr/bin/env python3
"""cudyn/cudyn.hpp reaches every public header that is installed.

The list of headers is Meson's own: what `meson install --dry-run` says it
would install from the build directory, so a header added to the tree is
checked without anyone listing it here. Public means under cudyn/ but not
cudyn/detail/ (installed only because templates need it, not API) and not
cudyn/mpi/ (the MPI component, which the umbrella header leaves out by
design) and not cudyn/sleep_alloc/ (the sleeping allocator, whose code is in
libcudyn-torch, not libcudyn). Reachable means included by cudyn.hpp, directly or through the
headers it includes (every `#include "cudyn/..."` line counts, conditional
or not).

usage: check_umbrella_header.py MESON... BUILD_DIR
(MESON: the command that runs Meson, e.g. `python3 -m mesonbuild.mesonmain`)
Exit 0 when every public header is reachable, 1 naming those that are not,
2 when Meson's list could not be read.
"""
import os
import re
import subprocess
import sys
import tempfile

INSTALLING = re.compile(r"^Installing (\S+\.hpp) to (\S+)$")
INCLUDE = re.compile(r'^\s*#\s*include\s+"(cudyn/[^"]+)"')


def installed_headers(meson, build_dir):
    """{'cudyn/device/event.hpp': '/src/include/cudyn/device/event.hpp', ...}"""
    with tempfile.TemporaryDirectory() as destdir:
        run = subprocess.run(meson + ["install", "-C", build_dir, "--dry-run", "--no-rebuild", "--destdir", destdir],
                             capture_output=True, text=True, check=False)
    if run.returncode != 0:
        sys.exit(f"check_umbrella_header: meson install --dry-run failed:\n{run.stdout}{run.stderr}")
    headers = {}
    for line in run.stdout.splitlines():
        match = INSTALLING.match(line.strip())
        if not match:
            continue
        source = match.group(1)
        marker = source.rfind("/cudyn/")
        if marker >= 0:
            headers[source[marker + 1:]] = source
    return headers


def reachable(root, sources):
    seen, todo = set(), [root]
    while todo:
        name = todo.pop()
        if name in seen or name not in sources:
            continue
        seen.add(name)
        with open(sources[name], encoding="utf-8") as text:
            for line in text:
                match = INCLUDE.match(line)
                if match:
                    todo.append(match.group(1))
    return seen


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    meson, build_dir = sys.argv[1:-1], sys.argv[-1]
    headers = installed_headers(meson, build_dir)
    if "cudyn/cudyn.hpp" not in headers:
        print("check_umbrella_header: Meson installs no cudyn/cudyn.hpp (is this the build directory?)",
              file=sys.stderr)
        return 2
    public = sorted(name for name in headers if not name.startswith(("cudyn/detail/", "cudyn/mpi/", "cudyn/sleep_alloc/")))
    found = reachable("cudyn/cudyn.hpp", headers)
    missing = [name for name in public if name not in found]
    for name in missing:
        print(f"not reachable from cudyn/cudyn.hpp: {name} (include it there)")
    print(f"{len(public) - len(missing)} of {len(public)} public headers reachable from cudyn/cudyn.hpp")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
