#!/usr/bin/env python3
"""Self-test of check_code_blocks.py: a checker that passes everything would
let the README rot unnoticed, so this proves it fails a broken block, names
the right Markdown line, honours skips and rejects bad markup.

    test_check_code_blocks.py [the checker's options] -- COMPILER [ARGS...]

The markup rules run in-process on small strings (no compiler); then the
checker runs, with the same compiler and options, on fixtures/sample.md, once
against a stand-in <cudyn/cudyn.hpp> (fixtures/include: this tests the
checker, not the library, so it must not fail while the real headers change)
and once against one that does not compile (fixtures/broken-include). Exit
status 0 when every expectation holds, 1 otherwise.
"""

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.dont_write_bytecode = True  # no __pycache__ left in the source tree
import check_code_blocks as checker  # noqa: E402  (needs the path above)

FIXTURE = HERE / "fixtures" / "sample.md"
failures = []


def expect(condition, message):
    if not condition:
        failures.append(message)


def check_markup_rules():
    fence = "```"

    def errors_of(text):
        return [e.message for e in checker.parse_markdown(text, "t.md")[1]]

    blocks, errors = checker.parse_markdown(
        "<!-- docs-test: skip -->\n%scpp\nx\n%s\n" % (fence, fence), "t.md")
    expect(any("needs a reason" in e.message for e in errors), "a skip without a reason is accepted")

    expect(any("unknown docs-test keyword" in e for e in errors_of(
        "<!-- docs-test: skipp typo -->\n%scpp\nx\n%s\n" % (fence, fence))),
        "an unknown keyword is accepted")
    expect(any("not followed by a C++ block" in e for e in errors_of(
        "<!-- docs-test: skip reason -->\nsome prose\n%scpp\nx\n%s\n" % (fence, fence))),
        "a comment separated from its block by prose is accepted")
    expect(any("not a C++ one" in e for e in errors_of(
        "<!-- docs-test: skip reason -->\n%ssh\nls\n%s\n" % (fence, fence))),
        "a comment before a shell block is accepted")
    expect(any("never closed" in e for e in errors_of("<!-- docs-test: context\nint n = 1;\n")),
           "an unclosed comment is accepted")
    expect(any("requires needs a header" in e for e in errors_of(
        "<!-- docs-test: requires -->\n%scpp\nx\n%s\n" % (fence, fence))),
        "a requires without a header is accepted")
    expect(any("given twice" in e for e in errors_of(
        "<!-- docs-test: context int a = 1; -->\n<!-- docs-test: context int b = 2; -->\n%scpp\nx\n%s\n"
        % (fence, fence))), "a second context is silently ignored")
    expect(errors_of("<!-- docs-test: skip reason -->\n\n%sC++ extra words\nx\n%s\n" % (fence, fence)) == [],
           "a blank line between comment and fence, or an info string with more words, is rejected")

    # Longer fences may hold shorter ones; `~~~` fences are fences too.
    blocks, errors = checker.parse_markdown(
        "````cpp\n%s\ninner\n````\n~~~c++\ntilde\n~~~\n" % fence, "t.md")
    expect(errors == [] and [b.code for b in blocks] == [[fence, "inner"], ["tilde"]],
           "nested or tilde fences are misread: %r" % [b.code for b in blocks])

    # Line mapping: the fragment's #include is moved above the function and
    # both it and the statements keep their Markdown line numbers.
    text = ("<!-- docs-test: context\nint n = 1;\n-->\n"
            "%scpp\n#include <map>\nint y = n;\n%s\n" % (fence, fence))
    blocks, errors = checker.parse_markdown(text, "t.md")
    unit = checker.translation_unit(blocks[0]).splitlines()
    expect(not checker.is_namespace_scope(blocks[0]), "a fragment is taken for namespace scope")
    include_at = unit.index("#include <map>")
    body_at = unit.index("int y = n;")
    function_at = next(i for i, line in enumerate(unit) if "docs_block()" in line)
    expect(unit[include_at - 1] == '#line 5 "t.md"' and include_at < function_at,
           "the fragment's #include is not moved out with its line: %r" % unit)
    expect(unit[body_at - 2] == '#line 5 "t.md"' and unit[body_at - 1] == "",
           "the fragment's statements lost their line numbers: %r" % unit)
    expect(unit.index("int n = 1;") > function_at and '#line 2 "t.md"' in unit,
           "the context is not in the function at its own line: %r" % unit)


