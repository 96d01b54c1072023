#!/usr/bin/env bash
# A Debian 11 (bullseye) root for the portable release (scripts/release) and
# its checks (scripts/check_release.sh): glibc 2.31 and g++ 10, older than the
# build machine's, so what is built in it binds to old symbol versions.
#
#   scripts/bullseye_root.sh create ROOT        make ROOT (reused when a previous create finished)
#   scripts/bullseye_root.sh run ROOT CMD...    run CMD inside ROOT, /proc mounted, clean environment
#   scripts/bullseye_root.sh unmount ROOT       unmount whatever is still mounted under ROOT
#
# CUDYN_ROOT_SUITE=bookworm makes a Debian 12 root the same way instead (the
# Debian packages' check, scripts/check_debian.sh: a system with nothing of
# cudyn but what the packages install).
#
# ROOT holds, from Debian's bullseye packages (debootstrap): g++ 10, ninja,
# pkg-config, python3, Catch2 2.13 and CMake 3.18 (for the consumer checks);
# plus Meson from this machine's apt (bookworm's 1.0.1, the project's floor:
# bullseye's own 0.56 is too old; it needs only python3 >= 3.7, which bullseye
# has) and the CUDA toolkit's cuda.h and cudaTypedefs.h in
# ROOT/usr/local/cuda/include (the only toolkit files cudyn builds against).
#
# Environment: CUDYN_DEBIAN_MIRROR (default: the mirror this machine's apt
# uses for Debian itself, read from /etc/apt/sources.list and
# /etc/apt/sources.list.d). Needs root (debootstrap, chroot, mount).
set -euo pipefail

packages=g++,ninja-build,pkg-config,python3,python3-setuptools,python3-pkg-resources,catch2,cmake
suite="${CUDYN_ROOT_SUITE:-bullseye}"
# Written last by create: a root without it is an interrupted create, made again.
marker=".cudyn-$suite-root"

usage() {
    echo "usage: scripts/bullseye_root.sh create ROOT | run ROOT CMD... | unmount ROOT" >&2
    exit 2
}

require_root() {
    if [ "$(id -u)" -ne 0 ]; then
        echo "bullseye_root: needs root (debootstrap, chroot, mount)" >&2
        exit 1
    fi
}

# The Debian mirror this machine's apt uses: the first source whose suite is
# this machine's own Debian codename (not -security, not a third-party one).
debian_mirror() {
    if [ -n "${CUDYN_DEBIAN_MIRROR:-}" ]; then
        echo "$CUDYN_DEBIAN_MIRROR"
        return
    fi
    python3 - <<'EOF'
import glob
import re
import sys

codename = ""
with open("/etc/os-release", encoding="utf-8") as release:
    for line in release:
        if line.startswith("VERSION_CODENAME="):
            codename = line.split("=", 1)[1].strip().strip('"')


def sources():
    # One-line format: deb [options] URI SUITE COMPONENT...
    for path in ["/etc/apt/sources.list"] + sorted(glob.glob("/etc/apt/sources.list.d/*.list")):
        try:
            lines = open(path, encoding="utf-8").read().splitlines()
        except OSError:
            continue
        for line in lines:
            line = re.sub(r"\[[^]]*\]", " ", line.split("#", 1)[0]).split()
            if len(line) >= 3 and line[0] == "deb":
                yield [line[1]], [line[2]]
    # deb822 format: stanzas of Key: value lines.
    for path in sorted(glob.glob("/etc/apt/sources.list.d/*.sources")):
        try:
            text = open(path, encoding="utf-8").read()
        except OSError:
            continue
        for stanza in re.split(r"\n\s*\n", text):
            fields = {}
            for line in stanza.splitlines():
                match = re.match(r"^([A-Za-z-]+):\s*(.*)$", line)
                if match:
                    fields[match.group(1).lower()] = match.group(2)
            if "deb" in fields.get("types", "").split() and fields.get("enabled", "yes").lower() != "no":
                yield fields.get("uris", "").split(), fields.get("suites", "").split()


for uris, suites in sources():
    if codename and codename in suites and uris:
        print(uris[0].rstrip("/"))
        sys.exit(0)
sys.exit(f"bullseye_root: no apt source for this machine's Debian suite ({codename or 'unknown'}): "
         "set CUDYN_DEBIAN_MIRROR to a Debian mirror URL")
EOF
}

# Every mount under ROOT, deepest first.
mounts_under() {
    local root="$1"
    awk -v root="$root/" 'index($2 "/", root) == 1 { print $2 }' /proc/self/mounts | sort -r
}

unmount_all() {
    local root="$1" mount
    for mount in $(mounts_under "$root"); do
        umount "$mount" 2>/dev/null || umount -l "$mount"
    done
    if [ -n "$(mounts_under "$root")" ]; then
        echo "bullseye_root: still mounted under $root:" >&2
        mounts_under "$root" >&2
        return 1
    fi
}

