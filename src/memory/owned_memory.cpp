// cudyn — OwnedMemory: one allocation, released in its own context.
#include "cudyn/memory/owned_memory.hpp"
#include "core/internal.hpp"

#include <string>

namespace cudyn::detail {

Result<void> OwnedMemory::require(const char* operation, const char* owner) const {
    if (!empty()) return ok();
    return Operation(operation).invalid(std::string("the ") + owner + " is empty (moved from or freed)");
}

Result<void> OwnedMemory::Held::release() {
    return context.release_into([this] { return give_back(address); }, [this] { *this = Held{}; });
}

}  // namespace cudyn::detail
