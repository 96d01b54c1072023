// cudyn — the size and range checks every module makes before it calls the
// driver: element counts to byte sizes without overflow, and address and
// index ranges that stay inside what they index.
//
// Internal (public only because inline and template code in the buffer
// headers calls them). Each refusal is InvalidArgument naming `what`.
#pragma once

#include "cudyn/core/result.hpp"

#include <cstddef>
#include <cstdint>

namespace cudyn::detail {

// count * element_size into *bytes; true when the product overflows size_t.
inline bool multiply_overflows(std::size_t count, std::size_t element_size, std::size_t* bytes) noexcept {
#if defined(__GNUC__) || defined(__clang__)
    return __builtin_mul_overflow(count, element_size, bytes);
#else
    if (element_size != 0 && count > static_cast<std::size_t>(-1) / element_size) return true;
    *bytes = count * element_size;
    return false;
#endif
}

// The refusals of byte_size and checked_bytes, out of line: the checks run
// inline on every allocation, the messages are built only on failure.
Error size_overflow_error(std::size_t count, std::size_t element_size, const char* what);
Error zero_count_error(const char* what);

// count * element_size, refused when the product overflows size_t (a count
// of 0 is 0 bytes).
inline Result<std::size_t> byte_size(std::size_t count, std::size_t element_size, const char* what) {
    std::size_t bytes = 0;
    if (multiply_overflows(count, element_size, &bytes)) return size_overflow_error(count, element_size, what);
    return bytes;
}

// The same, and refused when count is zero.
inline Result<std::size_t> checked_bytes(std::size_t count, std::size_t element_size, const char* what) {
    if (count == 0) return zero_count_error(what);
    return byte_size(count, element_size, what);
}

// [address, address + bytes) inside the address space: refused when it runs
// past the end (wraps around). bytes 0 is fine anywhere.
Result<void> check_address_range(std::uint64_t address, std::size_t bytes, const char* what);

// [offset, offset + count) within [0, size), overflow-safe; count 0 is
// refused too (an empty range is a caller's mistake here).
Result<void> check_range(std::size_t offset, std::size_t count, std::size_t size, const char* what);

}  // namespace cudyn::detail
