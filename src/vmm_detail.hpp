// cudyn — internals shared by the VMM modules (address_range, physical_memory,
// mapped_range, growable_buffer). Not installed.
#pragma once

#include "cudyn/allocation_properties.hpp"
#include "cudyn/driver_call.hpp"
#include "cudyn/memory_access.hpp"
#include "cudyn/owner_context.hpp"

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

namespace cudyn::detail {

// The loader's error when the driver is unusable, NotSupported naming the
// entry when this driver lacks it: checked before anything else, so a CUDA
// 10.1 driver hears about the missing entry, not about a device attribute.
template <typename Pfn>
Result<void> require_entry(Pfn DriverTable::*entry) {
    const DriverTable* table = usable_driver();
    if (table == nullptr) return driver_unusable_error();
    if (table->*entry == nullptr) return missing_entry_error(entry_info(entry));
    return ok();
}

// One cuMemAddressReserve. Freed by the destructor when address is set, i.e.
// when the last owner (AddressRange or MappedRange) lets go.
struct Reservation {
    CUdeviceptr address = 0;
    std::size_t size = 0;

    Reservation() = default;
    Reservation(const Reservation&) = delete;
    Reservation& operator=(const Reservation&) = delete;
    ~Reservation();  // gives back what is left, silently
    // cuMemAddressFree now; on success there is nothing left to free.
    Result<void> give_back();

    // Records [offset, offset + bytes) as mapped; false when it overlaps a
    // live mapping (and `*clash` gets that mapping's offset).
    bool claim(std::size_t offset, std::size_t bytes, std::size_t* clash);
    void unclaim(std::size_t offset);
    std::size_t mapping_count();

private:
    std::mutex mutex_;
    std::map<std::size_t, std::size_t> mapped_;  // offset -> bytes of each live mapping
};

// One cuMemCreate. Released by the destructor when handle is set, i.e. when
// the last owner (PhysicalMemory or MappedRange) lets go.
struct PhysicalHandle {
    explicit PhysicalHandle(const AllocationProperties& props) : properties(props) {}
    PhysicalHandle(const PhysicalHandle&) = delete;
    PhysicalHandle& operator=(const PhysicalHandle&) = delete;
    ~PhysicalHandle();  // gives back what is left, silently
    // cuMemRelease now; on success there is nothing left to release.
    Result<void> give_back();

    CUmemGenericAllocationHandle handle = 0;
    bool created = false;
    std::size_t size = 0;
    std::size_t granularity = 0;
    AllocationProperties properties;
};

// Lets go of a shared VMM record (Reservation, PhysicalHandle): when this is
// its last owner, gives it back to the driver first and reports the answer;
// a refusal keeps `owner` as it was, so the caller may retry.
template <typename Record>
Result<void> let_go(std::shared_ptr<Record>& owner) {
    if (owner && owner.use_count() == 1) CUDYN_TRY(owner->give_back());
    owner.reset();
    return ok();
}

// cuMemGetAllocationGranularity without the validation and support checks.
Result<std::size_t> query_granularity(const AllocationProperties& properties, Granularity which);

// Checks grants for memory living at `owner` before anything is changed:
// at least one grant, valid locations and flags, and for a device other than a
// device owner: that it exists, supports VMM and can access the owner's memory
// (cuDeviceCanAccessPeer), else NotSupported naming the pair.
Result<void> check_grants(const Location& owner, const AccessGrant* grants, std::size_t count);
// cuMemSetAccess of already checked grants over [address, address + bytes).
Result<void> apply_access(CUdeviceptr address, std::size_t bytes, const AccessGrant* grants, std::size_t count);

// The devices whose work may use memory with these grants: bit d for device
// d, for every device granted more than no access.
std::uint64_t granted_devices(const AccessGrant* grants, std::size_t count) noexcept;
// What Teardown::WaitForDevice waits for before an unmap: `owner` (the
// context the memory was mapped in; the current one when it is empty) is
// synchronized, and so is the primary context of every other device in
// `devices` that is active (inactive ones run no work). Every context is
// synchronized even when one fails; the first error is returned.
Result<void> wait_for_device_users(const OwnerContext& owner, std::uint64_t devices);

// x rounded up to a multiple of `step` (> 0); false on overflow.
inline bool round_up(std::size_t x, std::size_t step, std::size_t* out) noexcept {
    const std::size_t rest = x % step;
    if (rest == 0) {
        *out = x;
        return true;
    }
    if (x > static_cast<std::size_t>(-1) - (step - rest)) return false;
    *out = x + (step - rest);
    return true;
}

// Driver answers to a fabric handle that mean "no fabric on this system" (no
// IMEX channel or service) rather than a bug, and the NotSupported they
// become, naming the operation and what fabric sharing needs. fabric_error
// applies the two: `error` as that NotSupported when it is such an answer,
// else unchanged.
bool refuses_fabric(CUresult result);
Error no_fabric(Error error, const char* operation);
Error fabric_error(Error error, const char* operation);

}  // namespace cudyn::detail
