// cudyn-bench — the two-device fixture (peer_fixture.hpp).
#include "peer_fixture.hpp"

#include "cudyn/device/device.hpp"
#include "cudyn/device/peer_access.hpp"

#include <optional>
#include <utility>

namespace cudyn::bench {

namespace {

Result<std::optional<PeerFixture>> make_peer_fixture(std::string& why_not) {
    CUDYN_TRY_ASSIGN(const int count, Device::count());
    if (count < 2) {
        why_not = "fewer than two devices";
        return std::optional<PeerFixture>{};
    }
    CUDYN_TRY_ASSIGN(auto d0, Device::get(0));
    CUDYN_TRY_ASSIGN(auto d1, Device::get(1));
    CUDYN_TRY_ASSIGN(const bool can, d0.can_access_peer(d1));
    if (!can) {
        why_not = "cuDeviceCanAccessPeer says device 0 cannot reach device 1";
        return std::optional<PeerFixture>{};
    }
    CUDYN_TRY_ASSIGN(auto context1, PrimaryContext::retain(d1));
    CUDYN_TRY_ASSIGN(auto context0, PrimaryContext::activate(d0));
    CUDYN_TRY(disable_peer_access(context0, context1));
    return std::optional<PeerFixture>{PeerFixture{std::move(context0), std::move(context1)}};
}

}  // namespace

PeerFixture* peer_fixture(std::string& error) {
    static std::optional<Result<std::optional<PeerFixture>>> made;
    static std::string why_not;
    if (!made) made.emplace(make_peer_fixture(why_not));
    if (!made->has_value()) {
        error = made->error().describe();
        return nullptr;
    }
    if (!made->value()) {
        error = why_not;
        return nullptr;
    }
    return &*made->value();
}

}  // namespace cudyn::bench
