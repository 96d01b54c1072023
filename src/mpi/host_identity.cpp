// cudyn — host identities and the grouping of ranks by host (host_identity.hpp).
#include "cudyn/mpi/host_identity.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>
#include <utility>

namespace cudyn::mpi {

namespace {

int hex_value(char c) noexcept {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

// The kernel writes the boot id as a UUID ("09e6a9c7-acfa-4b77-b09e-9936965c6075\n"):
// its 32 hex digits, dashes skipped. Anything else leaves `out` all zero.
void parse_uuid(const std::string& text, std::array<std::uint8_t, 16>& out) noexcept {
    std::array<std::uint8_t, 16> parsed{};
    std::size_t digits = 0;
    for (const char c : text) {
        if (c == '-' || c == '\n') continue;
        const int value = hex_value(c);
        if (value < 0 || digits == 32) return;
        parsed[digits / 2] = static_cast<std::uint8_t>(parsed[digits / 2] | (value << (digits % 2 == 0 ? 4 : 0)));
        ++digits;
    }
    if (digits == 32) out = parsed;
}

}  // namespace

bool HostIdentity::has_boot_id() const noexcept {
    return std::any_of(boot_id.begin(), boot_id.end(), [](std::uint8_t b) { return b != 0; });
}

std::string HostIdentity::describe() const {
    if (!has_boot_id()) return host_name + " (no boot id)";
    char uuid[37];
    const auto& b = boot_id;
    std::snprintf(uuid, sizeof uuid, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
                  b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
    return host_name + " (boot id " + uuid + ")";
}

HostIdentity this_host() {
    HostIdentity identity;
    std::ifstream file("/proc/sys/kernel/random/boot_id");
    if (file) parse_uuid(std::string(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()),
                         identity.boot_id);
    // gethostname may leave a name that filled the buffer unterminated: the
    // buffer has room past the longest name kept.
    char name[256] = {};
    if (::gethostname(name, sizeof name - 1) == 0)
        identity.host_name.assign(name, std::min(std::char_traits<char>::length(name), HostIdentity::kMaxHostNameBytes));
    return identity;
}

bool HostGroups::same_host(int a, int b) const noexcept {
    const auto count = static_cast<int>(host_of_rank.size());
    if (a < 0 || b < 0 || a >= count || b >= count) return false;
    return host_of_rank[static_cast<std::size_t>(a)] == host_of_rank[static_cast<std::size_t>(b)];
}

HostGroups group_by_host(const std::vector<HostIdentity>& identity_of_rank) {
    HostGroups groups;
    groups.host_of_rank.reserve(identity_of_rank.size());
    // Ranks are walked in order, so each host's number is the order of its
    // lowest rank. A map keeps a job of thousands of nodes at n log n.
    std::map<std::pair<std::array<std::uint8_t, 16>, std::string>, std::size_t> number_of;
    for (std::size_t rank = 0; rank < identity_of_rank.size(); ++rank) {
        const HostIdentity& identity = identity_of_rank[rank];
        const auto [entry, added] =
            number_of.emplace(std::make_pair(identity.boot_id, identity.host_name), groups.hosts.size());
        if (added) {
            groups.hosts.push_back(identity);
            groups.ranks_of_host.emplace_back();
        }
        groups.host_of_rank.push_back(static_cast<int>(entry->second));
        groups.ranks_of_host[entry->second].push_back(static_cast<int>(rank));
    }
    return groups;
}

}  // namespace cudyn::mpi
