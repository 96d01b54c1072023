// cudyn — SleepingAllocator: one reservation and one mapping per allocation,
// tags, sleep (host copy, release) and wake (map at the same address, copy
// back), a bounded cache of freed allocations.
#include "cudyn/sleep_alloc/sleeping_allocator.hpp"

#include "cudyn/device/device.hpp"
#include "cudyn/device/primary_context.hpp"
#include "cudyn/loader/driver_call.hpp"
#include "cudyn/memory/host_span.hpp"
#include "cudyn/memory/pinned_buffer.hpp"
#include "cudyn/vmm/address_range.hpp"
#include "cudyn/vmm/allocation_properties.hpp"
#include "cudyn/vmm/mapped_range.hpp"
#include "cudyn/vmm/memory_access.hpp"
#include "cudyn/vmm/physical_memory.hpp"

#include "core/internal.hpp"

#include <algorithm>
#include <iterator>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace cudyn {

namespace {

constexpr detail::Operation kAllocate{"SleepingAllocator::allocate"};
constexpr detail::Operation kFree{"SleepingAllocator::free"};
constexpr detail::Operation kSetTag{"SleepingAllocator::set_tag"};
constexpr detail::Operation kSetPeers{"SleepingAllocator::set_peers"};
constexpr detail::Operation kTrim{"SleepingAllocator::trim_cache"};
constexpr detail::Operation kCacheLimit{"SleepingAllocator::set_cache_limit"};
constexpr detail::Operation kSleep{"SleepingAllocator::sleep"};
constexpr detail::Operation kWake{"SleepingAllocator::wake_up"};

// One allocation: its reservation, and while awake the mapping of its
// physical memory; while asleep the host copy of its bytes (offloaded tags).
struct Allocation {
    AddressRange range;
    MappedRange mapping;  // empty while asleep
    PinnedBuffer<unsigned char> saved;
    std::size_t bytes = 0;  // rounded to the granularity
    int device = 0;
    std::size_t tag = 0;  // index into State::tags
    bool asleep = false;
};

// What the allocator keeps per device: a retain of its primary context (made
// current for each operation on the device, the caller's put back), the
// granularity and the grants every allocation there gets.
struct DeviceSlot {
    PrimaryContext context;
    std::size_t granularity = 0;
    std::vector<AccessGrant> grants;
};

struct Counters {
    std::uint64_t live_bytes = 0;
    std::uint64_t live_count = 0;
    std::uint64_t peak_bytes = 0;
};

std::string quoted(const std::string& tag) { return "'" + tag + "'"; }

}  // namespace

struct SleepingAllocator::State {
    mutable std::mutex mutex;
    std::vector<std::string> tags{"default"};
    std::size_t current_tag = 0;
    std::map<int, DeviceSlot> devices;
    std::map<int, std::vector<int>> peers;  // set_peers, applied to later allocations
    std::map<CUdeviceptr, Allocation> live;
    std::multimap<std::pair<int, std::size_t>, Allocation> cache;  // (device, bytes)
    std::size_t cache_limit = 0;
    std::size_t cached = 0;
    std::map<std::pair<std::size_t, int>, Counters> counters;  // (tag, device)

    // The device's slot, made at its first use.
    Result<DeviceSlot*> slot(int device);
    // The grants of `device`'s later allocations: the device and its peers.
    Result<void> refresh_grants(int device);
    Result<std::size_t> tag_index(const detail::Operation& operation, const std::string& tag) const;
    void count_in(const Allocation& allocation);
    void count_out(const Allocation& allocation);
    // Unmaps (waiting for the devices that may use it) and frees the range.
    Result<void> give_back(Allocation& allocation);
    Result<void> trim_to(std::size_t limit);
    // cuCtxSynchronize of every device's context the allocator uses.
    Result<void> wait_for_devices();
    std::string describe(const Allocation& allocation) const;
};

Result<DeviceSlot*> SleepingAllocator::State::slot(int device) {
    if (auto found = devices.find(device); found != devices.end()) return &found->second;
    CUDYN_TRY_ASSIGN(auto handle, Device::get(device));
    CUDYN_TRY_ASSIGN(auto context, PrimaryContext::retain(handle));
    CUDYN_TRY_ASSIGN(const std::size_t granularity, detail::in_context(context.handle(), [device] {
                         return allocation_granularity(AllocationProperties::device(device));
                     }));
    auto made = devices.emplace(device, DeviceSlot{std::move(context), granularity,
                                                   {{Location::device(device), AccessFlags::ReadWrite}}});
    // Emplaced first, so that two devices naming each other as peers meet a slot.
    if (auto granted = refresh_grants(device); !granted) {
        devices.erase(made.first);
        return std::move(granted).error();
    }
    return &made.first->second;
}

