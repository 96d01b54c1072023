// Tiny kernels for the GPU tests and the benchmarks, as PTX text the driver
// JIT-compiles for whatever GPU is present (sm_70 and newer), loaded with
// cuModuleLoadData and launched with cuLaunchKernel through cudyn's table, so
// nothing here needs nvcc or links libcuda. Shared by tests/gpu (memory and
// VMM suites) and bench/.
//
//   fill_u32(data, n, value)   data[i] = value                    (PTX update_u32, grid-stride)
//   add_u32(data, n, delta)    data[i] += delta                   (PTX update_u32, grid-stride)
//   sum_u32(data, n, out)      *out += data[0] + ... + data[n-1]  (PTX sum_u32, mod 2^32)
//   delayed_fill_u32(data, n, value, delay_ns)
//                              waits delay_ns on the GPU, then data[i] = value (PTX delay_fill_u32):
//                              work that still touches memory for a known time
//
// sum_u32 is the bandwidth reader: 128-bit loads, four independent loads per
// grid-stride iteration, a warp-shuffle reduction and one atomic add per warp.
// It needs n to be a multiple of 4 and data 16-byte aligned (every cuMemAlloc,
// cuMemHostAlloc and cuMemAllocManaged allocation is).
#pragma once

#include "cudyn/core/result.hpp"

#include <cuda.h>

#include <cstdint>

namespace cudyn_test {

// The PTX module text (.version 7.0, .target sm_70, .address_size 64).
extern const char kMemoryKernelsPtx[];

class PtxKernels {
public:
    // Loads the module into the current context (the driver JIT-compiles the
    // PTX for that context's device) and looks up its two kernels.
    static cudyn::Result<PtxKernels> load();

    PtxKernels(PtxKernels&& other) noexcept;
    PtxKernels& operator=(PtxKernels&& other) noexcept;
    PtxKernels(const PtxKernels&) = delete;
    PtxKernels& operator=(const PtxKernels&) = delete;
    ~PtxKernels();  // cuModuleUnload, errors ignored

    // Launches are asynchronous on `stream` (0: the legacy default stream);
    // synchronise before the host reads the result.
    cudyn::Result<void> fill_u32(CUdeviceptr data, std::uint64_t count, std::uint32_t value,
                                 CUstream stream = nullptr) const {
        return update_u32(data, count, value, 0, stream);
    }
    cudyn::Result<void> add_u32(CUdeviceptr data, std::uint64_t count, std::uint32_t delta,
                                CUstream stream = nullptr) const {
        return update_u32(data, count, delta, 1, stream);
    }
    // Adds the sum of data[0, count) into the uint32 at `out` (device-visible,
    // zeroed by the caller). InvalidArgument unless count % 4 == 0 and data is
    // 16-byte aligned.
    cudyn::Result<void> sum_u32(CUdeviceptr data, std::uint64_t count, CUdeviceptr out,
                                CUstream stream = nullptr) const;

    // Waits `delay_ns` on the GPU's timer, then fills: the kernel is still
    // running, and writes its memory at the end, for that long.
    cudyn::Result<void> delayed_fill_u32(CUdeviceptr data, std::uint64_t count, std::uint32_t value,
                                         std::uint64_t delay_ns, CUstream stream = nullptr) const;

    int multiprocessors() const noexcept { return multiprocessors_; }

private:
    PtxKernels() = default;
    cudyn::Result<void> update_u32(CUdeviceptr data, std::uint64_t count, std::uint32_t value, std::uint32_t add,
                                   CUstream stream) const;
    cudyn::Result<void> launch(CUfunction function, unsigned int blocks, CUstream stream, void** parameters) const;
    unsigned int blocks_for(std::uint64_t items, unsigned int per_sm) const noexcept;

    CUmodule module_ = nullptr;
    CUfunction update_ = nullptr;
    CUfunction sum_ = nullptr;
    CUfunction delay_fill_ = nullptr;
    int multiprocessors_ = 1;
};

}  // namespace cudyn_test
