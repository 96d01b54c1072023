// cudyn — which ranks of a job run on the same host: a host identity per
// rank, and the ranks grouped by it. Part of the optional MPI component
// (libcudyn-mpi); this header itself needs no MPI.
//
// The identity is the kernel's boot id (/proc/sys/kernel/random/boot_id) plus
// the host name:
//   * the boot id is a random 128-bit value drawn by the kernel at each boot,
//     the same for every process under that kernel, containers included
//     (/proc/sys/kernel/random is not namespaced). Two machines never share
//     one, even when they were cloned from one image or carry the same host
//     name, which is what sharing GPU memory needs: one kernel, one driver.
//   * the host name separates containers that share a kernel but not their
//     namespaces (two Kubernetes pods on one node have their own UTS name,
//     and usually their own IPC and PID namespaces too, across which a
//     legacy CUDA IPC open cannot be counted on). Such ranks are told
//     "different host": a missed chance at worst, never a wrong promise.
// A container may hide the boot id (a masked /proc, a sandbox with a kernel
// of its own such as gVisor or Kata): the identity is then the host name
// alone, and two machines with the same name would be taken for one host.
// Whatever the grouping says, the open of a peer's descriptor is the real
// test: a wrong "same host" ends as that open's error, reported per peer.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace cudyn::mpi {

struct HostIdentity {
    static constexpr std::size_t kMaxHostNameBytes = 64;  // Linux's HOST_NAME_MAX; longer names are cut

    std::array<std::uint8_t, 16> boot_id{};  // all zero where it could not be read
    std::string host_name;                   // at most kMaxHostNameBytes bytes

    bool has_boot_id() const noexcept;
    // "node7 (boot id 09e6a9c7-acfa-4b77-b09e-9936965c6075)", or "node7 (no boot id)".
    std::string describe() const;

    friend bool operator==(const HostIdentity& a, const HostIdentity& b) noexcept {
        return a.boot_id == b.boot_id && a.host_name == b.host_name;
    }
    friend bool operator!=(const HostIdentity& a, const HostIdentity& b) noexcept { return !(a == b); }
};

// This process's identity: the boot id where the file reads as a UUID, the
// host name from gethostname (empty if that fails). Never fails.
HostIdentity this_host();

// The ranks of a communicator grouped by host. Hosts are numbered in the order
// of each one's lowest rank, so every rank that groups the same identities
// gets the same numbers (the descriptor exchange relies on it).
struct HostGroups {
    std::vector<HostIdentity> hosts;          // one per host
    std::vector<int> host_of_rank;            // index into hosts, per rank
    std::vector<std::vector<int>> ranks_of_host;  // per host, ascending

    std::size_t rank_count() const noexcept { return host_of_rank.size(); }
    // False for a rank outside [0, rank_count()).
    bool same_host(int a, int b) const noexcept;
};

// identity_of_rank[r] is rank r's identity.
HostGroups group_by_host(const std::vector<HostIdentity>& identity_of_rank);

}  // namespace cudyn::mpi
