// cudyn — an allocator whose memory sleeps and wakes at the same addresses:
// what an inference server colocated with training needs to hand a GPU's
// memory back without tearing the process (its tensors, CUDA graphs and
// pointers) down.
//
// Each allocation is its own reservation (AddressRange) with one physical
// allocation (PhysicalMemory) mapped in it (MappedRange), rounded up to the
// device's granularity, with read-write access for the device and for the
// peers set with set_peers(). Every allocation carries the tag that was
// current when it was made ("weights", "kv_cache", ...).
//
// sleep() copies the bytes of the tags it is told to offload to pinned host
// memory and gives every awake allocation's physical memory back to the
// driver; the addresses stay reserved. wake_up() creates and maps physical
// memory at the same addresses and copies the offloaded bytes back. Memory
// of tags that were not offloaded is undefined after wake_up (not zeroed).
//
// Freed memory goes back to the driver at once, unless a cache limit is set:
// then freed allocations, still mapped, are kept (up to that many bytes) and
// handed out again for a request of the same device and rounded size. The
// cache is emptied by sleep(), trim_cache() and a lower limit.
//
// Thread-safe: one lock around every call (PyTorch allocates from any thread).
#pragma once

#include "cudyn/core/result.hpp"

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace cudyn {

// The counters of one (tag, device).
struct SleepTagStats {
    std::string tag;
    int device = 0;
    std::uint64_t live_bytes = 0;      // allocated and not freed, awake or asleep (rounded sizes)
    std::uint64_t live_count = 0;
    std::uint64_t peak_bytes = 0;      // highest live_bytes since the allocator was made
    std::uint64_t awake_bytes = 0;     // of live_bytes: physical memory mapped now
    std::uint64_t sleeping_bytes = 0;  // of live_bytes: asleep, no physical memory
    std::uint64_t sleeping_count = 0;
    std::uint64_t offloaded_bytes = 0;  // pinned host bytes held for sleeping allocations
};

// What one sleep() or wake_up() did.
struct SleepWakeReport {
    std::size_t allocations = 0;      // put to sleep / woken
    std::uint64_t bytes = 0;          // physical bytes released / mapped
    std::uint64_t offloaded_bytes = 0;  // copied to host / copied back
    std::size_t cache_released = 0;   // cached allocations given back to the driver (sleep)
};

class SleepingAllocator {
public:
    // Tags are at most this many characters (the C API's stats row holds them).
    static constexpr std::size_t max_tag_length = 63;

    SleepingAllocator();
    // Frees every allocation, awake, asleep or cached, silently.
    ~SleepingAllocator();
    SleepingAllocator(const SleepingAllocator&) = delete;
    SleepingAllocator& operator=(const SleepingAllocator&) = delete;

    // `bytes` of device memory on `device`, rounded up to the device's
    // granularity, tagged with the current tag. InvalidArgument for a zero
    // size or a bad device ordinal (before any driver call); the driver's
    // error otherwise, with nothing left behind.
    Result<CUdeviceptr> allocate(std::size_t bytes, int device);
    // Gives the allocation that starts at `address` back (to the cache when
    // it fits, else to the driver, after waiting for the devices that may use
    // it). An allocation freed while asleep is accepted: its reservation and
    // its host copy go (a free cannot be refused under PyTorch, and a refusal
    // would keep the addresses forever). InvalidArgument for an address that
    // is no live allocation's start. A step the driver refuses keeps the
    // allocation, with what the driver still holds: free it again to retry.
    Result<void> free(CUdeviceptr address);

    // The tag later allocations get (process-wide, not per thread).
    // InvalidArgument for an empty tag or one longer than max_tag_length.
    Result<void> set_tag(std::string_view tag);
    std::string tag() const;
    // Devices that get read-write access to later allocations on `device`,
    // besides `device` itself. Checked when an allocation is made (NotSupported
    // where a peer cannot reach the device). InvalidArgument for a negative
    // ordinal or a peer equal to `device`.
    Result<void> set_peers(int device, const std::vector<int>& peers);
    // Bytes of freed allocations kept for reuse; 0 (the default): none, every
    // free goes back to the driver. Lowering it trims the cache.
    Result<void> set_cache_limit(std::size_t bytes);
    std::size_t cache_limit() const;
    std::size_t cached_bytes() const;
    // Gives every cached allocation back to the driver.
    Result<void> trim_cache();

    // Waits for the devices of the awake allocations (their queued work
    // finishes first, so it is in the copies), copies the bytes of every
    // awake allocation whose tag is in `offload_tags` to pinned host memory,
    // then unmaps every awake allocation and releases its physical memory;
    // the addresses stay reserved. The cache goes back to the driver too.
    // Refused (InvalidArgument) when something is asleep and nothing is awake
    // ("already asleep"), and for an offload tag never used. A failed copy
    // changes nothing (the copies made are dropped); a driver that refuses an
    // unmap stops the sleep there, and the error says how many allocations
    // sleep and that the rest stay awake.
    Result<SleepWakeReport> sleep(const std::vector<std::string>& offload_tags);
    // Maps fresh physical memory at the same addresses for every sleeping
    // allocation of `tags` (every tag when `all_tags`), and copies offloaded
    // bytes back. Refused (InvalidArgument) for an unknown tag and when no
    // allocation of those tags is asleep ("already awake"). Stops at the
    // first failure (a cuMemCreate out of memory): every allocation is then
    // either awake with its bytes or still asleep with its host copy, the
    // error says how many woke and how many still sleep, nothing leaks, and
    // wake_up can be retried.
    Result<SleepWakeReport> wake_up(const std::vector<std::string>& tags, bool all_tags);

    // Frees every allocation (awake, asleep or cached) silently, forgets the
    // tags, counters and peers, and sets the defaults again (tag "default",
    // no cache): a clean slate for a test or a shutdown.
    void reset() noexcept;

    // One row per (tag, device) that ever allocated, by tag then device.
    std::vector<SleepTagStats> stats() const;
    // Live allocations (awake or asleep), not counting the cache.
    std::size_t allocation_count() const;
    std::size_t sleeping_count() const;

    struct State;  // private to the library

private:
    std::unique_ptr<State> state_;
};

}  // namespace cudyn
