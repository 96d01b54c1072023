// cudyn-bench — the stream-ordered pool pair, timed the same way by every
// case that times it (one pool, with or without a peer granted access).
#pragma once

#include "harness.hpp"

#include "cudyn/device/stream.hpp"
#include "cudyn/loader/driver_call.hpp"
#include "cudyn/pool/memory_pool.hpp"
#include "cudyn/pool/stream_ordered_buffer.hpp"

#include <cstddef>
#include <cstdint>

namespace cudyn::bench {

// Slices a side per round (compare_loops): the driver's pair changes speed
// within a process, and slices that take turns see the same speeds.
constexpr int kPoolSlices = 5;
constexpr int kPoolRounds = 11;

// allocate+free pairs of `bytes` on `stream` from `pool`, then a stream
// synchronize, per slice: cudyn's StreamOrderedBuffer (freed by its
// destructor, as programs use it) against raw cuMemAllocFromPoolAsync +
// cuMemFreeAsync on the same pool and stream. The caller fills in operation
// and unit.
inline CaseResult compare_pool_pairs(const Settings& settings, std::uint64_t default_iterations,
                                     const MemoryPool& pool, const Stream& stream, std::size_t bytes) {
    const DriverTable& cu = driver();
    const CUmemoryPool pool_handle = pool.handle();
    const CUstream stream_handle = stream.handle();
    const auto raw = [&](std::uint64_t n) {
        std::uint64_t wrong = 0;
        for (std::uint64_t i = 0; i < n; ++i) {
            CUdeviceptr pointer = 0;
            wrong += cu.cuMemAllocFromPoolAsync_v11020(&pointer, bytes, pool_handle, stream_handle) != CUDA_SUCCESS;
            keep(pointer);
            wrong += cu.cuMemFreeAsync_v11020(pointer, stream_handle) != CUDA_SUCCESS;
        }
        return wrong + (cu.cuStreamSynchronize_v2000(stream_handle) != CUDA_SUCCESS);
    };
    const auto wrapped = [&](std::uint64_t n) {
        std::uint64_t wrong = 0;
        for (std::uint64_t i = 0; i < n; ++i) {
            auto buffer = StreamOrderedBuffer<std::byte>::allocate(pool, bytes, stream);
            wrong += !buffer.has_value();
            if (buffer) keep(buffer->device_address());
        }
        return wrong + !stream.synchronize().has_value();
    };
    return compare_loops(settings, default_iterations, raw, wrapped, kPoolSlices, kPoolRounds);
}

}  // namespace cudyn::bench
