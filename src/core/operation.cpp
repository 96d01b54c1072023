// cudyn — the error helpers of core/internal.hpp.
#include "core/internal.hpp"

#include <cinttypes>
#include <cstdio>
#include <utility>

namespace cudyn::detail {

namespace {
std::string prefixed(const char* name, const std::string& what) { return std::string(name) + ": " + what; }
}  // namespace

Error Operation::invalid(const std::string& what) const { return Error::invalid_argument(prefixed(name_, what)); }

Error Operation::not_supported(std::string entry_point, const std::string& what) const {
    return Error::not_supported(std::move(entry_point), prefixed(name_, what));
}

Error Operation::io(const std::string& what) const {
    Error error;
    error.code = ErrorCode::Io;
    error.message = prefixed(name_, what);
    return error;
}

Error Operation::denied(const std::string& what) const { return Error::permission_denied(prefixed(name_, what)); }

Error Operation::context(Error error) const {
    error.message = error.message.empty() ? std::string(name_) : prefixed(name_, error.message);
    return error;
}

std::string hex(std::uint64_t value) {
    char text[2 + 16 + 1];
    std::snprintf(text, sizeof text, "0x%" PRIx64, value);
    return text;
}

Error outside_allocation(const Operation& operation, std::uint64_t offset, std::uint64_t bytes,
                         std::uint64_t allocation_bytes) {
    return operation.invalid(std::to_string(bytes) + " bytes at offset " + std::to_string(offset) +
                             " run past the allocation of " + std::to_string(allocation_bytes) + " bytes");
}

}  // namespace cudyn::detail
