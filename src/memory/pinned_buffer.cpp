// cudyn — PinnedBuffer: cuMemHostAlloc / cuMemFreeHost.
#include "cudyn/memory/pinned_buffer.hpp"
#include "cudyn/detail/size_checks.hpp"
#include "cudyn/loader/driver_call.hpp"

#include <utility>

namespace cudyn::detail {

namespace {
Result<void> free_pinned_memory(std::uintptr_t address) {
    return call_driver(&DriverTable::cuMemFreeHost_v2000, reinterpret_cast<void*>(address));
}
}  // namespace

Result<OwnedMemory> allocate_pinned_memory(std::size_t count, std::size_t element_size, unsigned int flags,
                                           const char* what, MemoryKind kind) {
    CUDYN_TRY_ASSIGN(auto bytes, checked_bytes(count, element_size, what));
    CUDYN_TRY_ASSIGN(auto context, OwnerContext::current());
    void* host = nullptr;
    CUDYN_TRY(call_driver(&DriverTable::cuMemHostAlloc_v2020, &host, bytes, flags));
    return OwnedMemory(reinterpret_cast<std::uintptr_t>(host), 0, bytes, free_pinned_memory, std::move(context),
                       kind);
}

}  // namespace cudyn::detail
