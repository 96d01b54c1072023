// cudyn — PhysicalMemory: a shared cuMemCreate handle, released by its last owner.
#include "cudyn/vmm/physical_memory.hpp"

#include "core/internal.hpp"
#include "core/internal.hpp"
#include "vmm/internal.hpp"
#include "vmm/internal.hpp"
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
    return ok();
}

}  // namespace detail

Result<PhysicalMemory> PhysicalMemory::create(const AllocationProperties& properties, std::size_t size) {
    CUDYN_TRY(properties.validate());
    if (size == 0) return Error::invalid_argument("PhysicalMemory::create: size must be non-zero");
    CUDYN_TRY(detail::require_entry(&DriverTable::cuMemGetAllocationGranularity_v10020));
    CUDYN_TRY(properties.check_supported());
    auto granularity = detail::query_granularity(properties, Granularity::Minimum);
    if (!granularity) return granularity.error();
    if (size % *granularity != 0)
        return Error::invalid_argument("PhysicalMemory::create: size " + std::to_string(size) +
                                       " is not a multiple of the allocation granularity " +
                                       std::to_string(*granularity) + " of " + properties.describe());
    // The owner exists before the driver is asked (see AddressRange::reserve).
    auto memory = std::make_shared<detail::PhysicalHandle>(properties);
    const CUmemAllocationProp prop = properties.to_cu();
    CUmemGenericAllocationHandle handle = 0;
    if (auto created = call_driver(&DriverTable::cuMemCreate_v10020, &handle, size, &prop, 0ULL); !created) {
        // A system without IMEX may refuse fabric-shareable memory already
        // here rather than at export: the same NotSupported either way.
        Error error = std::move(created).error();
        // The granularity query answered for any node id; cuMemCreate is where
        // a node the machine lacks is refused (measured on an H200). cudyn does
        // not read the OS's node list itself: the driver's is the one that counts.
        if (properties.location().kind() == LocationKind::HostNuma && error.driver_result == CUDA_ERROR_INVALID_VALUE)
            error.message += " (is host NUMA node " + std::to_string(properties.location().id()) +
                             " a node of this machine?)";
        if (!includes(properties.handle_types(), HandleType::Fabric)) return error;
        return detail::fabric_error(std::move(error), "PhysicalMemory::create");
    }
    memory->handle = handle;
    memory->created = true;
    memory->size = size;
    memory->granularity = *granularity;
    return PhysicalMemory(std::move(memory));
}

PhysicalMemory::PhysicalMemory() noexcept = default;
PhysicalMemory::PhysicalMemory(std::shared_ptr<detail::PhysicalHandle> record) noexcept : memory_(std::move(record)) {}
PhysicalMemory::PhysicalMemory(PhysicalMemory&& other) noexcept = default;
PhysicalMemory& PhysicalMemory::operator=(PhysicalMemory&& other) noexcept = default;
PhysicalMemory::~PhysicalMemory() = default;

CUmemGenericAllocationHandle PhysicalMemory::handle() const noexcept { return memory_ ? memory_->handle : 0; }
std::size_t PhysicalMemory::size_bytes() const noexcept { return memory_ ? memory_->size : 0; }
std::size_t PhysicalMemory::granularity() const noexcept { return memory_ ? memory_->granularity : 0; }
const AllocationProperties* PhysicalMemory::properties() const noexcept {
    return memory_ ? &memory_->properties : nullptr;
}

Result<void> PhysicalMemory::release() {
    // Mappings still sharing the handle: the last of them releases it. A
    // refused release leaves the memory owned: release() may be retried.
    return detail::let_go(memory_);
}

}  // namespace cudyn
