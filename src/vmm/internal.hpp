// cudyn — private to the VMM module: the shared records behind ranges, memory
// and mappings, the one way other sources reach them (VmmAccess), and what
// creation, access grants and unmapping share.
#pragma once

#include "cudyn/detail/import_ticket.hpp"
#include "cudyn/detail/ledger_ticket.hpp"

#include "cudyn/core/location.hpp"
#include "cudyn/core/result.hpp"
#include "cudyn/detail/owner_context.hpp"
#include "cudyn/vmm/address_range.hpp"
#include "cudyn/vmm/allocation_properties.hpp"
#include "cudyn/vmm/memory_access.hpp"
#include "cudyn/vmm/physical_memory.hpp"

#include "core/internal.hpp"

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

namespace cudyn::detail {

// ---- the shared records -------------------------------------------------------------------
// A reservation and a physical handle each have several owners (the
// AddressRange or PhysicalMemory, and every MappedRange in or of it); the
// record gives itself back when the last of them drops it.

// One cuMemAddressReserve; freed by its destructor while address is set.
struct Reservation {
    CUdeviceptr address = 0;
    std::size_t size = 0;
    LedgerTicket ledger;  // counted out when the range is freed or forgotten

    Reservation() = default;
    Reservation(const Reservation&) = delete;
    Reservation& operator=(const Reservation&) = delete;
    ~Reservation();  // gives back what is left, silently
    // cuMemAddressFree now; on success there is nothing left to free.
    Result<void> give_back();
    // Lets go of the range without the driver (it refused to free it).
    void forget() noexcept {
        address = 0;
        ledger.close();
    }

    // One live mapping, and what grants over the whole range
    // (set_range_access) gave it: MappedRange's teardown and host_address()
    // read these next to its own grants.
    struct Mapping {
        std::size_t bytes = 0;
        Location location = Location::device(0);  // where its memory lives
        std::uint64_t range_users = 0;   // devices granted access by range-wide grants
        bool range_host = false;         // the last range-wide grant to a host location gave access
        std::uint64_t range_host_seq = 0;  // when that was decided (0: never)
    };

    // Records [offset, offset + bytes) as mapped; false when it overlaps a
    // live mapping (and `*clash` gets that mapping's offset).
    bool claim(std::size_t offset, std::size_t bytes, std::size_t* clash, const Location& location);
    void unclaim(std::size_t offset);
    std::size_t mapping_count();
    // The live mappings that together cover [offset, offset + bytes), in
    // address order (offset -> record); false, with `*hole` the first byte
    // no mapping covers, when some byte is unmapped.
    bool covering(std::size_t offset, std::size_t bytes, std::map<std::size_t, Mapping>* out, std::size_t* hole);
    // Range-wide grants were applied to the mappings at these offsets.
    void range_granted(const std::map<std::size_t, Mapping>& mappings, const AccessGrant* grants, std::size_t count,
                       std::uint64_t seq);
    // What range-wide grants gave the mapping at `offset` (zeros when none).
    Mapping granted_to(std::size_t offset);

private:
    std::mutex mutex_;
    std::map<std::size_t, Mapping> mapped_;  // offset -> each live mapping
};

// A rising count that orders grants made through a mapping and through its
// range (the later host grant decides host_address()).
std::uint64_t next_grant_seq() noexcept;

// One cuMemCreate (or imported handle); released by its destructor while
// created is set.
struct PhysicalHandle {
    explicit PhysicalHandle(const AllocationProperties& props) : properties(props) {}
    PhysicalHandle(const PhysicalHandle&) = delete;
    PhysicalHandle& operator=(const PhysicalHandle&) = delete;
    ~PhysicalHandle();  // gives back what is left, silently
    // cuMemRelease now; on success there is nothing left to release.
    Result<void> give_back();
    // Lets go of the handle without the driver (it refused to release it).
    void forget() noexcept {
        created = false;
        ledger.close();
        listed.close();
    }
    // Counts the handle into the memory ledger as `kind`, on its location's device.
    void count_in(MemoryKind kind) noexcept;

