// cudyn nccl — built only where nccl.h is found: every declaration of
// nccl_api.hpp against NCCL's own header, so a drifted value, struct or
// function shape fails the build instead of corrupting a call.
#include "nccl/nccl_api.hpp"

#include <nccl.h>

#include <type_traits>

namespace cudyn::nccl {

static_assert(kSuccess == ncclSuccess && kUnhandledCudaError == ncclUnhandledCudaError &&
                  kSystemError == ncclSystemError && kInternalError == ncclInternalError &&
                  kInvalidArgument == ncclInvalidArgument && kInvalidUsage == ncclInvalidUsage &&
                  kRemoteError == ncclRemoteError && kInProgress == ncclInProgress,
              "ncclResult_t values");
static_assert(kInt8 == ncclInt8 && kUint8 == ncclUint8 && kInt32 == ncclInt32 && kUint32 == ncclUint32 &&
                  kInt64 == ncclInt64 && kUint64 == ncclUint64 && kFloat16 == ncclFloat16 &&
                  kFloat32 == ncclFloat32 && kFloat64 == ncclFloat64 && kBfloat16 == ncclBfloat16,
              "ncclDataType_t values");
static_assert(kSum == ncclSum && kProd == ncclProd && kMax == ncclMax && kMin == ncclMin && kAvg == ncclAvg,
              "ncclRedOp_t values");
static_assert(kUniqueIdBytes == NCCL_UNIQUE_ID_BYTES && sizeof(UniqueIdBytes) == sizeof(ncclUniqueId),
              "ncclUniqueId");
static_assert(kWinCollSymmetric == NCCL_WIN_COLL_SYMMETRIC, "NCCL_WIN_COLL_SYMMETRIC");
static_assert(version_code(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH) == NCCL_VERSION_CODE, "ncclGetVersion's code");

using Nccl = Signatures<ncclResult_t, ncclComm_t, ncclUniqueId, ncclDataType_t, ncclRedOp_t, ncclWindow_t,
                        cudaStream_t>;
#define CUDYN_CHECK_SHAPE(entry, shape) \
    static_assert(std::is_same_v<decltype(&::entry), Nccl::shape>, #entry);
CUDYN_CHECK_SHAPE(ncclGetVersion, GetVersion)
CUDYN_CHECK_SHAPE(ncclGetErrorString, GetErrorString)
CUDYN_CHECK_SHAPE(ncclGetLastError, GetLastError)
CUDYN_CHECK_SHAPE(ncclGetUniqueId, GetUniqueId)
CUDYN_CHECK_SHAPE(ncclCommInitRank, CommInitRank)
CUDYN_CHECK_SHAPE(ncclCommFinalize, CommFinalize)
CUDYN_CHECK_SHAPE(ncclCommDestroy, CommDestroy)
CUDYN_CHECK_SHAPE(ncclCommRegister, CommRegister)
CUDYN_CHECK_SHAPE(ncclCommDeregister, CommDeregister)
CUDYN_CHECK_SHAPE(ncclCommWindowRegister, CommWindowRegister)
CUDYN_CHECK_SHAPE(ncclCommWindowDeregister, CommWindowDeregister)
CUDYN_CHECK_SHAPE(ncclAllReduce, AllReduce)
CUDYN_CHECK_SHAPE(ncclBroadcast, Broadcast)
CUDYN_CHECK_SHAPE(ncclMemAlloc, MemAlloc)
CUDYN_CHECK_SHAPE(ncclMemFree, MemFree)
CUDYN_CHECK_SHAPE(ncclGroupStart, GroupStart)
CUDYN_CHECK_SHAPE(ncclGroupEnd, GroupEnd)
#undef CUDYN_CHECK_SHAPE
// cudyn passes its CUstream where NCCL takes a cudaStream_t: the same type.
static_assert(std::is_same_v<cudaStream_t, CUstream_st*>, "cudaStream_t is CUstream");

}  // namespace cudyn::nccl
