// fakecuda_registry.cpp — what cuGetProcAddress* can hand out.
//
// One row per (base name, ABI version): the legacy-stream function and, for
// stream-ordered entries, the per-thread-default-stream twin. The versions
// are the ones of cudaTypedefs.h's PFN_<base>_v<version> typedefs, i.e. what
// the real driver registers. Rows are compiled in only where the variant
// exports the function (same FAKE_HAS guards as the definitions).
#include "fake_state.hpp"

#include <cudaTypedefs.h>

#include <type_traits>

namespace {

// cuMemcpyBatchAsync changed ABI without changing its base name: each row
// below must hand out the function of its version's typedef, or a program
// asking for one version gets the other's arguments.
#if FAKE_HAS(12080)
static_assert(std::is_same<decltype(&cuMemcpyBatchAsync), PFN_cuMemcpyBatchAsync_v12080>::value &&
                  std::is_same<decltype(&cuMemcpyBatchAsync_ptsz), PFN_cuMemcpyBatchAsync_v12080_ptsz>::value,
              "cuMemcpyBatchAsync@12080 is the 12.8 ABI (with failIdx)");
#endif
#if FAKE_HAS(13000)
static_assert(std::is_same<decltype(&cuMemcpyBatchAsync_v2), PFN_cuMemcpyBatchAsync_v13000>::value &&
                  std::is_same<decltype(&cuMemcpyBatchAsync_v2_ptsz), PFN_cuMemcpyBatchAsync_v13000_ptsz>::value,
              "cuMemcpyBatchAsync@13000 is the 13.0 ABI (without failIdx)");
#endif

#if FAKE_HAS(12080)
static_assert(std::is_same<decltype(&cuMemcpy3DBatchAsync), PFN_cuMemcpy3DBatchAsync_v12080>::value &&
                  std::is_same<decltype(&cuMemcpy3DBatchAsync_ptsz), PFN_cuMemcpy3DBatchAsync_v12080_ptsz>::value,
              "cuMemcpy3DBatchAsync@12080 is the 12.8 ABI (with failIdx)");
#endif
#if FAKE_HAS(13000)
static_assert(std::is_same<decltype(&cuMemcpy3DBatchAsync_v2), PFN_cuMemcpy3DBatchAsync_v13000>::value &&
                  std::is_same<decltype(&cuMemcpy3DBatchAsync_v2_ptsz), PFN_cuMemcpy3DBatchAsync_v13000_ptsz>::value,
              "cuMemcpy3DBatchAsync@13000 is the 13.0 ABI (without failIdx)");
#endif

template <typename F>
void* fn(F* f) {
    return reinterpret_cast<void*>(f);
}

const fake::ProcEntry kEntries[] = {
    // initialisation, version, errors, entry points
    {"cuInit", 2000, fn(&cuInit), nullptr},
    {"cuDriverGetVersion", 2020, fn(&cuDriverGetVersion), nullptr},
    {"cuGetErrorName", 6000, fn(&cuGetErrorName), nullptr},
    {"cuGetErrorString", 6000, fn(&cuGetErrorString), nullptr},
#if FAKE_HAS(11030)
    {"cuGetProcAddress", 11030, fn(&cuGetProcAddress), nullptr},
#endif
#if FAKE_HAS(12000)
    {"cuGetProcAddress", 12000, fn(&cuGetProcAddress_v2), nullptr},
#endif

    // devices
    {"cuDeviceGetCount", 2000, fn(&cuDeviceGetCount), nullptr},
    {"cuDeviceGet", 2000, fn(&cuDeviceGet), nullptr},
    {"cuDeviceGetName", 2000, fn(&cuDeviceGetName), nullptr},
    {"cuDeviceTotalMem", 2000, fn(&cuDeviceTotalMem), nullptr},
    {"cuDeviceTotalMem", 3020, fn(&cuDeviceTotalMem_v2), nullptr},
    {"cuDeviceGetAttribute", 2000, fn(&cuDeviceGetAttribute), nullptr},
    {"cuDeviceCanAccessPeer", 4000, fn(&cuDeviceCanAccessPeer), nullptr},
    {"cuDeviceGetUuid", 9020, fn(&cuDeviceGetUuid), nullptr},
#if FAKE_HAS(11040)
    {"cuDeviceGetUuid", 11040, fn(&cuDeviceGetUuid_v2), nullptr},
#endif
    {"cuDeviceGetPCIBusId", 4010, fn(&cuDeviceGetPCIBusId), nullptr},
    {"cuDeviceGetByPCIBusId", 4010, fn(&cuDeviceGetByPCIBusId), nullptr},
    {"cuDeviceGetLuid", 10000, fn(&cuDeviceGetLuid), nullptr},

    // contexts
    {"cuDevicePrimaryCtxRetain", 7000, fn(&cuDevicePrimaryCtxRetain), nullptr},
    {"cuDevicePrimaryCtxRelease", 7000, fn(&cuDevicePrimaryCtxRelease), nullptr},
#if FAKE_HAS(11000)
    {"cuDevicePrimaryCtxRelease", 11000, fn(&cuDevicePrimaryCtxRelease_v2), nullptr},
#endif
    {"cuDevicePrimaryCtxGetState", 7000, fn(&cuDevicePrimaryCtxGetState), nullptr},
    {"cuCtxSetCurrent", 4000, fn(&cuCtxSetCurrent), nullptr},
    {"cuCtxGetCurrent", 4000, fn(&cuCtxGetCurrent), nullptr},
    {"cuCtxGetDevice", 2000, fn(&cuCtxGetDevice), nullptr},
    {"cuCtxSynchronize", 2000, fn(&cuCtxSynchronize), nullptr},
    {"cuCtxEnablePeerAccess", 4000, fn(&cuCtxEnablePeerAccess), nullptr},
    {"cuCtxDisablePeerAccess", 4000, fn(&cuCtxDisablePeerAccess), nullptr},
    {"cuDeviceGetP2PAttribute", 8000, fn(&cuDeviceGetP2PAttribute), nullptr},
#if FAKE_HAS(13000)
    {"cuDeviceGetP2PAtomicCapabilities", 13000, fn(&cuDeviceGetP2PAtomicCapabilities), nullptr},
#endif
    {"cuMemcpyPeer", 4000, fn(&cuMemcpyPeer), fn(&cuMemcpyPeer_ptds)},
    {"cuMemcpyPeerAsync", 4000, fn(&cuMemcpyPeerAsync), fn(&cuMemcpyPeerAsync_ptsz)},
#if FAKE_HAS(13000)
    {"cuCtxGetDevice", 13000, fn(&cuCtxGetDevice_v2), nullptr},
    {"cuCtxSynchronize", 13000, fn(&cuCtxSynchronize_v2), nullptr},
#endif

    // streams and events
    {"cuStreamCreate", 2000, fn(&cuStreamCreate), nullptr},
    {"cuStreamDestroy", 2000, fn(&cuStreamDestroy), nullptr},
    {"cuStreamDestroy", 4000, fn(&cuStreamDestroy_v2), nullptr},
    {"cuStreamSynchronize", 2000, fn(&cuStreamSynchronize), fn(&cuStreamSynchronize_ptsz)},
    {"cuStreamQuery", 2000, fn(&cuStreamQuery), fn(&cuStreamQuery_ptsz)},
    {"cuStreamWaitEvent", 3020, fn(&cuStreamWaitEvent), fn(&cuStreamWaitEvent_ptsz)},
    {"cuEventCreate", 2000, fn(&cuEventCreate), nullptr},
    {"cuEventDestroy", 2000, fn(&cuEventDestroy), nullptr},
    {"cuEventDestroy", 4000, fn(&cuEventDestroy_v2), nullptr},
    {"cuEventRecord", 2000, fn(&cuEventRecord), fn(&cuEventRecord_ptsz)},
    {"cuEventSynchronize", 2000, fn(&cuEventSynchronize), nullptr},
    {"cuEventQuery", 2000, fn(&cuEventQuery), nullptr},
    {"cuEventElapsedTime", 2000, fn(&cuEventElapsedTime), nullptr},
#if FAKE_HAS(12080)
    {"cuEventElapsedTime", 12080, fn(&cuEventElapsedTime_v2), nullptr},
#endif

    // device memory, copies, sets, information
    {"cuMemAlloc", 2000, fn(&cuMemAlloc), nullptr},
    {"cuMemAlloc", 3020, fn(&cuMemAlloc_v2), nullptr},
    {"cuMemFree", 2000, fn(&cuMemFree), nullptr},
    {"cuMemFree", 3020, fn(&cuMemFree_v2), nullptr},
    {"cuMemGetInfo", 2000, fn(&cuMemGetInfo), nullptr},
    {"cuMemGetInfo", 3020, fn(&cuMemGetInfo_v2), nullptr},
    {"cuMemGetAddressRange", 2000, fn(&cuMemGetAddressRange), nullptr},
    {"cuMemGetAddressRange", 3020, fn(&cuMemGetAddressRange_v2), nullptr},
    {"cuMemcpy", 4000, fn(&cuMemcpy), fn(&cuMemcpy_ptds)},
    {"cuMemcpyAsync", 4000, fn(&cuMemcpyAsync), fn(&cuMemcpyAsync_ptsz)},
    {"cuMemcpyHtoD", 2000, fn(&cuMemcpyHtoD), nullptr},
    {"cuMemcpyHtoD", 3020, fn(&cuMemcpyHtoD_v2), fn(&cuMemcpyHtoD_v2_ptds)},
    {"cuMemcpyDtoH", 2000, fn(&cuMemcpyDtoH), nullptr},
    {"cuMemcpyDtoH", 3020, fn(&cuMemcpyDtoH_v2), fn(&cuMemcpyDtoH_v2_ptds)},
    {"cuMemcpyDtoD", 2000, fn(&cuMemcpyDtoD), nullptr},
    {"cuMemcpyDtoD", 3020, fn(&cuMemcpyDtoD_v2), fn(&cuMemcpyDtoD_v2_ptds)},
    {"cuMemcpyHtoDAsync", 2000, fn(&cuMemcpyHtoDAsync), nullptr},
    {"cuMemcpyHtoDAsync", 3020, fn(&cuMemcpyHtoDAsync_v2), fn(&cuMemcpyHtoDAsync_v2_ptsz)},
    {"cuMemcpyDtoHAsync", 2000, fn(&cuMemcpyDtoHAsync), nullptr},
    {"cuMemcpyDtoHAsync", 3020, fn(&cuMemcpyDtoHAsync_v2), fn(&cuMemcpyDtoHAsync_v2_ptsz)},
    {"cuMemcpyDtoDAsync", 3000, fn(&cuMemcpyDtoDAsync), nullptr},
    {"cuMemcpyDtoDAsync", 3020, fn(&cuMemcpyDtoDAsync_v2), fn(&cuMemcpyDtoDAsync_v2_ptsz)},
#if FAKE_HAS(12080)
    {"cuMemcpyBatchAsync", 12080, fn(&cuMemcpyBatchAsync), fn(&cuMemcpyBatchAsync_ptsz)},
#endif
#if FAKE_HAS(13000)
    {"cuMemcpyBatchAsync", 13000, fn(&cuMemcpyBatchAsync_v2), fn(&cuMemcpyBatchAsync_v2_ptsz)},
#endif
    {"cuMemsetD8", 2000, fn(&cuMemsetD8), nullptr},
    {"cuMemsetD8", 3020, fn(&cuMemsetD8_v2), fn(&cuMemsetD8_v2_ptds)},
    {"cuMemsetD8Async", 3020, fn(&cuMemsetD8Async), fn(&cuMemsetD8Async_ptsz)},
    {"cuMemsetD32", 2000, fn(&cuMemsetD32), nullptr},
    {"cuMemsetD32", 3020, fn(&cuMemsetD32_v2), fn(&cuMemsetD32_v2_ptds)},
    {"cuMemsetD32Async", 3020, fn(&cuMemsetD32Async), fn(&cuMemsetD32Async_ptsz)},

    // pitched memory, 2D and 3D copies, 16-bit and 2D sets, 3D batches (fakecuda_copy3d.cpp)
    {"cuMemAllocPitch", 3020, fn(&cuMemAllocPitch_v2), nullptr},
    {"cuMemcpy2D", 3020, fn(&cuMemcpy2D_v2), fn(&cuMemcpy2D_v2_ptds)},
    {"cuMemcpy2DAsync", 3020, fn(&cuMemcpy2DAsync_v2), fn(&cuMemcpy2DAsync_v2_ptsz)},
    {"cuMemcpy3D", 3020, fn(&cuMemcpy3D_v2), fn(&cuMemcpy3D_v2_ptds)},
    {"cuMemcpy3DAsync", 3020, fn(&cuMemcpy3DAsync_v2), fn(&cuMemcpy3DAsync_v2_ptsz)},
    {"cuMemsetD16", 3020, fn(&cuMemsetD16_v2), fn(&cuMemsetD16_v2_ptds)},
    {"cuMemsetD16Async", 3020, fn(&cuMemsetD16Async), fn(&cuMemsetD16Async_ptsz)},
    {"cuMemsetD2D8", 3020, fn(&cuMemsetD2D8_v2), fn(&cuMemsetD2D8_v2_ptds)},
    {"cuMemsetD2D8Async", 3020, fn(&cuMemsetD2D8Async), fn(&cuMemsetD2D8Async_ptsz)},
    {"cuMemsetD2D16", 3020, fn(&cuMemsetD2D16_v2), fn(&cuMemsetD2D16_v2_ptds)},
    {"cuMemsetD2D16Async", 3020, fn(&cuMemsetD2D16Async), fn(&cuMemsetD2D16Async_ptsz)},
    {"cuMemsetD2D32", 3020, fn(&cuMemsetD2D32_v2), fn(&cuMemsetD2D32_v2_ptds)},
    {"cuMemsetD2D32Async", 3020, fn(&cuMemsetD2D32Async), fn(&cuMemsetD2D32Async_ptsz)},
#if FAKE_HAS(12080)
    {"cuMemcpy3DBatchAsync", 12080, fn(&cuMemcpy3DBatchAsync), fn(&cuMemcpy3DBatchAsync_ptsz)},
#endif
#if FAKE_HAS(13000)
    {"cuMemcpy3DBatchAsync", 13000, fn(&cuMemcpy3DBatchAsync_v2), fn(&cuMemcpy3DBatchAsync_v2_ptsz)},
#endif

    // stream memory operations (fakecuda_stream_ops.cpp): the 8.0/9.0 ABI
    // and the 11.7 one
    {"cuStreamWriteValue32", 8000, fn(&cuStreamWriteValue32), nullptr},
    {"cuStreamWaitValue32", 8000, fn(&cuStreamWaitValue32), nullptr},
    {"cuStreamWriteValue64", 9000, fn(&cuStreamWriteValue64), nullptr},
    {"cuStreamWaitValue64", 9000, fn(&cuStreamWaitValue64), nullptr},
    {"cuStreamBatchMemOp", 8000, fn(&cuStreamBatchMemOp), nullptr},
#if FAKE_HAS(11070)
    {"cuStreamWriteValue32", 11070, fn(&cuStreamWriteValue32_v2), fn(&cuStreamWriteValue32_v2_ptsz)},
    {"cuStreamWaitValue32", 11070, fn(&cuStreamWaitValue32_v2), fn(&cuStreamWaitValue32_v2_ptsz)},
    {"cuStreamWriteValue64", 11070, fn(&cuStreamWriteValue64_v2), fn(&cuStreamWriteValue64_v2_ptsz)},
    {"cuStreamWaitValue64", 11070, fn(&cuStreamWaitValue64_v2), fn(&cuStreamWaitValue64_v2_ptsz)},
    {"cuStreamBatchMemOp", 11070, fn(&cuStreamBatchMemOp_v2), fn(&cuStreamBatchMemOp_v2_ptsz)},
#endif
    {"cuPointerGetAttribute", 4000, fn(&cuPointerGetAttribute), nullptr},
    {"cuPointerGetAttributes", 7000, fn(&cuPointerGetAttributes), nullptr},

    // pinned, mapped and registered host memory
    {"cuMemHostAlloc", 2020, fn(&cuMemHostAlloc), nullptr},
    {"cuMemFreeHost", 2000, fn(&cuMemFreeHost), nullptr},
    {"cuMemHostGetDevicePointer", 2020, fn(&cuMemHostGetDevicePointer), nullptr},
    {"cuMemHostGetDevicePointer", 3020, fn(&cuMemHostGetDevicePointer_v2), nullptr},
    {"cuMemHostRegister", 4000, fn(&cuMemHostRegister), nullptr},
    {"cuMemHostRegister", 6050, fn(&cuMemHostRegister_v2), nullptr},
    {"cuMemHostUnregister", 4000, fn(&cuMemHostUnregister), nullptr},

    // managed memory
    {"cuMemAllocManaged", 6000, fn(&cuMemAllocManaged), nullptr},
    {"cuMemAdvise", 8000, fn(&cuMemAdvise), nullptr},
    {"cuMemPrefetchAsync", 8000, fn(&cuMemPrefetchAsync), fn(&cuMemPrefetchAsync_ptsz)},
#if FAKE_HAS(12020)
    {"cuMemAdvise", 12020, fn(&cuMemAdvise_v2), nullptr},
    {"cuMemPrefetchAsync", 12020, fn(&cuMemPrefetchAsync_v2), fn(&cuMemPrefetchAsync_v2_ptsz)},
#endif
#if FAKE_HAS(13000)
    {"cuMemPrefetchBatchAsync", 13000, fn(&cuMemPrefetchBatchAsync), fn(&cuMemPrefetchBatchAsync_ptsz)},
    {"cuMemDiscardBatchAsync", 13000, fn(&cuMemDiscardBatchAsync), fn(&cuMemDiscardBatchAsync_ptsz)},
    {"cuMemDiscardAndPrefetchBatchAsync", 13000, fn(&cuMemDiscardAndPrefetchBatchAsync),
     fn(&cuMemDiscardAndPrefetchBatchAsync_ptsz)},
#endif
    {"cuMemRangeGetAttribute", 8000, fn(&cuMemRangeGetAttribute), nullptr},
    {"cuStreamAttachMemAsync", 6000, fn(&cuStreamAttachMemAsync), fn(&cuStreamAttachMemAsync_ptsz)},

    // virtual memory management
#if FAKE_HAS(10020)
    {"cuMemGetAllocationGranularity", 10020, fn(&cuMemGetAllocationGranularity), nullptr},
    {"cuMemAddressReserve", 10020, fn(&cuMemAddressReserve), nullptr},
    {"cuMemAddressFree", 10020, fn(&cuMemAddressFree), nullptr},
    {"cuMemCreate", 10020, fn(&cuMemCreate), nullptr},
    {"cuMemRelease", 10020, fn(&cuMemRelease), nullptr},
    {"cuMemMap", 10020, fn(&cuMemMap), nullptr},
    {"cuMemUnmap", 10020, fn(&cuMemUnmap), nullptr},
    {"cuMemSetAccess", 10020, fn(&cuMemSetAccess), nullptr},
    {"cuMemGetAccess", 10020, fn(&cuMemGetAccess), nullptr},
    {"cuMemExportToShareableHandle", 10020, fn(&cuMemExportToShareableHandle), nullptr},
    {"cuMemImportFromShareableHandle", 10020, fn(&cuMemImportFromShareableHandle), nullptr},
    {"cuMemGetAllocationPropertiesFromHandle", 10020, fn(&cuMemGetAllocationPropertiesFromHandle), nullptr},
#endif
#if FAKE_HAS(11000)
    {"cuMemRetainAllocationHandle", 11000, fn(&cuMemRetainAllocationHandle), nullptr},
#endif
#if FAKE_HAS(11070)
    {"cuMemGetHandleForAddressRange", 11070, fn(&cuMemGetHandleForAddressRange), nullptr},  // dma-buf
#endif

    // stream-ordered allocation and memory pools
#if FAKE_HAS(11020)
    {"cuMemAllocAsync", 11020, fn(&cuMemAllocAsync), fn(&cuMemAllocAsync_ptsz)},
    {"cuMemAllocFromPoolAsync", 11020, fn(&cuMemAllocFromPoolAsync), fn(&cuMemAllocFromPoolAsync_ptsz)},
    {"cuMemFreeAsync", 11020, fn(&cuMemFreeAsync), fn(&cuMemFreeAsync_ptsz)},
    {"cuMemPoolCreate", 11020, fn(&cuMemPoolCreate), nullptr},
    {"cuMemPoolDestroy", 11020, fn(&cuMemPoolDestroy), nullptr},
    {"cuMemPoolSetAttribute", 11020, fn(&cuMemPoolSetAttribute), nullptr},
    {"cuMemPoolGetAttribute", 11020, fn(&cuMemPoolGetAttribute), nullptr},
    {"cuMemPoolTrimTo", 11020, fn(&cuMemPoolTrimTo), nullptr},
    {"cuMemPoolSetAccess", 11020, fn(&cuMemPoolSetAccess), nullptr},
    {"cuMemPoolGetAccess", 11020, fn(&cuMemPoolGetAccess), nullptr},
    {"cuDeviceGetDefaultMemPool", 11020, fn(&cuDeviceGetDefaultMemPool), nullptr},
    {"cuDeviceGetMemPool", 11020, fn(&cuDeviceGetMemPool), nullptr},
    {"cuDeviceSetMemPool", 11020, fn(&cuDeviceSetMemPool), nullptr},
    {"cuMemPoolExportToShareableHandle", 11020, fn(&cuMemPoolExportToShareableHandle), nullptr},
    {"cuMemPoolImportFromShareableHandle", 11020, fn(&cuMemPoolImportFromShareableHandle), nullptr},
    {"cuMemPoolExportPointer", 11020, fn(&cuMemPoolExportPointer), nullptr},
    {"cuMemPoolImportPointer", 11020, fn(&cuMemPoolImportPointer), nullptr},
#endif
#if FAKE_HAS(13000)
    {"cuMemGetDefaultMemPool", 13000, fn(&cuMemGetDefaultMemPool), nullptr},
    {"cuMemGetMemPool", 13000, fn(&cuMemGetMemPool), nullptr},
    {"cuMemSetMemPool", 13000, fn(&cuMemSetMemPool), nullptr},
#endif

    // inter-process handles
    {"cuIpcGetMemHandle", 4010, fn(&cuIpcGetMemHandle), nullptr},
    {"cuIpcOpenMemHandle", 4010, fn(&cuIpcOpenMemHandle), nullptr},
#if FAKE_HAS(11000)
    {"cuIpcOpenMemHandle", 11000, fn(&cuIpcOpenMemHandle_v2), nullptr},
#endif
    {"cuIpcCloseMemHandle", 4010, fn(&cuIpcCloseMemHandle), nullptr},
    {"cuIpcGetEventHandle", 4010, fn(&cuIpcGetEventHandle), nullptr},
    {"cuIpcOpenEventHandle", 4010, fn(&cuIpcOpenEventHandle), nullptr},

    // modules and launches
    {"cuModuleLoadData", 2000, fn(&cuModuleLoadData), nullptr},
    {"cuModuleUnload", 2000, fn(&cuModuleUnload), nullptr},
    {"cuModuleGetFunction", 2000, fn(&cuModuleGetFunction), nullptr},
    {"cuLaunchKernel", 4000, fn(&cuLaunchKernel), fn(&cuLaunchKernel_ptsz)},
#if FAKE_HAS(12080)
    // checkpoint and restore (fakecuda_checkpoint.cpp)
    {"cuCheckpointProcessGetState", 12080, fn(&cuCheckpointProcessGetState), nullptr},
    {"cuCheckpointProcessGetRestoreThreadId", 12080, fn(&cuCheckpointProcessGetRestoreThreadId), nullptr},
    {"cuCheckpointProcessLock", 12080, fn(&cuCheckpointProcessLock), nullptr},
    {"cuCheckpointProcessCheckpoint", 12080, fn(&cuCheckpointProcessCheckpoint), nullptr},
    {"cuCheckpointProcessRestore", 12080, fn(&cuCheckpointProcessRestore), nullptr},
    {"cuCheckpointProcessUnlock", 12080, fn(&cuCheckpointProcessUnlock), nullptr},
#endif
};

}  // namespace

namespace fake {

const ProcEntry* proc_entries(std::size_t* count) {
    *count = sizeof(kEntries) / sizeof(kEntries[0]);
    return kEntries;
}

}  // namespace fake
