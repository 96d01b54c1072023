// cudyn — where a restore puts a checkpointed process: the devices it held,
// each moved onto another device of the machine. The process keeps its
// device ordinals; the physical device behind an ordinal changes.
#pragma once

#include "cudyn/core/result.hpp"
#include "cudyn/device/device.hpp"

#include <vector>

namespace cudyn {

class RestorePlacement {
public:
    struct Move {
        DeviceUuid from;  // a device the process held when checkpointed
        DeviceUuid to;    // the device to restore it onto
    };

    // Empty: every device comes back where it was.
    RestorePlacement() = default;

    // Moves `from` (which need not be visible any more) onto `to`, which
    // must be a device this process sees. InvalidArgument, the placement
    // unchanged, for a zero UUID, a device moved twice, or two devices
    // moved onto one.
    Result<void> move(const DeviceUuid& from, const DeviceUuid& to);
    Result<void> move(const Device& from, const Device& to);
    // Both directions: a and b trade places.
    Result<void> swap(const Device& a, const Device& b);

    const std::vector<Move>& moves() const noexcept { return moves_; }
    bool empty() const noexcept { return moves_.empty(); }

private:
    std::vector<Move> moves_;
};

}  // namespace cudyn
