#!/usr/bin/env bash
# The portable release, made and proven: .ci/run's last stage.
#
#   scripts/check_release.sh [OUT_DIR [BUILD_DIR]]
#   CUDYN_RELEASE_CHECKS=debian scripts/check_release.sh [OUT_DIR]   the debian-* checks alone
#
# OUT_DIR (default: build-portable) gets scripts/release's tarball and its
# Debian 11 (bullseye) root; BUILD_DIR, a build of this machine (default:
# build, where .ci/run's first stage built), is the gate's negative control.
# Checks, in order:
#   release               scripts/release: built in the bullseye root, every
#                         binary within the symbol floor
#   gate-rejects-host-build   the gate fails BUILD_DIR's libcudyn.so (bookworm's
#                         glibc 2.36 gives dlopen@GLIBC_2.34): it catches what
#                         it is there for (skipped where BUILD_DIR has none)
#   gcc10-build           the project from source with bullseye's g++ 10,
#                         default options and warnings as errors, like .ci/run's
#                         other builds (no TSan test, no gpu suite); its unit
#                         and fake suites then run there under meson test,
#                         whose results go to OUT_DIR/bullseye-gcc10-testlog.json
#   bullseye-*            the tarball unpacked in the root: its cudyn-info (no
#                         LD_LIBRARY_PATH: RUNPATH) and tests/consumers'
#                         program built there through pkg-config, the CMake
#                         package (cudyn::cudyn) and the static library
#                         (cudyn::cudyn_static), each run on the emulated fake
#                         driver that gcc10-build made
#   debian-*              the Debian packages (debian/): built on this machine,
#                         lintian, installed in a fresh Debian 12 root, where
#                         cudyn-info runs from the package and tests/consumers
#                         builds against the packages and runs its tests on
#                         the packaged fakes
#   host-*                the same tarball on this machine (newer glibc): its
#                         cudyn-info, and the consumer built by this machine's
#                         c++ against libcudyn.so and against libcudyn.a; its
#                         own fake drivers (lib/cudyn/fake/): cudyn-info loads
#                         the emulated one, and without a driver names it for a dry run
# Each check is one Meson-style result line in OUT_DIR/testlog.json, so
# scripts/test_summary.py counts them. Exits non-zero when any check failed.
# Needs root (scripts/release).
#
# The check scripts below are single-quoted on purpose (they expand in the
# shell that runs them, inside the root), and the functions run through check.
# shellcheck disable=SC2016,SC2317
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out_dir="${1:-$here/build-portable}"
mkdir -p "$out_dir" && out_dir="$(cd "$out_dir" && pwd)"
host_build="${2:-$here/build}"
root="${CUDYN_RELEASE_ROOT:-$out_dir/bullseye}"
in_root=(bash "$here/scripts/bullseye_root.sh" run "$root")
testlog="$out_dir/testlog.json"
gcc10_testlog="$out_dir/bullseye-gcc10-testlog.json"
logs="$out_dir/check-logs"
rm -rf "$logs" "$testlog" "$gcc10_testlog"
mkdir -p "$logs"
: >"$testlog"
status=0

# record NAME RESULT SECONDS: one line as meson test writes them.
record() {
    printf '{"name": "%s", "suite": ["release"], "result": "%s", "duration": %s}\n' "$1" "$2" "$3" >>"$testlog"
    echo "release check: $2 $1 (${3} s)"
    [ "$2" = OK ] || [ "$2" = SKIP ] || status=1
}
# check NAME CMD...: runs CMD with its output in a log, shown when it fails.
check() {
    local check_name="$1" start=$SECONDS
    shift
    if "$@" >"$logs/$check_name.log" 2>&1; then
        record "$check_name" OK $((SECONDS - start))
    else
        tail -n 40 "$logs/$check_name.log" >&2
        record "$check_name" FAIL $((SECONDS - start))
        return 1
    fi
}

