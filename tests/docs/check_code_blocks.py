#!/usr/bin/env python3
"""Every C++ block in README.md and docs/**/*.md compiles against cudyn's public headers.

    check_code_blocks.py [--root DIR] [--std c++17] [-I DIR]... [--isystem DIR]...
                         [--jobs N] [--keep DIR] [MARKDOWN...] -- COMPILER [ARGS...]

Without MARKDOWN files it checks ROOT/README.md and every ROOT/docs/**/*.md.
Each ```cpp or ```c++ block (the first word of the info string, any case)
becomes one translation unit that COMPILER checks with -fsyntax-only: nothing
is linked or run, so no driver, GPU or built library is needed. Other fences
(sh, plain text, ...) are ignored. Exit status: 0 when every block compiles,
1 when one does not or the markup below is wrong.

How a block is compiled
-----------------------
Every translation unit first includes <cudyn/cudyn.hpp> and the standard
headers snippets use without saying so: <cstddef> <cstdint> <cstdio> <string>
<utility> <vector>.

* A block that defines main (a line starting `int main(` or `auto main(`) is
  a whole program: it is compiled as it stands, at namespace scope.
* So is a block marked `<!-- docs-test: namespace-scope -->`: functions,
  types, declarations.
* Any other block is a fragment: its statements become the body of
      cudyn::Result<void> docs_block() { <context> <block> return {}; }
  so CUDYN_TRY and CUDYN_TRY_ASSIGN work as they would in the reader's code.
  Preprocessor lines (#include ...) of a fragment are moved above the function.

Markup: HTML comments, which rendered Markdown does not show, right before
the fence (only blank lines or other docs-test comments in between):

  <!-- docs-test: skip REASON -->
      Not compiled (shell, pseudo-code); REASON is required and printed.
  <!-- docs-test: returns int -->
      The fragment's function returns int instead: a block written as the
      body of main (`return 1;` on an error).
  <!-- docs-test: namespace-scope -->
      See above.
  <!-- docs-test: requires mpi.h -->
      The block needs a header of an optional dependency: it is compiled
      where the checker is told that header is there (--have mpi.h, its
      folder given with --isystem), and skipped, saying so, elsewhere.
  <!-- docs-test: context
  std::size_t n = 1024;
  std::vector<float> host_vector(n);
  -->
      Declarations the block assumes, compiled just before it (inside the
      function for a fragment, at namespace scope otherwise).

A docs-test comment that is not followed by a C++ block, an unknown keyword,
a keyword given twice and a skip without a reason are errors: stale markup
must not hide a block.

Diagnostics: each translation unit carries #line directives, so the
compiler's errors name the Markdown file and line themselves
(README.md:97:5: error: ...). Warnings are not enabled: a fragment
legitimately leaves variables unused. When the headers alone do not compile,
that is reported once and no block is checked.
"""

import argparse
import concurrent.futures
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional

CPP_LANGUAGES = {"cpp", "c++"}

HARNESS_INCLUDES = [
    "<cudyn/cudyn.hpp>",
    "<cstddef>",
    "<cstdint>",
    "<cstdio>",
    "<string>",
    "<utility>",
    "<vector>",
]