Result<void> SleepingAllocator::State::refresh_grants(int device) {
    std::vector<AccessGrant> grants{{Location::device(device), AccessFlags::ReadWrite}};
    for (int peer : peers[device]) {
        // The peer gets a slot of its own: its context is waited for before a sleep.
        CUDYN_TRY(slot(peer));
        grants.push_back({Location::device(peer), AccessFlags::ReadWrite});
    }
    devices.at(device).grants = std::move(grants);
    return ok();
}

Result<std::size_t> SleepingAllocator::State::tag_index(const detail::Operation& operation,
                                                         const std::string& tag) const {
    for (std::size_t i = 0; i < tags.size(); ++i)
        if (tags[i] == tag) return i;
    return operation.invalid("unknown tag " + quoted(tag) + " (no allocation was ever made under it)");
}

void SleepingAllocator::State::count_in(const Allocation& allocation) {
    Counters& row = counters[{allocation.tag, allocation.device}];
    row.live_bytes += allocation.bytes;
    row.live_count += 1;
    row.peak_bytes = std::max(row.peak_bytes, row.live_bytes);
}

void SleepingAllocator::State::count_out(const Allocation& allocation) {
    Counters& row = counters[{allocation.tag, allocation.device}];
    row.live_bytes -= allocation.bytes;
    row.live_count -= 1;
}

Result<void> SleepingAllocator::State::give_back(Allocation& allocation) {
    // A mapping holds its own context and waits for its devices (WaitForDevice);
    // asleep, it has nothing left (or a handle a refused release kept).
    CUDYN_TRY(allocation.mapping.unmap());
    CUDYN_TRY(allocation.saved.free());
    return allocation.range.free();
}

Result<void> SleepingAllocator::State::trim_to(std::size_t limit) {
    // Largest first: the fewest driver calls to get under the limit.
    while (cached > limit && !cache.empty()) {
        auto largest = std::prev(cache.end());
        auto& entry = largest->second;
        CUDYN_TRY(give_back(entry));
        cached -= entry.bytes;
        cache.erase(largest);
    }
    return ok();
}

Result<void> SleepingAllocator::State::wait_for_devices() {
    for (auto& [ordinal, slot] : devices) {
        CUDYN_TRY(detail::in_context(slot.context.handle(),
                                     [] { return call_driver(&DriverTable::cuCtxSynchronize_v2000); }));
    }
    return ok();
}

std::string SleepingAllocator::State::describe(const Allocation& allocation) const {
    return "the allocation at " + detail::hex(allocation.range.device_address()) + " (" +
           std::to_string(allocation.bytes) + " bytes, tag " + quoted(tags[allocation.tag]) + ", device " +
           std::to_string(allocation.device) + ")";
}

SleepingAllocator::SleepingAllocator() : state_(std::make_unique<State>()) {}

SleepingAllocator::~SleepingAllocator() {
    // Owners release silently: mappings wait for their devices, unmap, then
    // ranges and host copies go.
    state_->cache.clear();
    state_->live.clear();
}

void SleepingAllocator::reset() noexcept {
    const std::lock_guard<std::mutex> lock(state_->mutex);
    state_->cache.clear();
    state_->live.clear();
    state_->cached = 0;
    state_->cache_limit = 0;
    state_->counters.clear();
    state_->peers.clear();
    state_->devices.clear();
    state_->tags.assign(1, "default");
    state_->current_tag = 0;
}

