// cudyn — ManagedBuffer: cuMemAllocManaged / cuMemFree_v2.
#include "cudyn/memory/managed_buffer.hpp"
#include "cudyn/detail/size_checks.hpp"
#include "cudyn/loader/driver_call.hpp"
#include "memory/internal.hpp"

#include <utility>

namespace cudyn::detail {

Result<OwnedMemory> allocate_managed_memory(std::size_t count, std::size_t element_size, ManagedAttach attach) {
    CUDYN_TRY_ASSIGN(auto bytes, checked_bytes(count, element_size, "ManagedBuffer::allocate: count"));
    const unsigned int flags =
        attach == ManagedAttach::Host ? unsigned{CU_MEM_ATTACH_HOST} : unsigned{CU_MEM_ATTACH_GLOBAL};
    CUDYN_TRY_ASSIGN(auto context, OwnerContext::current());
    CUdeviceptr pointer = 0;
    CUDYN_TRY(call_driver(&DriverTable::cuMemAllocManaged_v6000, &pointer, bytes, flags));
    return OwnedMemory(static_cast<std::uintptr_t>(pointer), pointer, bytes, free_device_memory, std::move(context),
                       MemoryKind::Managed);
}

Result<ManagedRange> managed_subrange(const OwnedMemory& memory, std::size_t element_size, std::size_t first,
                                      std::size_t count) {
    CUDYN_TRY(memory.require("ManagedBuffer::managed_range", "ManagedBuffer"));
    CUDYN_TRY(check_range(first, count, memory.bytes() / element_size, "ManagedBuffer::managed_range"));
    return ManagedRange::over(memory.device_address() + first * element_size, count * element_size);
}

}  // namespace cudyn::detail