    CUmemGenericAllocationHandle handle = 0;
    bool created = false;
    std::size_t size = 0;
    std::size_t granularity = 0;
    AllocationProperties properties;
    LedgerTicket ledger;  // counted out when the handle is released or forgotten
    ImportTicket listed;  // imported memory: in live_imports() until released or forgotten
};

// Lets go of one owner's reference to a record: when it is the last, gives
// the record back first and reports the answer; a refusal keeps `owner` as
// it was, so the caller may retry.
template <typename Record>
Result<void> let_go(std::shared_ptr<Record>& owner) {
    if (owner && owner.use_count() == 1) CUDYN_TRY(owner->give_back());
    owner.reset();
    return ok();
}

// ---- the access point ---------------------------------------------------------------------
// AddressRange's and PhysicalMemory's one friend: MappedRange shares their
// records through it, and an import (share/) wraps the record it made.
struct VmmAccess {
    static const std::shared_ptr<Reservation>& reservation(const AddressRange& range) noexcept {
        return range.held_->reservation;
    }
    static const std::shared_ptr<PhysicalHandle>& record(const PhysicalMemory& memory) noexcept {
        return memory.held_->record;
    }
    // The owner of a record made outside PhysicalMemory::create (an imported handle).
    static PhysicalMemory adopt(std::shared_ptr<PhysicalHandle> record) noexcept {
        return PhysicalMemory(PhysicalMemory::Held{std::move(record)});
    }
};

// ---- creation -----------------------------------------------------------------------------

// What every creation that takes a location and handle types (cuMemCreate,
// cuMemPoolCreate) refuses before the driver, as InvalidArgument from
// `what` (the properties checked): a negative id, host NUMA current (`entry`
// does not take it), handle-type bits cudyn does not know.
Result<void> check_location_and_handle_types(const Location& location, HandleType types, const Operation& what,
                                             const char* entry);

// What a creation from `properties` checks before the driver is asked to
// create: validate(), the granularity entry, check_supported(); a refusal
// names `operation` first ("PhysicalMemory::create: AllocationProperties: ...").
Result<void> check_properties_for(const AllocationProperties& properties, const Operation& operation);

// cuMemGetAllocationGranularity without the validation and support checks;
// the driver's answer is kept per exact property set and kind (a device fact).
Result<std::size_t> query_granularity(const AllocationProperties& properties, Granularity which);
// Forgets the kept granularity answers, so the next query asks the driver.
// Only for the fake-driver tests (a fault injected into the query must reach
// it); the library never calls it.
void forget_granularity_answers() noexcept;

// The device whose attributes judge memory at `location`: a device location's
// own; for host memory the current context's device, device 0 when none is
// current (any other failure to ask is the driver's error).
// check_supported() asks it, and GrowableBuffer grants it access to host
// memory by default.
Result<int> judging_device(const Location& location);

// ---- access grants ------------------------------------------------------------------------

// Checks grants for memory living at `owner` before anything is changed:
// at least one grant, valid locations and flags, and for a device other than a
// device owner: that it exists, supports VMM and can access the owner's memory
// (cuDeviceCanAccessPeer), else NotSupported naming the pair.
Result<void> check_grants(const Location& owner, const AccessGrant* grants, std::size_t count);
// cuMemSetAccess of already checked grants over [address, address + bytes).
Result<void> apply_access(CUdeviceptr address, std::size_t bytes, const AccessGrant* grants, std::size_t count);

// Range-wide grants over [offset, offset + bytes) of `range` in one
// cuMemSetAccess, recorded for each mapping they cover (what
// set_range_access does for the whole range). InvalidArgument from `op` where
// a byte is unmapped, and the checks of check_grants for each mapping's
// memory, before anything is set.
Result<void> set_access_over(const AddressRange& range, std::size_t offset, std::size_t bytes,
                             const AccessGrant* grants, std::size_t count, const Operation& op);

// The devices whose work may use memory with these grants: bit d for device
// d, for every device granted more than no access.
std::uint64_t granted_devices(const AccessGrant* grants, std::size_t count) noexcept;

// Whether the host may touch the memory after these grants: the last grant
// naming a host location decides (any flags but None); `before` when none does.
bool host_granted(const AccessGrant* grants, std::size_t count, bool before) noexcept;

// ---- before an unmap ----------------------------------------------------------------------

// What Teardown::WaitForDevice waits for before an unmap: `owner` (the
// context the memory was mapped in; the current one when it is empty) is
// synchronized, and so is the primary context of every other device in
// `devices` that is active (inactive ones run no work). Every context is
// synchronized even when one fails; the first error is returned.
Result<void> wait_for_device_users(const OwnerContext& owner, std::uint64_t devices);

}  // namespace cudyn::detail
