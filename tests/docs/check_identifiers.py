#!/usr/bin/env python3
"""Every code-like name the README and docs/ put in backticks exists.

    check_identifiers.py ROOT CUDA_INCLUDE_DIR

Reads ROOT/README.md and every ROOT/docs/**/*.md (not docs/measurements/:
logs of past runs quote what was there then). In each inline code span
(`...`, outside fenced blocks) the code-like names are
  * every component of a qualified name (`Type::member`, `cudyn::name`);
  * every name called (`member()`, `make(a, b)`, `x.get()`);
  * every CamelCase name with two humps or more (`DeviceBuffer`).
Each must be a word of a public header (ROOT/include/, the fake driver's
ROOT/tests/fakecuda/include/), of the build interface a user calls
(ROOT/cmake/*.in, ROOT/meson_options.txt), or of the CUDA toolkit's cuda.h
(driver entry points, CUresult names); or be listed, with the reason, in
tests/docs/identifier_exceptions.txt (a name and its reason per line). Names
of the standard library (`std::...`) are not checked. Where a qualified name's
class is defined in a public header, its member must be a word of that
header (`GrowableBuffer::size` fails: that header has no `size`).

Snippets a reader copies into a build: every ```cmake and ```meson block
must be marked `<!-- excerpt: PATH -->` (right before its fence), PATH a file
of ROOT that cudyn's CI builds (tests/consumers/...), and its lines must be
PATH's lines, in order and contiguous. (The CI template's YAML is run by
scripts/run_ci_template.py instead.)

Exit 0 when every name is found and every excerpt matches; 1 with one line
per name that is not (FILE:LINE: `span`: NAME), per exception that no
document uses any more, and per block that is not its file's excerpt.
"""
import builtins
import glob
import os
import re
import sys

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
CAMEL = re.compile(r"^[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+$")


def words(text):
    return set(re.findall(IDENT, text))


def strip_templates(span):
    previous = None
    while previous != span:
        previous = span
        span = re.sub(r"<[^<>]*>", "", span)
    return span


def names_in(span):
    """(qualifier or None, name) pairs of a code span's code-like names."""
    span = strip_templates(span)
    found = []
    for match in re.finditer(rf"((?:{IDENT}::)+)({IDENT})", span):
        parts = match.group(1).split("::")[:-1] + [match.group(2)]
        if parts[0] == "std":
            continue
        if parts[0] == "cudyn":
            parts = parts[1:]
        for i, part in enumerate(parts):
            found.append((parts[i - 1] if i else None, part))
    for match in re.finditer(rf"(?<![:\w])({IDENT})\s*\(", span):
        found.append((None, match.group(1)))
    for match in re.finditer(rf"(?<![:\w.-])({IDENT})(?![\w:-])", span):
        if CAMEL.match(match.group(1)):
            found.append((None, match.group(1)))
    return found


def inline_spans(path):
    """(line number, span) of every inline code span outside fenced blocks."""
    fenced = False
    paragraph = []  # (line number, text): a span may wrap onto the next line
    out = []

    def flush():
        text = "\n".join(t for _, t in paragraph)
        starts = [n for n, _ in paragraph]
        offsets = [0]
        for _, t in paragraph:
            offsets.append(offsets[-1] + len(t) + 1)
        for match in re.finditer(r"(`+)(?!`)(.+?)(?<!`)\1(?!`)", text, re.S):
            line = starts[max(i for i in range(len(starts)) if offsets[i] <= match.start())]
            out.append((line, match.group(2).replace("\n", " ").strip()))
        paragraph.clear()

    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if line.lstrip().startswith("```"):
                flush()
                fenced = not fenced
                continue
            if fenced:
                continue
            if not line.strip():
                flush()
            else:
                paragraph.append((number, line.rstrip("\n")))
    flush()
    return out


