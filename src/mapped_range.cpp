// cudyn — MappedRange: cuMemMap of a whole PhysicalMemory into an AddressRange,
// with bounds, granularity and overlap checked first.
#include "cudyn/mapped_range.hpp"

#include "vmm_detail.hpp"

#include <string>
#include <utility>

namespace cudyn {

Result<MappedRange> MappedRange::map(const AddressRange& range, std::size_t offset, const PhysicalMemory& memory) {
    if (range.empty()) return Error::invalid_argument("MappedRange::map: the range is empty (moved from or freed)");
    if (memory.empty())
        return Error::invalid_argument("MappedRange::map: the memory is empty (moved from or released)");
    const std::size_t bytes = memory.size();
    const std::size_t granularity = memory.granularity();
    if (offset > range.size() || bytes > range.size() - offset)
        return Error::invalid_argument("MappedRange::map: " + std::to_string(bytes) + " bytes at offset " +
                                       std::to_string(offset) + " do not fit in the range of " +
                                       std::to_string(range.size()) + " bytes");
    if (offset % granularity != 0)
        return Error::invalid_argument("MappedRange::map: offset " + std::to_string(offset) +
                                       " is not a multiple of the memory's granularity " +
                                       std::to_string(granularity));
    const CUdeviceptr address = range.address() + offset;
    if (address % granularity != 0)
        return Error::invalid_argument("MappedRange::map: the range address is not aligned to the memory's "
                                       "granularity " + std::to_string(granularity) +
                                       " (reserve with alignment 0 or a multiple of it)");
    std::size_t clash = 0;
    if (!range.reservation_->claim(offset, bytes, &clash))
        return Error::invalid_argument("MappedRange::map: " + std::to_string(bytes) + " bytes at offset " +
                                       std::to_string(offset) + " overlap the mapping at offset " +
                                       std::to_string(clash));
    const auto mapped = call_driver(&DriverTable::cuMemMap_v10020, address, bytes, std::size_t{0}, memory.handle(), 0ULL);
    if (!mapped) {
        range.reservation_->unclaim(offset);
        return mapped.error();
    }
    return MappedRange(range.reservation_, memory.memory_, address, offset, bytes);
}

Result<MappedRange> MappedRange::map(const AddressRange& range, std::size_t offset, const PhysicalMemory& memory,
                                     std::initializer_list<AccessGrant> access) {
    return map_with_access(range, offset, memory, access.begin(), access.size());
}

Result<MappedRange> MappedRange::map(const AddressRange& range, std::size_t offset, const PhysicalMemory& memory,
                                     const std::vector<AccessGrant>& access) {
    return map_with_access(range, offset, memory, access.data(), access.size());
}

Result<MappedRange> MappedRange::map_with_access(const AddressRange& range, std::size_t offset,
                                                 const PhysicalMemory& memory, const AccessGrant* grants,
                                                 std::size_t count) {
    if (!memory.empty()) CUDYN_TRY(detail::check_grants(memory.properties()->location(), grants, count));
    auto mapping = map(range, offset, memory);
    if (!mapping) return mapping;
    // On failure the local mapping unmaps itself on the way out.
    CUDYN_TRY(detail::apply_access(mapping->address_, mapping->size_, grants, count));
    return mapping;
}

MappedRange::MappedRange() noexcept = default;

MappedRange::MappedRange(std::shared_ptr<detail::Reservation> reservation,
                         std::shared_ptr<detail::PhysicalHandle> memory, CUdeviceptr address, std::size_t offset,
                         std::size_t size) noexcept
    : reservation_(std::move(reservation)), memory_(std::move(memory)), address_(address), offset_(offset), size_(size) {}

MappedRange::MappedRange(MappedRange&& other) noexcept
    : reservation_(std::move(other.reservation_)),
      memory_(std::move(other.memory_)),
      address_(std::exchange(other.address_, 0)),
      offset_(std::exchange(other.offset_, 0)),
      size_(std::exchange(other.size_, 0)) {}

MappedRange& MappedRange::operator=(MappedRange&& other) noexcept {
    if (this != &other) {
        (void)unmap();
        reservation_ = std::move(other.reservation_);
        memory_ = std::move(other.memory_);
        address_ = std::exchange(other.address_, 0);
        offset_ = std::exchange(other.offset_, 0);
        size_ = std::exchange(other.size_, 0);
    }
    return *this;
}

MappedRange::~MappedRange() { (void)unmap(); }

Result<void> MappedRange::set_access(Location location, AccessFlags flags) {
    const AccessGrant grant{location, flags};
    return set_access(&grant, 1);
}

Result<void> MappedRange::set_access(std::initializer_list<AccessGrant> grants) {
    return set_access(grants.begin(), grants.size());
}

Result<void> MappedRange::set_access(const std::vector<AccessGrant>& grants) {
    return set_access(grants.data(), grants.size());
}

Result<void> MappedRange::set_access(const AccessGrant* grants, std::size_t count) {
    if (empty()) return Error::invalid_argument("MappedRange::set_access: the mapping is empty (moved from or unmapped)");
    CUDYN_TRY(detail::check_grants(memory_->properties.location(), grants, count));
    return detail::apply_access(address_, size_, grants, count);
}

Result<AccessFlags> MappedRange::access(Location location) const {
    if (empty()) return Error::invalid_argument("MappedRange::access: the mapping is empty (moved from or unmapped)");
    CUDYN_TRY(location.validate("MappedRange::access: location"));
    const CUmemLocation where = location.to_cu();
    unsigned long long flags = 0;
    CUDYN_TRY(call_driver(&DriverTable::cuMemGetAccess_v10020, &flags, &where, address_));
    return static_cast<AccessFlags>(flags);
}

const Location* MappedRange::memory_location() const noexcept {
    return memory_ ? &memory_->properties.location() : nullptr;
}

Result<void> MappedRange::unmap() {
    if (!memory_) return ok();
    const auto result = call_driver(&DriverTable::cuMemUnmap_v10020, address_, size_);
    reservation_->unclaim(offset_);
    // Unmap, then drop the handle (released if last), then the reservation
    // (freed if last): the driver's order.
    memory_.reset();
    reservation_.reset();
    address_ = 0;
    offset_ = 0;
    size_ = 0;
    return result;
}

}  // namespace cudyn
