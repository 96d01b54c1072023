// cudyn — CopyOptions: what a copy plan may tell the driver about a copy
// besides its addresses (CUmemcpyAttributes): where its source and its
// destination are expected to be, and that the copy should rather overlap
// with compute work than finish fast.
//
// Hints and the flag are hints: the driver may ignore them (it does for
// memory that is neither managed nor allocated outside CUDA), and only the
// batch entries carry them, so a plan issued copy by copy drops them. They
// are checked before any driver call: a negative id when set, a device that
// is not one of the visible devices when the plan runs.
#pragma once

#include "cudyn/core/location.hpp"

#include <optional>

namespace cudyn {

struct CopyOptions {
    std::optional<Location> source_hint;
    std::optional<Location> destination_hint;
    bool prefer_overlap_with_compute = false;

    bool any() const noexcept { return source_hint || destination_hint || prefer_overlap_with_compute; }
    friend bool operator==(const CopyOptions& a, const CopyOptions& b) noexcept {
        return a.source_hint == b.source_hint && a.destination_hint == b.destination_hint &&
               a.prefer_overlap_with_compute == b.prefer_overlap_with_compute;
    }
};

}  // namespace cudyn