def excerpt_problems(root, document, relative):
    """Every cmake or meson block of a document is a marked excerpt of its file."""
    problems = []
    lines = open(document, encoding="utf-8").read().splitlines()
    i = 0
    while i < len(lines):
        match = re.match(r"^```(cmake|meson)\s*$", lines[i])
        if not match:
            i += 1
            continue
        start = i
        end = start + 1
        while end < len(lines) and not lines[end].startswith("```"):
            end += 1
        block = lines[start + 1:end]
        i = end + 1
        marker = start - 1
        while marker >= 0 and not lines[marker].strip():
            marker -= 1
        mark = re.match(r"^<!-- excerpt: (\S+) -->$", lines[marker].strip()) if marker >= 0 else None
        if not mark:
            problems.append(f"{relative}:{start + 1}: a {match.group(1)} block without "
                            "<!-- excerpt: PATH --> (a file CI builds)")
            continue
        source = os.path.join(root, mark.group(1))
        if not os.path.isfile(source):
            problems.append(f"{relative}:{start + 1}: excerpt of {mark.group(1)}, which does not exist")
            continue
        text = open(source, encoding="utf-8").read().splitlines()
        if not any(text[k:k + len(block)] == block for k in range(len(text) - len(block) + 1)):
            problems.append(f"{relative}:{start + 1}: this block is no longer an excerpt of {mark.group(1)}")
    return problems


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    root, cuda_include = sys.argv[1:]
    headers = {}
    for pattern in ["include/**/*.hpp", "include/**/*.h", "include/**/*.def", "tests/fakecuda/include/**/*.h"]:
        for path in glob.glob(os.path.join(root, pattern), recursive=True):
            with open(path, encoding="utf-8") as f:
                headers[path] = f.read()
    known = set()
    for text in headers.values():
        known |= words(text)
    for pattern in ["cmake/*.in", "meson_options.txt"]:
        for path in glob.glob(os.path.join(root, pattern)):
            with open(path, encoding="utf-8") as f:
                known |= words(f.read())
    with open(os.path.join(cuda_include, "cuda.h"), encoding="utf-8", errors="replace") as f:
        known |= words(f.read())
    # The Python package's own names (its modules and type stubs), and
    # Python's built-in names, which the Python pages use.
    for path in glob.glob(os.path.join(root, "python/cudyn/*.py*")):
        with open(path, encoding="utf-8") as f:
            known |= words(f.read())
    known |= set(dir(builtins))
    # A header's own words, and those of the .def lists it includes (the
    # members they generate).
    for path, text in list(headers.items()):
        for included in re.findall(r'#include\s+"(cudyn/[^"]+\.def)"', text):
            included_path = os.path.join(root, "include", included)
            if included_path in headers:
                headers[path] = text + headers[included_path]
    # Where each public class or struct is defined: its members are checked there.
    defined_in = {}
    for path, text in headers.items():
        for match in re.finditer(rf"^\s*(?:class|struct|enum class)\s+({IDENT})\b[^;]*$", text, re.M):
            defined_in.setdefault(match.group(1), []).append(path)

    exceptions = {}
    exceptions_path = os.path.join(root, "tests/docs/identifier_exceptions.txt")
    with open(exceptions_path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            name, _, reason = line.partition(" ")
            if not reason.strip():
                print(f"{exceptions_path}:{number}: {name} has no reason")
                return 1
            exceptions[name] = reason.strip()

    documents = [os.path.join(root, "README.md")]
    documents += [p for p in sorted(glob.glob(os.path.join(root, "docs/**/*.md"), recursive=True))
                  if "/docs/measurements/" not in p]
    problems = []
    used = set()
    checked = 0
    for document in documents:
        relative = os.path.relpath(document, root)
        problems += excerpt_problems(root, document, relative)
        for line, span in inline_spans(document):
            for qualifier, name in names_in(span):
                checked += 1
                if name in exceptions:
                    used.add(name)
                    continue
                if name not in known:
                    problems.append(f"{relative}:{line}: `{span}`: {name} is in no public header")
                elif qualifier in defined_in and not any(name in words(headers[p]) for p in defined_in[qualifier]):
                    problems.append(f"{relative}:{line}: `{span}`: {qualifier} has no {name} "
                                    f"({', '.join(os.path.relpath(p, root) for p in defined_in[qualifier])})")
    for name in sorted(set(exceptions) - used):
        problems.append(f"{os.path.relpath(exceptions_path, root)}: {name} is used by no document any more")
    for p in problems:
        print(p)
    print(f"{'ok' if not problems else 'FAILED'}: {checked} names in {len(documents)} documents, "
          f"{len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
