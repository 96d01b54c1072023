#!/bin/sh
# Runs mpi_ranks under mpirun, as the 'mpi' test suite does:
#   run_mpi_ranks.sh MPIRUN PROGRAM RANKS [--two-hosts] [program options...]
# With Open MPI: --oversubscribe (more ranks than cores is fine: they mostly
# wait in collectives), --allow-run-as-root when run as root (CI containers),
# shared memory and self only (one machine: no probing of network
# interfaces), and no single-copy mechanism (CMA needs ptrace rights that
# containers often withhold). Other MPIs get the plain -n. Bounded: 100 s.
#
# --two-hosts makes one machine look like two: each rank runs in a UTS
# namespace of its own (unshare -u) named cudyn-host-<rank / 2>, so ranks 0-1
# and 2-3 are different hosts to cudyn (same boot id, different host name),
# and the run must say so: 2 hosts, every rank with peers on the other one
# (and, given CUDYN_NVML_PATH and FAKECUDA_IMEX=1, every pair of ranks able to
# pass fabric handles, across the hosts).
# It needs Open MPI (OMPI_COMM_WORLD_RANK) and the right to unshare (root
# outside a locked-down container); without them it exits 77 (skipped).
set -u

# Inside mpirun, one rank of --two-hosts: name this rank's host, then run.
if [ "$1" = "--as-rank" ]; then
    shift
    exec unshare -u sh -c 'hostname "$0" && exec "$@"' "cudyn-host-$((OMPI_COMM_WORLD_RANK / 2))" "$@"
fi

mpirun=$1
program=$2
ranks=$3
shift 3
two_hosts=false
if [ "${1:-}" = "--two-hosts" ]; then
    two_hosts=true
    shift
fi

options=""
if "$mpirun" --version 2>/dev/null | grep -q "Open MPI"; then
    options="--oversubscribe --mca btl self,vader --mca btl_vader_single_copy_mechanism none"
    [ "$(id -u)" -eq 0 ] && options="$options --allow-run-as-root"
elif $two_hosts; then
    echo "SKIP: --two-hosts needs Open MPI (OMPI_COMM_WORLD_RANK)"
    exit 77
fi

if ! $two_hosts; then
    # shellcheck disable=SC2086
    exec timeout 100 "$mpirun" $options -n "$ranks" "$program" "$@"
fi

if ! unshare -u true 2>/dev/null; then
    echo "SKIP: cannot unshare a UTS namespace here (needs CAP_SYS_ADMIN)"
    exit 77
fi
output="${TMPDIR:-/tmp}/cudyn-mpi-ranks-$$.txt"
# shellcheck disable=SC2086
timeout 100 "$mpirun" $options -n "$ranks" sh "$0" --as-rank "$program" "$@" >"$output" 2>&1
status=$?
cat "$output"
hosts_seen=$(grep -c "ranks on 2 host(s)" "$output")
alone=$(grep -c "on other hosts: none" "$output")
fabric_pairs=$(grep -c "fabric handles could pass between ranks: 0-1 0-2 0-3 1-2 1-3 2-3" "$output")
rm -f "$output"
if [ "$status" -ne 0 ]; then exit "$status"; fi
if [ "$hosts_seen" -ne 1 ] || [ "$alone" -ne 0 ]; then
    echo "expected 2 hosts and every rank with peers on the other one" >&2
    exit 1
fi
# With an NVML naming one fabric domain and an IMEX channel, every pair of
# ranks, across the hosts too, could pass fabric handles.
if [ -n "${CUDYN_NVML_PATH:-}" ] && [ "${FAKECUDA_IMEX:-0}" = 1 ] && [ "$fabric_pairs" -ne 1 ]; then
    echo "expected every pair of ranks to reach each other through fabric handles" >&2
    exit 1
fi
