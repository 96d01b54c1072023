// cudyn — pieces the MPI component's byte forms share (the rank record and
// the exchange frame), on top of the library's wire_format.hpp. Not installed.
#pragma once

#include "cudyn/core/error.hpp"
#include "core/wire_format.hpp"

#include <cuda.h>

#include <array>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace cudyn::mpi::detail {

// A fixed run of bytes (a magic, a boot id, a zero-padded name) in the shape
// WireWriter::fixed and WireReader::fixed take.
template <std::size_t N>
struct FixedBytes {
    static constexpr std::size_t kSize = N;
    using Bytes = std::array<std::uint8_t, N>;
    Bytes value{};
    const Bytes& to_bytes() const noexcept { return value; }
    static FixedBytes from_bytes(const Bytes& bytes) noexcept { return FixedBytes{bytes}; }
};

inline FixedBytes<8> magic_bytes(const char (&magic)[9]) noexcept {
    FixedBytes<8> bytes;
    std::memcpy(bytes.value.data(), magic, 8);
    return bytes;
}

// A CUresult from another process: C++ leaves a value outside the enum's
// range undefined, so anything past the largest value cuda.h has
// (CUDA_ERROR_UNKNOWN, 999) reads as that.
inline CUresult driver_result_from_wire(std::uint32_t value) noexcept {
    return value <= static_cast<std::uint32_t>(CUDA_ERROR_UNKNOWN) ? static_cast<CUresult>(value) : CUDA_ERROR_UNKNOWN;
}

// An ErrorCode from another process: a code a newer cudyn added is kept
// (ErrorCode holds any int), but a value past INT_MAX is no int, and the
// reader refuses the record rather than cut it into some other code.
inline bool error_code_from_wire(std::uint32_t value, ErrorCode& code) noexcept {
    if (value > static_cast<std::uint32_t>(INT_MAX)) return false;
    code = static_cast<ErrorCode>(static_cast<int>(value));
    return true;
}

}  // namespace cudyn::mpi::detail
