// cudyn — private helpers every module uses: errors that name their
// operation, the one hex formatter, the range-inside-its-allocation check,
// the entry-presence check and the fabric refusals.
#pragma once

#include "cudyn/core/error.hpp"
#include "cudyn/core/result.hpp"

#include <cuda.h>

#include <cstdint>
#include <string>

namespace cudyn::detail {

// ---- errors a call builds itself ---------------------------------------------------------------

// The name an operation's errors begin with ("export_dma_buf: ..."): every
// error a public call builds itself goes through one of these, so the
// caller always learns which call refused and why.
class Operation {
public:
    constexpr explicit Operation(const char* name) noexcept : name_(name) {}
    constexpr const char* name() const noexcept { return name_; }

    Error invalid(const std::string& what) const;  // InvalidArgument "name: what"
    Error not_supported(std::string entry_point, const std::string& what) const;
    Error io(const std::string& what) const;  // Io "name: what" (no errno: the peer's doing)
    Error denied(const std::string& what) const;  // PermissionDenied "name: what"
    // `error` with "name: " in front of its message; code, entry point and
    // CUresult kept.
    Error context(Error error) const;

private:
    const char* name_;
};

// "0x7f3a00000000".
std::string hex(std::uint64_t value);

// InvalidArgument unless [offset, offset + bytes) lies inside an allocation
// of `allocation_bytes` (overflow-safe): "name: N bytes at offset O run past
// the allocation of A bytes". Inline: exports that take a few tens of
// nanoseconds run it on every call; only the refusal is built out of line.
Error outside_allocation(const Operation& operation, std::uint64_t offset, std::uint64_t bytes,
                         std::uint64_t allocation_bytes);
inline Result<void> check_inside_allocation(const Operation& operation, std::uint64_t offset, std::uint64_t bytes,
                                            std::uint64_t allocation_bytes) {
    if (offset <= allocation_bytes && bytes <= allocation_bytes - offset) return ok();
    return outside_allocation(operation, offset, bytes, allocation_bytes);
}

// ---- fabric handles ----------------------------------------------------------------------------

// Driver answers to a fabric handle that mean "no fabric on this system" (no
// IMEX channel or service) rather than a bug, and the NotSupported they
// become, naming the operation and what fabric sharing needs. fabric_error
// applies the two: `error` as that NotSupported when it is such an answer,
// else unchanged. (Defined with the sharing code, src/share/.)
bool refuses_fabric(CUresult result);
Error no_fabric(Error error, const char* operation);
Error fabric_error(Error error, const char* operation);

}  // namespace cudyn::detail
