// fakecuda_placeholders.cpp — IPC entry points, not emulated yet (VMM lives
// in fakecuda_vmm.cpp).
//
// They are exported (where the variant's driver has them) so loaders find
// them, and answer CUDA_ERROR_NOT_SUPPORTED after the usual prologue (init
// check, fault injection, call counting). To emulate one family, delete its
// section here and implement the same functions in fakecuda_vmm.cpp /
// fakecuda_ipc.cpp (add the file to fakecuda_sources in meson.build);
// fakecuda_registry.cpp already lists them for cuGetProcAddress.
#include "fake_state.hpp"

// ---- legacy inter-process handles ---------------------------------------------------------------

FAKE_API CUresult CUDAAPI cuIpcGetMemHandle(CUipcMemHandle*, CUdeviceptr) {
    FAKE_ENTER(fake::kNeedsInit);
    return CUDA_ERROR_NOT_SUPPORTED;
}

FAKE_API CUresult CUDAAPI cuIpcOpenMemHandle(CUdeviceptr*, CUipcMemHandle, unsigned int) {
    FAKE_ENTER(fake::kNeedsInit);
    return CUDA_ERROR_NOT_SUPPORTED;
}

#if FAKE_HAS(11000)
FAKE_API CUresult CUDAAPI cuIpcOpenMemHandle_v2(CUdeviceptr*, CUipcMemHandle, unsigned int) {
    FAKE_ENTER(fake::kNeedsInit);
    return CUDA_ERROR_NOT_SUPPORTED;
}
#endif

FAKE_API CUresult CUDAAPI cuIpcCloseMemHandle(CUdeviceptr) {
    FAKE_ENTER(fake::kNeedsInit);
    return CUDA_ERROR_NOT_SUPPORTED;
}

FAKE_API CUresult CUDAAPI cuIpcGetEventHandle(CUipcEventHandle*, CUevent) {
    FAKE_ENTER(fake::kNeedsInit);
    return CUDA_ERROR_NOT_SUPPORTED;
}

FAKE_API CUresult CUDAAPI cuIpcOpenEventHandle(CUevent*, CUipcEventHandle) {
    FAKE_ENTER(fake::kNeedsInit);
    return CUDA_ERROR_NOT_SUPPORTED;
}
