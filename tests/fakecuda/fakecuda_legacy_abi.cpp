// fakecuda_legacy_abi.cpp — the unsuffixed 32-bit v1 ABIs (cuMemAlloc,
// cuMemcpyHtoD, ...) a real driver still exports and cuda.h renames to _v2. A
// loader that reaches one (dlsym of the bare name, cuGetProcAddress below
// 3020) gets a trap: nothing written, a line on stderr, NOT_SUPPORTED.
#include "fake_state.hpp"

#include <cstdio>

namespace {
CUresult trap(const char* name) {
    std::fprintf(stderr, "fakecuda: 32-bit v1 ABI %s called (use the _v2 entry point)\n", name);
    return CUDA_ERROR_NOT_SUPPORTED;
}
}  // namespace

FAKE_API CUresult CUDAAPI cuDeviceTotalMem(unsigned int*, CUdevice) {
    FAKE_ENTER(fake::kNeedsInit);
    return trap(__func__);
}

FAKE_API CUresult CUDAAPI cuMemAlloc(CUdeviceptr_v1*, unsigned int) {
    FAKE_ENTER(fake::kNeedsInit);
    return trap(__func__);
}

FAKE_API CUresult CUDAAPI cuMemFree(CUdeviceptr_v1) {
    FAKE_ENTER(fake::kNeedsInit);
    return trap(__func__);
}

FAKE_API CUresult CUDAAPI cuMemGetInfo(unsigned int*, unsigned int*) {
    FAKE_ENTER(fake::kNeedsInit);
    return trap(__func__);
}

FAKE_API CUresult CUDAAPI cuMemGetAddressRange(CUdeviceptr_v1*, unsigned int*, CUdeviceptr_v1) {
    FAKE_ENTER(fake::kNeedsInit);
    return trap(__func__);
}

FAKE_API CUresult CUDAAPI cuMemHostGetDevicePointer(CUdeviceptr_v1*, void*, unsigned int) {
    FAKE_ENTER(fake::kNeedsInit);
    return trap(__func__);
}

FAKE_API CUresult CUDAAPI cuMemcpyHtoD(CUdeviceptr_v1, const void*, unsigned int) {
    FAKE_ENTER(fake::kNeedsInit);
    return trap(__func__);
}

FAKE_API CUresult CUDAAPI cuMemcpyDtoH(void*, CUdeviceptr_v1, unsigned int) {
    FAKE_ENTER(fake::kNeedsInit);
    return trap(__func__);
}

FAKE_API CUresult CUDAAPI cuMemcpyDtoD(CUdeviceptr_v1, CUdeviceptr_v1, unsigned int) {
    FAKE_ENTER(fake::kNeedsInit);
    return trap(__func__);
}

FAKE_API CUresult CUDAAPI cuMemcpyHtoDAsync(CUdeviceptr_v1, const void*, unsigned int, CUstream) {
    FAKE_ENTER(fake::kNeedsInit);
    return trap(__func__);
}

FAKE_API CUresult CUDAAPI cuMemcpyDtoHAsync(void*, CUdeviceptr_v1, unsigned int, CUstream) {
    FAKE_ENTER(fake::kNeedsInit);
    return trap(__func__);
}

FAKE_API CUresult CUDAAPI cuMemcpyDtoDAsync(CUdeviceptr_v1, CUdeviceptr_v1, unsigned int, CUstream) {
    FAKE_ENTER(fake::kNeedsInit);
    return trap(__func__);
}

FAKE_API CUresult CUDAAPI cuMemsetD8(CUdeviceptr_v1, unsigned char, unsigned int) {
    FAKE_ENTER(fake::kNeedsInit);
    return trap(__func__);
}

FAKE_API CUresult CUDAAPI cuMemsetD32(CUdeviceptr_v1, unsigned int, unsigned int) {
    FAKE_ENTER(fake::kNeedsInit);
    return trap(__func__);
}
