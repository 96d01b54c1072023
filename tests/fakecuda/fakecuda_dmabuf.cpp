// fakecuda_dmabuf.cpp — cuMemGetHandleForAddressRange (11.7+) with the
// DMA_BUF_FD handle type, Linux only: the descriptor is a memfd of the range's
// size, so cudyn's dma-buf export runs without a GPU. Elsewhere
// fakecuda_vmm_unsupported.cpp answers NOT_SUPPORTED.
#include "fake_state.hpp"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#if FAKE_HAS(11070)

namespace {

using fake::Allocation;
using fake::Kind;
using fake::State;

constexpr unsigned long long kPcie = CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE;

// CUDA_SUCCESS when [p, p + n) is memory the driver exports, else why not, as
// cuda.h describes the entry and driver 580 on an H200 answered
// (docs/measurements/h200-2026-11-25-batch-dmabuf-hostvmm-pointers.md):
// cuMemAlloc memory, or a reservation wholly mapped by device memory of one
// device and identical properties; pinned host memory only where the device
// reports HOST_ALLOC_DMA_BUF_SUPPORTED; registered, managed, host-VMM, pool
// and IPC-opened memory INVALID_VALUE; DMA_BUF_SUPPORTED 0 NOT_SUPPORTED.
CUresult exportable(State& st, std::uintptr_t p, std::size_t n) {
    CUmemLocation backing{};
    switch (fake::vmm_backing(st, p, n, &backing)) {
    case 1:
        if (backing.type != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_INVALID_VALUE;  // host VMM memory
        return fake::attribute(st, backing.id, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED) != 0 ? CUDA_SUCCESS
                                                                                          : CUDA_ERROR_NOT_SUPPORTED;
    case -1: return CUDA_ERROR_INVALID_VALUE;  // part unmapped, or mixed memory
    default: break;                            // not a reservation
    }
    const Allocation* a = fake::find_allocation(st, p, 0);
    if (a == nullptr || n > a->size - (p - a->base)) return CUDA_ERROR_INVALID_VALUE;
    switch (a->kind) {
    case Kind::Device:
        return fake::attribute(st, a->device, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED) != 0 ? CUDA_SUCCESS
                                                                                          : CUDA_ERROR_NOT_SUPPORTED;
    case Kind::Host:
        return fake::attribute(st, a->device, CU_DEVICE_ATTRIBUTE_HOST_ALLOC_DMA_BUF_SUPPORTED) != 0
                   ? CUDA_SUCCESS
                   : CUDA_ERROR_INVALID_VALUE;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
}

}  // namespace

// The range (page-aligned, non-empty, exportable) is judged first, the flags
// after it: PCIE only where fakecuda_set_dma_buf_pcie(1) said the machine has
// the mapping, other bits NOT_SUPPORTED. The descriptor is a memfd named
// "dmabuf:", mode 0600 as a real one: not a dma-buf (nothing imports it, its
// bytes are not the memory's), and like one it outlives the memory.
FAKE_API CUresult CUDAAPI cuMemGetHandleForAddressRange(void* handle, CUdeviceptr dptr, size_t size,
                                                        CUmemRangeHandleType handleType, unsigned long long flags) {
    FAKE_ENTER(fake::kNeedsInit);
    State& st = fake::state();
    if (!fake::current_context(st)) return CUDA_ERROR_INVALID_CONTEXT;
    if (!handle || handleType != CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD) return CUDA_ERROR_INVALID_VALUE;
    const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
    const auto p = static_cast<std::uintptr_t>(dptr);
    if (size == 0 || p % page != 0 || size % page != 0 || size > ~std::uintptr_t{0} - p)
        return CUDA_ERROR_INVALID_VALUE;
    if (CUresult rc = exportable(st, p, size)) return rc;
    if ((flags & ~kPcie) != 0 || ((flags & kPcie) != 0 && !st.dma_buf_pcie)) return CUDA_ERROR_NOT_SUPPORTED;
    const int fd = ::memfd_create("dmabuf:", MFD_CLOEXEC);
    if (fd < 0) return CUDA_ERROR_OUT_OF_MEMORY;
    if (::ftruncate(fd, static_cast<off_t>(size)) != 0 || ::fchmod(fd, 0600) != 0) {
        ::close(fd);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    std::memcpy(handle, &fd, sizeof fd);
    return CUDA_SUCCESS;
}

#endif  // FAKE_HAS(11070)
