// cudyn — PeerPolicy: the rules, and the refusal that names the rule a peer
// failed. Reading a socket's peer credentials is fd_channel.cpp's business.
#include "cudyn/channel/peer_policy.hpp"

#include "core/internal.hpp"

#if !defined(_WIN32)
#include <unistd.h>
#endif

#include <algorithm>
#include <string>
#include <utility>

namespace cudyn {

namespace {

std::uint32_t own_uid() noexcept {
#if defined(_WIN32)
    return 0;  // no channel exists there: the value is never compared
#else
    return static_cast<std::uint32_t>(::geteuid());
#endif
}

bool contains(const std::vector<std::uint32_t>& values, std::uint32_t value) {
    return std::find(values.begin(), values.end(), value) != values.end();
}

std::string join_ids(const char* kind, const std::vector<std::uint32_t>& ids) {
    std::string text = kind;
    for (std::size_t i = 0; i < ids.size(); ++i) {
        text += i == 0 ? " " : (i + 1 == ids.size() ? " or " : ", ");
        text += std::to_string(ids[i]);
    }
    return text;
}

}  // namespace

std::string PeerCredentials::describe() const {
    return (pid >= 0 ? "pid " + std::to_string(pid) : std::string("a process of unknown pid")) + " (uid " +
           std::to_string(uid) + ", gid " + std::to_string(gid) + ")";
}

PeerPolicy::PeerPolicy() : uids_{own_uid()} {}

PeerPolicy PeerPolicy::users(std::vector<std::uint32_t> uids) {
    PeerPolicy policy;
    policy.uids_ = std::move(uids);
    return policy;
}

PeerPolicy PeerPolicy::any_user() {
    PeerPolicy policy;
    policy.any_user_ = true;
    policy.uids_.clear();
    return policy;
}

PeerPolicy& PeerPolicy::allow_uid(std::uint32_t uid) {
    if (!contains(uids_, uid)) uids_.push_back(uid);
    return *this;
}

PeerPolicy& PeerPolicy::allow_gid(std::uint32_t gid) {
    if (!contains(gids_, gid)) gids_.push_back(gid);
    return *this;
}

PeerPolicy& PeerPolicy::require_pid(std::int64_t pid) {
    pid_ = pid;
    return *this;
}

PeerPolicy& PeerPolicy::require(std::string rule, std::function<bool(const PeerCredentials&)> predicate) {
    requirements_.push_back({std::move(rule), std::move(predicate)});
    return *this;
}

std::string PeerPolicy::describe() const {
    std::string who;
    if (any_user_) {
        who = "any user";
    } else if (uids_.empty() && gids_.empty()) {
        who = "nobody (no uid or gid is admitted)";
    } else {
        if (!uids_.empty()) who = join_ids("uid", uids_);
        if (!gids_.empty()) who += (who.empty() ? "" : ", or ") + join_ids("gid", gids_);
    }
    if (pid_) who += " and pid " + std::to_string(*pid_);
    for (const Requirement& requirement : requirements_) who += " and " + requirement.rule;
    return who;
}

Result<void> PeerPolicy::check(const PeerCredentials& peer) const {
    const bool identity_admitted = any_user_ || contains(uids_, peer.uid) || contains(gids_, peer.gid);
    if (!identity_admitted)
        return Error::permission_denied(peer.describe() + " is not admitted: the policy admits " + describe());
    if (pid_ && peer.pid != *pid_)
        return Error::permission_denied(peer.describe() + " is not pid " + std::to_string(*pid_) +
                                        ", which the policy requires");
    for (const Requirement& requirement : requirements_)
        if (!requirement.predicate || !requirement.predicate(peer))
            return Error::permission_denied(peer.describe() + " fails the policy's rule: " + requirement.rule);
    return ok();
}

}  // namespace cudyn
