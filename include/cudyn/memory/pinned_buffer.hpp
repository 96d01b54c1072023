// cudyn — PinnedBuffer<T>: page-locked host memory from cuMemHostAlloc, typed
// and move-only. Pinned memory is what makes host<->device copies run at full
// speed and asynchronously.
#pragma once

#include "cudyn/core/result.hpp"
#include "cudyn/memory/owned_memory.hpp"

#include <cuda.h>

#include <cstddef>

namespace cudyn {

// cuMemHostAlloc flags, all off by default.
struct PinnedFlags {
    bool portable = false;        // pinned for every context, not only the current one
    bool device_mapped = false;   // also mapped into the device address space (see ZeroCopyBuffer)
    // Fast host writes and device reads over PCIe, but host reads are very slow:
    // only for buffers the host fills and never reads. Never the default.
    bool write_combined = false;

    unsigned int to_cu() const noexcept {
        return (portable ? unsigned{CU_MEMHOSTALLOC_PORTABLE} : 0u) |
               (device_mapped ? unsigned{CU_MEMHOSTALLOC_DEVICEMAP} : 0u) |
               (write_combined ? unsigned{CU_MEMHOSTALLOC_WRITECOMBINED} : 0u);
    }
};

namespace detail {
// cuMemHostAlloc of count * element_size bytes, freed with cuMemFreeHost.
// `what` names the caller in InvalidArgument messages; `kind` is its row in
// the memory ledger (pinned, or mapped for ZeroCopyBuffer).
Result<OwnedMemory> allocate_pinned_memory(std::size_t count, std::size_t element_size, unsigned int flags,
                                           const char* what, MemoryKind kind);
}  // namespace detail

template <typename T>
class PinnedBuffer : public detail::HostTypedMemory<T> {
public:
    // `count` elements of uninitialised pinned memory (needs a current context).
    static Result<PinnedBuffer> allocate(std::size_t count, PinnedFlags flags = {}) {
        return detail::adopt<PinnedBuffer>(
            detail::allocate_pinned_memory(count, sizeof(T), flags.to_cu(), "PinnedBuffer::allocate: count",
                                           MemoryKind::Pinned),
            [flags](detail::OwnedMemory memory) { return PinnedBuffer(std::move(memory), flags); });
    }

    PinnedBuffer() noexcept = default;  // empty

    PinnedFlags flags() const noexcept { return flags_; }

protected:
    // Adopts an allocation (also ZeroCopyBuffer's, which is pinned memory too).
    PinnedBuffer(detail::OwnedMemory memory, PinnedFlags flags) noexcept
        : detail::HostTypedMemory<T>(std::move(memory)), flags_(flags) {}

private:
    PinnedFlags flags_{};
};

}  // namespace cudyn
