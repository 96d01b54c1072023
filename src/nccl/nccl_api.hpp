// cudyn nccl — the few NCCL types, values and function shapes cudyn uses,
// declared here so that no nccl.h is needed to build (NCCL often comes only
// as a Python wheel's shared library). Where a build finds nccl.h,
// nccl_api_check.cpp compares every declaration below with it.
#pragma once

#include <cstddef>

struct CUstream_st;

namespace cudyn::nccl {

// ncclResult_t values.
constexpr int kSuccess = 0;
constexpr int kUnhandledCudaError = 1;
constexpr int kSystemError = 2;
constexpr int kInternalError = 3;
constexpr int kInvalidArgument = 4;
constexpr int kInvalidUsage = 5;
constexpr int kRemoteError = 6;
constexpr int kInProgress = 7;

// ncclDataType_t values.
constexpr int kInt8 = 0;
constexpr int kUint8 = 1;
constexpr int kInt32 = 2;
constexpr int kUint32 = 3;
constexpr int kInt64 = 4;
constexpr int kUint64 = 5;
constexpr int kFloat16 = 6;
constexpr int kFloat32 = 7;
constexpr int kFloat64 = 8;
constexpr int kBfloat16 = 9;

// ncclRedOp_t values.
constexpr int kSum = 0;
constexpr int kProd = 1;
constexpr int kMax = 2;
constexpr int kMin = 3;
constexpr int kAvg = 4;

// NCCL_UNIQUE_ID_BYTES and ncclUniqueId.
constexpr std::size_t kUniqueIdBytes = 128;
struct UniqueIdBytes {
    char internal[kUniqueIdBytes];
};

// NCCL_WIN_COLL_SYMMETRIC: a window every rank registers at the same offset
// of memory of the same size, which symmetric kernels may use.
constexpr int kWinCollSymmetric = 0x01;

// ncclGetVersion's code: major * 10000 + minor * 100 + patch since 2.9.
constexpr int version_code(int major, int minor, int patch = 0) noexcept { return major * 10000 + minor * 100 + patch; }

struct CommOpaque;    // struct ncclComm
struct WindowOpaque;  // NCCL's window record

// The function shapes, over the types that stand for NCCL's own: cudyn
// instantiates them with its declarations, the check with nccl.h's.
template <typename Result, typename Comm, typename UniqueId, typename DataType, typename RedOp, typename Window,
          typename Stream>
struct Signatures {
    using GetVersion = Result (*)(int*);
    using GetErrorString = const char* (*)(Result);
    using GetLastError = const char* (*)(Comm);
    using GetUniqueId = Result (*)(UniqueId*);
    using CommInitRank = Result (*)(Comm*, int, UniqueId, int);
    using CommFinalize = Result (*)(Comm);
    using CommDestroy = Result (*)(Comm);
    using CommRegister = Result (*)(const Comm, void*, std::size_t, void**);
    using CommDeregister = Result (*)(const Comm, void*);
    using CommWindowRegister = Result (*)(Comm, void*, std::size_t, Window*, int);
    using CommWindowDeregister = Result (*)(Comm, Window);
    using AllReduce = Result (*)(const void*, void*, std::size_t, DataType, RedOp, Comm, Stream);
    using Broadcast = Result (*)(const void*, void*, std::size_t, DataType, int, Comm, Stream);
    using MemAlloc = Result (*)(void**, std::size_t);
    using MemFree = Result (*)(void*);
    using GroupStart = Result (*)();
    using GroupEnd = Result (*)();
};
using Comm = CommOpaque*;
using Window = WindowOpaque*;
using Pfn = Signatures<int, Comm, UniqueIdBytes, int, int, Window, CUstream_st*>;

}  // namespace cudyn::nccl
