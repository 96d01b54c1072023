// cudyn-bench — the stream-ordered pool pair, timed the same way by every
// case that times it (one pool, with or without a peer granted access).
#pragma once

#include "harness.hpp"
#include "pool_pair_loops.hpp"

#include "cudyn/device/stream.hpp"
#include "cudyn/loader/driver_call.hpp"
#include "cudyn/pool/memory_pool.hpp"

#include <cstddef>
#include <cstdint>

namespace cudyn::bench {

// Slices a side per round (compare_loops): the driver's pair changes speed
// within a process, and slices that take turns see the same speeds.
constexpr int kPoolSlices = 5;
constexpr int kPoolRounds = 11;

// allocate+free pairs of `bytes` on `stream` from `pool`, then a stream
// synchronize, per slice: cudyn_pool_pairs against raw_pool_pairs on the
// same pool and stream. The caller fills in operation
// and unit.
inline CaseResult compare_pool_pairs(const Settings& settings, std::uint64_t default_iterations,
                                     const MemoryPool& pool, const Stream& stream, std::size_t bytes) {
    const DriverTable& cu = driver();
    const CUmemoryPool pool_handle = pool.handle();
    const CUstream stream_handle = stream.handle();
    const auto raw = [&](std::uint64_t n) {
        return raw_pool_pairs(cu, pool_handle, stream_handle, bytes, n) +
               (cu.cuStreamSynchronize_v2000(stream_handle) != CUDA_SUCCESS);
    };
    const auto wrapped = [&](std::uint64_t n) {
        return cudyn_pool_pairs(pool, stream, bytes, n) + !stream.synchronize().has_value();
    };
    return compare_loops(settings, default_iterations, raw, wrapped, kPoolSlices, kPoolRounds);
}

}  // namespace cudyn::bench