Result<CUdeviceptr> SleepingAllocator::allocate(std::size_t bytes, int device) {
    if (bytes == 0) return kAllocate.invalid("size must be non-zero");
    if (device < 0) return kAllocate.invalid("device ordinal " + std::to_string(device) + " is negative");
    const std::lock_guard<std::mutex> lock(state_->mutex);
    CUDYN_TRY_ASSIGN(DeviceSlot * slot, state_->slot(device));
    const std::size_t step = slot->granularity;
    if (bytes > static_cast<std::size_t>(-1) - (step - 1))
        return kAllocate.invalid("size " + std::to_string(bytes) + " rounded up to the granularity overflows");
    const std::size_t rounded = (bytes + step - 1) / step * step;

    Allocation allocation;
    if (auto hit = state_->cache.find({device, rounded}); hit != state_->cache.end()) {
        allocation = std::move(hit->second);
        state_->cache.erase(hit);
        state_->cached -= rounded;
    } else {
        CUDYN_TRY(detail::in_context(slot->context.handle(), [&]() -> Result<void> {
            CUDYN_TRY_ASSIGN(allocation.range, AddressRange::reserve(rounded, step));
            CUDYN_TRY_ASSIGN(auto memory, PhysicalMemory::create(AllocationProperties::device(device), rounded));
            CUDYN_TRY_ASSIGN(allocation.mapping, MappedRange::map(allocation.range, 0, memory, slot->grants));
            return ok();
        }));
        allocation.bytes = rounded;
        allocation.device = device;
    }
    allocation.tag = state_->current_tag;
    const CUdeviceptr address = allocation.range.device_address();
    state_->count_in(allocation);
    state_->live.emplace(address, std::move(allocation));
    return address;
}

Result<void> SleepingAllocator::free(CUdeviceptr address) {
    const std::lock_guard<std::mutex> lock(state_->mutex);
    auto found = state_->live.find(address);
    if (found == state_->live.end())
        return kFree.invalid(detail::hex(address) + " is not the start of a live allocation of this allocator");
    Allocation& allocation = found->second;
    if (!allocation.asleep && state_->cached + allocation.bytes <= state_->cache_limit) {
        state_->cached += allocation.bytes;
        state_->count_out(allocation);
        const std::pair<int, std::size_t> key{allocation.device, allocation.bytes};
        state_->cache.emplace(key, std::move(allocation));
        state_->live.erase(found);
        return ok();
    }
    if (auto given = state_->give_back(allocation); !given) {
        // Kept, to be freed again: unmapped already, it counts as asleep (no
        // memory behind its addresses), which a retried free finishes.
        if (allocation.mapping.empty()) allocation.asleep = true;
        return kFree.context(std::move(given).error());
    }
    state_->count_out(allocation);
    state_->live.erase(found);
    return ok();
}

Result<void> SleepingAllocator::set_tag(std::string_view tag) {
    if (tag.empty()) return kSetTag.invalid("the tag is empty");
    if (tag.size() > max_tag_length)
        return kSetTag.invalid("the tag is " + std::to_string(tag.size()) + " characters long; at most " +
                               std::to_string(max_tag_length) + " are kept");
    const std::lock_guard<std::mutex> lock(state_->mutex);
    const std::string name(tag);
    auto known = std::find(state_->tags.begin(), state_->tags.end(), name);
    if (known == state_->tags.end()) {
        state_->tags.push_back(name);
        known = std::prev(state_->tags.end());
    }
    state_->current_tag = static_cast<std::size_t>(known - state_->tags.begin());
    return ok();
}

std::string SleepingAllocator::tag() const {
    const std::lock_guard<std::mutex> lock(state_->mutex);
    return state_->tags[state_->current_tag];
}

Result<void> SleepingAllocator::set_peers(int device, const std::vector<int>& peers) {
    if (device < 0) return kSetPeers.invalid("device ordinal " + std::to_string(device) + " is negative");
    for (int peer : peers) {
        if (peer < 0) return kSetPeers.invalid("peer ordinal " + std::to_string(peer) + " is negative");
        if (peer == device)
            return kSetPeers.invalid("peer " + std::to_string(peer) + " is the device itself (always granted)");
    }
    const std::lock_guard<std::mutex> lock(state_->mutex);
    std::vector<int> previous = std::move(state_->peers[device]);
    state_->peers[device] = peers;
    // A device already in use takes the new grants for its later allocations.
    if (state_->devices.count(device) != 0) {
        if (auto granted = state_->refresh_grants(device); !granted) {
            state_->peers[device] = std::move(previous);
            return kSetPeers.context(std::move(granted).error());
        }
    }
    return ok();
}

Result<void> SleepingAllocator::set_cache_limit(std::size_t bytes) {
    const std::lock_guard<std::mutex> lock(state_->mutex);
    state_->cache_limit = bytes;
    if (auto trimmed = state_->trim_to(bytes); !trimmed) return kCacheLimit.context(std::move(trimmed).error());
    return ok();
}

