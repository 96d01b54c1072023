// cudyn loader — compile-time checks that each table entry has the exact type
// cuda.h declares for its ABI symbol. A typedef that drifted
// from the declaration, or an entry listed with the wrong version, fails the
// build here instead of corrupting a call at run time.
#include "cudyn/loader/driver_table.hpp"

#include <cstddef>
#include <type_traits>

namespace cudyn {

// DECLARED entries: compare with the declaration. `abi` is expanded here on
// purpose: under per-thread-default-stream builds cuda.h renames the
// declaration (cuMemcpyHtoDAsync_v2 -> ..._ptsz) with the same type.
#define CUDYN_CHECK_DECLARED(pfn, abi)                                 \
    static_assert(std::is_same_v<pfn, decltype(&::abi)>,               \
                  #pfn " does not match cuda.h's declaration of " #abi);
// UNDECLARED entries: cuda.h no longer declares the old ABI; the typedef is
// the only description of it, so there is nothing to compare against.
#define CUDYN_CHECK_UNDECLARED(pfn, abi)
#define CUDYN_DRIVER_ENTRY(base, version, abi, need, decl) CUDYN_CHECK_##decl(PFN_##base##_v##version, abi)
#include "cudyn/loader/driver_symbols.def"
#undef CUDYN_DRIVER_ENTRY
#undef CUDYN_CHECK_DECLARED
#undef CUDYN_CHECK_UNDECLARED

// The two ABIs of cuMemcpyBatchAsync differ by one parameter, so a typedef
// that drifted would shift every argument after it. The 13.0 row is checked
// against cuda.h above; cuda.h 13 no longer declares the 12.8 ABI, so its
// shape is spelled out here from the 12.8 headers: failIdx before the stream.
static_assert(std::is_same_v<PFN_cuMemcpyBatchAsync_v12080,
                             CUresult(CUDAAPI*)(CUdeviceptr*, CUdeviceptr*, std::size_t*, std::size_t,
                                                CUmemcpyAttributes*, std::size_t*, std::size_t, std::size_t*, CUstream)>,
              "PFN_cuMemcpyBatchAsync_v12080 is not the 12.8 ABI (failIdx before the stream)");
static_assert(std::is_same_v<PFN_cuMemcpyBatchAsync_v13000,
                             CUresult(CUDAAPI*)(CUdeviceptr*, CUdeviceptr*, std::size_t*, std::size_t,
                                                CUmemcpyAttributes*, std::size_t*, std::size_t, CUstream)>,
              "PFN_cuMemcpyBatchAsync_v13000 is not the 13.0 ABI (no failIdx)");

// cuMemcpy3DBatchAsync changed ABI the same way (failIdx dropped in 13.0).
static_assert(std::is_same_v<PFN_cuMemcpy3DBatchAsync_v12080,
                             CUresult(CUDAAPI*)(std::size_t, CUDA_MEMCPY3D_BATCH_OP*, std::size_t*, unsigned long long,
                                                CUstream)>,
              "PFN_cuMemcpy3DBatchAsync_v12080 is not the 12.8 ABI (failIdx before the flags)");
static_assert(std::is_same_v<PFN_cuMemcpy3DBatchAsync_v13000,
                             CUresult(CUDAAPI*)(std::size_t, CUDA_MEMCPY3D_BATCH_OP*, unsigned long long, CUstream)>,
              "PFN_cuMemcpy3DBatchAsync_v13000 is not the 13.0 ABI (no failIdx)");

static_assert(std::is_standard_layout_v<DriverTable>, "DriverTable offsets are used by the loader");
static_assert(sizeof(DriverTable) == driver_entry_count * sizeof(void*), "one pointer per listed entry");

}  // namespace cudyn
