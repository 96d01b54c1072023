// cudyn — what the sharing records share: the exporter's identity and the
// check of the part a record shares.
#include "cudyn/detail/record_access.hpp"

#include "core/process_identity.hpp"
#include "share/internal.hpp"

#include <string>

namespace cudyn::detail {

bool ExporterIdentity::is_this_process() const noexcept { return detail::is_this_process(pid_, token_); }

Result<void> check_shared_part(const Operation& record, std::uint64_t offset, std::uint64_t size,
                               std::uint64_t allocation_size) {
    if (size == 0) return record.invalid("shared size is 0");
    return check_inside_allocation(record, offset, size, allocation_size);
}

}  // namespace cudyn::detail
