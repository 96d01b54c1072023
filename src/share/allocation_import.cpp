// cudyn — import_allocation: what another process exported, imported by its
// kind's own import, and the owner of what was imported.
#include "cudyn/share/allocation_sharing.hpp"

#include "core/internal.hpp"
#include "core/wire_format.hpp"
#include "share/allocation_parts.hpp"

#include <variant>

namespace cudyn {

Result<ImportedAllocation> import_allocation(const AllocationDescriptor& descriptor) {
    if (descriptor.exported_by_this_process())
        return detail::Operation{"import_allocation"}.invalid(
            "the allocation was exported by this process (use its memory directly)");
    return std::visit([&descriptor](const auto& parts) { return detail::import_parts(parts, descriptor); },
                      detail::RecordAccess::fields(descriptor).parts);
}

Result<void> ImportedAllocation::Held::release() {
    CUDYN_TRY(ipc_memory.close());
    if (mapped) {
        CUDYN_TRY(mapping.unmap());
        mapped = false;
    }
    CUDYN_TRY(pool_memory.free());
    CUDYN_TRY(pool.destroy());
    *this = Held{};
    return ok();
}

}  // namespace cudyn