def run_checker(options, include, extra=()):
    """The checker's output and exit status on the fixture, with `include`
    searched before the caller's include folders, and `extra` options."""
    split = options.index("--")
    command = ([sys.executable, str(HERE / "check_code_blocks.py"), "-I", str(include)] + list(extra)
               + options[:split] + [str(FIXTURE)] + options[split:])
    result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
    print(result.stdout)
    return result.stdout, result.returncode


def check_fixture(options):
    lines = FIXTURE.read_text(encoding="utf-8").split("\n")

    def fence_line(marker):
        """1-based line of the fence opening the block that holds `marker`."""
        at = next(i for i, line in enumerate(lines) if "marker: " + marker in line)
        while not lines[at].lstrip().startswith(("```", "~~~")):
            at -= 1
        return at + 1

    shown = FIXTURE.relative_to(HERE.parent.parent).as_posix()  # relative to the repository
    output, status = run_checker(options, HERE / "fixtures" / "include")
    expect(status == 1, "the checker exits %d on a broken block, not 1" % status)

    broken = fence_line("broken")
    expect("FAIL %s:%d" % (shown, broken) in output, "the broken block at line %d is not reported" % broken)
    expect("%s:%d:" % (shown, broken + 2) in output,
           "the compiler's error does not name line %d of the Markdown" % (broken + 2))
    expect(output.count("FAIL ") == 1, "blocks that compile were reported as failing")
    for marker in ("fragment-with-context", "whole-program", "namespace-scope", "returns-int"):
        expect("PASS %s:%d" % (shown, fence_line(marker)) in output, "the '%s' block did not pass" % marker)
    expect("SKIP %s:%d: pseudo-code: the shape of a call, not C++" % (shown, fence_line("skipped")) in output,
           "the skipped block is not listed with its reason")
    expect("SKIP %s:%d: needs optional_dependency.h, which this build does not have" % (shown, fence_line("requires"))
           in output, "a block whose header is not there is not skipped with the reason")
    expect("4 passed, 1 failed, 2 skipped" in output, "the shell block was counted, or a block was missed")

    # The same block where the build has the header: compiled.
    output, status = run_checker(options, HERE / "fixtures" / "include",
                                 ["--have", "optional_dependency.h", "--isystem", str(HERE / "fixtures" / "optional")])
    expect("PASS %s:%d" % (shown, fence_line("requires")) in output,
           "a block whose header is there is not compiled")
    expect("5 passed, 1 failed, 1 skipped" in output, "--have changed more than the block that requires it")

    # Headers that do not compile: said once, not as a failure of every block.
    output, status = run_checker(options, HERE / "fixtures" / "broken-include")
    expect(status == 1, "the checker exits %d when the headers do not compile, not 1" % status)
    expect("the harness alone" in output and "marker: broken header" in output,
           "headers that do not compile are not reported")
    expect("FAIL %s" % shown not in output, "headers that do not compile are reported once per block")


def main(options):
    if "--" not in options:
        print("usage: test_check_code_blocks.py [checker options] -- COMPILER [ARGS...]", file=sys.stderr)
        return 1
    check_markup_rules()
    check_fixture(options)
    for failure in failures:
        print("SELF-TEST FAILED: " + failure)
    if not failures:
        print("self-test passed: the checker fails broken blocks at the right line and honours its markup")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
