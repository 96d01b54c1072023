// cudyn — the device moves of a restore.
#include "cudyn/checkpoint/restore_placement.hpp"

#include "core/internal.hpp"

namespace cudyn {

namespace {
constexpr detail::Operation kMove{"RestorePlacement::move"};
constexpr detail::Operation kSwap{"RestorePlacement::swap"};
}  // namespace

Result<void> RestorePlacement::move(const DeviceUuid& from, const DeviceUuid& to) {
    if (from.is_zero() || to.is_zero()) return kMove.invalid("a zero UUID names no device");
    for (const Move& m : moves_) {
        if (m.from == from) return kMove.invalid(from.to_string() + " is already moved onto " + m.to.to_string());
        if (m.to == to) return kMove.invalid(m.from.to_string() + " is already moved onto " + to.to_string());
    }
    auto target = Device::by_uuid(to);
    if (!target) return kMove.context(std::move(target).error());
    moves_.push_back({from, to});
    return ok();
}

Result<void> RestorePlacement::move(const Device& from, const Device& to) {
    CUDYN_TRY_ASSIGN(const DeviceUuid from_uuid, from.uuid());
    CUDYN_TRY_ASSIGN(const DeviceUuid to_uuid, to.uuid());
    return move(from_uuid, to_uuid);
}

Result<void> RestorePlacement::swap(const Device& a, const Device& b) {
    CUDYN_TRY_ASSIGN(const DeviceUuid a_uuid, a.uuid());
    CUDYN_TRY_ASSIGN(const DeviceUuid b_uuid, b.uuid());
    if (a_uuid == b_uuid) return kSwap.invalid("both devices are " + a_uuid.to_string());
    const std::vector<Move> before = moves_;
    CUDYN_TRY(move(a_uuid, b_uuid));
    auto second = move(b_uuid, a_uuid);
    if (!second) {
        moves_ = before;
        return kSwap.context(std::move(second).error());
    }
    return ok();
}

}  // namespace cudyn
