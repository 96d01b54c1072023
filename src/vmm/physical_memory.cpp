// cudyn — PhysicalMemory: a shared cuMemCreate handle, released by its last owner.
#include "cudyn/vmm/physical_memory.hpp"
#include "cudyn/loader/driver_call.hpp"

#include "core/internal.hpp"
#include "vmm/internal.hpp"

#include <string>
#include <utility>

namespace cudyn {

namespace detail {

PhysicalHandle::~PhysicalHandle() { (void)give_back(); }

Result<void> PhysicalHandle::give_back() {
    if (!created) return ok();
    CUDYN_TRY(call_driver(&DriverTable::cuMemRelease_v10020, handle));
    created = false;
    ledger.close();
    listed.close();
    return ok();
}

void PhysicalHandle::count_in(MemoryKind kind) noexcept {
    const Location& location = properties.location();
    const int device = location.kind() == LocationKind::Device ? location.id() : -1;
    ledger = ledger_open(kind, device, size, static_cast<std::uintptr_t>(handle));
}

}  // namespace detail

namespace {

constexpr detail::Operation kCreate{"PhysicalMemory::create"};

}  // namespace

Result<PhysicalMemory> PhysicalMemory::create(const AllocationProperties& properties, std::size_t size) {
    if (size == 0) return kCreate.invalid("size must be non-zero");
    CUDYN_TRY(detail::check_properties_for(properties, kCreate));
    CUDYN_TRY_ASSIGN(const std::size_t granularity, detail::query_granularity(properties, Granularity::Minimum));
    if (size % granularity != 0)
        return kCreate.invalid("size " + std::to_string(size) + " is not a multiple of the allocation granularity " +
                               std::to_string(granularity) + " of " + properties.describe());
    // The owner exists before the driver is asked (see AddressRange::reserve).
    auto memory = std::make_shared<detail::PhysicalHandle>(properties);
    const CUmemAllocationProp prop = properties.to_cu();
    CUmemGenericAllocationHandle handle = 0;
    if (auto created = call_driver(&DriverTable::cuMemCreate_v10020, &handle, size, &prop, 0ULL); !created) {
        Error error = std::move(created).error();
        // The granularity query answers for any node id; cuMemCreate is where
        // a node the machine lacks is refused. cudyn does not read the OS's
        // node list itself: the driver's is the one that counts.
        if (properties.location().kind() == LocationKind::HostNuma && error.driver_result == CUDA_ERROR_INVALID_VALUE)
            error.message += " (is host NUMA node " + std::to_string(properties.location().id()) +
                             " a node of this machine?)";
        // A system without IMEX may refuse fabric-shareable memory already
        // here rather than at export: the same NotSupported either way.
        if (!includes(properties.handle_types(), HandleType::Fabric)) return error;
        return detail::fabric_error(std::move(error), kCreate.name());
    }
    memory->handle = handle;
    memory->created = true;
    memory->size = size;
    memory->granularity = granularity;
    memory->count_in(MemoryKind::VmmPhysical);
    return PhysicalMemory(Held{std::move(memory)});
}

CUmemGenericAllocationHandle PhysicalMemory::handle() const noexcept { return empty() ? 0 : held_->record->handle; }
std::size_t PhysicalMemory::size_bytes() const noexcept { return empty() ? 0 : held_->record->size; }
std::size_t PhysicalMemory::granularity() const noexcept { return empty() ? 0 : held_->record->granularity; }
const AllocationProperties* PhysicalMemory::properties() const noexcept {
    return empty() ? nullptr : &held_->record->properties;
}

// Mappings still sharing the handle: the last of them releases it.
Result<void> PhysicalMemory::Held::release() { return detail::let_go(record); }

// Only a last owner's release can be refused.
void PhysicalMemory::Held::abandon() noexcept { record->forget(); }

}  // namespace cudyn
