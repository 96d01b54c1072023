#!/usr/bin/env bash
# Installs cudyn, with its fake drivers (-Dfake_driver=enabled), into a
# temporary prefix and builds and runs the two consumer projects
# (tests/consumers/meson, tests/consumers/cmake) against it, the way another
# project would take the library:
#   1. the CPU-only CI template a user copies (docs/guide/testing-without-
#      a-gpu.md, scripts/run_ci_template.py): its install is the one below,
#      its installed cudyn-info runs with no LD_LIBRARY_PATH, and it builds
#      the Meson consumer through pkg-config and runs its tests
#   2. the same Meson consumer with cudyn as a subproject (subprojects/cudyn
#      -> this checkout, --force-fallback-for=cudyn)
#   2b. the installed libcudyn against the committed ABI baseline
#      (scripts/check_abi.sh, abidw/abidiff), and a program built against
#      the released headers (tests/abi/<SONAME>.commit) run against it
#   3. CMake consumer through find_package(cudyn CONFIG) (CMAKE_PREFIX_PATH)
#   4. CMake consumer linking cudyn::cudyn_static from a copy of the install
#      staged elsewhere (meson install --destdir): the CMake package, and the
#      fake drivers' location it gives, are relocatable
# Each builds two programs: consumer (state loaded on the installed emulated
# fake driver, 1 MiB allocated and freed through cudyn::call_driver) and a
# small downstream program's own tests (tests/consumers/arena: device memory,
# VMM growth, sharing between two processes, a fault injected half-way, an
# old driver, the stub, no driver), which run through `meson test` / `ctest`
# on the fake drivers the package names (installed, or the subproject's).
# Exits non-zero on any failure.
#
#   scripts/check_consumers.sh [BUILD_DIR]     BUILD_DIR: unused (the fakes
#                                              come from the install); kept for callers
#
# Environment: CXX (compiler for every build), CUDYN_CONSUMERS_KEEP=1 keeps the
# temporary folder.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
work="$(mktemp -d "${TMPDIR:-/tmp}/cudyn-consumers.XXXXXX")"
if [ "${CUDYN_CONSUMERS_KEEP:-0}" = 1 ]; then
    echo "consumers: keeping $work"
else
    trap 'rm -rf "$work"' EXIT
fi
prefix="$work/prefix"

step() { echo "=== consumers: $*"; }
# Runs a command with its output in a log, shown only when it fails.
quiet() {
    local log="$work/last.log"
    if ! "$@" >"$log" 2>&1; then
        tail -n 40 "$log" >&2
        echo "consumers: FAILED: $*" >&2
        return 1
    fi
}

step "the CPU-only CI template of docs/guide/testing-without-a-gpu.md, as written"
# Its install (with the fakes, prefix $prefix, libdir lib) is the one every
# step below uses; its last step builds tests/consumers/meson through
# pkg-config and runs its tests on the installed fakes.
cp -r "$here/tests/consumers" "$work/consumers-template"
quiet python3 "$here/scripts/run_ci_template.py" "$here/docs/guide/testing-without-a-gpu.md" --source "$here" \
    --project "$work/consumers-template/meson" --prefix "$prefix" --build "$work/cudyn-build" \
    --extra-setup-option=-Dpython=disabled
grep -E '^(Ok|Fail|Skipped):' "$work/last.log" | tr '\n' ' '
echo
quiet meson install -C "$work/cudyn-build" --destdir "$work/moved"  # a second, relocated copy

pc_file="$(find "$prefix" -name cudyn.pc -print -quit)"
cmake_config="$(find "$prefix" -name cudynConfig.cmake -print -quit)"
libdir="$(dirname "$(dirname "$pc_file")")"
fake_dir="$libdir/cudyn/fake"
for installed in "$prefix/include/cudyn/cudyn.hpp" "$prefix/include/cudyn/loader/driver_symbols.def" "$pc_file" \
                 "$cmake_config" "$(dirname "$cmake_config")/cudynConfigVersion.cmake" \
                 "$prefix/include/cudyn/fake/fakecuda_probe.h"; do
    [ -f "$installed" ] || { echo "consumers: not installed: $installed" >&2; exit 1; }