# (c) the Debian packages (debian/): built here (Debian 12) without their
# test suites (the stages before ran the same code's), lintian, then
# installed in a fresh Debian 12 root that has nothing of cudyn but them,
# where cudyn-info runs with no environment and tests/consumers builds against
# them (pkg-config and find_package, no path given) and runs its tests on the
# packaged fakes. The MPI packages are built and checked by lintian, not
# installed there (they would bring Open MPI into the root).
deb_dir="$out_dir/debian"
deb_root="$out_dir/bookworm"
in_deb_root=(env CUDYN_ROOT_SUITE=bookworm bash "$here/scripts/bullseye_root.sh" run "$deb_root")
debian_packages() {
    rm -rf "$deb_dir" && mkdir -p "$deb_dir/cudyn"
    # The checkout's files, not its build folders.
    git -C "$here" ls-files -co --exclude-standard | tar -C "$here" -cf - -T - | tar -C "$deb_dir/cudyn" -xf -
    local profiles=nocheck
    dpkg -s mpi-default-dev >/dev/null 2>&1 || profiles+=,pkg.cudyn.nompi
    (cd "$deb_dir/cudyn" && DEB_BUILD_OPTIONS="nocheck parallel=$(nproc)" dpkg-buildpackage -b -us -uc -P"$profiles")
    ls "$deb_dir"/*.deb
}
debian_lintian() {
    # Errors and warnings fail; each tag let through is explained in debian/*.lintian-overrides.
    lintian --fail-on error,warning "$deb_dir"/*.changes
}
debian_install() {
    CUDYN_ROOT_SUITE=bookworm bash "$here/scripts/bullseye_root.sh" create "$deb_root"
    # A re-run's root: what an earlier run installed goes first.
    "${in_deb_root[@]}" sh -c 'dpkg -l "*cudyn*" 2>/dev/null | awk "/^ii/ { print \$2 }" | xargs -r dpkg --purge'
    rm -rf "$deb_root/work" && mkdir -p "$deb_root/work/debs"
    cp "$deb_dir"/*.deb "$deb_root/work/debs/"
    rm -f "$deb_root"/work/debs/*mpi* "$deb_root"/work/debs/*dbgsym*
    "${in_deb_root[@]}" sh -c 'dpkg -i /work/debs/*.deb'
    cp -r "$here/tests/consumers" "$deb_root/work/consumers"
}
packaged() {
    "${in_deb_root[@]}" bash -euo pipefail -c "$1"
}
debian_checks() {
    if check debian-packages debian_packages; then
        check debian-lintian debian_lintian
        if check debian-install debian_install; then
            check debian-cudyn-info packaged '
                version="$(cudyn-info --version)"
                echo "$version"
                grep -qx "cudyn-info [0-9.]* (libcudyn [0-9.]*)" <<<"$version"
                report="$(cudyn-info)"  # no driver in the root: it says so and exits 0
                echo "$report"
                grep -q "state           not_found" <<<"$report"
                guide=/usr/share/doc/cudyn/docs/guide/testing-without-a-gpu.md
                test -f "$guide" && grep -qF "$guide" <<<"$report"
                fake="$(pkg-config --variable=fake_driver_dir cudyn)/emulated/libcuda.so.1"
                CUDYN_DRIVER_PATH="$fake" cudyn-info --json | grep -q "\"state\": \"loaded\""'
            check debian-consumer-meson packaged '
                cd /work/consumers/meson && rm -rf build
                meson setup build --wrap-mode=nofallback
                meson compile -C build
                meson test -C build --print-errorlogs
                fake="$(pkg-config --variable=fake_driver_dir cudyn)/emulated/libcuda.so.1"
                CUDYN_DRIVER_PATH="$fake" build/consumer --expect loaded'
            check debian-consumer-cmake packaged '
                rm -rf /work/cmake && cmake -S /work/consumers/cmake -B /work/cmake -G Ninja -DCMAKE_BUILD_TYPE=Release
                cmake --build /work/cmake
                ctest --test-dir /work/cmake --output-on-failure'
        fi
    fi
}

# CUDYN_RELEASE_CHECKS=debian: the Debian packages' checks alone.
if [ "${CUDYN_RELEASE_CHECKS:-all}" = debian ]; then
    debian_checks
    python3 "$here/scripts/test_summary.py" "$testlog" || status=1
    exit "$status"
fi

if ! check release bash "$here/scripts/release" "$out_dir"; then
    echo "release checks: no release, nothing else to check" >&2
    exit 1
fi
cat "$out_dir/symbol-floor.txt"
tarball="$(find "$out_dir" -maxdepth 1 -name 'cudyn-*-linux-x86_64-*.tar.gz' -type f | head -n 1)"
release_name="$(basename "$tarball" .tar.gz)"

# The negative control: exit 1 alone could be an unreadable file, so the
# report must name a symbol above the glibc floor.
gate_rejects() {
    local output
    output="$(python3 "$here/scripts/check_symbol_floor.py" "$@")" && { echo "$output"; echo "the gate passed it"; return 1; }
    echo "$output"
    grep -q ': above GLIBC_2.28$' <<<"$output"
}
host_library="$(find "$host_build" -maxdepth 1 -name 'libcudyn.so.*.*.*' -type f 2>/dev/null | head -n 1)"
if [ -n "$host_library" ]; then
    check gate-rejects-host-build gate_rejects "$host_library"
else
    record gate-rejects-host-build SKIP 0
fi

# (b) the project from source with g++ 10, its unit and fake suites.
suites=()
for suite in unit fake-emulated fake-cuda12 fake-cuda11 fake-legacy fake-stub fake-broken nvidia-stub; do
    suites+=(--suite "$suite")
done
gcc10_build() {
    "${in_root[@]}" bash -euo pipefail -c '
        rm -rf /work/build-gcc10
        meson setup /work/build-gcc10 /src/cudyn --werror -Dtsan_test=disabled -Dgpu_tests=disabled
        meson compile -C /work/build-gcc10'
}
if check gcc10-build gcc10_build; then
    "${in_root[@]}" meson test -C /work/build-gcc10 --print-errorlogs --num-processes "$(nproc)" "${suites[@]}" \
        >"$logs/gcc10-tests.log" 2>&1 || { tail -n 60 "$logs/gcc10-tests.log" >&2; status=1; }
    grep -E '^(Ok|Fail|Skipped|Timeout|Expected Fail|Unexpected Pass):' "$logs/gcc10-tests.log" | tr '\n' ' '
    echo
    cp "$root/work/build-gcc10/meson-logs/testlog.json" "$gcc10_testlog" || status=1
fi

# (a) the tarball, in the root and on this machine.
fake=/work/build-gcc10/tests/fakecuda/emulated/libcuda.so.1
if [ ! -f "$root$fake" ]; then
    echo "release checks: no fake driver from gcc10-build: the tarball's checks fail" >&2
fi
rm -rf "$root/work/unpacked" "$out_dir/unpacked"
mkdir -p "$root/work/unpacked" "$out_dir/unpacked"
tar -xzf "$tarball" -C "$root/work/unpacked"
tar -xzf "$tarball" -C "$out_dir/unpacked"
rm -rf "$root/work/consumers" && cp -r "$here/tests/consumers" "$root/work/consumers"

# In the root: a clean environment, the tarball at /work/unpacked/NAME.
bullseye() {
    "${in_root[@]}" env CUDYN_DRIVER_PATH="$fake" FAKECUDA_DEVICES=1 PREFIX="/work/unpacked/$release_name" \
        bash -euo pipefail -c "$1"
}
check bullseye-cudyn-info bullseye '
    report="$("$PREFIX/bin/cudyn-info" --json)"
    echo "$report"
    grep -q "\"state\": \"loaded\"" <<<"$report"'
check bullseye-consumer-pkg-config bullseye '
    g++ -std=c++17 -Wall -Wextra -Werror /work/consumers/consumer_main.cpp -o /work/unpacked/consumer-pc \
        $(PKG_CONFIG_PATH="$PREFIX/lib/pkgconfig" pkg-config --cflags --libs cudyn)
    LD_LIBRARY_PATH="$PREFIX/lib" /work/unpacked/consumer-pc --expect loaded'
check bullseye-consumer-cmake-shared bullseye '
    rm -rf /work/cmake-shared
    cmake -S /work/consumers/cmake -B /work/cmake-shared -DCMAKE_PREFIX_PATH="$PREFIX" -DCMAKE_BUILD_TYPE=Release \
        -G Ninja -DCMAKE_CXX_COMPILER=g++
    cmake --build /work/cmake-shared
    LD_LIBRARY_PATH="$PREFIX/lib" /work/cmake-shared/consumer --expect loaded'
check bullseye-consumer-cmake-static bullseye '
    rm -rf /work/cmake-static
    cmake -S /work/consumers/cmake -B /work/cmake-static -DCMAKE_PREFIX_PATH="$PREFIX" -DCMAKE_BUILD_TYPE=Release \
        -G Ninja -DCMAKE_CXX_COMPILER=g++ -DCUDYN_CONSUMER_STATIC=ON
    cmake --build /work/cmake-static
    /work/cmake-static/consumer --expect loaded'

# On this machine: the same bytes, glibc and libstdc++ newer than the build's.
host() {
    env CUDYN_DRIVER_PATH="$root$fake" FAKECUDA_DEVICES=1 PREFIX="$out_dir/unpacked/$release_name" \
        CONSUMER="$here/tests/consumers/consumer_main.cpp" WORK="$out_dir/unpacked" bash -euo pipefail -c "$1"
}
check host-cudyn-info host '
    report="$(env -u LD_LIBRARY_PATH "$PREFIX/bin/cudyn-info" --json)"
    echo "$report"
    grep -q "\"state\": \"loaded\"" <<<"$report"'
# The .pc file names the toolkit headers where the root had them,
# /usr/local/cuda/include, the toolkit's usual place here too.
check host-consumer-shared host '
    c++ -std=c++17 "$CONSUMER" -o "$WORK/consumer-shared" \
        $(PKG_CONFIG_PATH="$PREFIX/lib/pkgconfig" pkg-config --cflags --libs cudyn)
    LD_LIBRARY_PATH="$PREFIX/lib" "$WORK/consumer-shared" --expect loaded'
check host-consumer-static host '
    c++ -std=c++17 "$CONSUMER" -o "$WORK/consumer-static" \
        $(PKG_CONFIG_PATH="$PREFIX/lib/pkgconfig" pkg-config --cflags cudyn) "$PREFIX/lib/libcudyn.a" -pthread -ldl
    "$WORK/consumer-static" --expect loaded'

check host-tarball-fake host '
    fake="$PREFIX/lib/cudyn/fake"
    for variant in emulated cuda12 cuda11 legacy stub broken; do test -f "$fake/$variant/libcuda.so.1"; done
    test -f "$PREFIX/include/cudyn/fake/fakecuda_probe.h"
    env CUDYN_DRIVER_PATH="$fake/emulated/libcuda.so.1" "$PREFIX/bin/cudyn-info" --json | grep -q "\"state\": \"loaded\""
    report="$(env CUDYN_DRIVER_PATH=/nonexistent/libcuda.so.1 "$PREFIX/bin/cudyn-info")"
    echo "$report"
    grep -qF "CUDYN_DRIVER_PATH=$(cd "$fake" && pwd -P)/emulated/libcuda.so.1 " <<<"$report"'

debian_checks

summary_logs=("$testlog")
[ -f "$gcc10_testlog" ] && summary_logs+=("$gcc10_testlog")
python3 "$here/scripts/test_summary.py" "${summary_logs[@]}" || status=1
exit "$status"
