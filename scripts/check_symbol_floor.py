#!/usr/bin/env python3
"""Fail when a shipped binary needs a newer glibc / libstdc++ than the floor.

    check_symbol_floor.py [--floor GLIBC_2.28 ...] [--cxx g++] [--objdump objdump] FILE|DIR...

Reads `objdump -T` of every FILE (for a DIR: every ELF file and static library
under it, so a release tree is checked whole) and checks each undefined (imported) symbol's
version against the floor for its namespace. The defaults are the portable
release's promise: glibc 2.28 and the libstdc++ / libgcc_s of GCC 8:

    GLIBC_2.28  GLIBCXX_3.4.25  CXXABI_1.3.11  GCC_8.0.0

Weak references count too: the dynamic loader refuses a library whose version
references name a version node that the system library lacks, weak or not. A
version in a namespace with no floor (GLIBC_PRIVATE, CXXABI_TM_1, ...) fails,
so nothing passes unchecked.

A static library (an `ar` archive) or object file has no symbol versions: its objects say
which symbols they need, not which versions. Such a FILE is linked whole
(--whole-archive, -z defs) into a probe shared object with --cxx against the
shared runtime of the machine running the check, and the probe is checked
instead. Every versioned symbol keeps its version node in later releases, so
where the probe's imports are within the floor, each symbol the archive needs
exists at that version in glibc 2.28 and GCC 8's libstdc++. Run it on the
oldest system at hand: a newer glibc binds a reference to the newest default
version (memcpy@GLIBC_2.14, dlopen@GLIBC_2.34) even where an older one exists.

Prints every offending symbol with its version and the highest version each
file needs per namespace; exits 1 on any offence or unreadable file.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

DEFAULT_FLOORS = ("GLIBC_2.28", "GLIBCXX_3.4.25", "CXXABI_1.3.11", "GCC_8.0.0")

# An objdump -T row: address, 7 flag characters, section, size, then an
# optional version and the name. binutils 2.35 prints an import's version bare
# (" GLIBC_2.2.5 dlopen"), 2.40 in parentheses ("(GLIBC_2.2.5) dlopen").
ROW = re.compile(r"^[0-9a-fA-F]+ (?P<flags>.{7}) (?P<section>\S+)\s+[0-9a-fA-F]+\s+(?P<rest>.*)$")
VERSION = re.compile(r"^(?P<namespace>[A-Za-z][A-Za-z0-9_]*?)_(?P<number>[0-9]+(?:\.[0-9]+)*)$")


def parse_version(text):
    """'GLIBC_2.2.5' -> ('GLIBC', (2, 2, 5)); None where there is no number."""
    match = VERSION.match(text)
    if match is None:
        return None
    return match.group("namespace"), tuple(int(part) for part in match.group("number").split("."))


def imports(objdump_output):
    """(name, version text or '', weak) for every undefined symbol."""
    for line in objdump_output.splitlines():
        row = ROW.match(line)
        if row is None or row.group("section") != "*UND*":
            continue
        fields = row.group("rest").split()
        if len(fields) == 2:
            version, name = fields
        elif len(fields) == 1:
            version, name = "", fields[0]
        else:
            raise ValueError(f"unexpected objdump -T row: {line!r}")
        yield name, version.strip("()"), "w" in row.group("flags")


def check_output(label, objdump_output, floors):
    """Prints the file's report; returns the number of offending symbols."""
    offences = []
    highest = {}
    for name, version, weak in imports(objdump_output):
        if version in ("", "Base"):
            continue  # unversioned: any provider will do
        parsed = parse_version(version)
        if parsed is None or parsed[0] not in floors:
            offences.append((name, version, weak, "no floor for this version"))
            continue
        namespace, number = parsed
        if number > highest.get(namespace, ((), ""))[0]:
            highest[namespace] = (number, version)
        if number > floors[namespace][0]:
            offences.append((name, version, weak, f"above {floors[namespace][1]}"))
    needs = ", ".join(highest[namespace][1] for namespace in sorted(highest)) or "no versioned symbol"
    verdict = "FAIL" if offences else "ok"
    print(f"{verdict:4}  {label}: needs {needs}")
    for name, version, weak, reason in sorted(offences, key=lambda offence: (offence[1], offence[0])):
        print(f"      {name} @ {version}{' (weak)' if weak else ''}: {reason}")
    return len(offences)