std::size_t SleepingAllocator::cache_limit() const {
    const std::lock_guard<std::mutex> lock(state_->mutex);
    return state_->cache_limit;
}

std::size_t SleepingAllocator::cached_bytes() const {
    const std::lock_guard<std::mutex> lock(state_->mutex);
    return state_->cached;
}

Result<void> SleepingAllocator::trim_cache() {
    const std::lock_guard<std::mutex> lock(state_->mutex);
    if (auto trimmed = state_->trim_to(0); !trimmed) return kTrim.context(std::move(trimmed).error());
    return ok();
}

Result<SleepWakeReport> SleepingAllocator::sleep(const std::vector<std::string>& offload_tags) {
    const std::lock_guard<std::mutex> lock(state_->mutex);
    std::set<std::size_t> offload;
    for (const auto& tag : offload_tags) {
        CUDYN_TRY_ASSIGN(const std::size_t index, state_->tag_index(kSleep, tag));
        offload.insert(index);
    }
    std::vector<Allocation*> awake;
    std::size_t asleep = 0;
    for (auto& [address, allocation] : state_->live) {
        if (allocation.asleep)
            ++asleep;
        else
            awake.push_back(&allocation);
    }
    if (awake.empty() && asleep > 0)
        return kSleep.invalid("already asleep: " + std::to_string(asleep) +
                              " allocation(s) sleep and none is awake (wake_up first)");

    SleepWakeReport report;
    report.cache_released = state_->cache.size();
    if (auto trimmed = state_->trim_to(0); !trimmed) {
        report.cache_released -= state_->cache.size();
        return kSleep.context(std::move(trimmed).error());
    }
    if (awake.empty()) return report;

    // Work queued on the memory finishes first, so that it is in the copies
    // and nothing runs on memory about to be unmapped.
    if (auto waited = state_->wait_for_devices(); !waited)
        return kSleep.context(std::move(waited).error());

    // Every copy before any release: a failed copy changes nothing.
    for (Allocation* allocation : awake) {
        if (offload.count(allocation->tag) == 0) continue;
        const CUcontext context = state_->devices.at(allocation->device).context.handle();
        auto copied = detail::in_context(context, [&]() -> Result<void> {
            CUDYN_TRY_ASSIGN(allocation->saved, PinnedBuffer<unsigned char>::allocate(allocation->bytes));
            return allocation->mapping.device_span().copy_to(
                HostSpan<std::byte>(reinterpret_cast<std::byte*>(allocation->saved.data()), allocation->bytes));
        });
        if (!copied) {
            for (Allocation* made : awake) made->saved = PinnedBuffer<unsigned char>();
            Error error = kSleep.context(std::move(copied).error());
            error.message += " (copying " + state_->describe(*allocation) +
                             " to host; nothing was released, every allocation stays awake)";
            return error;
        }
        report.offloaded_bytes += allocation->bytes;
    }

    for (Allocation* allocation : awake) {
        // Waited for above, under the lock: no second wait per allocation.
        allocation->mapping.set_teardown(Teardown::CallerSynchronized);
        auto unmapped = allocation->mapping.unmap();
        allocation->mapping.set_teardown(Teardown::WaitForDevice);
        if (!unmapped && !allocation->mapping.empty()) {
            // Still mapped: it stays awake, its copy is not needed, and so do the rest.
            std::size_t left_awake = 0;
            for (Allocation* other : awake) {
                if (!other->asleep) {
                    other->saved = PinnedBuffer<unsigned char>();
                    ++left_awake;
                }
            }
            Error error = kSleep.context(std::move(unmapped).error());
            error.message += " (unmapping " + state_->describe(*allocation) + ": " +
                             std::to_string(report.allocations) + " allocation(s) went to sleep, " +
                             std::to_string(left_awake) + " stay awake, this one among them; sleep again to retry)";
            return error;
        }
        // Unmapped. A physical handle the driver would not release yet stays
        // with the (empty) mapping, given back when the allocation wakes or is freed.
        allocation->asleep = true;
        report.allocations += 1;
        report.bytes += allocation->bytes;
    }
    return report;
}

