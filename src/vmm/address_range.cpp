// cudyn — AddressRange: a shared reservation, freed by its last owner.
#include "cudyn/vmm/address_range.hpp"
#include "cudyn/loader/driver_call.hpp"

#include "core/internal.hpp"
#include "vmm/internal.hpp"

#include <atomic>
#include <iterator>
#include <limits>
#include <string>
#include <utility>

namespace cudyn {

namespace detail {

Reservation::~Reservation() { (void)give_back(); }

Result<void> Reservation::give_back() {
    if (address == 0) return ok();
    CUDYN_TRY(call_driver(&DriverTable::cuMemAddressFree_v10020, address, size));
    address = 0;
    ledger.close();
    return ok();
}

bool Reservation::claim(std::size_t offset, std::size_t bytes, std::size_t* clash, const Location& location) {
    std::lock_guard<std::mutex> lock(mutex_);
    // The first mapping starting at or after `offset`, and the one before it.
    auto next = mapped_.lower_bound(offset);
    if (next != mapped_.end() && next->first < offset + bytes) {
        *clash = next->first;
        return false;
    }
    if (next != mapped_.begin()) {
        auto previous = std::prev(next);
        if (previous->first + previous->second.bytes > offset) {
            *clash = previous->first;
            return false;
        }
    }
    Mapping record;
    record.bytes = bytes;
    record.location = location;
    mapped_.emplace(offset, record);
    return true;
}

void Reservation::unclaim(std::size_t offset) {
    std::lock_guard<std::mutex> lock(mutex_);
    mapped_.erase(offset);
}

bool Reservation::covering(std::size_t offset, std::size_t bytes, std::map<std::size_t, Mapping>* out,
                           std::size_t* hole) {
    std::lock_guard<std::mutex> lock(mutex_);
    out->clear();
    const std::size_t end = offset + bytes;
    // The mapping holding `offset`, if one starts before it.
    auto at = mapped_.upper_bound(offset);
    if (at != mapped_.begin() && std::prev(at)->first + std::prev(at)->second.bytes > offset) --at;
    std::size_t reached = offset;
    for (; at != mapped_.end() && reached < end; ++at) {
        if (at->first > reached) break;  // a gap before this mapping
        out->emplace(at->first, at->second);
        reached = at->first + at->second.bytes;
    }
    if (reached < end) {
        *hole = reached;
        return false;
    }
    return true;
}

void Reservation::range_granted(const std::map<std::size_t, Mapping>& mappings, const AccessGrant* grants,
                                std::size_t count, std::uint64_t seq) {
    std::lock_guard<std::mutex> lock(mutex_);
    const std::uint64_t users = granted_devices(grants, count);
    bool names_host = false;
    for (std::size_t i = 0; i < count; ++i) names_host = names_host || grants[i].location.is_host();
    for (const auto& entry : mappings) {
        auto live = mapped_.find(entry.first);
        if (live == mapped_.end()) continue;
        live->second.range_users |= users;
        if (names_host) {
            live->second.range_host = host_granted(grants, count, live->second.range_host);
            live->second.range_host_seq = seq;
        }
    }
}

Reservation::Mapping Reservation::granted_to(std::size_t offset) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto live = mapped_.find(offset);
    return live == mapped_.end() ? Mapping{} : live->second;
}

std::uint64_t next_grant_seq() noexcept {
    static std::atomic<std::uint64_t> seq{0};
    return seq.fetch_add(1, std::memory_order_relaxed) + 1;
}

std::size_t Reservation::mapping_count() {
    std::lock_guard<std::mutex> lock(mutex_);
    return mapped_.size();
}

}  // namespace detail

namespace {

constexpr detail::Operation kReserve{"AddressRange::reserve"};
constexpr detail::Operation kFree{"AddressRange::free"};

bool power_of_two(std::size_t x) noexcept { return x != 0 && (x & (x - 1)) == 0; }

}  // namespace

Result<AddressRange> AddressRange::reserve(std::size_t size, std::size_t alignment, CUdeviceptr hint) {
    constexpr std::size_t kMax = std::numeric_limits<std::size_t>::max();
    if (size == 0) return kReserve.invalid("size must be non-zero");
    if (alignment != 0 && !power_of_two(alignment))
        return kReserve.invalid("alignment " + std::to_string(alignment) +
                                " is not a power of two (0 takes the driver's default)");
    if (alignment > kMax - size)
        return kReserve.invalid("size " + std::to_string(size) + " + alignment " + std::to_string(alignment) +
                                " overflows");
    if (hint != 0 && alignment != 0 && hint % alignment != 0)
        return kReserve.invalid("hint " + std::to_string(hint) + " is not aligned to alignment " +
                                std::to_string(alignment));
    if (hint > std::numeric_limits<CUdeviceptr>::max() - size)
        return kReserve.invalid("hint " + std::to_string(hint) + " + size " + std::to_string(size) + " overflows");

    // The owner exists before the driver is asked, so a reservation can never
    // be left without one.
    auto reservation = std::make_shared<detail::Reservation>();
    CUdeviceptr address = 0;
    CUDYN_TRY(call_driver(&DriverTable::cuMemAddressReserve_v10020, &address, size, alignment, hint, 0ULL));
    reservation->address = address;
    reservation->size = size;
    reservation->ledger = detail::ledger_open(MemoryKind::VmmReserved, -1, size, address);
    return AddressRange(Held{std::move(reservation)});
}

CUdeviceptr AddressRange::device_address() const noexcept { return empty() ? 0 : held_->reservation->address; }
std::size_t AddressRange::size_bytes() const noexcept { return empty() ? 0 : held_->reservation->size; }
std::size_t AddressRange::mapping_count() const noexcept {
    return empty() ? 0 : held_->reservation->mapping_count();
}

Result<void> AddressRange::free() {
    if (empty()) return ok();
    if (const std::size_t mappings = held_->reservation->mapping_count(); mappings != 0)
        return kFree.invalid(std::to_string(mappings) + " mapping(s) still live in the range; unmap them first");
    // Freed now, also while an unmapped MappedRange whose memory the driver
    // has not taken back yet still holds a reference. A refusal leaves the
    // range reserved and owned: free() may be retried.
    CUDYN_TRY(held_->reservation->give_back());
    return held_.release();
}

Result<void> AddressRange::Held::release() { return detail::let_go(reservation); }

// Only a last owner's release can be refused.
void AddressRange::Held::abandon() noexcept { reservation->forget(); }

}  // namespace cudyn