done
for variant in emulated cuda12 cuda11 legacy stub broken; do
    [ -f "$fake_dir/$variant/libcuda.so.1" ] || { echo "consumers: not installed: $fake_dir/$variant/libcuda.so.1" >&2; exit 1; }
done
version="$(PKG_CONFIG_PATH="$(dirname "$pc_file")" pkg-config --modversion cudyn)"
ls "$libdir/libcudyn.so.${version%.*}" "$libdir/libcudyn.so.$version" "$libdir"/libcudyn.a >/dev/null
[ -f "$prefix/share/doc/cudyn/docs/guide/testing-without-a-gpu.md" ] || { echo "consumers: the guide is not installed" >&2; exit 1; }
pc_fake_dir="$(PKG_CONFIG_PATH="$(dirname "$pc_file")" pkg-config --variable=fake_driver_dir cudyn)"
[ "$pc_fake_dir" -ef "$fake_dir" ] || { echo "consumers: cudyn.pc names fake_driver_dir=$pc_fake_dir, not $fake_dir" >&2; exit 1; }

# consumer NAME EXECUTABLE LIBRARY_FOLDER FAKE_DIR: the program on the emulated fake.
run_consumer() {
    step "run $1 (expect loaded)"
    env CUDYN_DRIVER_PATH="$4/emulated/libcuda.so.1" FAKECUDA_DEVICES=1 \
        LD_LIBRARY_PATH="$3${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$2" --expect loaded
}
# arena_tests NAME LIBRARY_FOLDER COMMAND...: the downstream program's own tests.
arena_tests() {
    local name="$1" library_folder="$2"
    shift 2
    step "$name: the downstream program's tests on the fake drivers"
    quiet env LD_LIBRARY_PATH="$library_folder${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$@"
    grep -E '^(Ok|Fail|Skipped):|tests passed|tests failed' "$work/last.log" | tr '\n' ' '
    echo
}

step "installed cudyn-info, with no environment but the driver (its rpath finds libcudyn)"
quiet env -u LD_LIBRARY_PATH CUDYN_DRIVER_PATH="$fake_dir/emulated/libcuda.so.1" "$prefix/bin/cudyn-info"
grep -q 'state           loaded' "$work/last.log" || { cat "$work/last.log" >&2; exit 1; }
quiet env -u LD_LIBRARY_PATH "$prefix/bin/cudyn-info" --version
grep -qx "cudyn-info $version (libcudyn $version)" "$work/last.log" || { cat "$work/last.log" >&2; exit 1; }
step "installed cudyn-info explains each unusable state and names the installed fake for a dry run"
quiet env -u LD_LIBRARY_PATH python3 "$here/scripts/check_info_report.py" "$prefix/bin/cudyn-info" "$fake_dir"

step "meson consumer via pkg-config (the CI template's build)"
# meson test built what the tests need; the consumer program too.
quiet meson compile -C "$work/consumers-template/meson/build"
run_consumer meson-pkg-config "$work/consumers-template/meson/build/consumer" "$libdir" "$fake_dir"

step "the installed libcudyn against the committed ABI baseline (scripts/check_abi.sh)"
# Its types are described from the headers it was compiled from: the debug
# information names the source tree's include/.
if command -v abidw >/dev/null 2>&1; then
    abi_start=$SECONDS
    quiet bash "$here/scripts/check_abi.sh" "$libdir/libcudyn.so.$version" "$here/include"
    echo "$(tail -n 1 "$work/last.log") ($((SECONDS - abi_start)) s)"
else
    echo "consumers: abidw not found (apt-get install abigail-tools): the ABI check did not run" >&2
    exit 1
fi

