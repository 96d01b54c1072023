// fakecuda_vmm_unsupported.cpp — the VMM and dma-buf entries where their
// emulation (memfd + mmap) does not exist: everywhere but Linux (the MinGW
// DLL). Exported as a real driver exports them, they answer NOT_SUPPORTED,
// and the VMM and DMA_BUF_SUPPORTED attributes read 0 (fakecuda_state.cpp).
#include "fake_state.hpp"

namespace fake {

int vmm_check(State&, std::uintptr_t, std::size_t) { return 0; }  // nothing is ever reserved

}  // namespace fake

#if FAKE_HAS(10020)

FAKE_API CUresult CUDAAPI cuMemGetAllocationGranularity(size_t*, const CUmemAllocationProp*,
                                                        CUmemAllocationGranularity_flags) {
    FAKE_ENTER(fake::kNeedsInit);
    return CUDA_ERROR_NOT_SUPPORTED;
}

FAKE_API CUresult CUDAAPI cuMemAddressReserve(CUdeviceptr*, size_t, size_t, CUdeviceptr, unsigned long long) {
    FAKE_ENTER(fake::kNeedsInit);
    return CUDA_ERROR_NOT_SUPPORTED;
}

FAKE_API CUresult CUDAAPI cuMemAddressFree(CUdeviceptr, size_t) {
    FAKE_ENTER(fake::kNeedsInit);
    return CUDA_ERROR_NOT_SUPPORTED;
}

FAKE_API CUresult CUDAAPI cuMemCreate(CUmemGenericAllocationHandle*, size_t, const CUmemAllocationProp*,
                                      unsigned long long) {
    FAKE_ENTER(fake::kNeedsInit);
    return CUDA_ERROR_NOT_SUPPORTED;
}

FAKE_API CUresult CUDAAPI cuMemRelease(CUmemGenericAllocationHandle) {
    FAKE_ENTER(fake::kNeedsInit);
    return CUDA_ERROR_NOT_SUPPORTED;
}

FAKE_API CUresult CUDAAPI cuMemMap(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long) {
    FAKE_ENTER(fake::kNeedsInit);
    return CUDA_ERROR_NOT_SUPPORTED;
}

FAKE_API CUresult CUDAAPI cuMemUnmap(CUdeviceptr, size_t) {
    FAKE_ENTER(fake::kNeedsInit);
    return CUDA_ERROR_NOT_SUPPORTED;
}

FAKE_API CUresult CUDAAPI cuMemSetAccess(CUdeviceptr, size_t, const CUmemAccessDesc*, size_t) {
    FAKE_ENTER(fake::kNeedsInit);
    return CUDA_ERROR_NOT_SUPPORTED;
}

FAKE_API CUresult CUDAAPI cuMemGetAccess(unsigned long long*, const CUmemLocation*, CUdeviceptr) {
    FAKE_ENTER(fake::kNeedsInit);
    return CUDA_ERROR_NOT_SUPPORTED;
}

FAKE_API CUresult CUDAAPI cuMemExportToShareableHandle(void*, CUmemGenericAllocationHandle, CUmemAllocationHandleType,
                                                       unsigned long long) {
    FAKE_ENTER(fake::kNeedsInit);
    return CUDA_ERROR_NOT_SUPPORTED;
}

FAKE_API CUresult CUDAAPI cuMemImportFromShareableHandle(CUmemGenericAllocationHandle*, void*,
                                                         CUmemAllocationHandleType) {
    FAKE_ENTER(fake::kNeedsInit);
    return CUDA_ERROR_NOT_SUPPORTED;
}

FAKE_API CUresult CUDAAPI cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp*, CUmemGenericAllocationHandle) {
    FAKE_ENTER(fake::kNeedsInit);
    return CUDA_ERROR_NOT_SUPPORTED;
}

#if FAKE_HAS(11000)
FAKE_API CUresult CUDAAPI cuMemRetainAllocationHandle(CUmemGenericAllocationHandle*, void*) {
    FAKE_ENTER(fake::kNeedsInit);
    return CUDA_ERROR_NOT_SUPPORTED;
}
#endif  // FAKE_HAS(11000)

#endif  // FAKE_HAS(10020)

// dma-buf descriptors are Linux's (fakecuda_dmabuf.cpp there).
#if FAKE_HAS(11070)
FAKE_API CUresult CUDAAPI cuMemGetHandleForAddressRange(void*, CUdeviceptr, size_t, CUmemRangeHandleType,
                                                        unsigned long long) {
    FAKE_ENTER(fake::kNeedsInit);
    return CUDA_ERROR_NOT_SUPPORTED;
}
#endif  // FAKE_HAS(11070)