cuda_headers() {
    local candidate
    for candidate in "${CUDA_PATH:-}" "${CUDA_HOME:-}" /usr/local/cuda /opt/cuda; do
        if [ -n "$candidate" ] && [ -f "$candidate/include/cuda.h" ] && [ -f "$candidate/include/cudaTypedefs.h" ]; then
            echo "$candidate/include"
            return
        fi
    done
    echo "bullseye_root: CUDA toolkit headers (cuda.h, cudaTypedefs.h) not found in \$CUDA_PATH, \$CUDA_HOME," \
         "/usr/local/cuda or /opt/cuda" >&2
    return 1
}

create() {
    local root="$1" mirror headers
    headers="$(cuda_headers)"
    if [ ! -f "$root/$marker" ]; then
        if [ -e "$root" ]; then
            echo "bullseye_root: $root is incomplete: making it again"
            # Never delete through a mount point (an interrupted run's /proc).
            unmount_all "$root"
            rm -rf --one-file-system "$root"
        fi
        command -v debootstrap >/dev/null 2>&1 || {
            echo "bullseye_root: installing debootstrap"
            DEBIAN_FRONTEND=noninteractive apt-get update -qq
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
        }
        mirror="$(debian_mirror)"
        echo "bullseye_root: debootstrap $suite from $mirror into $root"
        mkdir -p "$root"
        if ! debootstrap --variant=minbase --include="$packages" "$suite" "$root" "$mirror" >"$root.debootstrap.log" 2>&1; then
            tail -n 30 "$root.debootstrap.log" >&2
            unmount_all "$root" || true
            echo "bullseye_root: debootstrap failed (log: $root.debootstrap.log)" >&2
            return 1
        fi
        # Meson from this machine's apt, unpacked by the root's dpkg, which
        # checks its dependencies against bullseye's packages. Downloaded into
        # the root's /tmp: apt's sandbox user may write there.
        rm -f "$root"/tmp/meson_*.deb
        if ! (cd "$root/tmp" && apt-get download -qq meson >/dev/null 2>&1); then
            DEBIAN_FRONTEND=noninteractive apt-get update -qq  # a fresh machine may have no package lists
            (cd "$root/tmp" && apt-get download -qq meson >/dev/null)
        fi
        chroot "$root" sh -c 'dpkg -i /tmp/meson_*.deb >/dev/null && rm -f /tmp/meson_*.deb'
        # Downloaded packages: not needed once installed.
        rm -f "$root"/var/cache/apt/archives/*.deb
        echo "$packages + meson $(chroot "$root" meson --version)" >"$root/$marker"
    fi
    mkdir -p "$root/usr/local/cuda/include"
    cp "$headers/cuda.h" "$headers/cudaTypedefs.h" "$root/usr/local/cuda/include/"
    echo "bullseye_root: $root ready ($(cat "$root/$marker"); $(chroot "$root" g++ --version | head -n 1))"
}

run_in() {
    local root="$1"
    shift
    [ -f "$root/$marker" ] || { echo "bullseye_root: $root: not made (scripts/bullseye_root.sh create $root)" >&2; return 1; }
    # /proc: the test suites read /proc/self/exe and /proc/<pid>/fd. /dev/shm:
    # POSIX shared memory (shm_open), where the fake NCCL's ranks meet; glibc
    # before 2.34 wants a tmpfs there. Mounted for this command only and
    # unmounted however it ends.
    local mounted=() unmount="" mount
    if ! mountpoint -q "$root/proc"; then
        mount -t proc proc "$root/proc" && mounted+=("$root/proc")
    fi
    mkdir -p "$root/dev/shm"
    if ! mountpoint -q "$root/dev/shm"; then
        mount -t tmpfs -o mode=1777 tmpfs "$root/dev/shm" && mounted+=("$root/dev/shm")
    fi
    for mount in "${mounted[@]}"; do unmount+="umount '$mount' 2>/dev/null || umount -l '$mount'; "; done
    # shellcheck disable=SC2064  # the folders are fixed now
    [ -n "$unmount" ] && trap "$unmount" EXIT
    # A clean environment: the build machine's CXX, PKG_CONFIG_PATH or
    # CUDA_PATH would name compilers and folders of the other system.
    chroot "$root" /usr/bin/env -i PATH=/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin \
        HOME=/root LC_ALL=C.UTF-8 TERM=dumb "$@"
}

[ "$#" -ge 2 ] || usage
command="$1"
root="$2"
shift 2
case "$root" in /*) ;; *) root="$PWD/$root" ;; esac
root="${root%/}"
case "$command" in
    create) [ "$#" -eq 0 ] || usage; require_root; create "$root" ;;
    run) [ "$#" -ge 1 ] || usage; require_root; run_in "$root" "$@" ;;
    unmount) [ "$#" -eq 0 ] || usage; require_root; unmount_all "$root" ;;
    *) usage ;;
esac
