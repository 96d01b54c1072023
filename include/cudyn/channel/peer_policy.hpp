// cudyn — PeerPolicy: who may be at the other end of a descriptor channel.
//
// A descriptor sent over a channel is a capability: whoever receives a VMM
// or pool descriptor, or a legacy IPC record, can map the sender's GPU
// memory. A Unix socket tells each end who the other is (the kernel's
// record of the peer's pid, uid and gid, taken when it connected or
// listened), and both ends of a named channel check it before anything is
// sent: FdListener::accept checks who connected, FdChannel::connect checks
// who listens. The default admits only processes of this process's own
// effective uid; widening it is the caller's decision (which other users to
// trust), made explicit here.
#pragma once

#include "cudyn/core/result.hpp"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace cudyn {

// The kernel's record of a channel's other end.
struct PeerCredentials {
    std::int64_t pid = -1;  // -1 where the platform does not tell
    std::uint32_t uid = 0;
    std::uint32_t gid = 0;

    // "pid 4242 (uid 1000, gid 1000)".
    std::string describe() const;
};

class PeerPolicy {
public:
    // Only processes running as this process's effective uid.
    PeerPolicy();
    static PeerPolicy same_user() { return PeerPolicy(); }
    // Only processes running as one of `uids`: this process's own uid is
    // admitted only when listed, and an empty list admits nobody.
    static PeerPolicy users(std::vector<std::uint32_t> uids);
    // Every process that can reach the socket. Only for a socket protected
    // by other means (a directory only trusted users can enter, a network
    // namespace of its own): an abstract name is reachable by every process
    // of the network namespace.
    static PeerPolicy any_user();

    // Widens: a process of this uid, or of this primary gid, is admitted too.
    PeerPolicy& allow_uid(std::uint32_t uid);
    PeerPolicy& allow_gid(std::uint32_t gid);
    // Narrows: the peer must also be this process (e.g. the exporter a
    // descriptor names). A platform that does not report the peer's pid
    // refuses every peer under this rule.
    PeerPolicy& require_pid(std::int64_t pid);
    // Narrows: the peer must also satisfy `predicate`; `rule` names it in
    // refusals ("a member of the job's cgroup").
    PeerPolicy& require(std::string rule, std::function<bool(const PeerCredentials&)> predicate);

    // ok() when the policy admits `peer`; otherwise PermissionDenied naming
    // the peer and the rule it failed.
    Result<void> check(const PeerCredentials& peer) const;
    // "uid 1000", "uid 1000 or 1001, or gid 100, and pid 4242", "any user".
    std::string describe() const;

private:
    struct Requirement {
        std::string rule;
        std::function<bool(const PeerCredentials&)> predicate;
    };
    bool any_user_ = false;
    std::vector<std::uint32_t> uids_;
    std::vector<std::uint32_t> gids_;
    std::optional<std::int64_t> pid_;
    std::vector<Requirement> requirements_;
};

}  // namespace cudyn
