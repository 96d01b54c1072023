// The fake's model of stream-ordered allocation and memory pools
// ([pool-model]), exercised through the raw driver table (cudyn's own pool
// API is tested elsewhere): default and current pools, attributes, address
// reuse on the same stream and across streams, use after a stream-ordered
// free, release thresholds and trimming, deferred destruction, access, and a
// pool plus one of its allocations shared with a second process.
//
// Runs on the emulated (13.0) and cuda11 (11.8) fakes; legacy (10.1) has no
// pool entries. Every case frees what it allocated: the fake's pool probes
// read what they read at the start.
#include "support/catch.hpp"
#include "support/child_process.hpp"
#include "support/fake_driver.hpp"
#include "support/fake_memory_helpers.hpp"
#include "support/ipc_helpers.hpp"
#include "support/vmm_helpers.hpp"

#include "cudyn/loader/driver_table.hpp"
#include "cudyn/channel/fd_channel.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <limits>
#include <thread>
#include <vector>

using cudyn_test::activate;
using cudyn_test::ChildChecks;
using cudyn_test::FakeDriver;
using cudyn_test::kMiB;
using cudyn_test::read32;
using cudyn_test::require_ok;
using cudyn_test::take;
using cudyn_test::ScopedStreamDelay;
using namespace cudyn_test::ipc;  // tags, timeouts, probe(), ok(), run_role(), start_child(), ...