step "a program built against the released headers runs against the installed libcudyn"
# The released tree is the commit named next to the ABI baseline of this
# SONAME: its include/ is what programs built for the release compiled in,
# inline code that calls library functions by name (some in cudyn::detail,
# which the ABI check lets go of). Needs the clone's history.
release_commit_file="$here/tests/abi/libcudyn.so.${version%.*}.commit"
if [ -f "$release_commit_file" ]; then
    release_commit="$(tr -d '[:space:]' <"$release_commit_file")"
    if git -C "$here" cat-file -e "$release_commit^{tree}" 2>/dev/null; then
        mkdir "$work/released"
        git -C "$here" archive "$release_commit" include | tar -x -C "$work/released"
        # The released include/ first: every header it includes is found there,
        # the installed package's flags only add what it needs besides (cuda.h).
        # shellcheck disable=SC2046  # one argument per flag
        quiet "${CXX:-c++}" -std=c++17 -O2 -I"$work/released/include" \
            $(PKG_CONFIG_PATH="$(dirname "$pc_file")" pkg-config --cflags cudyn) \
            "$here/tests/consumers/released/released_headers.cpp" -o "$work/released/released_headers" \
            -L"$libdir" -lcudyn
        quiet env CUDYN_DRIVER_PATH="$fake_dir/emulated/libcuda.so.1" FAKECUDA_DEVICES=1 LD_LIBRARY_PATH="$libdir" \
            "$work/released/released_headers"
        tail -n 1 "$work/last.log"
    else
        echo "consumers: the release's commit ${release_commit:0:12} is not in this clone (shallow?): not checked" >&2
    fi
else
    echo "consumers: no release commit for libcudyn.so.${version%.*} ($release_commit_file): nothing released to check against"
fi

step "meson consumer with cudyn as a subproject"
# The whole consumers folder, so meson/ still finds ../consumer_main.cpp.
cp -r "$here/tests/consumers" "$work/consumers-sub-src"
mkdir "$work/consumers-sub-src/meson/subprojects"
ln -s "$here" "$work/consumers-sub-src/meson/subprojects/cudyn"
quiet meson setup "$work/meson-sub" "$work/consumers-sub-src/meson" --force-fallback-for=cudyn
quiet meson compile -C "$work/meson-sub"
run_consumer meson-subproject "$work/meson-sub/consumer" "$work/meson-sub/subprojects/cudyn" \
    "$work/meson-sub/subprojects/cudyn/tests/fakecuda"
arena_tests meson-subproject "$work/meson-sub/subprojects/cudyn" \
    meson test -C "$work/meson-sub" --suite arena --print-errorlogs

step "cmake consumer via find_package(cudyn CONFIG)"
quiet cmake -S "$here/tests/consumers/cmake" -B "$work/cmake-shared" -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_BUILD_TYPE=Release
quiet cmake --build "$work/cmake-shared"
run_consumer cmake-shared "$work/cmake-shared/consumer" "$libdir" "$fake_dir"
arena_tests cmake-shared "$libdir" ctest --test-dir "$work/cmake-shared" --output-on-failure

step "cmake consumer, static, against the relocated copy"
moved_prefix="$work/moved$prefix"
rm -rf "$prefix.hidden" && mv "$prefix" "$prefix.hidden"  # nothing may still point at the original
quiet cmake -S "$here/tests/consumers/cmake" -B "$work/cmake-static" -DCMAKE_PREFIX_PATH="$moved_prefix" \
    -DCUDYN_CONSUMER_STATIC=ON -DCMAKE_BUILD_TYPE=Release
quiet cmake --build "$work/cmake-static"
moved_fake_dir="$work/moved${fake_dir}"
run_consumer cmake-static "$work/cmake-static/consumer" /nonexistent "$moved_fake_dir"
arena_tests cmake-static /nonexistent ctest --test-dir "$work/cmake-static" --output-on-failure
mv "$prefix.hidden" "$prefix"

step "all consumers passed"
