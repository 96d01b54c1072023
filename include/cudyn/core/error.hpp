// cudyn — the error type every fallible call reports.
#pragma once

#include <cuda.h>

#include <string>

namespace cudyn {

// What kind of failure an Error is. Callers branch on this; the CUresult and
// message carry the detail.
enum class ErrorCode {
    NotSupported,      // the driver or device really lacks the feature or entry point
    DriverNotFound,    // no driver library could be opened
    StubDriver,        // the toolkit's stub libcuda answered (CUDA_ERROR_STUB_LIBRARY)
    DriverInitFailed,  // the library opened but cuInit failed (no device, version mismatch, ...)
    DriverRefused,     // the loader refused the configured driver path (e.g. not absolute)
    InvalidArgument,   // cudyn rejected the arguments before calling the driver
    OutOfMemory,       // the driver could not allocate (CUDA_ERROR_OUT_OF_MEMORY)
    Driver,            // any other CUresult
    Io,                // a system call failed, or the peer of a channel closed it mid-exchange
    Timeout,           // a bounded wait (a channel's poll) expired
    PermissionDenied,  // a channel's peer failed the credential check, or a socket path is another user's
};

// A stable lower-case name for an ErrorCode ("not_supported", ...).
const char* to_string(ErrorCode code) noexcept;

// Names and descriptions of CUresult values, from a table generated at build
// time from cuda.h's cudaError_enum: they work with no driver and with the
// stub, which answers cuGetErrorName with nothing. Unknown values give
// "CUDA_ERROR_UNKNOWN_CODE" / "unknown CUresult".
const char* cuda_error_name(CUresult result) noexcept;
const char* cuda_error_description(CUresult result) noexcept;

struct Error {
    ErrorCode code = ErrorCode::Driver;
    CUresult driver_result = CUDA_SUCCESS;  // CUDA_SUCCESS when no driver call failed
    std::string entry_point;                // the driver entry involved, if any ("cuMemAlloc_v2")
    std::string message;                    // what went wrong, in words

    // "cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY (2): out of memory", or for a
    // validation error "invalid_argument: count must be non-zero".
    std::string describe() const;

    static Error invalid_argument(std::string message);
    static Error not_supported(std::string entry_point, std::string message);
    // Io naming the system call and errno: "sendmsg: Broken pipe (32): <message>".
    static Error system(const char* call, int error_number, std::string message);
    static Error timeout(std::string message);
    static Error permission_denied(std::string message);
    // Maps a failing CUresult to the matching ErrorCode (stub -> StubDriver,
    // CUDA_ERROR_NOT_SUPPORTED -> NotSupported, out of memory -> OutOfMemory, ...).
    static Error from_driver(CUresult result, std::string entry_point, std::string message = {});
};

}  // namespace cudyn
