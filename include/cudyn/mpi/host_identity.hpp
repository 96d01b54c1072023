// cudyn — which ranks of a job run on the same host: the kernel's boot id
// (one per booted kernel, containers included) plus the host name (which
// separates containers that share a kernel but not their namespaces). A
// wrong "same host" can only end as the open's own error, reported per peer.
// Needs no MPI.
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