def run(command):
    return subprocess.run(command, check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True).stdout


def is_relocatable(path):
    """A static library (ar archive) or an ELF relocatable object (e_type ET_REL)."""
    with open(path, "rb") as file:
        head = file.read(18)
    if head[:8] == b"!<arch>\n":
        return True
    return head[:4] == b"\x7fELF" and len(head) == 18 and head[16:18] in (b"\x01\x00", b"\x00\x01")


def binaries_under(folder):
    """ELF files and ar archives under folder, sorted; symbolic links are the files they name."""
    found = []
    for parent, _, names in os.walk(folder):
        for name in names:
            path = os.path.join(parent, name)
            if os.path.islink(path) or not os.path.isfile(path):
                continue
            with open(path, "rb") as file:
                magic = file.read(8)
            if magic[:4] == b"\x7fELF" or magic == b"!<arch>\n":
                found.append(path)
    return sorted(found)


def probe_relocatable(path, cxx, libraries, folder):
    """Links the whole archive (or object) into a shared object: the probe whose imports are checked."""
    probe = os.path.join(folder, os.path.basename(path) + ".probe.so")
    run([cxx, "-shared", "-o", probe, "-Wl,-z,defs",
         "-Wl,--whole-archive", path, "-Wl,--no-whole-archive"] + libraries)
    return probe


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", metavar="FILE|DIR")
    parser.add_argument("--floor", action="append", metavar="NAMESPACE_VERSION",
                        help="highest version allowed in a namespace, e.g. GLIBC_2.28 "
                             "(repeatable; replaces the defaults: " + " ".join(DEFAULT_FLOORS) + ")")
    parser.add_argument("--objdump", default=os.environ.get("OBJDUMP", "objdump"))
    parser.add_argument("--cxx", default=os.environ.get("CXX", "c++"),
                        help="links the probe for a static library (default: $CXX or c++)")
    parser.add_argument("--probe-libs", default="-pthread -ldl",
                        help="what a static library's consumer links besides it (default: %(default)s)")
    arguments = parser.parse_args()

    floors = {}
    for text in arguments.floor or DEFAULT_FLOORS:
        parsed = parse_version(text)
        if parsed is None:
            parser.error(f"--floor {text}: expected NAMESPACE_NUMBER, e.g. GLIBC_2.28")
        floors[parsed[0]] = (parsed[1], text)
    print("floor: " + " ".join(floors[namespace][1] for namespace in sorted(floors)))

    paths = []
    for path in arguments.files:
        if os.path.isdir(path):
            inside = binaries_under(path)
            if not inside:
                parser.error(f"{path}: no ELF file or static library in it")
            paths += inside
        else:
            paths.append(path)

    offending = 0
    broken = 0
    with tempfile.TemporaryDirectory(prefix="symbol-floor.") as folder:
        for path in paths:
            try:
                target = path
                label = path
                if is_relocatable(path):
                    target = probe_relocatable(path, arguments.cxx, arguments.probe_libs.split(), folder)
                    label = f"{path} (linked whole into a probe with {arguments.cxx})"
                offending += check_output(label, run([arguments.objdump, "-T", target]), floors)
            except (OSError, ValueError, subprocess.CalledProcessError) as error:
                detail = getattr(error, "stderr", "") or ""
                print(f"FAIL  {path}: {error}\n{detail.rstrip()}")
                broken += 1
    files = len(paths)
    if offending or broken:
        print(f"symbol floor: {offending} symbol(s) above the floor, {broken} file(s) unreadable, in {files} file(s)")
        return 1
    print(f"symbol floor: {files} file(s) within the floor")
    return 0


if __name__ == "__main__":
    sys.exit(main())
