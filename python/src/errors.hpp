// How a cudyn::Error crosses into Python: thrown as NativeError inside the
// bindings, turned by the module's translator into an instance of the
// matching cudyn.errors class (cudyn.Error and one subclass per ErrorCode).
#pragma once

#include <cudyn/core/error.hpp>
#include <cudyn/core/result.hpp>

#include <exception>
#include <string>
#include <utility>

namespace cudyn_python {

struct NativeError : std::exception {
    explicit NativeError(cudyn::Error e) : error(std::move(e)), text(error.describe()) {}
    const char* what() const noexcept override { return text.c_str(); }
    cudyn::Error error;
    std::string text;
};

[[noreturn]] inline void raise(cudyn::Error error) { throw NativeError(std::move(error)); }

// A bad argument found by the bindings themselves, before any driver call.
[[noreturn]] inline void raise_invalid(std::string message) {
    raise(cudyn::Error::invalid_argument(std::move(message)));
}

template <typename T>
T unwrap(cudyn::Result<T>&& result) {
    if (!result) raise(std::move(result).error());
    return std::move(result).value();
}

inline void unwrap(cudyn::Result<void>&& result) {
    if (!result) raise(std::move(result).error());
}

// Installs the translator (once, at module import).
void register_error_translator();

}  // namespace cudyn_python
