// cudyn — errors: codes, CUresult names, mapping from driver results.
#include "cudyn/core/error.hpp"
#include "cudyn/core/result.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace cudyn {

namespace {

struct CudaErrorRow {
    int value;
    const char* name;
    const char* description;
};

constexpr CudaErrorRow kCudaErrors[] = {
#include "cuda_error_table.inc"
};

const CudaErrorRow* find_cuda_error(CUresult result) noexcept {
    for (const CudaErrorRow& row : kCudaErrors)
        if (row.value == static_cast<int>(result)) return &row;
    return nullptr;
}

}  // namespace

const char* to_string(ErrorCode code) noexcept {
    switch (code) {
        case ErrorCode::NotSupported: return "not_supported";
        case ErrorCode::DriverNotFound: return "driver_not_found";
        case ErrorCode::StubDriver: return "stub_driver";
        case ErrorCode::DriverInitFailed: return "driver_init_failed";
        case ErrorCode::DriverRefused: return "driver_refused";
        case ErrorCode::InvalidArgument: return "invalid_argument";
        case ErrorCode::OutOfMemory: return "out_of_memory";
        case ErrorCode::Driver: return "driver";
        case ErrorCode::Io: return "io";
        case ErrorCode::Timeout: return "timeout";
        case ErrorCode::PermissionDenied: return "permission_denied";
    }
    return "unknown";
}

const char* cuda_error_name(CUresult result) noexcept {
    const CudaErrorRow* row = find_cuda_error(result);
    return row != nullptr ? row->name : "CUDA_ERROR_UNKNOWN_CODE";
}

const char* cuda_error_description(CUresult result) noexcept {
    const CudaErrorRow* row = find_cuda_error(result);
    return row != nullptr ? row->description : "unknown CUresult";
}

std::string Error::describe() const {
    std::string text = entry_point.empty() ? std::string(to_string(code)) : entry_point;
    if (driver_result != CUDA_SUCCESS)
        text += std::string(": ") + cuda_error_name(driver_result) + " (" +
                std::to_string(static_cast<int>(driver_result)) + ")";
    if (!message.empty()) text += ": " + message;
    return text;
}

Error Error::invalid_argument(std::string message) {
    return Error{ErrorCode::InvalidArgument, CUDA_SUCCESS, {}, std::move(message)};
}

Error Error::not_supported(std::string entry_point, std::string message) {
    return Error{ErrorCode::NotSupported, CUDA_SUCCESS, std::move(entry_point), std::move(message)};
}

Error Error::system(const char* call, int error_number, std::string message) {
    std::string text = std::strerror(error_number);
    text += " (" + std::to_string(error_number) + ")";
    if (!message.empty()) text += ": " + message;
    return Error{ErrorCode::Io, CUDA_SUCCESS, call, std::move(text)};
}

Error Error::timeout(std::string message) {
    return Error{ErrorCode::Timeout, CUDA_SUCCESS, {}, std::move(message)};
}

Error Error::permission_denied(std::string message) {
    return Error{ErrorCode::PermissionDenied, CUDA_SUCCESS, {}, std::move(message)};
}

Error Error::from_driver(CUresult result, std::string entry_point, std::string message) {
    ErrorCode code = ErrorCode::Driver;
    switch (result) {
        case CUDA_ERROR_STUB_LIBRARY: code = ErrorCode::StubDriver; break;
        case CUDA_ERROR_NOT_SUPPORTED: code = ErrorCode::NotSupported; break;
        case CUDA_ERROR_OUT_OF_MEMORY: code = ErrorCode::OutOfMemory; break;
        default: break;
    }
    if (message.empty()) message = cuda_error_description(result);
    return Error{code, result, std::move(entry_point), std::move(message)};
}

namespace detail {

void fail_bad_result_access(const Error& error) noexcept {
    std::fprintf(stderr, "cudyn: value() called on a failed Result: %s\n", error.describe().c_str());
    std::abort();
}

void fail_error_of_success() noexcept {
    std::fputs("cudyn: error() called on a Result that holds a value\n", stderr);
    std::abort();
}

}  // namespace detail

}  // namespace cudyn
