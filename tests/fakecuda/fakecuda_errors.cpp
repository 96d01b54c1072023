// fakecuda_errors.cpp — cuGetErrorName / cuGetErrorString.
//
// Names are the enumerator spellings of cuda.h's CUresult (stringized, so they
// cannot drift from the header); descriptions are the driver's short strings
// for the codes tests meet, and a phrase derived from the name for the rest.
#include "fake_state.hpp"
#include "fake_enum.hpp"

#include <cctype>
#include <cstring>

namespace fake {
namespace {

struct ErrorEntry {
    CUresult code;
    const char* name;
    const char* text;  // nullptr: derived from the name
};

#define FAKE_ERR(code, text) {code, #code, text}

const ErrorEntry kErrors[] = {
    FAKE_ERR(CUDA_SUCCESS, "no error"),
    FAKE_ERR(CUDA_ERROR_INVALID_VALUE, "invalid argument"),
    FAKE_ERR(CUDA_ERROR_OUT_OF_MEMORY, "out of memory"),
    FAKE_ERR(CUDA_ERROR_NOT_INITIALIZED, "initialization error"),
    FAKE_ERR(CUDA_ERROR_DEINITIALIZED, "driver shutting down"),
    FAKE_ERR(CUDA_ERROR_PROFILER_DISABLED, "profiler disabled while using external profiling tool"),
    FAKE_ERR(CUDA_ERROR_PROFILER_NOT_INITIALIZED, nullptr),
    FAKE_ERR(CUDA_ERROR_PROFILER_ALREADY_STARTED, nullptr),
    FAKE_ERR(CUDA_ERROR_PROFILER_ALREADY_STOPPED, nullptr),
    FAKE_ERR(CUDA_ERROR_STUB_LIBRARY, "CUDA driver is a stub library"),
    FAKE_ERR(CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER,
             "API call is not supported in the installed CUDA driver"),
    FAKE_ERR(CUDA_ERROR_DEVICE_UNAVAILABLE, "CUDA-capable device(s) is/are busy or unavailable"),
    FAKE_ERR(CUDA_ERROR_NO_DEVICE, "no CUDA-capable device is detected"),
    FAKE_ERR(CUDA_ERROR_INVALID_DEVICE, "invalid device ordinal"),
    FAKE_ERR(CUDA_ERROR_DEVICE_NOT_LICENSED, "device doesn't have valid Grid license"),
    FAKE_ERR(CUDA_ERROR_INVALID_IMAGE, "device kernel image is invalid"),
    FAKE_ERR(CUDA_ERROR_INVALID_CONTEXT, "invalid device context"),
    FAKE_ERR(CUDA_ERROR_CONTEXT_ALREADY_CURRENT, "context already current"),
    FAKE_ERR(CUDA_ERROR_MAP_FAILED, "mapping of buffer object failed"),
    FAKE_ERR(CUDA_ERROR_UNMAP_FAILED, "unmapping of buffer object failed"),
    FAKE_ERR(CUDA_ERROR_ARRAY_IS_MAPPED, "array is mapped"),
    FAKE_ERR(CUDA_ERROR_ALREADY_MAPPED, "resource already mapped"),
    FAKE_ERR(CUDA_ERROR_NO_BINARY_FOR_GPU, "no kernel image is available for execution on the device"),
    FAKE_ERR(CUDA_ERROR_ALREADY_ACQUIRED, "resource already acquired"),
    FAKE_ERR(CUDA_ERROR_NOT_MAPPED, "resource not mapped"),
    FAKE_ERR(CUDA_ERROR_NOT_MAPPED_AS_ARRAY, "resource not mapped as array"),
    FAKE_ERR(CUDA_ERROR_NOT_MAPPED_AS_POINTER, "resource not mapped as pointer"),
    FAKE_ERR(CUDA_ERROR_ECC_UNCORRECTABLE, "uncorrectable ECC error encountered"),
    FAKE_ERR(CUDA_ERROR_UNSUPPORTED_LIMIT, "limit is not supported on this architecture"),
    FAKE_ERR(CUDA_ERROR_CONTEXT_ALREADY_IN_USE, "exclusive-thread device already in use by a different thread"),
    FAKE_ERR(CUDA_ERROR_PEER_ACCESS_UNSUPPORTED, "peer access is not supported between these two devices"),
    FAKE_ERR(CUDA_ERROR_INVALID_PTX, "a PTX JIT compilation failed"),
    FAKE_ERR(CUDA_ERROR_INVALID_GRAPHICS_CONTEXT, "invalid OpenGL or DirectX context"),
    FAKE_ERR(CUDA_ERROR_NVLINK_UNCORRECTABLE, "uncorrectable NVLink error detected during the execution"),
    FAKE_ERR(CUDA_ERROR_JIT_COMPILER_NOT_FOUND, "PTX JIT compiler library not found"),
    FAKE_ERR(CUDA_ERROR_UNSUPPORTED_PTX_VERSION, "the provided PTX was compiled with an unsupported toolchain."),
    FAKE_ERR(CUDA_ERROR_JIT_COMPILATION_DISABLED, "PTX JIT compilation was disabled"),
    FAKE_ERR(CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY, nullptr),
    FAKE_ERR(CUDA_ERROR_UNSUPPORTED_DEVSIDE_SYNC, nullptr),
    FAKE_ERR(CUDA_ERROR_CONTAINED, nullptr),
    FAKE_ERR(CUDA_ERROR_INVALID_SOURCE, "device kernel image is invalid"),
    FAKE_ERR(CUDA_ERROR_FILE_NOT_FOUND, "file not found"),
    FAKE_ERR(CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND, "shared object symbol not found"),
    FAKE_ERR(CUDA_ERROR_SHARED_OBJECT_INIT_FAILED, "shared object initialization failed"),
    FAKE_ERR(CUDA_ERROR_OPERATING_SYSTEM, "OS call failed or operation not supported on this OS"),
    FAKE_ERR(CUDA_ERROR_INVALID_HANDLE, "invalid resource handle"),
    FAKE_ERR(CUDA_ERROR_ILLEGAL_STATE, "the operation cannot be performed in the present state"),
    FAKE_ERR(CUDA_ERROR_LOSSY_QUERY, nullptr),
    FAKE_ERR(CUDA_ERROR_NOT_FOUND, "named symbol not found"),
    FAKE_ERR(CUDA_ERROR_NOT_READY, "device not ready"),
    FAKE_ERR(CUDA_ERROR_ILLEGAL_ADDRESS, "an illegal memory access was encountered"),
    FAKE_ERR(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, "too many resources requested for launch"),
    FAKE_ERR(CUDA_ERROR_LAUNCH_TIMEOUT, "the launch timed out and was terminated"),
    FAKE_ERR(CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING, "launch uses incompatible texturing mode"),
    FAKE_ERR(CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, "peer access is already enabled"),
    FAKE_ERR(CUDA_ERROR_PEER_ACCESS_NOT_ENABLED, "peer access has not been enabled"),
    FAKE_ERR(CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE, "cannot set while device is active in this process"),
    FAKE_ERR(CUDA_ERROR_CONTEXT_IS_DESTROYED, "context is destroyed"),
    FAKE_ERR(CUDA_ERROR_ASSERT, "device-side assert triggered"),
    FAKE_ERR(CUDA_ERROR_TOO_MANY_PEERS, "peer mapping resources exhausted"),
    FAKE_ERR(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED,
             "part or all of the requested memory range is already mapped"),
    FAKE_ERR(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED,
             "pointer does not correspond to a registered memory region"),
    FAKE_ERR(CUDA_ERROR_HARDWARE_STACK_ERROR, "hardware stack error"),
    FAKE_ERR(CUDA_ERROR_ILLEGAL_INSTRUCTION, "an illegal instruction was encountered"),
    FAKE_ERR(CUDA_ERROR_MISALIGNED_ADDRESS, "misaligned address"),
    FAKE_ERR(CUDA_ERROR_INVALID_ADDRESS_SPACE, "operation not supported on global/shared address space"),
    FAKE_ERR(CUDA_ERROR_INVALID_PC, "invalid program counter"),
    FAKE_ERR(CUDA_ERROR_LAUNCH_FAILED, "unspecified launch failure"),
    FAKE_ERR(CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE, "too many blocks in cooperative launch"),
    FAKE_ERR(CUDA_ERROR_TENSOR_MEMORY_LEAK, nullptr),
    FAKE_ERR(CUDA_ERROR_NOT_PERMITTED, "operation not permitted"),
    FAKE_ERR(CUDA_ERROR_NOT_SUPPORTED, "operation not supported"),
    FAKE_ERR(CUDA_ERROR_SYSTEM_NOT_READY, "system not yet initialized"),
    FAKE_ERR(CUDA_ERROR_SYSTEM_DRIVER_MISMATCH,
             "system has unsupported display driver / cuda driver combination"),
    FAKE_ERR(CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE,
             "forward compatibility was attempted on non supported HW"),
    FAKE_ERR(CUDA_ERROR_MPS_CONNECTION_FAILED, "MPS client failed to connect to the MPS control daemon or the MPS server"),
    FAKE_ERR(CUDA_ERROR_MPS_RPC_FAILURE, nullptr),
    FAKE_ERR(CUDA_ERROR_MPS_SERVER_NOT_READY, nullptr),
    FAKE_ERR(CUDA_ERROR_MPS_MAX_CLIENTS_REACHED, nullptr),
    FAKE_ERR(CUDA_ERROR_MPS_MAX_CONNECTIONS_REACHED, nullptr),
    FAKE_ERR(CUDA_ERROR_MPS_CLIENT_TERMINATED, nullptr),
    FAKE_ERR(CUDA_ERROR_CDP_NOT_SUPPORTED, nullptr),
    FAKE_ERR(CUDA_ERROR_CDP_VERSION_MISMATCH, nullptr),
    FAKE_ERR(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "operation not permitted when stream is capturing"),
    FAKE_ERR(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, nullptr),
    FAKE_ERR(CUDA_ERROR_STREAM_CAPTURE_MERGE, nullptr),
    FAKE_ERR(CUDA_ERROR_STREAM_CAPTURE_UNMATCHED, nullptr),
    FAKE_ERR(CUDA_ERROR_STREAM_CAPTURE_UNJOINED, nullptr),
    FAKE_ERR(CUDA_ERROR_STREAM_CAPTURE_ISOLATION, nullptr),
    FAKE_ERR(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, nullptr),
    FAKE_ERR(CUDA_ERROR_CAPTURED_EVENT, nullptr),
    FAKE_ERR(CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, nullptr),
    FAKE_ERR(CUDA_ERROR_TIMEOUT, "wait operation timed out"),
    FAKE_ERR(CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, nullptr),
    FAKE_ERR(CUDA_ERROR_EXTERNAL_DEVICE, nullptr),
    FAKE_ERR(CUDA_ERROR_INVALID_CLUSTER_SIZE, nullptr),
    FAKE_ERR(CUDA_ERROR_FUNCTION_NOT_LOADED, nullptr),
    FAKE_ERR(CUDA_ERROR_INVALID_RESOURCE_TYPE, nullptr),
    FAKE_ERR(CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION, nullptr),
    FAKE_ERR(CUDA_ERROR_KEY_ROTATION, nullptr),
    FAKE_ERR(CUDA_ERROR_UNKNOWN, "unknown error"),
};

#undef FAKE_ERR

constexpr std::size_t kErrorCount = sizeof(kErrors) / sizeof(kErrors[0]);

// "CUDA_ERROR_STREAM_CAPTURE_MERGE" -> "stream capture merge"
struct Derived {
    char text[kErrorCount][64];
    Derived() {
        for (std::size_t i = 0; i < kErrorCount; ++i) {
            const char* n = kErrors[i].name;
            const char* prefix = "CUDA_ERROR_";
            if (std::strncmp(n, prefix, std::strlen(prefix)) == 0) n += std::strlen(prefix);
            std::size_t j = 0;
            for (; *n && j + 1 < sizeof text[i]; ++n, ++j) {
                text[i][j] = (*n == '_') ? ' ' : static_cast<char>(std::tolower(static_cast<unsigned char>(*n)));
            }
            text[i][j] = '\0';
        }
    }
};

// Codes are compared as int: a caller may pass any value.
const ErrorEntry* find_error(int rc) {
    for (const auto& e : kErrors) {
        if (static_cast<int>(e.code) == rc) return &e;
    }
    return nullptr;
}

const char* name_of(int rc) {
    const ErrorEntry* e = find_error(rc);
    return e ? e->name : nullptr;
}

const char* string_of(int rc) {
    static const Derived derived;
    const ErrorEntry* e = find_error(rc);
    if (!e) return nullptr;
    if (e->text) return e->text;
    return derived.text[static_cast<std::size_t>(e - kErrors)];
}

}  // namespace

const char* error_name(CUresult rc) { return name_of(raw(rc)); }

const char* error_string(CUresult rc) { return string_of(raw(rc)); }

CUresult error_from_name(const std::string& name, bool* ok) {
    for (const auto& e : kErrors) {
        if (name == e.name) {
            *ok = true;
            return e.code;
        }
    }
    *ok = false;
    return CUDA_ERROR_UNKNOWN;
}

}  // namespace fake

// Neither needs cuInit. Unknown code: CUDA_ERROR_INVALID_VALUE and *pStr = NULL.
FAKE_API CUresult CUDAAPI cuGetErrorName(CUresult error, const char** pStr) {
    FAKE_ENTER(fake::kNoInit);
    if (!pStr) return CUDA_ERROR_INVALID_VALUE;
    *pStr = fake::name_of(fake::raw(error));
    return *pStr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

FAKE_API CUresult CUDAAPI cuGetErrorString(CUresult error, const char** pStr) {
    FAKE_ENTER(fake::kNoInit);
    if (!pStr) return CUDA_ERROR_INVALID_VALUE;
    *pStr = fake::string_of(fake::raw(error));
    return *pStr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
