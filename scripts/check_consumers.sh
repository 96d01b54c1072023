#!/usr/bin/env bash
# Installs cudyn into a temporary prefix and builds and runs the two consumer
# projects (tests/consumers/meson, tests/consumers/cmake) against it, the way
# another project would take the library:
#   1. Meson consumer through pkg-config (PKG_CONFIG_PATH at the prefix)
#   2. the same Meson consumer with cudyn as a subproject (subprojects/cudyn
#      -> this checkout, --force-fallback-for=cudyn)
#   3. CMake consumer through find_package(cudyn CONFIG) (CMAKE_PREFIX_PATH)
#   4. CMake consumer linking cudyn::cudyn_static from a copy of the install
#      staged elsewhere (meson install --destdir): the CMake package is
#      relocatable
# Each consumer runs on the emulated fake driver when it is built
# (<build>/tests/fakecuda/emulated/libcuda.so.1: state loaded, 1 MiB
# allocated and freed through cudyn::call_driver), else with an absent driver
# (state not_found). Exits non-zero on any failure.
#
#   scripts/check_consumers.sh [BUILD_DIR]     BUILD_DIR: where the fake driver is (default: build)
#
# Environment: CXX (compiler for every build), CUDYN_CONSUMERS_KEEP=1 keeps the
# temporary folder.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="$(cd "${1:-${BUILD_DIR:-$here/build}}" 2>/dev/null && pwd || echo "${1:-$here/build}")"
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

step "build and install cudyn into $prefix"
quiet meson setup "$work/cudyn-build" "$here" -Dprefix="$prefix" -Dtests=disabled -Dbench=disabled
quiet meson compile -C "$work/cudyn-build"
quiet meson install -C "$work/cudyn-build"
quiet meson install -C "$work/cudyn-build" --destdir "$work/moved"  # a second, relocated copy

pc_file="$(find "$prefix" -name cudyn.pc -print -quit)"
cmake_config="$(find "$prefix" -name cudynConfig.cmake -print -quit)"
for installed in "$prefix/include/cudyn/cudyn.hpp" "$prefix/include/cudyn/loader/driver_symbols.def" "$pc_file" \
                 "$cmake_config" "$(dirname "$cmake_config")/cudynConfigVersion.cmake"; do
    [ -f "$installed" ] || { echo "consumers: not installed: $installed" >&2; exit 1; }
done
libdir="$(dirname "$(dirname "$pc_file")")"
ls "$libdir"/libcudyn.so* "$libdir"/libcudyn.a >/dev/null

fake="$build_dir/tests/fakecuda/emulated/libcuda.so.1"
if [ -f "$fake" ]; then
    driver_env=(CUDYN_DRIVER_PATH="$fake" FAKECUDA_DEVICES=1)
    expect=loaded
else
    echo "consumers: $fake not built: running with no driver, expecting not_found"
    driver_env=(CUDYN_DRIVER_PATH=/nonexistent/cudyn-consumers/libcuda.so.1)
    expect=not_found
fi

run_consumer() {  # name, executable, library folder
    step "run $1 (expect $expect)"
    env "${driver_env[@]}" LD_LIBRARY_PATH="$3${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$2" --expect "$expect"
}

step "installed cudyn-info"
quiet env "${driver_env[@]}" LD_LIBRARY_PATH="$libdir" "$prefix/bin/cudyn-info"

step "meson consumer via pkg-config"
quiet env PKG_CONFIG_PATH="$(dirname "$pc_file")" meson setup "$work/meson-pc" "$here/tests/consumers/meson" \
    --wrap-mode=nofallback
quiet meson compile -C "$work/meson-pc"
run_consumer meson-pkg-config "$work/meson-pc/consumer" "$libdir"

step "meson consumer with cudyn as a subproject"
# The whole consumers folder, so meson/ still finds ../consumer_main.cpp.
cp -r "$here/tests/consumers" "$work/consumers-sub-src"
mkdir "$work/consumers-sub-src/meson/subprojects"
ln -s "$here" "$work/consumers-sub-src/meson/subprojects/cudyn"
quiet meson setup "$work/meson-sub" "$work/consumers-sub-src/meson" --force-fallback-for=cudyn
quiet meson compile -C "$work/meson-sub"
run_consumer meson-subproject "$work/meson-sub/consumer" "$work/meson-sub/subprojects/cudyn"

step "cmake consumer via find_package(cudyn CONFIG)"
quiet cmake -S "$here/tests/consumers/cmake" -B "$work/cmake-shared" -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_BUILD_TYPE=Release
quiet cmake --build "$work/cmake-shared"
run_consumer cmake-shared "$work/cmake-shared/consumer" "$libdir"

step "cmake consumer, static, against the relocated copy"
moved_prefix="$work/moved$prefix"
rm -rf "$prefix.hidden" && mv "$prefix" "$prefix.hidden"  # nothing may still point at the original
quiet cmake -S "$here/tests/consumers/cmake" -B "$work/cmake-static" -DCMAKE_PREFIX_PATH="$moved_prefix" \
    -DCUDYN_CONSUMER_STATIC=ON -DCMAKE_BUILD_TYPE=Release
quiet cmake --build "$work/cmake-static"
run_consumer cmake-static "$work/cmake-static/consumer" /nonexistent
mv "$prefix.hidden" "$prefix"

step "all consumers passed"