DIRECTIVE_START = re.compile(r"^\s*<!--\s*docs-test:\s*(.*)$")
FENCE_OPEN = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([^\s`]*)")
DEFINES_MAIN = re.compile(r"^\s*(?:int|auto)\s+main\s*\(", re.MULTILINE)
KNOWN_KEYWORDS = ("skip", "context", "returns", "namespace-scope", "requires")


@dataclass
class Directive:
    keyword: str
    argument: str  # the text after the keyword, up to -->
    line: int  # 1-based line of the <!-- in the Markdown
    argument_line: int  # 1-based line where `argument` starts


@dataclass
class Block:
    path: str  # as shown in messages (relative to the root where possible)
    line: int  # 1-based line of the opening fence
    code: List[str]  # the block's lines, fence indentation removed
    directives: List[Directive] = field(default_factory=list)

    @property
    def first_code_line(self) -> int:
        return self.line + 1

    def directive(self, keyword: str) -> Optional[Directive]:
        for d in self.directives:
            if d.keyword == keyword:
                return d
        return None


@dataclass
class MarkupError:
    path: str
    line: int
    message: str


def parse_markdown(text: str, path: str):
    """Returns (C++ blocks, markup errors) of one Markdown file."""
    lines = text.split("\n")
    blocks: List[Block] = []
    errors: List[MarkupError] = []
    pending: List[Directive] = []  # docs-test comments waiting for their fence
    i = 0
    while i < len(lines):
        line = lines[i]
        directive_match = DIRECTIVE_START.match(line)
        fence_match = FENCE_OPEN.match(line)
        if directive_match:
            start = i
            body = directive_match.group(1)
            # The comment runs to the first -->, possibly lines later.
            collected = []
            while "-->" not in body:
                collected.append(body)
                i += 1
                if i >= len(lines):
                    errors.append(MarkupError(path, start + 1, "docs-test comment never closed with -->"))
                    return blocks, errors
                body = lines[i]
            collected.append(body[: body.index("-->")])
            first = collected[0].strip()
            keyword, rest = (first.split(None, 1) + ["", ""])[:2]
            if keyword not in KNOWN_KEYWORDS:
                errors.append(MarkupError(path, start + 1,
                                          "unknown docs-test keyword '%s' (known: %s)"
                                          % (keyword, ", ".join(KNOWN_KEYWORDS))))
            else:
                # A context's declarations may begin on the comment's own line
                # or on the next; either way each keeps its Markdown line.
                if rest.strip():
                    argument_lines = [rest] + collected[1:]
                    argument_line = start + 1
                else:
                    argument_lines = collected[1:]
                    argument_line = start + 2
                argument = "\n".join(argument_lines)
                if keyword != "context":
                    argument = " ".join(argument.split())
                pending.append(Directive(keyword, argument, start + 1, argument_line))
            i += 1
            continue
        if fence_match:
            indent = len(fence_match.group(1))
            fence = fence_match.group(2)
            language = fence_match.group(3).lower()
            start = i
            code = []
            i += 1
            closed = False
            while i < len(lines):
                candidate = lines[i]
                stripped = candidate.strip()
                if stripped.startswith(fence[0] * len(fence)) and set(stripped) == {fence[0]}:
                    closed = True
                    break
                # Remove the fence's own indentation, as CommonMark does.
                removable = len(candidate) - len(candidate.lstrip(" "))
                code.append(candidate[min(indent, removable):])
                i += 1
            i += 1  # past the closing fence
            if language in CPP_LANGUAGES:
                if not closed:
                    errors.append(MarkupError(path, start + 1, "C++ block never closed"))
                blocks.append(Block(path, start + 1, code, pending))
            elif pending:
                errors.append(MarkupError(path, pending[0].line,
                                          "docs-test comment precedes a '%s' block, not a C++ one"
                                          % (language or "plain")))
            pending = []
            continue
        if line.strip() and pending:
            errors.append(MarkupError(path, pending[0].line, "docs-test comment is not followed by a C++ block"))
            pending = []
        i += 1
    if pending:
        errors.append(MarkupError(path, pending[0].line, "docs-test comment is not followed by a C++ block"))
    for block in blocks:
        skip = block.directive("skip")
        if skip is not None and not skip.argument:
            errors.append(MarkupError(path, skip.line, "docs-test: skip needs a reason"))
        requires = block.directive("requires")
        if requires is not None and not requires.argument:
            errors.append(MarkupError(path, requires.line, "docs-test: requires needs a header"))
        returns = block.directive("returns")
        if returns is not None and not returns.argument:
            errors.append(MarkupError(path, returns.line, "docs-test: returns needs a type"))
        if returns is not None and is_namespace_scope(block):
            errors.append(MarkupError(path, returns.line, "docs-test: returns is for fragments, this block is not one"))
        keywords = [d.keyword for d in block.directives]
        for d in block.directives:
            if keywords.count(d.keyword) > 1:
                # Only the first would count: say so instead of ignoring one.
                errors.append(MarkupError(path, d.line, "docs-test: %s given twice for one block" % d.keyword))
                break
    return blocks, errors


def c_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def split_preprocessor(lines: List[str]):
    """Separates preprocessor lines (with their backslash continuations) from
    the rest; each returned chunk is (index of its first line, lines). The
    rest keeps its length: moved lines become blank, so line numbers hold."""
    moved = []
    kept = []
    i = 0
    while i < len(lines):
        if lines[i].lstrip().startswith("#"):
            first = i
            chunk = [lines[i]]
            while chunk[-1].rstrip().endswith("\\") and i + 1 < len(lines):
                i += 1
                chunk.append(lines[i])
            moved.append((first, chunk))
            kept.extend([""] * len(chunk))
        else:
            kept.append(lines[i])
        i += 1
    return moved, kept


def is_namespace_scope(block: Block) -> bool:
    return block.directive("namespace-scope") is not None or bool(DEFINES_MAIN.search("\n".join(block.code)))


def translation_unit(block: Block) -> str:
    """The source that compiles `block`, with #line directives pointing each
    of the block's lines (and its context's) back into the Markdown."""
    name = c_string(block.path)
    out = ["// generated by tests/docs/check_code_blocks.py from %s:%d" % (block.path, block.line)]
    out += ["#include %s" % header for header in HARNESS_INCLUDES]
    context = block.directive("context")
    context_lines = context.argument.split("\n") if context else []
    context_first = context.argument_line if context else 0

    if is_namespace_scope(block):
        if context:
            out.append("#line %d %s" % (context_first, name))
            out += context_lines
        out.append("#line %d %s" % (block.first_code_line, name))
        out += block.code
        return "\n".join(out) + "\n"

    # A fragment: #include and friends cannot live inside a function.
    context_moved, context_kept = split_preprocessor(context_lines)
    code_moved, code_kept = split_preprocessor(block.code)
    for first, chunk in context_moved:
        out.append("#line %d %s" % (context_first + first, name))
        out += chunk
    for first, chunk in code_moved:
        out.append("#line %d %s" % (block.first_code_line + first, name))
        out += chunk
    returns = block.directive("returns")
    return_type = returns.argument if returns else "cudyn::Result<void>"
    out.append("[[maybe_unused]] static %s docs_block() {" % return_type)
    if context:
        out.append("#line %d %s" % (context_first, name))
        out += context_kept
    out.append("#line %d %s" % (block.first_code_line, name))
    out += code_kept
    # Value-initialised success: Result<void>{} is ok(), int{} is 0.
    out.append("return {};")
    out.append("}")
    return "\n".join(out) + "\n"


@dataclass
class Outcome:
    block: Block
    status: str  # PASS, FAIL, SKIP
    detail: str = ""  # compiler output, or the skip reason


def compile_source(text: str, source: Path, compiler: List[str], flags: List[str], root: Path) -> Optional[str]:
    """None when `text` compiles, else the compiler's output."""
    source.write_text(text, encoding="utf-8")
    try:
        # From the root, where the #line paths lead, so that the compiler can
        # quote the Markdown line it complains about.
        result = subprocess.run(compiler + flags + ["-fsyntax-only", str(source)], cwd=str(root),
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                universal_newlines=True, errors="replace")
    except OSError as error:
        return "cannot run %s: %s" % (compiler[0], error)
    if result.returncode != 0:
        return result.stdout.rstrip() or "compiler exit status %d" % result.returncode
    return None


def compile_block(block: Block, compiler: List[str], flags: List[str], root: Path, directory: Path,
                  index: int) -> Outcome:
    stem = re.sub(r"[^A-Za-z0-9]+", "_", block.path).strip("_")
    source = directory / ("%03d_%s_L%d.cpp" % (index, stem, block.line))
    errors = compile_source(translation_unit(block), source, compiler, flags, root)
    return Outcome(block, "PASS") if errors is None else Outcome(block, "FAIL", errors)


def harness_alone() -> str:
    return "".join("#include %s\n" % header for header in HARNESS_INCLUDES)


def first_error(output: str) -> str:
    for line in output.splitlines():
        if "error" in line:
            return line.strip()
    lines = output.strip().splitlines()
    return lines[0] if lines else ""


def main(argv: List[str]) -> int:
    if "--" in argv:
        split = argv.index("--")
        own, compiler = argv[:split], argv[split + 1:]
    else:
        own, compiler = argv, []
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("markdown", nargs="*", help="files to check (default: ROOT/README.md, ROOT/docs/**/*.md)")
    parser.add_argument("--root", default=".", help="the repository (paths are shown relative to it)")
    parser.add_argument("--std", default="c++17", help="the build's cpp_std ('none': pass no -std)")
    parser.add_argument("-I", dest="include", action="append", default=[], help="include folder")
    parser.add_argument("--isystem", action="append", default=[], help="system include folder (CUDA)")
    parser.add_argument("--have", action="append", default=[],
                        help="a header that blocks marked 'requires' may use (found through --isystem)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="compilers run at once")
    parser.add_argument("--keep", help="write the translation units here instead of a temporary folder")
    options = parser.parse_args(own)
    if not compiler:
        parser.error("no compiler: pass it after --, e.g. -- c++")

    root = Path(options.root).resolve()
    if options.markdown:
        files = [Path(f).resolve() for f in options.markdown]
    else:
        files = [root / "README.md"] + sorted((root / "docs").glob("**/*.md"))

    def shown(path: Path) -> str:
        try:
            return path.relative_to(root).as_posix()
        except ValueError:
            return str(path)

    blocks: List[Block] = []
    markup_errors: List[MarkupError] = []
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as error:
            markup_errors.append(MarkupError(shown(path), 0, "cannot read: %s" % error))
            continue
        found, errors = parse_markdown(text, shown(path))
        blocks += found
        markup_errors += errors

    flags = [] if options.std in ("", "none") else ["-std=" + options.std]
    flags += ["-I" + d for d in options.include]
    for d in options.isystem:
        flags += ["-isystem", d]

    started = time.monotonic()
    outcomes: List[Optional[Outcome]] = [None] * len(blocks)
    with tempfile.TemporaryDirectory(prefix="cudyn-docs-") as temporary:
        directory = Path(options.keep) if options.keep else Path(temporary)
        directory.mkdir(parents=True, exist_ok=True)
        # Compilers are separate processes: threads are enough to overlap them.
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, options.jobs)) as pool:
            # The headers alone, alongside the blocks: when they fail, every
            # block fails with the same errors, which are then shown once.
            harness = pool.submit(compile_source, harness_alone(), directory / "harness.cpp", compiler, flags, root)
            futures = {}
            for index, block in enumerate(blocks):
                skip = block.directive("skip")
                requires = block.directive("requires")
                if skip is not None:
                    outcomes[index] = Outcome(block, "SKIP", skip.argument)
                elif requires is not None and requires.argument not in options.have:
                    outcomes[index] = Outcome(block, "SKIP", "needs %s, which this build does not have"
                                              % requires.argument)
                else:
                    futures[pool.submit(compile_block, block, compiler, flags, root, directory, index)] = index
            for future in concurrent.futures.as_completed(futures):
                outcomes[futures[future]] = future.result()
            harness_errors = harness.result()
    elapsed = time.monotonic() - started

    for error in markup_errors:
        print("MARKUP %s:%d: %s" % (error.path, error.line, error.message))
    if harness_errors is not None:
        print("FAIL the harness alone (%s) does not compile, so no block can; blocks not checked:"
              % " ".join(HARNESS_INCLUDES))
        for line in harness_errors.splitlines():
            print("    " + line)
        print("\n%d C++ blocks in %d files; %d markup errors (%.1f s)"
              % (len(blocks), len(files), len(markup_errors), elapsed))
        return 1
    for outcome in outcomes:
        block = outcome.block
        kind = "namespace scope" if is_namespace_scope(block) else "fragment"
        if outcome.status == "SKIP":
            print("SKIP %s:%d: %s" % (block.path, block.line, outcome.detail))
        elif outcome.status == "PASS":
            print("PASS %s:%d (%s)" % (block.path, block.line, kind))
        else:
            print("FAIL %s:%d (%s):" % (block.path, block.line, kind))
            for line in outcome.detail.splitlines():
                print("    " + line)

    failed = [o for o in outcomes if o.status == "FAIL"]
    counts = {s: sum(1 for o in outcomes if o.status == s) for s in ("PASS", "FAIL", "SKIP")}
    print("\n%d C++ blocks in %d files: %d passed, %d failed, %d skipped; %d markup errors (%.1f s)"
          % (len(blocks), len(files), counts["PASS"], counts["FAIL"], counts["SKIP"], len(markup_errors), elapsed))
    if failed:
        # One line per failure, to fix them in order without the full logs.
        print("failed blocks, first error of each:")
        for outcome in failed:
            print("  block at %s:%d: %s" % (outcome.block.path, outcome.block.line, first_error(outcome.detail)))
    return 1 if failed or markup_errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