Result<SleepWakeReport> SleepingAllocator::wake_up(const std::vector<std::string>& tags, bool all_tags) {
    const std::lock_guard<std::mutex> lock(state_->mutex);
    std::set<std::size_t> chosen;
    for (const auto& tag : tags) {
        CUDYN_TRY_ASSIGN(const std::size_t index, state_->tag_index(kWake, tag));
        chosen.insert(index);
    }
    if (!all_tags && chosen.empty()) return kWake.invalid("no tag named (name tags, or wake every tag)");
    std::vector<Allocation*> sleeping;
    for (auto& [address, allocation] : state_->live)
        if (allocation.asleep && (all_tags || chosen.count(allocation.tag) != 0)) sleeping.push_back(&allocation);
    if (sleeping.empty()) {
        std::string which = "any tag";
        if (!all_tags) {
            which = "tag(s)";
            for (std::size_t index : chosen) which += " " + quoted(state_->tags[index]);
        }
        return kWake.invalid("already awake: no allocation of " + which + " is asleep");
    }

    SleepWakeReport report;
    for (Allocation* allocation : sleeping) {
        const DeviceSlot& slot = state_->devices.at(allocation->device);
        // Woken even when the caller's context cannot be put back afterwards:
        // counted as awake before that error goes back.
        bool mapped = false;
        auto woke = detail::in_context(slot.context.handle(), [&]() -> Result<void> {
            // A handle a refused release left behind goes first (its mapping is gone).
            CUDYN_TRY(allocation->mapping.unmap());
            CUDYN_TRY_ASSIGN(auto memory,
                             PhysicalMemory::create(AllocationProperties::device(allocation->device), allocation->bytes));
            CUDYN_TRY_ASSIGN(auto mapping, MappedRange::map(allocation->range, 0, memory, slot.grants));
            if (!allocation->saved.empty()) {
                // On a failed copy the new mapping is unmapped as it goes: still asleep.
                CUDYN_TRY(mapping.device_span().copy_from(HostSpan<const std::byte>(
                    reinterpret_cast<const std::byte*>(allocation->saved.data()), allocation->bytes)));
            }
            allocation->mapping = std::move(mapping);
            mapped = true;
            return ok();
        });
        if (mapped) {
            const bool had_copy = !allocation->saved.empty();
            allocation->saved = PinnedBuffer<unsigned char>();
            allocation->asleep = false;
            report.allocations += 1;
            report.bytes += allocation->bytes;
            if (had_copy) report.offloaded_bytes += allocation->bytes;
        }
        if (!woke) {
            const std::size_t still = sleeping.size() - report.allocations;
            Error error = kWake.context(std::move(woke).error());
            error.message += " (waking " + state_->describe(*allocation) + "; " + std::to_string(report.allocations) +
                             " allocation(s) woke with their bytes, " + std::to_string(still) +
                             " still asleep with their host copies; nothing leaked: call wake_up again to retry)";
            return error;
        }
    }
    return report;
}

std::vector<SleepTagStats> SleepingAllocator::stats() const {
    const std::lock_guard<std::mutex> lock(state_->mutex);
    std::map<std::pair<std::size_t, int>, SleepTagStats> rows;
    for (const auto& [key, counters] : state_->counters) {
        SleepTagStats& row = rows[key];
        row.tag = state_->tags[key.first];
        row.device = key.second;
        row.live_bytes = counters.live_bytes;
        row.live_count = counters.live_count;
        row.peak_bytes = counters.peak_bytes;
    }
    for (const auto& [address, allocation] : state_->live) {
        SleepTagStats& row = rows[{allocation.tag, allocation.device}];
        if (allocation.asleep) {
            row.sleeping_bytes += allocation.bytes;
            row.sleeping_count += 1;
            if (!allocation.saved.empty()) row.offloaded_bytes += allocation.bytes;
        } else {
            row.awake_bytes += allocation.bytes;
        }
    }
    std::vector<SleepTagStats> out;
    out.reserve(rows.size());
    for (auto& [key, row] : rows) out.push_back(std::move(row));
    std::sort(out.begin(), out.end(), [](const SleepTagStats& a, const SleepTagStats& b) {
        return a.tag != b.tag ? a.tag < b.tag : a.device < b.device;
    });
    return out;
}

std::size_t SleepingAllocator::allocation_count() const {
    const std::lock_guard<std::mutex> lock(state_->mutex);
    return state_->live.size();
}

std::size_t SleepingAllocator::sleeping_count() const {
    const std::lock_guard<std::mutex> lock(state_->mutex);
    return static_cast<std::size_t>(std::count_if(state_->live.begin(), state_->live.end(),
                                                  [](const auto& entry) { return entry.second.asleep; }));
}

}  // namespace cudyn
