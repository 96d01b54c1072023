// cudyn — the refusals of the size and range checks (detail/size_checks.hpp).
#include "cudyn/detail/size_checks.hpp"
#include "core/internal.hpp"

#include <limits>
#include <string>

namespace cudyn::detail {

Error size_overflow_error(std::size_t count, std::size_t element_size, const char* what) {
    return Error::invalid_argument(std::string(what) + " " + std::to_string(count) + " times " +
                                   std::to_string(element_size) + "-byte elements overflows size_t");
}

Error zero_count_error(const char* what) { return Error::invalid_argument(std::string(what) + " must be non-zero"); }

Result<void> check_address_range(std::uint64_t address, std::size_t bytes, const char* what) {
    if (bytes == 0 || bytes - 1 <= std::numeric_limits<std::uint64_t>::max() - address) return ok();
    return Operation(what).invalid(std::to_string(bytes) + " bytes from address " + std::to_string(address) +
                                   " run past the end of the address space (the range wraps around)");
}

Result<void> check_range(std::size_t offset, std::size_t count, std::size_t size, const char* what) {
    const Operation operation(what);
    if (count == 0) return operation.invalid("count must be non-zero");
    if (offset > size || count > size - offset)
        return operation.invalid("offset " + std::to_string(offset) + " + count " + std::to_string(count) +
                                 " exceeds the size " + std::to_string(size));
    return ok();
}

}  // namespace cudyn::detail
