// fakecuda_dmabuf.cpp — cuMemGetHandleForAddressRange (CUDA 11.7) with
// CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, on Linux (elsewhere
// fakecuda_vmm_unsupported.cpp answers CUDA_ERROR_NOT_SUPPORTED).
//
// What the driver accepts and refuses is the H200's with driver 580
// (docs/measurements/h200-2026-11-25-batch-dmabuf-hostvmm-pointers.md) and
// cuda.h's description of the entry:
//   - address and size aligned to the host page size, size non-zero, the
//     range inside one cuMemAlloc allocation, or inside one reservation and
//     wholly mapped by physical memory on one device with identical
//     properties; else CUDA_ERROR_INVALID_VALUE (an offset of 100 bytes, a
//     range past the allocation's end were measured);
//   - pinned host memory (cuMemHostAlloc) only where the device reports
//     HOST_ALLOC_DMA_BUF_SUPPORTED (0 on the H200: INVALID_VALUE there);
//     registered, managed, host-VMM, pool and IPC-opened memory
//     CUDA_ERROR_INVALID_VALUE (cuda.h names only cuMemAlloc, mapped
//     reservations and cuMemHostAlloc; managed and host VMM were measured);
//   - DMA_BUF_SUPPORTED 0 on the memory's device: CUDA_ERROR_NOT_SUPPORTED;
//   - flags: CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE is
//     CUDA_ERROR_NOT_SUPPORTED (as on the H200) unless
//     fakecuda_set_dma_buf_pcie(1) says this machine has the PCIe (BAR1)
//     mapping; other bits CUDA_ERROR_NOT_SUPPORTED (flags 7 measured). The
//     range is judged first, the flags after it.
//
// The descriptor is a memfd of the range's size named "dmabuf:" (its
// /proc/self/fd link reads "/memfd:dmabuf: (deleted)" where a real one reads
// "/dmabuf:"), mode 0600 as measured. It is not a dma-buf: no importer takes
// it and its bytes are not the memory's. Like a real one it outlives the
// memory (freeing the allocation while the descriptor is open is fine).
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

// CUDA_SUCCESS when [p, p + n) is memory the driver exports, else why not.
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