namespace {

constexpr unsigned kSlow = 200'000;  // us before each piece of stream work starts: far longer than a few calls
constexpr std::size_t kBlock = 4096;

const cudyn::DriverTable& cu() { return cudyn::driver(); }

// ---- the fake's pool probes ---------------------------------------------------------------

long live_pools() { return probe<PFN_fakecuda_live_pools>("fakecuda_live_pools")(); }
long pending_destroys() { return probe<PFN_fakecuda_pending_pool_destroys>("fakecuda_pending_pool_destroys")(); }
long live_blocks() { return probe<PFN_fakecuda_live_pool_blocks>("fakecuda_live_pool_blocks")(); }
unsigned long long reserved_bytes(CUmemoryPool pool) {
    return probe<PFN_fakecuda_pool_reserved_bytes>("fakecuda_pool_reserved_bytes")(pool);
}

// What the fake holds at the start of a case is what it holds at its end.
class PoolLeakCheck {
public:
    PoolLeakCheck() : pools_(live_pools()), blocks_(live_blocks()), pending_(pending_destroys()) {}
    ~PoolLeakCheck() {
        CHECK(live_pools() == pools_);
        CHECK(live_blocks() == blocks_);
        CHECK(pending_destroys() == pending_);
    }
    PoolLeakCheck(const PoolLeakCheck&) = delete;
    PoolLeakCheck& operator=(const PoolLeakCheck&) = delete;

private:
    long pools_, blocks_, pending_;
};

// ---- raw handles -------------------------------------------------------------------------

CUstream make_stream() {
    CUstream stream = nullptr;
    REQUIRE(cu().cuStreamCreate_v2000(&stream, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
    return stream;
}

CUmemPoolProps device_props(int device, CUmemAllocationHandleType handles = CU_MEM_HANDLE_TYPE_NONE) {
    CUmemPoolProps props{};
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.handleTypes = handles;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = device;
    return props;
}

CUmemoryPool make_pool(const CUmemPoolProps& props) {
    CUmemoryPool pool = nullptr;
    REQUIRE(cu().cuMemPoolCreate_v11020(&pool, &props) == CUDA_SUCCESS);
    REQUIRE(pool != nullptr);
    return pool;
}

CUdeviceptr alloc_from(CUmemoryPool pool, std::size_t bytes, CUstream stream) {
    CUdeviceptr p = 0;
    REQUIRE(cu().cuMemAllocFromPoolAsync_v11020(&p, bytes, pool, stream) == CUDA_SUCCESS);
    REQUIRE(p != 0);
    return p;
}

void free_async(CUdeviceptr p, CUstream stream) { REQUIRE(cu().cuMemFreeAsync_v11020(p, stream) == CUDA_SUCCESS); }

void sync(CUstream stream) { REQUIRE(cu().cuStreamSynchronize_v2000(stream) == CUDA_SUCCESS); }

cuuint64_t pool_bytes(CUmemoryPool pool, CUmemPool_attribute attr) {
    cuuint64_t value = 0;
    REQUIRE(cu().cuMemPoolGetAttribute_v11020(pool, attr, &value) == CUDA_SUCCESS);
    return value;
}

void set_pool_bytes(CUmemoryPool pool, CUmemPool_attribute attr, cuuint64_t value) {
    REQUIRE(cu().cuMemPoolSetAttribute_v11020(pool, attr, &value) == CUDA_SUCCESS);
}

void set_pool_flag(CUmemoryPool pool, CUmemPool_attribute attr, int value) {
    REQUIRE(cu().cuMemPoolSetAttribute_v11020(pool, attr, &value) == CUDA_SUCCESS);
}

// Waits (bounded) until the fake's worker ran everything enqueued, without
// a synchronization call (which would also make frees reusable).
void wait_idle() {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (FakeDriver::loaded().pending_work() > 0 && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    REQUIRE(FakeDriver::loaded().pending_work() == 0);
}

template <typename T>
T pointer_attribute(CUpointer_attribute attr, CUdeviceptr p) {
    T value{};
    REQUIRE(cu().cuPointerGetAttribute_v4000(&value, attr, p) == CUDA_SUCCESS);
    return value;
}

}  // namespace

TEST_CASE("pools: default and current pools, creation checks, attributes, pointer queries",
          "[emulated][cuda11][pool-model]") {
    auto context = activate(0);
    const PoolLeakCheck leaks;
    CUmemoryPool default0 = nullptr;
    REQUIRE(cu().cuDeviceGetDefaultMemPool_v11020(&default0, 0) == CUDA_SUCCESS);
    CUmemoryPool current = nullptr;
    REQUIRE(cu().cuDeviceGetMemPool_v11020(&current, 0) == CUDA_SUCCESS);
    CHECK(current == default0);
    CHECK(cu().cuMemPoolDestroy_v11020(default0) == CUDA_ERROR_INVALID_VALUE);  // defaults cannot be destroyed
    CUmemoryPool ignored = nullptr;
    CHECK(cu().cuDeviceGetDefaultMemPool_v11020(&ignored, 7) == CUDA_ERROR_INVALID_DEVICE);

    // Creation: the properties are checked.
    CUmemPoolProps props = device_props(0);
    props.reserved[3] = 1;
    CHECK(cu().cuMemPoolCreate_v11020(&ignored, &props) == CUDA_ERROR_INVALID_VALUE);
    props = device_props(0);
    props.allocType = CU_MEM_ALLOCATION_TYPE_INVALID;
    CHECK(cu().cuMemPoolCreate_v11020(&ignored, &props) == CUDA_ERROR_INVALID_VALUE);
    props = device_props(7);
    CHECK(cu().cuMemPoolCreate_v11020(&ignored, &props) == CUDA_ERROR_INVALID_DEVICE);
    props = device_props(0);
    props.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT;
    CHECK(cu().cuMemPoolCreate_v11020(&ignored, &props) == CUDA_ERROR_INVALID_VALUE);
    // Not in CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES: not supported.
    // (13.0 takes POSIX fds and fabric handles, as the H200 reads 0x9; 11.8 fds only.)
    props = device_props(0, CU_MEM_HANDLE_TYPE_WIN32_KMT);
    CHECK(cu().cuMemPoolCreate_v11020(&ignored, &props) == CUDA_ERROR_NOT_SUPPORTED);

    const long pools_before = live_pools();
    CUmemoryPool pool = make_pool(device_props(0));
    CHECK(live_pools() == pools_before + 1);
    CHECK(pool != default0);

    // Attributes: the defaults, the read-only statistics, the watermark resets.
    int flag = -1;
    for (CUmemPool_attribute attr : {CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC,
                                     CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES}) {
        REQUIRE(cu().cuMemPoolGetAttribute_v11020(pool, attr, &flag) == CUDA_SUCCESS);
        CHECK(flag == 1);
    }
    CHECK(pool_bytes(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD) == 0);
    cuuint64_t bytes = 1;
    CHECK(cu().cuMemPoolSetAttribute_v11020(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &bytes) == CUDA_ERROR_INVALID_VALUE);
    CHECK(cu().cuMemPoolSetAttribute_v11020(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &bytes) == CUDA_ERROR_INVALID_VALUE);
    CHECK(cu().cuMemPoolSetAttribute_v11020(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &bytes) == CUDA_ERROR_INVALID_VALUE);
    CHECK(cu().cuMemPoolGetAttribute_v11020(pool, static_cast<CUmemPool_attribute>(0), &bytes) == CUDA_ERROR_INVALID_VALUE);

    // The current pool serves cuMemAllocAsync on the device's streams.
    REQUIRE(cu().cuDeviceSetMemPool_v11020(0, pool) == CUDA_SUCCESS);
    REQUIRE(cu().cuDeviceGetMemPool_v11020(&current, 0) == CUDA_SUCCESS);
    CHECK(current == pool);
    CUstream stream = make_stream();
    CUdeviceptr p = 0;
    CHECK(cu().cuMemAllocAsync_v11020(&p, 0, stream) == CUDA_ERROR_INVALID_VALUE);
    CHECK(cu().cuMemAllocAsync_v11020(&p, std::numeric_limits<std::size_t>::max(), stream) == CUDA_ERROR_OUT_OF_MEMORY);
    REQUIRE(cu().cuMemAllocAsync_v11020(&p, 1000, stream) == CUDA_SUCCESS);
    CHECK(pointer_attribute<CUmemoryPool>(CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, p) == pool);
    CHECK(pointer_attribute<unsigned int>(CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p) == CU_MEMORYTYPE_DEVICE);
    CHECK(pointer_attribute<CUcontext>(CU_POINTER_ATTRIBUTE_CONTEXT, p) == nullptr);  // no context owns it
    CHECK(pointer_attribute<bool>(CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, p) == false);
    CUdeviceptr base = 0;
    std::size_t size = 0;
    REQUIRE(cu().cuMemGetAddressRange_v3020(&base, &size, p + 10) == CUDA_SUCCESS);
    CHECK((base == p && size == 1000));
    CHECK(pool_bytes(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT) >= 1000);
    CHECK(pool_bytes(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) == 2 * kMiB);
    // The block is the fake's memory: a copy through a stream reaches it.
    REQUIRE(cu().cuMemsetD8Async_v3020(p, 0x5a, 1000, stream) == CUDA_SUCCESS);
    sync(stream);
    std::vector<unsigned char> back(1000);
    REQUIRE(cu().cuMemcpyDtoH_v3020(back.data(), p, back.size()) == CUDA_SUCCESS);
    CHECK(back.front() == 0x5a);
    CHECK(back.back() == 0x5a);
    free_async(p, stream);
    sync(stream);

    // A pool of another device cannot be current here; destroying the current
    // pool makes the default current again.
    CHECK(cu().cuDeviceSetMemPool_v11020(1, pool) == CUDA_ERROR_INVALID_VALUE);
    REQUIRE(cu().cuMemPoolDestroy_v11020(pool) == CUDA_SUCCESS);
    REQUIRE(cu().cuDeviceGetMemPool_v11020(&current, 0) == CUDA_SUCCESS);
    CHECK(current == default0);
    CHECK(cu().cuMemPoolGetAttribute_v11020(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &bytes) == CUDA_ERROR_INVALID_VALUE);
    REQUIRE(cu().cuStreamDestroy_v4000(stream) == CUDA_SUCCESS);
}

TEST_CASE("pools: a freed block is reused at once on its stream, elsewhere once the free is known done",
          "[emulated][cuda11][pool-model]") {
    auto context = activate(0);
    const PoolLeakCheck leaks;
    CUmemoryPool pool = make_pool(device_props(0));
    set_pool_bytes(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, std::numeric_limits<cuuint64_t>::max());
    CUstream s = make_stream();
    CUstream t = make_stream();
    {
        const ScopedStreamDelay slow(kSlow);
        const CUdeviceptr a = alloc_from(pool, kBlock, s);
        free_async(a, s);
        // Gone for calls at once.
        CHECK(cu().cuMemsetD8Async_v3020(a, 1, kBlock, s) == CUDA_ERROR_INVALID_VALUE);
        CUdeviceptr base = 0;
        std::size_t size = 0;
        CHECK(cu().cuMemGetAddressRange_v3020(&base, &size, a) == CUDA_ERROR_NOT_FOUND);
        // The same stream gets the same address back while the free is still pending.
        REQUIRE(FakeDriver::loaded().pending_work() > 0);
        CHECK(alloc_from(pool, kBlock, s) == a);
        free_async(a, s);
        // Another stream does not, while the free has not run.
        const CUdeviceptr b = alloc_from(pool, kBlock, t);
        CHECK(b != a);
        free_async(b, t);
        // A synchronization that saw the free done hands it to every stream.
        sync(s);
        CHECK(alloc_from(pool, kBlock, t) == a);
        free_async(a, t);
        sync(t);
        // Everything free again, in one piece: the chunk.
        unsigned long long start = 0, length = 0;
        auto free_ranges = probe<PFN_fakecuda_pool_free_ranges>("fakecuda_pool_free_ranges");
        CHECK(free_ranges(pool, &start, &length, 1) == 1);
        CHECK((start == a && length == 2 * kMiB));
    }
    SECTION("opportunistic reuse: a free done on its stream serves another stream without a synchronization") {
        const CUdeviceptr a = alloc_from(pool, kBlock, s);
        free_async(a, s);
        wait_idle();
        CHECK(alloc_from(pool, kBlock, t) == a);
        free_async(a, t);
    }
    SECTION("without it, only once a synchronization saw the free") {
        set_pool_flag(pool, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC, 0);
        const CUdeviceptr a = alloc_from(pool, kBlock, s);
        free_async(a, s);
        wait_idle();
        const CUdeviceptr b = alloc_from(pool, kBlock, t);
        CHECK(b != a);
        free_async(b, t);
        sync(s);
        CHECK(alloc_from(pool, kBlock, t) == a);
        free_async(a, t);
    }
    SECTION("an event recorded after the free orders another stream after it") {
        const ScopedStreamDelay slow(kSlow);
        const CUdeviceptr a = alloc_from(pool, kBlock, s);
        free_async(a, s);
        CUevent event = nullptr;
        REQUIRE(cu().cuEventCreate_v2000(&event, CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS);
        REQUIRE(cu().cuEventRecord_v2000(event, s) == CUDA_SUCCESS);
        REQUIRE(cu().cuStreamWaitEvent_v3020(t, event, 0) == CUDA_SUCCESS);
        REQUIRE(FakeDriver::loaded().pending_work() > 0);
        CHECK(alloc_from(pool, kBlock, t) == a);
        free_async(a, t);
        REQUIRE(cu().cuEventDestroy_v4000(event) == CUDA_SUCCESS);
    }
    sync(s);
    sync(t);
    REQUIRE(cu().cuStreamDestroy_v4000(s) == CUDA_SUCCESS);
    REQUIRE(cu().cuStreamDestroy_v4000(t) == CUDA_SUCCESS);
    REQUIRE(cu().cuMemPoolDestroy_v11020(pool) == CUDA_SUCCESS);
}

TEST_CASE("pools: work before a stream-ordered free may use the block; work running after it faults",
          "[emulated][cuda11][pool-model]") {
    CUmemoryPool pool = nullptr;
    CUdeviceptr survivor = 0;
    const PoolLeakCheck leaks;
    {
        auto context = activate(0);
        pool = make_pool(device_props(0));
        CUstream s = make_stream();
        CUstream t = make_stream();
        const ScopedStreamDelay slow(20'000);
        const CUdeviceptr a = alloc_from(pool, kBlock, s);
        survivor = alloc_from(pool, kBlock, s);
        sync(s);

        // Legal: t's fill is enqueued before the free and s waits for it.
        REQUIRE(cu().cuMemsetD32Async_v3020(a, 0x11111111u, kBlock / 4, t) == CUDA_SUCCESS);
        CUevent filled = nullptr;
        REQUIRE(cu().cuEventCreate_v2000(&filled, CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS);
        REQUIRE(cu().cuEventRecord_v2000(filled, t) == CUDA_SUCCESS);
        REQUIRE(cu().cuStreamWaitEvent_v3020(s, filled, 0) == CUDA_SUCCESS);
        const CUdeviceptr b = alloc_from(pool, kBlock, s);
        REQUIRE(cu().cuMemsetD32Async_v3020(b, 0, kBlock / 4, s) == CUDA_SUCCESS);
        free_async(b, s);  // a's neighbour; then a itself, after the fill
        free_async(a, s);
        sync(s);
        sync(t);
        CHECK(FakeDriver::loaded().context_error(0) == 0);

        // A use after free: t's fill is enqueued before the free (the address
        // is live at the call) but runs after it (t waits for an event
        // recorded before the free on s, and the free runs first).
        const CUdeviceptr c = alloc_from(pool, kBlock, s);
        REQUIRE(cu().cuMemsetD32Async_v3020(survivor, 0, kBlock / 4, s) == CUDA_SUCCESS);
        REQUIRE(cu().cuEventRecord_v2000(filled, s) == CUDA_SUCCESS);
        REQUIRE(cu().cuStreamWaitEvent_v3020(t, filled, 0) == CUDA_SUCCESS);
        REQUIRE(cu().cuMemsetD32Async_v3020(c, 0x22222222u, kBlock / 4, t) == CUDA_SUCCESS);
        free_async(c, s);
        CHECK(cu().cuStreamSynchronize_v2000(t) == CUDA_ERROR_ILLEGAL_ADDRESS);
        CHECK(FakeDriver::loaded().context_error(0) == CUDA_ERROR_ILLEGAL_ADDRESS);
        // The failed context answers its error; its last release destroys it
        // with its streams and events.
        CHECK(cu().cuEventDestroy_v4000(filled) == CUDA_ERROR_ILLEGAL_ADDRESS);
    }
    CHECK(FakeDriver::loaded().context_error(0) == 0);
    // Pool blocks belong to no context: the survivor outlived it.
    auto context = activate(0);
    CHECK(pointer_attribute<CUmemoryPool>(CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, survivor) == pool);
    REQUIRE(cu().cuMemFree_v3020(survivor) == CUDA_SUCCESS);
    REQUIRE(cu().cuMemPoolDestroy_v11020(pool) == CUDA_SUCCESS);
}

TEST_CASE("pools: cuMemFree of a pool block does not wait for the stream", "[emulated][cuda11][pool-model]") {
    CUmemoryPool pool = nullptr;
    const PoolLeakCheck leaks;
    {
        auto context = activate(0);
        pool = make_pool(device_props(0));
        CUstream s = make_stream();
        const ScopedStreamDelay slow(kSlow);
        const CUdeviceptr a = alloc_from(pool, kBlock, s);
        REQUIRE(cu().cuMemsetD8Async_v3020(a, 1, kBlock, s) == CUDA_SUCCESS);
        REQUIRE(cu().cuMemFree_v3020(a) == CUDA_SUCCESS);
        CHECK(FakeDriver::loaded().pending_work() > 0);  // returned without waiting
        CHECK(cu().cuMemFree_v3020(a) == CUDA_ERROR_INVALID_VALUE);
        // The set ran after the free: a fault, as the driver leaves it to the caller.
        CHECK(cu().cuStreamSynchronize_v2000(s) == CUDA_ERROR_ILLEGAL_ADDRESS);
    }
    CHECK(FakeDriver::loaded().context_error(0) == 0);
    auto context = activate(0);
    REQUIRE(cu().cuMemPoolDestroy_v11020(pool) == CUDA_SUCCESS);
}

TEST_CASE("pools: release threshold at synchronization, cuMemPoolTrimTo, watermarks, cuMemGetInfo",
          "[emulated][cuda11][pool-model]") {
    auto context = activate(0);
    const PoolLeakCheck leaks;
    CUmemoryPool pool = make_pool(device_props(0));
    CUstream s = make_stream();
    std::size_t free_before = 0, total = 0, free_now = 0;
    REQUIRE(cu().cuMemGetInfo_v3020(&free_before, &total) == CUDA_SUCCESS);

    // Threshold 0 (the default): a synchronization gives free chunks back.
    CUdeviceptr a = alloc_from(pool, 3 * kMiB, s);
    CHECK(pool_bytes(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) == 4 * kMiB);
    CHECK(reserved_bytes(pool) == 4 * kMiB);
    REQUIRE(cu().cuMemGetInfo_v3020(&free_now, &total) == CUDA_SUCCESS);
    CHECK(free_before - free_now == 4 * kMiB);  // reserved pool memory is device memory in use
    free_async(a, s);
    CHECK(pool_bytes(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) == 4 * kMiB);
    CHECK(pool_bytes(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT) == 0);
    sync(s);
    CHECK(pool_bytes(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) == 0);
    CHECK(pool_bytes(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH) == 4 * kMiB);
    set_pool_bytes(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, 0);
    CHECK(pool_bytes(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH) == 0);
    CHECK(pool_bytes(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH) >= 3 * kMiB);

    // Above the threshold only, and never below it: of two free 2 MiB chunks a
    // 2 MiB threshold keeps one (a 3 MiB one would keep both).
    set_pool_bytes(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, 2 * kMiB);
    a = alloc_from(pool, 2 * kMiB, s);
    const CUdeviceptr b = alloc_from(pool, 2 * kMiB, s);
    CHECK(pool_bytes(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) == 4 * kMiB);
    free_async(a, s);
    free_async(b, s);
    REQUIRE(cu().cuCtxSynchronize_v2000() == CUDA_SUCCESS);
    CHECK(pool_bytes(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) == 2 * kMiB);

    // Trimming: never below what is in use, never below the bytes to keep.
    set_pool_bytes(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, std::numeric_limits<cuuint64_t>::max());
    a = alloc_from(pool, 2 * kMiB, s);
    const CUdeviceptr c = alloc_from(pool, 2 * kMiB, s);
    const CUdeviceptr d = alloc_from(pool, 2 * kMiB, s);
    free_async(c, s);
    free_async(d, s);
    sync(s);
    CHECK(pool_bytes(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) == 6 * kMiB);
    REQUIRE(cu().cuMemPoolTrimTo_v11020(pool, 4 * kMiB) == CUDA_SUCCESS);
    CHECK(pool_bytes(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) == 4 * kMiB);
    REQUIRE(cu().cuMemPoolTrimTo_v11020(pool, 0) == CUDA_SUCCESS);
    CHECK(pool_bytes(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) == 2 * kMiB);  // a is still in use
    free_async(a, s);
    sync(s);
    REQUIRE(cu().cuMemPoolTrimTo_v11020(pool, 0) == CUDA_SUCCESS);
    CHECK(pool_bytes(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) == 0);

    // An event synchronization applies the threshold too.
    set_pool_bytes(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, 0);
    a = alloc_from(pool, kBlock, s);
    free_async(a, s);
    CUevent event = nullptr;
    REQUIRE(cu().cuEventCreate_v2000(&event, 0) == CUDA_SUCCESS);
    REQUIRE(cu().cuEventRecord_v2000(event, s) == CUDA_SUCCESS);
    REQUIRE(cu().cuEventSynchronize_v2000(event) == CUDA_SUCCESS);
    CHECK(pool_bytes(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) == 0);
    REQUIRE(cu().cuEventDestroy_v4000(event) == CUDA_SUCCESS);

    // maxSize (a CUDA 12.2 field; an 11.8 driver reads it as reserved bytes).
    CUmemPoolProps props = device_props(0);
    props.maxSize = 4 * kMiB;
    CUmemoryPool small = nullptr;
    if (cu().cuMemGetDefaultMemPool_v13000 == nullptr) {
        CHECK(cu().cuMemPoolCreate_v11020(&small, &props) == CUDA_ERROR_INVALID_VALUE);
    } else {
        small = make_pool(props);
        const CUdeviceptr e = alloc_from(small, 3 * kMiB, s);
        CUdeviceptr f = 0;
        CHECK(cu().cuMemAllocFromPoolAsync_v11020(&f, 2 * kMiB, small, s) == CUDA_ERROR_OUT_OF_MEMORY);
        CHECK(cu().cuMemAllocFromPoolAsync_v11020(&f, kMiB, small, s) == CUDA_SUCCESS);  // the chunk's rest
        free_async(e, s);
        free_async(f, s);
        sync(s);
        // A pool that cannot grow takes memory another stream's pending free
        // releases, the allocating stream waiting for that free
        // (REUSE_ALLOW_INTERNAL_DEPENDENCIES), or fails without it.
        {
            const ScopedStreamDelay slow(kSlow);
            CUstream t = make_stream();
            const CUdeviceptr g = alloc_from(small, 4 * kMiB, s);
            free_async(g, s);
            set_pool_flag(small, CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES, 0);
            CUdeviceptr h = 0;
            CHECK(cu().cuMemAllocFromPoolAsync_v11020(&h, 4 * kMiB, small, t) == CUDA_ERROR_OUT_OF_MEMORY);
            set_pool_flag(small, CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES, 1);
            REQUIRE(cu().cuMemAllocFromPoolAsync_v11020(&h, 4 * kMiB, small, t) == CUDA_SUCCESS);
            CHECK(h == g);
            // t's later work runs after s's free.
            CHECK(cu().cuStreamQuery_v2000(t) == CUDA_ERROR_NOT_READY);
            free_async(h, t);
            sync(t);
            CHECK(cu().cuStreamQuery_v2000(s) == CUDA_SUCCESS);
            REQUIRE(cu().cuStreamDestroy_v4000(t) == CUDA_SUCCESS);
        }
        REQUIRE(cu().cuMemPoolDestroy_v11020(small) == CUDA_SUCCESS);
    }
    REQUIRE(cu().cuStreamDestroy_v4000(s) == CUDA_SUCCESS);
    REQUIRE(cu().cuMemPoolDestroy_v11020(pool) == CUDA_SUCCESS);
}

TEST_CASE("pools: destroying a pool with blocks outstanding waits for them", "[emulated][cuda11][pool-model]") {
    auto context = activate(0);
    const PoolLeakCheck leaks;
    CUstream s = make_stream();
    const long pending = pending_destroys();
    CUmemoryPool pool = make_pool(device_props(0));
    const long pools = live_pools();
    const CUdeviceptr a = alloc_from(pool, kBlock, s);
    const CUdeviceptr b = alloc_from(pool, kBlock, s);
    REQUIRE(cu().cuMemPoolDestroy_v11020(pool) == CUDA_SUCCESS);
    CHECK(live_pools() == pools - 1);
    CHECK(pending_destroys() == pending + 1);
    CHECK(cu().cuMemPoolDestroy_v11020(pool) == CUDA_ERROR_INVALID_VALUE);  // the handle is gone
    CUdeviceptr more = 0;
    CHECK(cu().cuMemAllocFromPoolAsync_v11020(&more, kBlock, pool, s) == CUDA_ERROR_INVALID_VALUE);
    // The blocks still work.
    REQUIRE(cu().cuMemsetD32Async_v3020(a, 0x33333333u, kBlock / 4, s) == CUDA_SUCCESS);
    sync(s);
    CHECK(read32(a, kBlock) == std::vector<std::uint32_t>(kBlock / 4, 0x33333333u));
    REQUIRE(cu().cuMemFree_v3020(a) == CUDA_SUCCESS);
    CHECK(pending_destroys() == pending + 1);
    {
        const ScopedStreamDelay slow(kSlow);
        free_async(b, s);
        CHECK(pending_destroys() == pending + 1);  // its free has not run yet
        sync(s);
    }
    CHECK(pending_destroys() == pending);
    REQUIRE(cu().cuStreamDestroy_v4000(s) == CUDA_SUCCESS);
}

TEST_CASE("pools: access from other devices, support attributes, handle types", "[emulated][cuda11][pool-model]") {
    auto context = activate(0);
    const PoolLeakCheck leaks;
    const FakeDriver& fake = FakeDriver::loaded();
    CUmemoryPool pool = make_pool(device_props(0));
    CUmemAccess_flags flags = CU_MEM_ACCESS_FLAGS_PROT_NONE;
    CUmemLocation location{};
    location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    location.id = 0;
    REQUIRE(cu().cuMemPoolGetAccess_v11020(&flags, pool, &location) == CUDA_SUCCESS);
    CHECK(flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    location.id = 1;
    REQUIRE(cu().cuMemPoolGetAccess_v11020(&flags, pool, &location) == CUDA_SUCCESS);
    CHECK(flags == CU_MEM_ACCESS_FLAGS_PROT_NONE);

    CUmemAccessDesc desc{};
    desc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    desc.location.id = 0;
    desc.flags = CU_MEM_ACCESS_FLAGS_PROT_NONE;
    CHECK(cu().cuMemPoolSetAccess_v11020(pool, &desc, 1) == CUDA_ERROR_INVALID_VALUE);  // the owner keeps its access
    desc.location.id = 5;
    desc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CHECK(cu().cuMemPoolSetAccess_v11020(pool, &desc, 1) == CUDA_ERROR_INVALID_DEVICE);
    desc.location.id = 1;
    auto set_peer = probe<PFN_fakecuda_set_peer_access>("fakecuda_set_peer_access");
    set_peer(1, 0, 0);
    CHECK(cu().cuMemPoolSetAccess_v11020(pool, &desc, 1) == CUDA_ERROR_INVALID_DEVICE);
    set_peer(1, 0, 1);
    REQUIRE(cu().cuMemPoolSetAccess_v11020(pool, &desc, 1) == CUDA_SUCCESS);
    REQUIRE(cu().cuMemPoolGetAccess_v11020(&flags, pool, &location) == CUDA_SUCCESS);
    CHECK(flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    REQUIRE(cu().cuMemPoolDestroy_v11020(pool) == CUDA_SUCCESS);

    // The support attributes are honoured (and can be overridden).
    CUstream s = make_stream();
    CUmemoryPool ignored = nullptr;
    CUdeviceptr p = 0;
    fake.set_attribute(-1, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, 0);
    CHECK(cu().cuMemAllocAsync_v11020(&p, kBlock, s) == CUDA_ERROR_NOT_SUPPORTED);
    CUmemPoolProps props = device_props(0);
    CHECK(cu().cuMemPoolCreate_v11020(&ignored, &props) == CUDA_ERROR_NOT_SUPPORTED);
    CHECK(cu().cuDeviceGetDefaultMemPool_v11020(&ignored, 0) == CUDA_ERROR_NOT_SUPPORTED);
    fake.set_attribute(-1, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, 1);
    fake.set_attribute(-1, CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES, 0);
    props = device_props(0, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    CHECK(cu().cuMemPoolCreate_v11020(&ignored, &props) == CUDA_ERROR_NOT_SUPPORTED);
    fake.set_attribute(-1, CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);

    // Fault injection reaches the new entries.
    {
        cudyn_test::ScopedFault fault("cuMemAllocAsync");
        CHECK(cu().cuMemAllocAsync_v11020(&p, kBlock, s) == CUDA_ERROR_OUT_OF_MEMORY);
    }
    const long before = fake.call_count("cuMemAllocAsync_ptsz");
    auto per_thread = reinterpret_cast<PFN_cuMemAllocAsync_v11020>(fake.symbol("cuMemAllocAsync_ptsz"));
    REQUIRE(per_thread != nullptr);
    REQUIRE(per_thread(&p, kBlock, nullptr) == CUDA_SUCCESS);  // NULL: this thread's stream
    CHECK(fake.call_count("cuMemAllocAsync_ptsz") == before + 1);
    REQUIRE(cu().cuMemFreeAsync_v11020(p, CU_STREAM_PER_THREAD) == CUDA_SUCCESS);
    REQUIRE(cu().cuStreamSynchronize_v2000(CU_STREAM_PER_THREAD) == CUDA_SUCCESS);

    // cuMemFreeAsync takes cuMemAlloc memory too.
    CUdeviceptr plain = 0;
    REQUIRE(cu().cuMemAlloc_v3020(&plain, kBlock) == CUDA_SUCCESS);
    const long live = fake.live_allocations();
    free_async(plain, s);
    CHECK(fake.live_allocations() == live - 1);
    sync(s);
    REQUIRE(cu().cuStreamDestroy_v4000(s) == CUDA_SUCCESS);
}

TEST_CASE("pools: CUDA 13's location-keyed pool queries", "[emulated][pool-model]") {
    auto context = activate(0);
    REQUIRE(cu().cuMemGetDefaultMemPool_v13000 != nullptr);
    CUmemLocation location{};
    location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    location.id = 1;
    CUmemoryPool by_location = nullptr, by_device = nullptr;
    REQUIRE(cu().cuMemGetDefaultMemPool_v13000(&by_location, &location, CU_MEM_ALLOCATION_TYPE_PINNED) == CUDA_SUCCESS);
    REQUIRE(cu().cuDeviceGetDefaultMemPool_v11020(&by_device, 1) == CUDA_SUCCESS);
    CHECK(by_location == by_device);
    // Managed memory has pools of its own, apart from the pinned ones (an
    // H200 with driver 580 answered with one for device 0 and for the host).
    CUmemoryPool managed = nullptr, managed_current = nullptr;
    REQUIRE(cu().cuMemGetDefaultMemPool_v13000(&managed, &location, CU_MEM_ALLOCATION_TYPE_MANAGED) == CUDA_SUCCESS);
    CHECK(managed != nullptr);
    CHECK(managed != by_device);
    REQUIRE(cu().cuMemGetMemPool_v13000(&managed_current, &location, CU_MEM_ALLOCATION_TYPE_MANAGED) == CUDA_SUCCESS);
    CHECK(managed_current == managed);
    location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT;
    CHECK(cu().cuMemGetDefaultMemPool_v13000(&by_location, &location, CU_MEM_ALLOCATION_TYPE_PINNED) ==
          CUDA_ERROR_INVALID_VALUE);
    // Host pools (HOST_MEMORY_POOLS_SUPPORTED): memory the host reads.
    location.type = CU_MEM_LOCATION_TYPE_HOST;
    location.id = 0;
    CUmemoryPool host = nullptr;
    REQUIRE(cu().cuMemGetDefaultMemPool_v13000(&host, &location, CU_MEM_ALLOCATION_TYPE_PINNED) == CUDA_SUCCESS);
    CUmemoryPool current = nullptr;
    REQUIRE(cu().cuMemGetMemPool_v13000(&current, &location, CU_MEM_ALLOCATION_TYPE_PINNED) == CUDA_SUCCESS);
    CHECK(current == host);
    CUstream s = make_stream();
    const CUdeviceptr p = alloc_from(host, kBlock, s);
    CHECK(pointer_attribute<unsigned int>(CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p) == CU_MEMORYTYPE_HOST);
    free_async(p, s);
    sync(s);

    // cuMemSetMemPool: the pool's own location and type only.
    CUmemoryPool pool = make_pool(device_props(1));
    location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    location.id = 0;
    CHECK(cu().cuMemSetMemPool_v13000(&location, CU_MEM_ALLOCATION_TYPE_PINNED, pool) == CUDA_ERROR_INVALID_VALUE);
    location.id = 1;
    REQUIRE(cu().cuMemSetMemPool_v13000(&location, CU_MEM_ALLOCATION_TYPE_PINNED, pool) == CUDA_SUCCESS);
    REQUIRE(cu().cuDeviceGetMemPool_v11020(&current, 1) == CUDA_SUCCESS);
    CHECK(current == pool);
    REQUIRE(cu().cuMemPoolDestroy_v11020(pool) == CUDA_SUCCESS);
    REQUIRE(cu().cuDeviceGetMemPool_v11020(&current, 1) == CUDA_SUCCESS);
    CHECK(current == by_device);
    REQUIRE(cu().cuStreamDestroy_v4000(s) == CUDA_SUCCESS);
}

// ---- a pool and one of its blocks in a second process ---------------------------------------------

namespace {

constexpr std::uint32_t kFirst = 0x9001f001u;
constexpr std::uint32_t kReply = 0x9001f002u;
constexpr std::size_t kShared = 64 * 1024;

// Imports the parent's pool and block, checks its bytes, writes the reply
// into the second half; frees it when told to (after the parent freed its
// own pointer, which the driver forbids and the fake survives).
int importer_role(int, char**) {
    return run_role("pool-model-importer", [](ChildChecks& check, cudyn::FdChannel& channel) {
        const long descriptors = open_descriptors();
        auto message = channel.receive(kRawBytes, kStep);
        if (!ok(check, message, "the pool and pointer") || !check.expect(message->fd.valid(), "a descriptor came"))
            return;
        CUmemPoolPtrExportData data{};
        if (!check.expect(message->payload.size() == sizeof data, "export data size")) return;
        std::memcpy(&data, message->payload.data(), sizeof data);
        CUmemoryPool pool = nullptr;
        const auto handle = reinterpret_cast<void*>(static_cast<std::intptr_t>(message->fd.get()));
        if (!check.expect(cudyn::driver().cuMemPoolImportFromShareableHandle_v11020(
                              &pool, handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0) == CUDA_SUCCESS,
                          "import the pool"))
            return;
        message->fd = cudyn::FileDescriptor();  // the imported pool holds its own
        CUdeviceptr p = 0;
        CUstream stream = nullptr;
        check.expect(cudyn::driver().cuMemAllocFromPoolAsync_v11020(&p, 64, pool, stream) == CUDA_ERROR_INVALID_VALUE,
                     "an imported pool does not allocate");
        CUmemPoolPtrExportData garbage{};
        check.expect(cudyn::driver().cuMemPoolImportPointer_v11020(&p, pool, &garbage) == CUDA_ERROR_INVALID_VALUE,
                     "garbage export data");
        if (!check.expect(cudyn::driver().cuMemPoolImportPointer_v11020(&p, pool, &data) == CUDA_SUCCESS,
                          "import the pointer"))
            return;
        CUmemoryPool owner = nullptr;
        check.expect(cudyn::driver().cuPointerGetAttribute_v4000(&owner, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, p) ==
                             CUDA_SUCCESS &&
                         owner == pool,
                     "the imported block is the imported pool's");
        check.expect(same_words(p, kShared / 2, kFirst), "the exporter's bytes are visible");
        ok(check, set_words(p + kShared / 2, kShared / 2, kReply), "write the reply");
        if (!ok(check, send_tag(channel, kWaiting), "send 'waiting'")) return;

        if (!ok(check, channel.receive(kRecorded, kStep), "'free it now'")) return;
        check.expect(same_words(p, kShared / 2, kFirst), "the bytes stayed after the exporter's free");
        check.expect(cudyn::driver().cuMemFreeAsync_v11020(p, CU_STREAM_LEGACY) == CUDA_SUCCESS, "free the import");
        check.expect(cudyn::driver().cuStreamSynchronize_v2000(CU_STREAM_LEGACY) == CUDA_SUCCESS, "synchronize");
        check.expect(cudyn::driver().cuMemPoolImportPointer_v11020(&p, pool, &data) == CUDA_ERROR_INVALID_VALUE,
                     "an allocation its exporter freed cannot be imported");
        check.expect(cudyn::driver().cuMemPoolDestroy_v11020(pool) == CUDA_SUCCESS, "destroy the imported pool");
        check.expect(live_blocks() == 0 && live_pools() == 0, "nothing of the pool left here");
        check.expect(open_descriptors() == descriptors, "no descriptor left open");
        ok(check, send_tag(channel, kDone), "send 'done'");
    });
}
const cudyn_test::ChildRole importer("pool-model-importer", importer_role);

}  // namespace

TEST_CASE("pools: a pool and a block shared with another process", "[emulated][cuda11][pool-model]") {
    auto context = activate(0);
    const PoolLeakCheck leaks;
    const long descriptors = open_descriptors();
    CUmemoryPool pool = make_pool(device_props(0, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
    CUstream s = make_stream();
    const CUdeviceptr a = alloc_from(pool, kShared, s);
    REQUIRE(cu().cuMemsetD32Async_v3020(a, kFirst, kShared / 4, s) == CUDA_SUCCESS);
    sync(s);

    // What cannot be exported or imported here.
    CUmemoryPool default0 = nullptr;
    REQUIRE(cu().cuDeviceGetDefaultMemPool_v11020(&default0, 0) == CUDA_SUCCESS);
    int fd = -1;
    CHECK(cu().cuMemPoolExportToShareableHandle_v11020(&fd, default0, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0) ==
          CUDA_ERROR_INVALID_VALUE);
    CHECK(cu().cuMemPoolExportToShareableHandle_v11020(&fd, pool, CU_MEM_HANDLE_TYPE_FABRIC, 0) == CUDA_ERROR_INVALID_VALUE);
    CUmemPoolPtrExportData data{};
    const CUdeviceptr unshared = alloc_from(default0, kBlock, s);
    CHECK(cu().cuMemPoolExportPointer_v11020(&data, unshared) == CUDA_ERROR_INVALID_VALUE);
    free_async(unshared, s);
    // A pointer exports only once its pool was exported.
    CHECK(cu().cuMemPoolExportPointer_v11020(&data, a) == CUDA_ERROR_INVALID_VALUE);

    REQUIRE(cu().cuMemPoolExportToShareableHandle_v11020(&fd, pool, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0) ==
            CUDA_SUCCESS);
    cudyn::FileDescriptor exported(fd);
    CHECK(cu().cuMemPoolExportPointer_v11020(&data, a + 64) == CUDA_ERROR_INVALID_VALUE);  // not a block's start
    REQUIRE(cu().cuMemPoolExportPointer_v11020(&data, a) == CUDA_SUCCESS);
    CUdeviceptr own = 0;
    CHECK(cu().cuMemPoolImportPointer_v11020(&own, pool, &data) == CUDA_ERROR_INVALID_VALUE);  // not an imported pool

    ParentSide side = start_child("pool-model-importer");
    require_ok(side.channel.send(kRawBytes, &data, sizeof data, exported.get(), kStep));
    (void)take(side.channel.receive(kWaiting, kChildTimeout));
    CHECK(read32(a + kShared / 2, kShared / 2) == std::vector<std::uint32_t>(kShared / 8, kReply));

    // Freed here while the child still has it imported (the driver wants the
    // importer first): the fake keeps the bytes out of reuse meanwhile.
    free_async(a, s);
    sync(s);
    const CUdeviceptr other = alloc_from(pool, kShared, s);
    CHECK(other != a);
    require_ok(send_tag(side.channel, kRecorded));
    (void)take(side.channel.receive(kDone, kChildTimeout));
    CHECK(side.child.wait(kChildTimeout) == 0);

    // Released by the importer: the stream gets the address again.
    free_async(other, s);
    const CUdeviceptr again = alloc_from(pool, kShared, s);
    CHECK(again == a);
    free_async(again, s);
    sync(s);
    REQUIRE(cu().cuStreamDestroy_v4000(s) == CUDA_SUCCESS);
    REQUIRE(cu().cuMemPoolDestroy_v11020(pool) == CUDA_SUCCESS);
    require_ok(exported.close());
    require_ok(side.channel.close());
    CHECK(open_descriptors() == descriptors);
}

namespace {

// A fabric pool whose export was refused (no IMEX channel, the fake's
// default); argv[0] "destroy" then destroys it, "keep" exits without.
int refused_fabric_role(int argc, char** argv) {
    ChildChecks check("pool-model-refused-fabric");
    auto context = cudyn_test::ipc::child_context(0);
    if (!ok(check, context, "context on device 0")) return 1;
    const CUmemPoolProps props = device_props(0, CU_MEM_HANDLE_TYPE_FABRIC);
    CUmemoryPool pool = nullptr;
    if (!check.expect(cu().cuMemPoolCreate_v11020(&pool, &props) == CUDA_SUCCESS, "create a fabric pool"))
        return check.exit_status();
    CUmemFabricHandle handle{};
    check.expect(cu().cuMemPoolExportToShareableHandle_v11020(&handle, pool, CU_MEM_HANDLE_TYPE_FABRIC, 0) ==
                     CUDA_ERROR_NOT_PERMITTED,
                 "the fabric export is refused without an IMEX channel");
    if (argc > 0 && std::strcmp(argv[0], "destroy") == 0) {
        const rlimit no_core{0, 0};
        (void)::setrlimit(RLIMIT_CORE, &no_core);  // the abort below is expected: no core file
        (void)cu().cuMemPoolDestroy_v11020(pool);
    }
    return check.exit_status();
}
const cudyn_test::ChildRole refused_fabric("pool-model-refused-fabric", refused_fabric_role);

}  // namespace

TEST_CASE("pools: a fabric pool whose export was refused is never destroyed: the fake aborts there, as the driver "
          "crashed",
          "[emulated][pool-model]") {
    // Without an IMEX channel (the default) creating the pool works, its
    // export is refused, and cuMemPoolDestroy of it then crashed driver 580:
    // the fake aborts, so a library that destroys such a pool fails loudly.
    const int kept = cudyn_test::ChildProcess::spawn("pool-model-refused-fabric", {"keep"}).wait(kChildTimeout);
    CHECK(kept == 0);
    const int destroyed =
        cudyn_test::ChildProcess::spawn("pool-model-refused-fabric", {"destroy"}).wait(kChildTimeout);
    CHECK(destroyed == 128 + SIGABRT);

    // A fabric pool that was never exported is destroyed as usual (the driver
    // returned 0 for that), in this process.
    auto context = activate(0);
    const cudyn_test::ScopedAttribute fabric_pools(
        0, CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES,
        static_cast<int>(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR | CU_MEM_HANDLE_TYPE_FABRIC));
    const PoolLeakCheck leaks;
    CUmemoryPool pool = make_pool(device_props(0, CU_MEM_HANDLE_TYPE_FABRIC));
    CHECK(cu().cuMemPoolDestroy_v11020(pool) == CUDA_SUCCESS);
}
