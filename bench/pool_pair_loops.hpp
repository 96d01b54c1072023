// cudyn-bench — the stream-ordered pool pair's two loops, raw and cudyn, as
// every program that times the pair runs them (cudyn-bench's pool cases,
// cudyn-pool-floor): the same code on both sides wherever it is measured.
// Free of the harness, so that a program of its own can include it.
#pragma once

#include "cudyn/device/stream.hpp"
#include "cudyn/loader/driver_table.hpp"
#include "cudyn/pool/memory_pool.hpp"
#include "cudyn/pool/stream_ordered_buffer.hpp"

#include <cstddef>
#include <cstdint>

namespace cudyn::bench {

// The address is kept in a register so the compiler cannot drop the call
// that made it.
inline void keep_address(CUdeviceptr address) { __asm__ __volatile__("" : : "r"(address) : "memory"); }

// `n` raw cuMemAllocFromPoolAsync + cuMemFreeAsync pairs of `bytes`; the
// calls the driver refused.
inline std::uint64_t raw_pool_pairs(const DriverTable& cu, CUmemoryPool pool, CUstream stream, std::size_t bytes,
                                    std::uint64_t n) {
    std::uint64_t wrong = 0;
    for (std::uint64_t i = 0; i < n; ++i) {
        CUdeviceptr pointer = 0;
        wrong += cu.cuMemAllocFromPoolAsync_v11020(&pointer, bytes, pool, stream) != CUDA_SUCCESS;
        keep_address(pointer);
        wrong += cu.cuMemFreeAsync_v11020(pointer, stream) != CUDA_SUCCESS;
    }
    return wrong;
}

// `n` StreamOrderedBuffers of `bytes` from `pool` on `stream`, each freed by
// its destructor as programs use it; the allocations refused.
inline std::uint64_t cudyn_pool_pairs(const MemoryPool& pool, const Stream& stream, std::size_t bytes,
                                      std::uint64_t n) {
    std::uint64_t wrong = 0;
    for (std::uint64_t i = 0; i < n; ++i) {
        auto buffer = StreamOrderedBuffer<std::byte>::allocate(pool, bytes, stream);
        wrong += !buffer.has_value();
        if (buffer) keep_address(buffer->device_address());
    }
    return wrong;
}

}  // namespace cudyn::bench
